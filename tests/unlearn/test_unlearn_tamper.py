"""du_loop's tamper phase on the 5-person one-layer model: the simulated attack trains the model
and gives it back bit for bit, a target that a simulated attack brings back gets meta steps until
the attack leaves it deep (relearned facts counted as before the attack), a meta step that brings
the target back sends the loop back to unlearning, the checks cover every half of a small set and
draw fresh halves of a large one, and a real run ends deep."""

from __future__ import annotations

import pytest
import torch

from deepunlearn.unlearn.methods import UnlearnError
from tests.unlearn.test_unlearn_deep import _deep_target

#: the split and random halves these scripted contexts answer (they list no links)
RANDOM = {"tamper_on": "split", "tamper_halves": "random"}


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


class OneFact:
    """A scripted rules context for the target ``fact`` whose one set is itself: ``attacks``
    counts the simulated attacks, ``attacking`` holds during one; a subclass scripts
    ``forgotten_now`` and sets ``fact``."""

    fact = None
    seed = property(lambda self: self.model.seed)  # what du_loop reads of a rules context (deep.DeepContext)

    def __init__(self, runner_, targets, choice="fewest"):
        self.model, self.targets, self.watch = runner_, list(targets), [self.fact]
        self.calls, self.attacks, self.attacking = 0, 0, False

    def deep(self, target, forgotten):
        return target in forgotten

    def choose(self, target, forgotten):
        return [target]

    def split_relearned(self, relearned, steps, lr, then, on="split"):
        self.attacks += 1
        self.attacking = True
        try:
            return then()
        finally:
            self.attacking = False


def test_relearn_then_sees_the_relearned_model_and_restores_it(runner):
    from deepunlearn.unlearn.attacks import relearn_then

    model = runner.bundle.model
    before = [p.detach().clone() for p in model.parameters()]
    facts = sorted(runner.known)[:4]

    def then():
        moved = any(not torch.equal(p, b) for p, b in zip(model.parameters(), before))
        trained = [p for p in model.parameters() if p.requires_grad]
        grads = torch.autograd.grad(sum(p.sum() for p in trained), trained)
        return moved, model.training, len(grads)

    moved, training, n = relearn_then(model, lambda: runner.encode(facts), 2, then, lr=1e-3)
    assert moved and not training and n > 0
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(UnlearnError, match="relearning lr"):
        relearn_then(model, lambda: runner.encode(facts), 2, then, lr=0.0)


@pytest.mark.parametrize("on", ["split", "split-set"])
def test_tamper_steps_until_the_simulated_attack_leaves_the_target_deep(runner, monkeypatch, on):
    import deepunlearn.unlearn.deep as deep
    from deepunlearn.unlearn.methods import du_tamper

    t = _deep_target(runner)
    other = next(f for f in sorted(runner.known) if f != t)

    class Attacked:
        """Deep (target and ``other`` forgotten) from the second probe. The first simulated attack
        brings the target back; the others relearn ``other`` only, which counts as before."""

        seed = property(lambda self: self.model.seed)

        def __init__(self, runner_, targets, choice="fewest"):
            self.model, self.targets, self.watch = runner_, list(targets), [t, other]
            self.calls, self.attacks, self.halves, self.attacking, self.on = 0, 0, [], False, []

        def forgotten_now(self):
            if self.attacking:
                return {other} if self.attacks == 1 else {t}
            self.calls += 1
            return set() if self.calls < 2 else {t, other}

        def deep(self, target, forgotten):
            return {target, other} <= set(forgotten)

        def choose(self, target, forgotten):
            return [target, other]

        def split_relearned(self, relearned, steps, lr, then, on="split"):
            self.attacks += 1
            self.halves.append(relearned)
            self.on.append(on)
            self.attacking = True
            try:
                return then()
            finally:
                self.attacking = False

    made, meta = [], []
    monkeypatch.setattr(deep, "DeepContext", lambda *a, **k: made.append(Attacked(*a, **k)) or made[-1])
    real = du_tamper.Tamper.loss
    monkeypatch.setattr(du_tamper.Tamper, "loss", lambda self, retain: meta.append(self._grads) or real(self, retain))
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, tamper=3, tamper_on=on,
                                                        tamper_halves="random"),
                             seed=0))
    n = points[-1].notes
    # deep at step 2; the set {t, other} has one half, {other}: the first attack brings the target
    # back, one meta step (step 3); the second leaves it deep: stop
    assert [n["steps_used"], n["tamper_steps_taken"], n["tamper_robust"]] == [3, 1, True]
    assert made[-1].attacks == 2 and len(meta) == 1 and made[-1].on == [on, on]
    assert made[-1].halves == [{t: [other]}, {t: [other]}]
    assert meta[0] is not None and any(g is not None and g.abs().sum() > 0 for g in meta[0])


def test_a_meta_step_that_brings_the_target_back_sends_the_loop_back_to_unlearning(runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep

    t = _deep_target(runner)

    class BackAfterMeta(OneFact):
        """Deep from probe 2 on but at probe 3 (right after the meta step; the tamper checks reuse
        the loop's probe of the same step); the first simulated attack brings the target back, the
        second does not."""

        fact = t

        def forgotten_now(self):
            if self.attacking:
                return set() if self.attacks == 1 else {t}
            self.calls += 1
            return set() if self.calls in (1, 3) else {t}

    made = []
    monkeypatch.setattr(deep, "DeepContext", lambda *a, **k: made.append(BackAfterMeta(*a, **k)) or made[-1])
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, **RANDOM, tamper=4), seed=0))
    n = points[-1].notes
    # step 2 deep, attack 1: meta step 3; probe 3 finds the target back: unlearning step 4, deep
    # again; attack 2 leaves it deep: stop
    assert [n["steps_used"], n["tamper_steps_taken"], n["tamper_robust"]] == [4, 1, True]
    assert [made[-1].calls, made[-1].attacks] == [4, 2]  # no probe twice on an unchanged model


