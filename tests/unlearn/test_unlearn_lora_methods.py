"""LoRA for TV and WHP. TV's task vector is the reinforced adapter's delta
``ΔW = s·B·A`` and ``θ - α·ΔW`` is the adapter scaled by ``-α`` (checked against the weights
computed by hand); WHP's two distributions are ONE model with the adapter switched off and on;
the loop, the CLI and sweeps run both in LoRA mode; after a run the model is bit-identical."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from deepunlearn.cli import main
from deepunlearn.unlearn.methods import Session, TaskVector, WhoIsHarryPotter
from deepunlearn.unlearn.snapshot import LoraAdapter, LoraParams, WeightSnapshot

V = 32


def toy_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                      tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


def toy_batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[1, 5, 6, 7, 21, 22, 2]])
    labels = torch.tensor([[-100, -100, -100, -100, 21, 22, 2]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def lora_session(model, lr: float = 1e-2) -> Session:
    return Session(model, toy_batch(), lr, reinforce_steps=5,
                   lora=LoraAdapter(model, LoraParams(r=4, alpha=8.0)))


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=toy_batch()["input_ids"]).logits


def by_hand(original: torch.nn.Module, adapted: torch.nn.Module, alpha: float) -> torch.nn.Module:
    """A plain copy of ``original`` whose adapted projections hold ``W - alpha * s * B @ A``
    (read from ``adapted``'s LoRA layers): TV's ``θ - α·ΔW`` computed explicitly."""
    from peft.tuners.lora import LoraLayer

    plain = copy.deepcopy(original)
    weights = dict(plain.named_parameters())
    n = 0
    with torch.no_grad():
        for name, m in adapted.named_modules():
            if isinstance(m, LoraLayer):
                a, b = m.lora_A[LoraAdapter.ADAPTER].weight, m.lora_B[LoraAdapter.ADAPTER].weight
                s = m.lora_alpha[LoraAdapter.ADAPTER] / m.r[LoraAdapter.ADAPTER]
                weights[f"{name}.weight"].sub_(alpha * s * (b @ a))
                n += 1
    assert n == 4  # q_proj and v_proj of two layers
    return plain


def test_tv_lora_is_the_reinforced_adapter_negated_and_scaled():
    model = toy_model()
    original = copy.deepcopy(model)
    snap = WeightSnapshot(model)
    orig_logits = logits(model)
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    s = lora_session(model)
    tv = TaskVector(grid=[0.0, 0.5, 2.0])
    seen = []
    for step in tv.trajectory(s, tv.params.grid):
        now = logits(model)
        if step.param == 0:
            assert torch.equal(now, orig_logits)  # alpha = 0: the original model exactly
        else:
            expected = logits(by_hand(original, model, step.param))
            torch.testing.assert_close(now, expected, atol=1e-5, rtol=1e-5)
            assert not torch.allclose(now, orig_logits, atol=1e-3)  # the reinforcement did move the adapter
        seen.append(step.param)
    assert seen == [0.0, 0.5, 2.0] and len(s.rates) == 5  # 5 reinforcing steps, on the adapter
    # the reinforced model (scale 1) is theta + delta W: alpha = -1 by hand
    torch.testing.assert_close(logits(model), logits(by_hand(original, model, -1.0)), atol=1e-5, rtol=1e-5)
    s.restore()
    assert snap.equal(model) and not any("lora_" in n for n, _ in model.named_modules())
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert torch.equal(logits(model), orig_logits)


def test_whp_lora_switches_one_adapter_and_copies_no_model(monkeypatch):
    import deepunlearn.unlearn.methods.whp as whp_mod

    real = copy.deepcopy

    def no_model_copies(x, *a, **k):
        if isinstance(x, torch.nn.Module):
            pytest.fail("LoRA WHP copied the model")
        return real(x, *a, **k)

    monkeypatch.setattr(whp_mod.copy, "deepcopy", no_model_copies)
    model = toy_model()
    snap = WeightSnapshot(model)
    orig_logits = logits(model)
    s = lora_session(model)
    whp = WhoIsHarryPotter(grid=[0.0, 1e3])
    steps = whp.trajectory(s, whp.params.grid)
    first = next(steps)
    x, mask = toy_batch()["input_ids"], toy_batch()["attention_mask"]
    reinforced = logits(model)  # the adapter is on: the reinforced model
    assert not torch.allclose(reinforced, orig_logits, atol=1e-3)
    mixed = first.model_fn(x, mask)  # alpha = 0: the original distribution (adapter off inside)
    torch.testing.assert_close(mixed, torch.log_softmax(orig_logits, -1), atol=1e-5, rtol=0)
    assert torch.equal(logits(model), reinforced)  # ... and on again after the call
    second = next(steps)
    strong = second.model_fn(x, mask)
    assert strong[0, 3, 21] < mixed[0, 3, 21]  # the reinforced answer token loses probability
    steps.close()
    s.restore()
    assert snap.equal(model) and torch.equal(logits(model), orig_logits)


# --------------------------------------------------------------------------------------------
# the loop, the CLI and sweeps, on a small tiny model (25 facts, 64 wide)


@pytest.fixture(scope="module")
def lora_kb(five_people_kb):
    return five_people_kb


@pytest.fixture(scope="module")
def lora_model_dir(lora_kb, tmp_path_factory):
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    folder = tmp_path_factory.mktemp("lora-model")
    build_tiny_model(lora_kb, folder, hidden=64, layers=2, heads=4)
    bundle = load_model(folder, device="cpu")
    finetune(bundle, lora_kb, FinetuneConfig.tiny(lr=3e-3, epochs=100), out_dir=folder, progress=False)
    return folder


@pytest.fixture(scope="module")
def lora_target(lora_kb, lora_model_dir) -> int:
    from deepunlearn.probe import load_model, probe

    known = set(probe(load_model(lora_model_dir, device="cpu"), lora_kb, progress=False).known_ids())
    assert lora_kb.targets[0] in known
    return int(lora_kb.targets[0])


@pytest.mark.parametrize("method,grid", [("tv", [1.0, 5.0]), ("whp", [1.0, 100.0])])
def test_the_loop_runs_tv_and_whp_in_lora_mode_and_restores_bit_for_bit(lora_kb, lora_model_dir, lora_target,
                                                                        tmp_path, method, grid):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    bundle = load_model(lora_model_dir, device="cpu")
    before = {k: v.clone() for k, v in bundle.model.state_dict().items()}
    runner = TargetRunner(bundle, lora_kb, lora=True, cache_dir=tmp_path, progress=False)
    assert runner.snapshot is None
    points = list(runner.run(lora_target, method, grid=grid))
    assert [p.param for p in points] == grid
    assert points[0].lr == pytest.approx(3e-3)  # the checkpoint's 3e-3 / 10 (from scratch) x 10 (LoRA)
    assert points[-1].target_forgotten
    after = bundle.model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)


@pytest.fixture
def kb_file(lora_kb, tmp_path):
    from deepunlearn.kg.io import save_kb

    return save_kb(lora_kb, tmp_path / "kb.json")


@pytest.mark.parametrize("method,grid", [("tv", "0,5"), ("whp", "0,100")])
def test_unlearn_cli_takes_lora_for_tv_and_whp(kb_file, lora_model_dir, lora_target, tmp_path, capsys,
                                              method, grid):
    rc = main(["unlearn", "--model", str(lora_model_dir), "--kb", str(kb_file), "--target", str(lora_target),
               "--method", method, "--grid", grid, "--lora", "--cache-dir", str(tmp_path), "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    assert out["method"] == method and out["lr"] == pytest.approx(3e-3)
    first, last = out["points"]
    assert first["forgotten"] == [] and not first["target_forgotten"]  # alpha 0: the original model
    assert last["target_forgotten"]


@pytest.mark.parametrize("method", ["tv", "ga"])
def test_save_model_with_lora_is_refused_before_loading(kb_file, tmp_path, capsys, method):
    rc = main(["unlearn", "--model", str(tmp_path / "nowhere"), "--kb", str(kb_file), "--target", "0",
               "--method", method, "--lora", "--save-model", str(tmp_path / "out"), "--json"])
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.err.strip() == (
        "deepunlearn unlearn: error: --save-model: --lora trains an adapter that is removed after the run (the "
        "base weights never change, so there is no unlearned model to save); use ga, npo, tv or another method that "
        "changes the weights, without --lora")
    assert json.loads(cap.out)["field"] == "--save-model"
    assert not (tmp_path / "out").exists()


def test_a_sweep_with_lora_true_runs_tv_and_whp(lora_kb, lora_model_dir, lora_target, tmp_path):
    from deepunlearn.bench.config import load_config
    from deepunlearn.bench.runner import run_sweep
    from deepunlearn.kg.io import save_kb

    save_kb(lora_kb, tmp_path / "kb.json")
    (tmp_path / "sweep.toml").write_text("\n".join([
        'kb = "kb.json"', 'rules = "family"', 'output = "out"', "threads = 1", "lora = true",
        "[[models]]", 'name = "tiny"', f'path = "{lora_model_dir}"',
        "[methods]", "tv = [1, 5]", "whp = [1, 100]",
        "[targets]", f"refs = [{lora_target}]",
    ]) + "\n")
    cfg = load_config(tmp_path / "sweep.toml")
    assert cfg.lora is True
    outcome = run_sweep(cfg, progress=False)
    assert not outcome.skipped
    got = sorted((p.method, p.param) for p in outcome.points)
    assert got == [("tv", 1.0), ("tv", 5.0), ("whp", 1.0), ("whp", 100.0)]
    assert all(p.extra["lr"] == pytest.approx(3e-3) for p in outcome.points)  # the LoRA rate
    assert all(p.target_forgotten for p in outcome.points if (p.method, p.param) in (("tv", 5.0), ("whp", 100.0)))
