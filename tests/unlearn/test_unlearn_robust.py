"""du_loop's ``robust`` option on the 5-person EDU-RELAT KB: a set chosen while avoiding a fact is
the cheapest exact minimal set without it, a fragile fact is exactly one whose return alone makes
the target derivable again (pyDatalog's closure, brute force over the forgotten facts), and the
loop, told a target is fragile, forgets a spare set before it stops. And healing's extension past
its budget (``heal_more`` while the sample is below ``heal_floor``), on a scripted probe."""

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
        ctx = r.deep_context([t])
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


@pytest.mark.parametrize("shares, stops_at", [
    ([0.5, 0.8, 0.9], 6),       # below the floor at the end of heal: on until the floor
    ([0.5, 0.95], 4),           # at the floor when heal is spent: stop there
    ([0.5, 0.5, 0.5, 0.5], 8),  # never at the floor: heal_more spent too
    ([1.0], 2),                 # the sample recovered (the tolerance): stop at once
])
def test_healing_goes_on_past_its_budget_only_while_the_sample_is_below_the_floor(shares, stops_at):
    """heal 4 steps, a probe every 2, up to 4 more while the sample knows less than 0.9 of what it
    knew (a scripted probe answers the share of the 20-fact sample in ``shares``, one per probe)."""
    from types import SimpleNamespace

    from deepunlearn.unlearn.methods.du import DULoopParams
    from deepunlearn.unlearn.methods.du_heal import Healer

    answers = iter([None] + shares)  # None: the sample as it stood before the run, all of it

    class Ctx:
        watch, known, protected = [], set(range(40)), frozenset()

        def known_among(self, ids):
            share = next(answers, None)
            return list(ids) if share is None else list(ids)[:round(share * len(ids))]

    params = DULoopParams(heal=4, heal_every=2, heal_more=4, heal_floor=0.9, heal_sample=20, heal_tolerance=0.0)
    healer = Healer(params, SimpleNamespace(retain=None, encode=lambda ids: ids), Ctx(), seed=0)
    assert len(healer.before) == 20
    probes = []
    while True:
        if healer.probe_due():
            probes.append(healer.taken)
            if healer.recovered():
                break
    assert healer.taken == stops_at and probes == list(range(2, stops_at + 1, 2))
    assert healer.spent == (stops_at >= 4 and shares[-1] < 1.0)