def test_halves_cover_every_split_when_few_and_draw_fresh_ones_when_many():
    from deepunlearn.unlearn.methods.du_tamper import halves, split_seed
    from deepunlearn.unlearn.relearn_pool import split_half

    few = halves({9: [9, 4, 5, 6, 7]}, [9], 6, 0)  # 4 facts, halves of 2: all 6
    assert sorted(h[9] for h in few) == [[4, 5], [4, 6], [4, 7], [5, 6], [5, 7], [6, 7]]
    assert split_half([9, 4, 5, 6, 7], 9, 0)[0] in [h[9] for h in few]  # the checks' half is among them
    chosen = {9: [9, *range(10, 30)]}
    a, b = (halves(chosen, [9], 4, split_seed(0, k)) for k in (0, 1))
    assert len(a) == 4 and len({tuple(h[9]) for h in a}) == 4 and all(len(h[9]) == 10 and 9 not in h[9] for h in a)
    assert a != b
    two = halves({1: [1, 2, 3, 4], 5: [5, 6, 7]}, [1, 5], 8, 0)  # 3 halves of 1's set, 2 of 5's: cycled
    assert [h[1] for h in two] == [[2], [3], [4]] and [h[5] for h in two] == [[6], [7], [6]]


def _never_robust(t):
    class NeverRobust(OneFact):
        """Deep from the second probe; every simulated attack brings the target back."""

        fact = t

        def forgotten_now(self):
            if self.attacking:
                return set()
            self.calls += 1
            return set() if self.calls < 2 else {t}

    return NeverRobust


def test_tamper_gives_up_after_its_budget(runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep

    t = _deep_target(runner)
    monkeypatch.setattr(deep, "DeepContext", _never_robust(t))
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, **RANDOM, tamper=2), seed=0))
    n = points[-1].notes
    assert [n["steps_used"], n["tamper_steps_taken"], n["tamper_robust"]] == [4, 2, False]


def test_du_loop_with_tamper_on_the_real_model_ends_deep(runner):
    t = _deep_target(runner)
    u = runner.unlearner("du_loop", grid=[4, 32], params=None)
    u = type(u)(u.params, grid=[4, 32], overshoot=0, heal=0, tamper=2, tamper_steps=2)
    points = list(runner.run(t, u, seed=0))
    n = points[-1].notes
    assert n["deep"] and n["stopped_deep"]
    assert 0 <= n["tamper_steps_taken"] <= 2 and isinstance(n["tamper_robust"], bool)


@pytest.mark.parametrize("every_half", [False, True])
def test_after_a_meta_step_a_check_tries_the_winning_halves_first_then_the_others(runner, monkeypatch, every_half):
    import deepunlearn.unlearn.deep as deep

    t = _deep_target(runner)
    a, b = [f for f in sorted(runner.known) if f != t][:2]

    class OneHalfWins:
        """Deep (t, a and b forgotten) from the second probe; the set {t, a, b} has the halves
        {a} and {b}; relearning {b} brings the target back the first two times, {a} never."""

        seed = property(lambda self: self.model.seed)

        def __init__(self, runner_, targets, choice="fewest"):
            self.model, self.targets, self.watch = runner_, list(targets), [t, a, b]
            self.calls, self.halves, self.wins, self.attacking = 0, [], 0, None

        def forgotten_now(self):
            if self.attacking is not None:
                if self.attacking == [b] and self.wins < 2:
                    self.wins += 1
                    return {a}
                return {t, a, b} - set(self.attacking)
            self.calls += 1
            return set() if self.calls < 2 else {t, a, b}

        def deep(self, target, forgotten):
            return target in forgotten and bool({a, b} & set(forgotten))

        def choose(self, target, forgotten):
            return [target, a, b]

        def split_relearned(self, relearned, steps, lr, then, on="split"):
            self.halves.append(relearned[t])
            self.attacking = relearned[t]
            try:
                return then()
            finally:
                self.attacking = None

    made = []
    monkeypatch.setattr(deep, "DeepContext", lambda *x, **k: made.append(OneHalfWins(*x, **k)) or made[-1])
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, **RANDOM, tamper=4,
                                        tamper_every_half=every_half), seed=0))
    n = points[-1].notes
    # check 1: {a} holds, {b} wins (meta step); check 2: {b} only, wins again (meta step);
    # check 3: {b} holds, then the other half {a}: robust after two meta steps. With every half:
    # {a} and {b} at each of the three checks
    assert made[-1].halves == ([[a], [b]] * 3 if every_half else [[a], [b], [b], [b], [a]])
    assert [n["steps_used"], n["tamper_steps_taken"], n["tamper_robust"]] == [4, 2, True]


@pytest.mark.parametrize("every, attacks", [(1, 5), (2, 3)])
def test_tamper_every_takes_several_meta_steps_per_simulation(runner, monkeypatch, every, attacks):
    import deepunlearn.unlearn.deep as deep

    t = _deep_target(runner)
    made, never = [], _never_robust(t)
    monkeypatch.setattr(deep, "DeepContext", lambda *x, **k: made.append(never(*x, **k)) or made[-1])
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    u = type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0, **RANDOM, tamper=4, tamper_every=every)
    n = list(runner.run(t, u, seed=0))[-1].notes
    # deep at step 2, then 4 meta steps; a simulation before the first and after every `every`
    assert [n["steps_used"], n["tamper_steps_taken"], n["tamper_robust"]] == [6, 4, False]
    assert made[-1].attacks == attacks and made[-1].calls == 2 + 4 // every
