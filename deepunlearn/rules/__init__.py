"""The rules layer: rule language and rule sets, closure, derivation hypergraph, minimal
deep-unlearning sets (DUS / RP / MDUS and exact enumeration), recall and accuracy.

Other layers call::

    from deepunlearn.rules import Evaluator, Evaluation, RulesError
    ev = Evaluator(kb, rules="family", known=None, exact=True, seeds=100, time_budget=10.0)
    ev.minimal_sets(target)              # MinimalSets(.sets, .exact), cached per target
    ev.evaluate(target, forgotten)       # Evaluation(recall, accuracy, ..., set, exact)

    # the reference's protocol: the release's stored sets, first set of maximal recall
    ev = Evaluator(kb, known=None, exact=False, seeds=100, sets=stored_sets(kb, "release"), tie="first")

Heavy optional imports (clingo, pyDatalog, matplotlib) happen inside the functions that use them.
"""

from .budget import DEFAULT_MAX_GROUNDINGS, RuleBudgetError
from .closure import Closure, closure
from .errors import RulesError, RuleSyntaxError
from .graph import Cone, DerivationGraph, derivable, derivation_graph, is_deep_unlearning_set, is_minimal
from .language import Atom, Const, Neq, Rule, RuleSet, Var
from .load import BUILTIN, load_rules
from .metrics import Evaluation, Evaluator, accuracy, recall
from .minimal import MinimalSets, minimal_sets
from .mine import MineResult, mine_rules
from .parser import parse_datalog, parse_raw
from .sampling import dus, mdus, prune
from .stored import stored_sets

__all__ = [
    "Atom", "BUILTIN", "Closure", "Cone", "Const", "DEFAULT_MAX_GROUNDINGS", "DerivationGraph", "Evaluation", "Evaluator", "MineResult", "MinimalSets",
    "Neq", "Rule", "RuleBudgetError", "RuleSet", "RuleSyntaxError", "RulesError", "Var", "accuracy", "closure", "derivable",
    "derivation_graph", "dus", "is_deep_unlearning_set", "is_minimal", "load_rules", "mdus", "mine_rules", "minimal_sets",
    "parse_datalog", "parse_raw", "prune", "recall", "stored_sets",
]
