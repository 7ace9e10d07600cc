"""Attacks after unlearning: relearning and int8 quantisation leave the model bit for bit as it
was and record what they should (the ``deepunlearn attack`` command: test_unlearn_attack_cli.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from deepunlearn.unlearn.attacks import (
    AttackParams, quantize_attack, quantized, relearn_attack, relearn_sample,
)
from deepunlearn.unlearn.methods import UnlearnError


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_state(model, before: dict[str, torch.Tensor]) -> None:
    now = model.state_dict()
    assert set(now) == set(before)
    for k, v in before.items():
        assert now[k].dtype == v.dtype, k
        assert torch.equal(now[k], v), k


def pool_of(runner, target: int) -> list[int]:
    return sorted(runner.known - {target} - set(runner.chosen_set(target)))


def answer_logprob(runner, ids) -> torch.Tensor:
    from deepunlearn.unlearn.losses import sequence_logprob

    batch = runner.encode(list(ids))
    with torch.no_grad():
        logits = runner.bundle.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return sequence_logprob(logits, batch["labels"])[0]


# ------------------------------------------------------------------------------------ AttackParams
@pytest.mark.parametrize("kw, loc, text", [
    ({"relearn": [2, 1]}, "relearn", "must be sorted and distinct, got [2, 1]"),
    ({"relearn": [1, 1]}, "relearn", "must be sorted and distinct"),
    ({"relearn": [0, 1]}, "relearn", "step counts must be >= 1, got 0"),
    ({"relearn": [1.5]}, "relearn", "valid integer"),
    ({"relearn_size": 0}, "relearn_size", "greater than or equal to 1"),
    ({"relearn_size": True}, "relearn_size", "valid integer"),
    ({"relearn_lr": 0.0}, "relearn_lr", "greater than 0"),
    ({"relearn_lr": float("nan")}, "relearn_lr", "finite number"),
    ({"quantize": "int3"}, "quantize", "'int8', 'int4' or 'nf4'"),
    ({"at": "first"}, "at", "'last' or 'all'"),
    ({"relearn_steps": [1]}, "relearn_steps", "Extra inputs are not permitted"),
])
def test_attack_params_name_the_bad_field(kw, loc, text):
    with pytest.raises(ValidationError) as e:
        AttackParams(**kw)
    err = e.value.errors()[0]
    assert err["loc"][0] == loc
    assert text in err["msg"]


def test_attack_params_defaults_and_enabled():
    p = AttackParams()
    assert (p.relearn, p.relearn_size, p.relearn_lr, p.quantize, p.at) == ([], 16, None, None, "last")
    assert not p.enabled()
    assert AttackParams(relearn=[1, 2, 4, 8]).enabled() and AttackParams(quantize="int8").enabled()


# ------------------------------------------------------------------------------------ relearning
def test_relearn_sample_is_the_seeded_numpy_draw_from_the_sorted_pool():
    pool = [40, 7, 13, 99, 2, 61, 5, 8]
    ordered = sorted(pool)
    expected = sorted(ordered[j] for j in np.random.default_rng(3).choice(len(ordered), size=4, replace=False))
    got = relearn_sample(pool, 4, seed=3)
    assert got == expected and set(got) <= set(pool) and len(set(got)) == 4
    assert relearn_sample(list(reversed(pool)), 4, seed=3) == got  # the pool's order does not matter
    assert relearn_sample(pool, 100, seed=3) == ordered  # min(size, len(pool))
    assert relearn_sample([], 4) == []
    assert {tuple(relearn_sample(pool, 4, seed=s)) for s in range(6)} != {tuple(got)}  # the seed matters


def test_relearn_records_known_at_the_grid_steps_and_restores_everything(runner, five_people_kb):
    model = runner.bundle.model
    target = five_people_kb.targets[0]
    pool = pool_of(runner, target)
    # a state with mixed flags and modes, and a gradient the caller holds
    model.eval()
    model.model.layers[0].train()
    model.model.embed_tokens.weight.requires_grad_(False)
    held = torch.full_like(model.lm_head.weight, 0.5)
    model.lm_head.weight.grad = held
    before = state(model)
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    modes = {n: m.training for n, m in model.named_modules()}
    embed = model.model.embed_tokens.weight.detach().clone()

    encoded, calls, seen = [], [], []
    sampled = relearn_sample(pool, 6, seed=5)

    def encode(ids):
        encoded.append(list(ids))
        return runner.encode(ids)

    def known():
        calls.append(len(calls))
        seen.append((model.training, answer_logprob(runner, sampled), answer_logprob(runner, [target])))
        return runner.known_among(sorted(runner.known))

    start = (answer_logprob(runner, sampled), answer_logprob(runner, [target]))
    out = relearn_attack(model, encode, pool, [1, 3, 4], lr=1e-3, size=6, seed=5, known=known)

    assert list(out) == [1, 3, 4] and len(calls) == 3  # known() exactly at the grid steps
    assert all(isinstance(v, set) and v <= runner.known for v in out.values())
    assert encoded == [sampled] and set(sampled) <= set(pool)  # the seeded draw, never outside the pool
    assert all(not training for training, _, _ in seen)  # probed in eval mode
    # relearning raises the sampled facts' answer log-probability step after step, and moves the held-out target's
    sums = [float(lp.sum()) for _, lp, _ in seen]
    assert float(start[0].sum()) < sums[0] < sums[1] < sums[2]
    assert not torch.equal(seen[0][2], start[1])
    assert torch.equal(model.model.embed_tokens.weight, embed)  # a frozen parameter is not trained
    assert_same_state(model, before)
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert {n: m.training for n, m in model.named_modules()} == modes
    assert model.lm_head.weight.grad is held and torch.equal(held, torch.full_like(held, 0.5))
    assert all(p.grad is None for n, p in model.named_parameters() if n != "lm_head.weight")


def test_relearn_restores_the_model_when_known_raises(runner, five_people_kb):
    model = runner.bundle.model
    model.eval()
    before = state(model)
    calls = []

    def known():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("probe failed")
        return set()

    with pytest.raises(RuntimeError, match="probe failed"):
        relearn_attack(model, runner.encode, pool_of(runner, five_people_kb.targets[0]), [1, 2, 8], lr=1e-2,
                       known=known)
    assert len(calls) == 2
    assert_same_state(model, before)
    assert not model.training and all(p.requires_grad for p in model.parameters())


def test_relearn_on_an_empty_pool_runs_nothing_and_bad_grids_are_refused(runner):
    model = runner.bundle.model
    never = lambda *a: pytest.fail("nothing should run")  # noqa: E731
    assert relearn_attack(model, never, [], [1, 2], lr=1e-3, known=never) == {}
    for steps in ([2, 1], [0, 1], [1, 1]):
        with pytest.raises(UnlearnError, match="sorted, distinct and >= 1"):
            relearn_attack(model, never, [1, 2], steps, lr=1e-3, known=never)
    with pytest.raises(UnlearnError, match="finite number > 0"):
        relearn_attack(model, never, [1, 2], [1], lr=float("nan"), known=never)


# ------------------------------------------------------------------------------------ quantisation
def test_int8_quantisation_swaps_every_linear_in_and_out(runner, five_people_kb):
    import torch.ao.nn.quantized.dynamic as nnqd

    model = runner.bundle.model
    before = state(model)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert len(linears) == 8  # q, k, v, o, gate, up, down, lm_head
    batch = runner.encode(list(range(len(five_people_kb))))
    with torch.no_grad():
        float_logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    inside = {}

    def known():
        mods = dict(model.named_modules())
        inside["types"] = {type(mods[n]) for n in linears}
        with torch.no_grad():
            inside["logits"] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        inside["generated"] = model.generate(batch["input_ids"][:1, :4], max_new_tokens=3, do_sample=False)
        return runner.known_among(sorted(runner.known))

    got = quantize_attack(model, known, how="int8")
    assert inside["types"] == {nnqd.Linear}
    diff = (inside["logits"] - float_logits).abs().max().item()
    assert 0 < diff < 0.1 * float_logits.abs().max().item()  # slightly different, not garbage
    gen = inside["generated"]
    assert 4 < gen.shape[1] <= 7 and torch.equal(gen[:, :4], batch["input_ids"][:1, :4])  # generate runs
    assert got <= runner.known and len(got) >= len(runner.known) - 5
    mods = dict(model.named_modules())
    assert all(mods[n] is m for n, m in linears.items())  # the very same float modules are back
    assert_same_state(model, before)


def test_quantisation_puts_the_modules_back_when_known_raises(runner):
    model = runner.bundle.model
    before = state(model)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}

    def known():
        raise RuntimeError("probe failed")

    with pytest.raises(RuntimeError, match="probe failed"):
        quantize_attack(model, known)
    mods = dict(model.named_modules())
    assert all(mods[n] is m for n, m in linears.items())
    assert_same_state(model, before)


def test_quantized_yields_the_swapped_names_and_converts_other_dtypes():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).to(torch.bfloat16)
    x = torch.randn(5, 4, dtype=torch.bfloat16)
    with quantized(model, "int8") as names:
        assert names == ["0", "2"]
        y = model(x)
    assert y.dtype == torch.bfloat16 and y.shape == (5, 2)
    assert torch.allclose(y.float(), model(x).float(), atol=0.1)
    assert type(model[0]) is torch.nn.Linear


def test_int8_quantises_gpt2_conv1d_as_the_linear_of_its_transposed_weight():
    import torch.ao.nn.quantized.dynamic as nnqd
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(3, 4))  # nf=3 outputs, nx=4 inputs: y = x @ W + b, W is (4, 3)
    x = torch.randn(5, 4)
    with quantized(model, "int8") as names:
        assert names == ["0"] and type(model[0]) is nnqd.Linear
        y = model(x)
    exact = x @ model[0].weight + model[0].bias
    assert torch.allclose(y, exact, atol=0.05) and not torch.equal(y, exact)
    assert type(model[0]) is Conv1D


def test_quantisation_errors_are_one_line():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    with pytest.raises(UnlearnError, match="quantize must be one of int8, int4, nf4, got 'int3'"):
        quantize_attack(model, set, how="int3")
    assert quantize_attack(model, set, how="nf4") == set()  # 4-bit runs on CPU
    with pytest.raises(UnlearnError) as e:
        quantize_attack(model.to("meta"), set, how="int8")
    assert str(e.value) == "int8 dynamic quantisation runs on CPU; use quantize = 'int4' or 'nf4' on a GPU"
