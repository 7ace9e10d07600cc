"""du_loop's step guard on the 5-person EDU-RELAT KB's one-layer model: an undone step puts the
weights, AdamW's state and the random state back bit for bit (the run after an undone first step
is exactly the unguarded run at half the rate); a guard that never fires leaves the trajectory as
it is; at a rate that wrecks the model the guard undoes steps and keeps more of its sample than
the unguarded run; guard=0 is the default trajectory."""

from __future__ import annotations

import copy

import pytest
import torch

from deepunlearn.unlearn.deep import DeepContext
from deepunlearn.unlearn.methods.du_guard import StepGuard, draw
from tests.unlearn.test_unlearn_deep import _deep_target


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def _session(runner, t, lr):
    u = runner.unlearner("ga", grid=[3])
    s = runner.session(u, [t])
    s.lr, s.schedule, s.warmup_steps = lr, "constant", 0
    return u, s


class Verdicts(StepGuard):
    """A guard whose probe answers from a script: after step k (1-based attempt) the sample is
    known or lost; every restore is checked against a copy of the model taken at save time."""

    def __init__(self, model, lost_after: set[int]):
        self.model, self.lost_after, self.attempt, self.restored = model, lost_after, 0, 0
        super().__init__(self._probe, [0, 1], drop=0.05, min_scale=0.001)

    def _probe(self, ids):
        torch.rand(1)  # a step may draw random numbers (dropout): the undo puts the generator back
        return set() if self.attempt in self.lost_after else set(ids)

    def save(self, tensors, opt):
        super().save(tensors, opt)
        self.attempt += 1
        self.before = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(opt.state_dict()), torch.get_rng_state())

    def restore(self, tensors, opt):
        super().restore(tensors, opt)
        self.restored += 1
        weights, state, rng = self.before
        assert torch.equal(torch.get_rng_state(), rng)
        for k, v in self.model.state_dict().items():
            assert torch.equal(v, weights[k]), k
        now = opt.state_dict()["state"]
        assert now.keys() == state["state"].keys()
        for i in now:
            for k in now[i]:
                assert torch.equal(now[i][k], state["state"][i][k]), (i, k)


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _restored(runner):
    runner.snapshot.restore(runner.bundle.model)


@pytest.mark.parametrize("undo_step", [1, 2])
def test_an_undone_step_is_the_run_at_half_the_rate_bit_for_bit(runner, undo_step):
    t = _deep_target(runner)
    u, s = _session(runner, t, 5e-3)
    guard = s.step_guard = Verdicts(s.model, {undo_step})
    torch.manual_seed(0)
    guarded = []
    for step in s.descend(u.total_loss, 3):
        guarded.append(_weights(s.model))
    assert guard.restored == 1 and guard.undone == 1 and guard.scale == 0.5
    assert len(s.rates) == len(s.losses) == 3 and s.step == 3  # accepted steps only
    assert s.rates == [5e-3 if k < undo_step else 2.5e-3 for k in range(1, 4)]
    _restored(runner)
    # the reference: no guard, the rate halved from the undone step on (set between two steps)
    u, r = _session(runner, t, 5e-3)
    torch.manual_seed(0)
    plain = []
    for step in r.descend(u.total_loss, 3):
        plain.append(_weights(r.model))
        if step == undo_step - 1:
            r.lr = 2.5e-3
    if undo_step == 1:  # the first step is undone before anything: the whole run is at half the rate
        _restored(runner)
        u, r = _session(runner, t, 2.5e-3)
        torch.manual_seed(0)
        plain = [_weights(r.model) for _ in r.descend(u.total_loss, 3)]
    for a, b in zip(guarded, plain):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert s.losses == r.losses


def test_a_guard_that_never_fires_keeps_the_trajectory(runner):
    t = _deep_target(runner)
    off = list(runner.run(t, runner.unlearner("du_loop", grid=[2, 4]), seed=0))
    u = runner.unlearner("du_loop", grid=[2, 4])
    on = list(runner.run(t, type(u)(u.params, guard=8, guard_drop=1.0), seed=0))
    for a, b in zip(off, on):
        assert a.forgotten == b.forgotten and a.accuracy == b.accuracy
        assert b.notes["guard_undone"] == 0 and b.notes["guard_scale"] == 1.0
        assert {k: v for k, v in b.notes.items() if not k.startswith("guard_") and k != "seconds"} == \
            {k: v for k, v in a.notes.items() if k != "seconds"}
    default = list(runner.run(t, type(u)(u.params, guard=0), seed=0))
    key = lambda points: [(p.forgotten, p.accuracy, p.notes["steps_used"]) for p in points]  # noqa: E731
    assert key(default) == key(off)
    assert not any(k.startswith("guard_") for p in default for k in p.notes)


def test_at_a_wrecking_rate_the_guard_undoes_steps_and_keeps_more_of_its_sample(runner):
    t = _deep_target(runner)
    sample = runner.deep_context([t]).guard_sample(64)
    assert sample and not set(sample) & (set(runner.deep_context([t]).watch) | {t})
    assert sample == sorted(set(runner.known) - set(runner.deep_context([t]).watch))  # 64 > the pool: all of it
    u = runner.unlearner("du_loop", grid=[4])
    plain = list(runner.run(t, type(u)(u.params, lr=0.3), seed=0))[-1]
    guarded = list(runner.run(t, type(u)(u.params, lr=0.3, guard=64, guard_drop=0.05, guard_min_scale=1e-4),
                              seed=0))[-1]
    lost_plain = len(set(sample) & set(plain.forgotten))
    lost_guarded = len(set(sample) & set(guarded.forgotten))
    assert guarded.notes["guard_undone"] >= 1 and guarded.notes["guard_scale"] < 1
    assert lost_guarded < lost_plain, (lost_guarded, lost_plain)
    assert guarded.notes["guard_known"] == pytest.approx(1 - lost_guarded / len(sample))


def test_the_sample_is_seeded_and_bad_options_are_refused(runner):
    assert draw(range(100), 10, 0) == draw(reversed(range(100)), 10, 0) != draw(range(100), 10, 1)
    assert len(draw(range(100), 10, 0)) == 10 and draw(range(5), 10, 0) == [0, 1, 2, 3, 4]
    from deepunlearn.unlearn.methods import UnlearnError

    u = runner.unlearner("du_loop")
    for bad in ({"guard": -1}, {"guard_drop": 1.5}, {"guard_min_scale": 0}):
        with pytest.raises(UnlearnError, match=next(iter(bad))):
            type(u)(u.params, **bad)
