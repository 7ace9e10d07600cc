"""The linked halves of du_loop's simulated split attacks (``tamper_halves = "linked"``): the
links the rules context reports are exactly what an independent Datalog derives from one fact of
a chosen set and the rest of K, the drawn halves split as many links as the best half found by brute force, and
a du_loop run that draws them ends deep."""

from __future__ import annotations

import itertools

import pytest

from tests.unlearn.test_unlearn_deep import _deep_target


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def test_links_are_what_an_independent_datalog_derives_from_one_fact_and_the_rest_of_k(runner):
    from deepunlearn.rules.pydatalog_engine import pydatalog_closure
    from deepunlearn.unlearn.deep import DeepContext

    kb, known = runner.kb, set(runner.known)
    checked = 0
    for t in sorted(known)[:12]:
        ctx = runner.deep_context([t])
        inside = set(runner.chosen_set(t)) | {t}
        brute = set()
        for a in sorted(inside):
            omega = pydatalog_closure(kb, runner.evaluator.rules, known=(known - inside) | {a})
            brute |= {(a, b) for b in inside - {a} if kb.facts[b] in omega}
        assert set(ctx.links(inside)) == brute
        checked += bool(brute)
    assert checked >= 3  # sets with links (inverses, symmetric relations, two-premise rules)


def _score(half, rest, target, links):
    inside = set(rest) | {target}
    return sum(1 for a, b in links[target] if a in half and b in inside and b not in half)


def test_linked_halves_split_as_many_links_as_the_best_half():
    from deepunlearn.unlearn.methods.du_tamper import halves, linked_halves

    target, rest = 9, [1, 2, 3, 4, 5, 6, 7]
    links = {target: [(1, 2), (2, 1), (3, 4), (4, 3), (5, 9), (6, 7)]}
    best = max(_score(set(h), rest, target, links) for h in itertools.combinations(rest, 3))
    assert best == 3  # three relearned facts, each with its partner (or the target) held out
    for seed in range(5):
        got = linked_halves({target: [target] + rest}, [target], 3, seed, links, tries=400)
        assert len(got) == 3 and len({tuple(h[target]) for h in got}) == 3
        assert all(len(h[target]) == 3 and set(h[target]) <= set(rest) for h in got)
        assert _score(set(got[0][target]), rest, target, links) == best
        scores = [_score(set(h[target]), rest, target, links) for h in got]
        assert scores == sorted(scores, reverse=True)
    # a set with few halves: every half, as the random draw gives
    small = {target: [target, 1, 2, 3]}
    assert linked_halves(small, [target], 4, 0, links) == halves(small, [target], 4, 0)


@pytest.mark.parametrize("how", ["lookahead", "tamper"])
def test_du_loop_drawing_linked_halves_ends_deep(runner, how):
    t = _deep_target(runner)
    u = runner.unlearner("du_loop", grid=[4, 32], params=None)
    extra = {"lookahead": "margin", "overshoot": 1.0} if how == "lookahead" else {"tamper": 2, "tamper_steps": 2,
                                                                                   "overshoot": 0}
    u = type(u)(u.params, grid=[4, 32], heal=0, tamper_halves="linked", tamper_splits=1, **extra)
    n = list(runner.run(t, u, seed=0))[-1].notes
    assert n["deep"] and n["stopped_deep"]
    if how == "lookahead":
        assert n["lookahead_steps"] == n["steps_used"] - n["steps_to_deep"] > 0
    else:
        assert 0 <= n["tamper_steps_taken"] <= 2 and isinstance(n["tamper_robust"], bool)
