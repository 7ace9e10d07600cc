"""Which facts must a model forget so that a target cannot be derived back? (no model needed)

Run: python examples/rules_api.py
"""

import deepunlearn

kb = deepunlearn.generate_family(20, seed=7)               # a synthetic family KB
rules = deepunlearn.load_rules("family")                   # the paper's Horn rules
target = kb.targets[0]
graph = deepunlearn.derivation_graph(kb, rules)            # how each fact of the closure is derived
sets = deepunlearn.minimal_sets(graph, target)             # every minimal deep-unlearning set
print(f"target {kb.facts[target]}: {len(sets.sets)} minimal sets, the smallest {min(map(len, sets.sets))} facts")

ev = deepunlearn.Evaluator(kb, rules=rules)                # recall and accuracy of a forgotten set
only_target = ev.evaluate(target, [target])                # forgetting the target alone
best = ev.evaluate(target, sorted(sets.sets[0]))           # forgetting a whole minimal set
print(f"forget the target alone: recall {only_target.recall:.2f}, accuracy {only_target.accuracy:.2f}")
print(f"forget a minimal set:    recall {best.recall:.2f}, accuracy {best.accuracy:.2f}")
assert best.recall == 1.0 and only_target.recall < 1.0
