"""The compose questions of a KB under its rules (:mod:`deepunlearn.kg.compose`), torch-free.

A *derived fact* here is a KB fact that a rule grounding derives from other KB facts: a
hyperedge of the derivation graph whose head and body facts are all in the KB. Each such
grounding whose rule body is a chain (:func:`~deepunlearn.kg.compose.chain`) gets one compose
question; the rules that cannot give one are reported with the reason (one atom, no chain, a
relation the domain gives no phrase for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kg.compose import ComposeError, ComposeQuestion, Step, chain, compose_question, phrase, question_template
from .language import Rule, RuleSet, Var


@dataclass
class ComposeSet:
    """The compose questions of a KB (``questions``, one per grounding), and ``skipped``:
    ``{rule text: reason}`` for every rule that has none."""

    questions: list[ComposeQuestion] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    steps: dict[str, tuple[Step, ...]] = field(default_factory=dict)

    def fact_ids(self) -> list[int]:
        """The derived facts that have a compose question, in first-seen order."""
        return list(dict.fromkeys(q.fact_id for q in self.questions))

    def to_json(self) -> dict:
        return {"questions": [q.to_json() for q in self.questions], "skipped": dict(self.skipped),
                "rules": {r: [str(s) for s in st] for r, st in self.steps.items()}}


def rule_steps(kb, rule: Rule) -> tuple[tuple[Step, ...], list[int]]:
    """The chain of ``rule`` (steps, and the relation-atom index of each) with every step phrased
    in ``kb``'s templates; a :class:`ComposeError` says why there is none."""
    atoms = rule.relation_atoms
    args = [a.args for a in atoms] + [rule.head.args]
    if not all(isinstance(t, Var) for ts in args for t in ts):
        raise ComposeError("a constant in the head or the body")
    order = chain((rule.head.args[0].name, rule.head.args[1].name),
                  [(a.relation, a.args[0].name, a.args[1].name) for a in atoms])
    steps = tuple(Step(atoms[k].relation, fwd) for k, fwd in order)
    for s in steps[:-1]:
        phrase(kb, s)
    question_template(kb, steps[-1])
    return steps, [k for k, _ in order]


def compose_set(kb, rules: str | RuleSet, graph=None, fact_ids=None, known=None, **graph_options) -> ComposeSet:
    """Every compose question of ``kb`` under ``rules`` (a grounding per derived fact and rule,
    :class:`ComposeSet`); ``fact_ids`` limits the derived facts asked about; ``known`` limits
    the body facts to K (default: the whole KB). ``graph``: the derivation graph when the caller
    has it (then ``known`` is the graph's own K)."""
    from .graph import derivation_graph

    g = graph if graph is not None else derivation_graph(kb, rules, known=known, **graph_options)
    out = ComposeSet()
    chains: dict[int, tuple[tuple[Step, ...], list[int]] | None] = {}
    wanted = None if fact_ids is None else {int(i) for i in fact_ids}
    for e in range(g.n_edges):
        head = int(g.edge_head[e])
        body = [int(b) for b in g.body_of(e)]
        if head >= g.n_kb or any(b >= g.n_kb or b == head or not g.base[b] for b in body):
            continue
        if wanted is not None and head not in wanted:
            continue
        r = int(g.edge_rule[e])
        if r not in chains:
            rule = g.rules[r]
            try:
                chains[r] = rule_steps(kb, rule)
                out.steps[rule.to_datalog()] = chains[r][0]
            except ComposeError as err:
                chains[r] = None
                out.skipped[rule.to_datalog()] = str(err)
        if chains[r] is None:
            continue
        steps, order = chains[r]
        out.questions.append(compose_question(kb, head, g.rules[r].to_datalog(), steps, [body[k] for k in order]))
    return out
