"""Exact enumeration of all ⊆-minimal deep-unlearning sets with the clingo answer-set solver.

The program (docs/concepts.md), over the target's cone only::

    { removed(F) : base(F) }.                      % choose facts of K to remove
    true(F) :- base(F), not removed(F).            % what is left of K ...
    true(H) :- edge(E, H), true(F) : body(E, F).   % ... and everything it derives (least model)
    :- true(target).                               % the target must not be derivable
    #heuristic removed(F) : base(F). [1, false]

With ``--heuristic=Domain --enum-mode=domRec`` clasp enumerates exactly the models whose set of
``removed`` atoms is ⊆-minimal, each once.
"""

from __future__ import annotations

import time

from .graph import Cone

PROGRAM = """
#defined edge/2. #defined body/2. #defined base/1.
{ removed(F) : base(F) }.
true(F) :- base(F), not removed(F).
true(H) :- edge(E, H), true(F) : body(E, F).
:- true(0).
#heuristic removed(F) : base(F). [1, false]
#show removed/1.
"""


def enumerate_minimal(cone: Cone, time_budget: float = 10.0) -> tuple[list[frozenset[int]], bool]:
    """All minimal deep-unlearning sets of the cone's target, as sets of *global* fact ids, and
    whether the enumeration finished within ``time_budget`` seconds (False: the sets found so
    far, each of them minimal, but maybe not all of them).

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> kb = KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}},
    ...                          [("A", "husband", "B"), ("B", "wife", "A")])
    >>> sets, complete = enumerate_minimal(derivation_graph(kb, "family").cone(0))
    >>> [sorted(s) for s in sets], complete
    ([[0, 1]], True)
    """
    import clingo

    start = time.perf_counter()
    facts = [f"base({f})." for f, b in enumerate(cone.base) if b]
    for e, (h, body) in enumerate(zip(cone.heads, cone.bodies)):
        facts.append(f"edge({e},{h}).")
        facts.extend(f"body({e},{x})." for x in body)
    ctl = clingo.Control(["--heuristic=Domain", "--enum-mode=domRec", "0"], logger=lambda code, msg: None)
    ctl.add("base", [], PROGRAM + "\n".join(facts))
    ctl.ground([("base", [])])
    nodes = cone.nodes
    found: list[frozenset[int]] = []

    def on_model(model) -> None:
        found.append(frozenset(int(nodes[s.arguments[0].number]) for s in model.symbols(shown=True)))

    remaining = time_budget - (time.perf_counter() - start)
    if remaining <= 0:
        return [], False
    deadline = time.perf_counter() + remaining
    with ctl.solve(on_model=on_model, async_=True) as handle:
        # wait() may return before its timeout without the search having finished (a wake-up of
        # the condition variable it waits on, seen on a heavily loaded machine): wait again
        # until the search finishes or the budget is really spent
        finished = handle.wait(remaining)
        while not finished and (left := deadline - time.perf_counter()) > 0:
            finished = handle.wait(left)
        if not finished:
            handle.cancel()
        result = handle.get()
    complete = bool(finished and result.exhausted)
    return list(dict.fromkeys(found)), complete
