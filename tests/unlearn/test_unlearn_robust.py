"""du_loop's ``robust`` option on the 5-person EDU-RELAT KB: a set chosen while avoiding a fact is
the cheapest exact minimal set without it, a fragile fact is exactly one whose return alone makes
the target derivable again (pyDatalog's closure, brute force over the forgotten facts), and the
loop, told a target is fragile, forgets a spare set before it stops."""

from __future__ import annotations

import pytest

from deepunlearn.rules import RulesError, closure
from deepunlearn.unlearn.deep import DeepContext


def _derivable(kb, known, t) -> bool:
    return tuple(kb.facts[t]) in closure(kb, "edu-relat", engine="pydatalog", known=sorted(known))


def _with_two_sets(runner) -> list[int]:
    return [t for t in sorted(runner.known) if len(runner.evaluator.minimal_sets(t).sets) >= 2]


def test_avoid_gives_the_fewest_fact_set_without_the_fact(five_people_runner, five_people_kb):
    r = five_people_runner
    targets = _with_two_sets(r)
    assert targets
    for t in targets:
        sets = r.evaluator.minimal_sets(t).sets
        for h in sorted({f for s in sets for f in s} - {t}):
            without = [s for s in sets if h not in s]
            if not without:  # in every minimal set: nothing avoids it
                with pytest.raises(RulesError, match="no minimal deep-unlearning set"):
                    r.chosen_set(t, avoid=[h])
                continue
            got = r.chosen_set(t, avoid=[h])
            assert h not in got and frozenset(got) in sets
            assert len(got) == min(len(s) for s in without)
            assert not _derivable(five_people_kb, r.known - set(got), t)


def test_fragile_is_the_first_fact_whose_return_alone_derives_the_target(five_people_runner, five_people_kb):
    r = five_people_runner
    seen = 0
    for t in _with_two_sets(r):
        ctx = DeepContext(r, [t])
        sets = r.evaluator.minimal_sets(t).sets
        gone = set(r.chosen_set(t))
        members = {f for s in sets for f in s}
        want = next((h for h in sorted(gone & members - {t})
                     if _derivable(five_people_kb, r.known - (gone - {h}), t) and any(h not in s for s in sets)), None)
        h = ctx.fragile(t, gone)
        assert h == want
        if h is None:
            continue
        seen += 1
        spare = set(r.chosen_set(t, sorted(gone), avoid=[h]))
        both = gone | spare
        assert not _derivable(five_people_kb, r.known - (both - {h}), t)  # h back alone: still not derivable
        nxt = ctx.fragile(t, both)
        assert nxt is None or nxt != h
    assert seen >= 3


class _Scripted:
    """The target forgotten from the second probe on, fragile (through ``h``) until ``spare`` is
    forgotten too, which happens from the third probe on."""

    h = spare = None

    def __init__(self, runner, targets, choice="fewest"):
        self.targets, self.watch, self.calls = list(targets), list(targets), 0

    def forgotten_now(self):
        self.calls += 1
        return set() if self.calls < 2 else set(self.targets) | ({self.spare} if self.calls >= 3 else set())

    def deep(self, t, forgotten):
        return t in forgotten

    def fragile(self, t, forgotten):
        return None if self.spare in forgotten else self.h

    def choose(self, t, forgotten, avoid=()):
        return sorted({t, self.spare}) if self.h in avoid else [t]


def test_robust_loop_forgets_a_spare_set_before_it_stops(five_people_runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep
    from deepunlearn.unlearn.methods.base import Session

    r = five_people_runner
    t = _with_two_sets(r)[0]
    _Scripted.h, _Scripted.spare = [f for f in sorted(r.known) if f != t][:2]
    monkeypatch.setattr(deep, "DeepContext", _Scripted)
    forgets, real = [], Session.set_forget
    monkeypatch.setattr(Session, "set_forget", lambda self, ids: forgets.append(sorted(ids)) or real(self, ids))
    u = r.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    plain = list(r.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0), seed=0))
    assert [p.notes["steps_used"] for p in plain] == [1, 2, 2, 2]  # deep at the second probe: stop
    forgets.clear()
    points = list(r.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, robust=True), seed=0))
    assert [p.notes["steps_used"] for p in points] == [1, 2, 3, 3]  # fragile at 2: one more round on the spare
    assert [_Scripted.spare] in forgets  # the spare set's facts still known, the target already forgotten
