"""du_loop's relearning lookahead on the 5-person one-layer model: a margin step's gradient is the
loss's gradient at the weights one or more sign steps of the simulated split attack leave (checked
against those steps taken by hand on a copy of the model), the weights come back bit for bit, a
step with nothing to relearn is the plain one, and a real run takes it on every margin step (or
every unlearning step) and on no other; ``margin_base`` puts its own forget loss on the margin's
steps only, GA's by default after an NPO base and the base's own after another."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from deepunlearn.unlearn.finetune import answer_loss
from tests.unlearn.test_unlearn_deep import _deep_target


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def _answer_grads(model, params, data):
    logits = model(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
    return torch.autograd.grad(answer_loss(logits, data["labels"])[0], params, allow_unused=True)


@pytest.mark.parametrize("depth,on,how", [(1, "split", "random"), (2, "split", "random"), (1, "split-set", "random"),
                                          (1, "split-set", "linked")])
def test_the_lookahead_gradient_is_the_loss_gradient_after_sign_steps_of_the_attack(runner, depth, on, how):
    from deepunlearn.unlearn.deep import DeepContext
    from deepunlearn.unlearn.methods.du_tamper import Lookahead, draw_halves, split_seed
    from deepunlearn.unlearn.relearn_pool import target_forms

    t = _deep_target(runner)
    chosen = {t: runner.chosen_set(t)}
    ctx = runner.deep_context([t])
    model = runner.bundle.model
    params = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    session = SimpleNamespace(lr=1e-3, model=model, trainable=lambda: params)
    look = Lookahead(SimpleNamespace(tamper_lr_scale=2.0, tamper_steps=4, lookahead_depth=depth, tamper_on=on,
                                     tamper_halves=how),
                     session, ctx, seed=0, params=None)
    assert look.radius == pytest.approx(8e-3)
    forget = runner.encode([t])

    def loss():
        out = model(input_ids=forget["input_ids"], attention_mask=forget["attention_mask"]).logits
        return -answer_loss(out, forget["labels"])[0]

    got = torch.autograd.grad(look.loss(chosen, loss), params, allow_unused=True)
    assert all(torch.equal(p, b) for p, b in zip(params, before))  # the weights are back, bit for bit
    assert look.notes() == {"lookahead_steps": 1}

    # by hand: the half the first step draws, the attack's batch, one sign step on a copy
    half = draw_halves(how, ctx, chosen, 1, split_seed(0, 1 << 20))[0]
    data = ctx.split_batch(half, on)()
    # split-set: the half's facts alone; split: the target's other forms too
    assert data["input_ids"].shape[0] == len(half[t]) + (len(target_forms(runner.kb, t)) if on == "split" else 0)
    moved = copy.deepcopy(model)
    moved_params = [p for p in moved.parameters() if p.requires_grad]
    for _ in range(depth):  # each sign step from the gradient where the last one left the copy
        g_r = _answer_grads(moved, moved_params, data)
        with torch.no_grad():
            for p, g in zip(moved_params, g_r):
                if g is not None:
                    p.sub_(8e-3 / depth * g.sign())
    out = moved(input_ids=forget["input_ids"], attention_mask=forget["attention_mask"]).logits
    want = torch.autograd.grad(-answer_loss(out, forget["labels"])[0], moved_params, allow_unused=True)
    plain = torch.autograd.grad(loss(), params, allow_unused=True)
    pairs = [(a, b, c) for a, b, c in zip(got, want, plain) if b is not None]
    assert pairs and all(a is not None and torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b, _ in pairs)
    assert any(not torch.allclose(b, c) for _, b, c in pairs)  # the looked-ahead gradient is not the plain one


def test_nothing_to_relearn_is_the_plain_loss():
    from deepunlearn.unlearn.methods.du_tamper import Lookahead

    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    ctx = SimpleNamespace(targets=[3], split_batch=lambda half, on: None)
    session = SimpleNamespace(lr=1e-3, model=None, trainable=lambda: [w])
    look = Lookahead(SimpleNamespace(tamper_lr_scale=1.0, tamper_steps=8, lookahead_depth=1, tamper_on="split",
                                     tamper_halves="random"),
                     session, ctx, seed=0, params=None)
    plain = (w ** 2).sum()
    assert look.loss({3: [3]}, lambda: plain) is plain
    assert look.notes() == {"lookahead_steps": 1}


def test_du_loop_takes_the_lookahead_on_its_margin_steps_or_on_every_unlearning_step(runner):
    t = _deep_target(runner)
    u = runner.unlearner("du_loop", grid=[4, 32], params=None)
    runs = {}
    for on in ("off", "margin", "all"):
        v = type(u)(u.params, grid=[4, 32], overshoot=1.0, heal=0, lookahead=on, tamper_on="split",
                    tamper_halves="random")
        runs[on] = list(runner.run(t, v, seed=0))[-1].notes
    plain, look, every = runs["off"], runs["margin"], runs["all"]
    assert "lookahead_steps" not in plain
    # the same trajectory up to the deep point; then every margin step looks ahead
    assert look["steps_to_deep"] == plain["steps_to_deep"] and look["deep"] and look["stopped_deep"]
    assert look["lookahead_steps"] == look["steps_used"] - look["steps_to_deep"] > 0
    assert every["lookahead_steps"] == every["steps_used"] and every["deep"]  # every step, none healing


def test_margin_base_takes_the_margin_steps_with_its_own_forget_loss(runner, monkeypatch):
    from deepunlearn.unlearn.methods import get_method

    ga = get_method("ga")
    calls = []
    real = ga.loss
    monkeypatch.setattr(ga, "loss", lambda self, session: calls.append(1) or real(self, session))
    t = _deep_target(runner)
    u = runner.unlearner("du_loop", grid=[4, 32], params=None)
    notes = {}
    for margin_base in (None, "npo", "ga", "auto"):
        calls.clear()
        v = type(u)(u.params, grid=[4, 32], overshoot=1.0, heal=0, margin_base=margin_base)
        notes[margin_base] = list(runner.run(t, v, seed=0))[-1].notes
        notes[margin_base]["ga_calls"] = len(calls)
    # None is the base's own loss (npo): no GA step, the same run
    assert notes[None]["ga_calls"] == notes["npo"]["ga_calls"] == 0
    assert notes[None]["steps_used"] == notes["npo"]["steps_used"]
    # GA's loss on every margin step and on no other; the deep point is the base's
    n = notes["ga"]
    assert n["steps_to_deep"] == notes[None]["steps_to_deep"] and n["deep"]
    assert n["ga_calls"] == n["steps_used"] - n["steps_to_deep"] > 0
    # the default ("auto") after an NPO base is GA's margin: the same run
    assert u.params.margin_base == "auto"
    assert {k: notes["auto"][k] for k in ("ga_calls", "steps_used", "steps_to_deep")} == \
        {k: n[k] for k in ("ga_calls", "steps_used", "steps_to_deep")}
    with pytest.raises(Exception, match="margin_base"):
        type(u)(u.params, grid=[4], margin_base="sideways")


def test_the_default_margin_is_the_base_own_loss_after_a_base_other_than_npo():
    from deepunlearn.unlearn.methods import get_method

    du = get_method("du_loop")
    for base in ("ga", "simnpo", "rmu"):
        assert du(None, grid=[4], base=base).margin_base is None  # the base's own loss
    assert du(None, grid=[4]).margin_base.name == "ga"
    assert du(None, grid=[4], margin_base=None).margin_base is None
