"""Sharpness-aware minimisation in the shared optimiser step (``sam_rho``): on a two-parameter
model the step equals the SAM update computed by hand (analytic gradients, AdamW's formula), and
``sam_rho = 0`` is bit for bit the plain AdamW loop."""

from __future__ import annotations

import math

import pytest
import torch

from deepunlearn.unlearn.methods import UnlearnError
from deepunlearn.unlearn.methods.base import Session
from deepunlearn.unlearn.sam import sam_gradients


class Two(torch.nn.Module):
    """Two scalar weights a, b; the loss is (a b - 1)^2."""

    def __init__(self, a: float, b: float):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.tensor(b, dtype=torch.float64))


def loss_of(session) -> torch.Tensor:
    m = session.model
    return (m.a * m.b - 1) ** 2


def grad(a: float, b: float) -> tuple[float, float]:
    """d/da, d/db of (a b - 1)^2, by hand."""
    r = a * b - 1
    return 2 * r * b, 2 * r * a


def sam_grad(a: float, b: float, rho: float) -> tuple[float, float]:
    ga, gb = grad(a, b)
    n = math.hypot(ga, gb)
    return grad(a + rho * ga / n, b + rho * gb / n)


def adamw_by_hand(w, grads_fn, steps, lr, b1=0.9, b2=0.999, eps=1e-8):
    """AdamW (no weight decay on scalars, as Hugging Face's groups) written out."""
    w = list(w)
    m = [0.0, 0.0]
    v = [0.0, 0.0]
    for t in range(1, steps + 1):
        g = grads_fn(*w)
        for i in range(2):
            m[i] = b1 * m[i] + (1 - b1) * g[i]
            v[i] = b2 * v[i] + (1 - b2) * g[i] ** 2
            mh, vh = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
            w[i] -= lr * mh / (math.sqrt(vh) + eps)
    return w


def _session(model, rho):
    return Session(model, batch={}, lr=0.1, weight_decay=0.0, schedule="constant", sam_rho=rho)


def test_sam_gradients_are_the_gradient_at_the_perturbed_point_and_the_weights_come_back():
    model = Two(1.0, 0.5)
    params = [model.a, model.b]
    loss_of(_session(model, 0)).backward()
    sam_gradients(params, lambda: loss_of(_session(model, 0)), rho=1.0)
    want = sam_grad(1.0, 0.5, 1.0)
    assert (model.a.grad.item(), model.b.grad.item()) == pytest.approx(want, rel=1e-9)
    assert want[0] > 0 > grad(1.0, 0.5)[0]  # the perturbed gradient's sign differs: the case tells them apart
    assert model.a.item() == 1.0 and model.b.item() == 0.5  # restored exactly


@pytest.mark.parametrize("rho", [0.05, 1.0])
def test_sam_steps_equal_the_hand_computed_update(rho):
    model = Two(1.0, 0.5)
    s = _session(model, rho)
    for _ in s.descend(loss_of, 3):
        pass
    want = adamw_by_hand((1.0, 0.5), lambda a, b: sam_grad(a, b, rho), 3, lr=0.1)
    plain = adamw_by_hand((1.0, 0.5), grad, 3, lr=0.1)
    got = [model.a.item(), model.b.item()]
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert got != pytest.approx(plain, abs=1e-6)
    # the recorded loss is the one at w (before the perturbation): the first is (0.5 - 1)^2
    assert s.losses[0] == pytest.approx(0.25)


def test_sam_rho_zero_is_bit_for_bit_the_plain_loop(monkeypatch):
    import deepunlearn.unlearn.methods.session as base

    monkeypatch.setattr(base, "sam_gradients", lambda *a, **k: pytest.fail("SAM ran with sam_rho = 0"))
    model = Two(1.0, 0.5)
    for _ in _session(model, 0.0).descend(loss_of, 4):
        pass
    ref = Two(1.0, 0.5)
    opt = torch.optim.AdamW([{"params": [ref.a, ref.b], "weight_decay": 0.0}], lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        ((ref.a * ref.b - 1) ** 2).backward()
        opt.step()
    assert torch.equal(model.a, ref.a) and torch.equal(model.b, ref.b)


def test_every_gradient_method_takes_sam_steps_and_tv_refuses_them(five_people_runner, monkeypatch):
    import deepunlearn.unlearn.methods.session as base

    calls = []
    real = base.sam_gradients
    monkeypatch.setattr(base, "sam_gradients", lambda params, fn, rho: calls.append(rho) or real(params, fn, rho))
    runner = five_people_runner
    t = sorted(runner.known)[0]
    for method, grid in (("ga", [1, 4]), ("npo", [2]), ("du_loop", [3])):
        calls.clear()
        u = runner.unlearner(method, grid=grid)
        u = type(u)(u.params, grid=grid, sam_rho=0.05)
        points = list(runner.run(t, u, seed=0))
        steps = points[-1].notes.get("steps_used", max(grid))
        assert calls == [0.05] * steps, method
    with pytest.raises(UnlearnError, match="sam_rho"):
        runner.unlearner("tv", params=runner.unlearner("tv").Params(sam_rho=0.1))
