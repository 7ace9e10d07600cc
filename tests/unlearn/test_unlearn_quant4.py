"""The 4-bit quantisation attack (int4, nf4) on CPU: group-wise absmax round-to-nearest in plain
torch, every parameter tensor bit-exact after restore, and the CLI / sweep option accept it."""

from __future__ import annotations

import json

import pytest
import torch

from deepunlearn.unlearn.attacks import AttackParams, quantize_attack, quantized
from deepunlearn.unlearn.quant4 import GROUP, NF4, fake_linear, fake_quantize


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize("how", ["int4", "nf4"])
def test_4bit_attack_restores_every_parameter_bit_for_bit(runner, five_people_kb, how):
    model = runner.bundle.model
    before, state = params(model), {k: v.clone() for k, v in model.state_dict().items()}
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    batch = runner.encode(list(range(len(five_people_kb))))
    with torch.no_grad():
        float_logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    inside = {}

    def known():
        mods = dict(model.named_modules())
        inside["swapped"] = all(mods[n] is not m for n, m in linears.items())
        inside["levels"] = max(len(torch.unique(g)) for g in mods["lm_head"].weight.reshape(-1, GROUP))
        with torch.no_grad():
            inside["logits"] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return runner.known_among(sorted(runner.known))

    got = quantize_attack(model, known, how=how)
    assert inside["swapped"] and inside["levels"] <= 16  # 4 bits: at most 16 values per group
    diff = (inside["logits"] - float_logits).abs().max().item()
    assert 0 < diff < 0.5 * float_logits.abs().max().item()  # different, not garbage
    assert got <= runner.known and len(got) >= len(runner.known) - 5  # a finetuned model still knows most
    mods = dict(model.named_modules())
    assert all(mods[n] is m for n, m in linears.items())
    now = dict(model.named_parameters())
    assert set(now) == set(before) and all(torch.equal(now[k], v) and now[k].dtype == v.dtype for k, v in before.items())
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert all(p.requires_grad for p in model.parameters())


def test_int4_is_symmetric_absmax_round_to_nearest_per_group():
    torch.manual_seed(0)
    w = torch.randn(3, 2 * GROUP + 5)  # a row not a multiple of the group: padded for the grouping only
    q = fake_quantize(w, "int4")
    assert q.shape == w.shape and q.dtype == w.dtype
    for r in range(3):
        for start in range(0, w.shape[1], GROUP):
            g, qg = w[r, start:start + GROUP], q[r, start:start + GROUP]
            s = g.abs().max() / 7
            assert torch.allclose(qg, torch.clamp(torch.round(g / s), -8, 7) * s)
            assert (qg - g).abs().max() <= s / 2 + 1e-6 and len(torch.unique(qg)) <= 16


def test_nf4_takes_the_nearest_codebook_value_times_the_group_absmax():
    torch.manual_seed(1)
    w = torch.randn(2, GROUP)
    q = fake_quantize(w, "nf4")
    code = torch.tensor(NF4)
    for r in range(2):
        m = w[r].abs().max()
        nearest = code[(w[r].unsqueeze(-1) / m - code).abs().argmin(-1)] * m
        assert torch.allclose(q[r], nearest)
    assert q.abs().max() == w.abs().max()  # the absmax itself is a code (±1)


def test_zero_groups_other_dtypes_and_gpt2_conv1d():
    assert torch.equal(fake_quantize(torch.zeros(2, 8), "int4", group=4), torch.zeros(2, 8))
    w = torch.randn(4, 8, dtype=torch.bfloat16)
    assert fake_quantize(w, "nf4").dtype == torch.bfloat16
    from transformers.pytorch_utils import Conv1D

    conv = Conv1D(3, 4)  # y = x @ W + b, W is (4 inputs, 3 outputs)
    lin = fake_linear(conv, "int4", group=4)
    assert torch.equal(lin.weight, fake_quantize(conv.weight.detach().t(), "int4", group=4))
    assert torch.equal(lin.bias, conv.bias.detach()) and not lin.weight.requires_grad
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).to(torch.bfloat16)
    x = torch.randn(5, 4, dtype=torch.bfloat16)
    with quantized(model, "nf4") as names:
        assert names == ["0", "2"]
        y = model(x)
    assert y.dtype == torch.bfloat16 and type(model[0]) is torch.nn.Linear


@pytest.mark.parametrize("how", ["int4", "nf4"])
def test_sweep_option_and_attack_command_take_4bit(five_people_model_dir, five_people_kb, tmp_path, capsys, how):
    assert AttackParams(quantize=how).enabled()
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    code = main(["attack", "--model", str(five_people_model_dir), "--kb", str(kb_file),
                 "--target", str(five_people_kb.targets[0]), "--quantize", how, "--cache-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out.strip().splitlines()[-1])
    assert obj["quantize"] == how and 0.0 <= obj["recall_quant"] <= 1.0 and 0.0 <= obj["accuracy_quant"] <= 1.0
