"""The GPU path on CPU: the sweep's memory fit check with injected free
memory, and ``benchmarks/gpu_sweep.py`` run with a tiny config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepunlearn.cli import main
from tests.bench.benchmark_scripts import load_benchmark

GiB = 2 ** 30


# --------------------------------------------------------------------------------------------- fit check


@pytest.fixture
def llama7b_folder(fake_model) -> Path:
    """A folder whose config.json is Llama-2-7b's shape (``{"model_type": "llama"}``: transformers'
    LlamaConfig defaults are Llama-2-7b's)."""
    return fake_model


def test_check_fit_refuses_names_the_fix_and_passes_lora(llama7b_folder, monkeypatch):
    from deepunlearn.bench import guard

    with pytest.raises(guard.ModelFitError) as e:
        guard.check_fit("llama7b", str(llama7b_folder), methods=["ga", "tv"], lora=False, device="cuda",
                        free_bytes=40 * GiB)
    msg = str(e.value)
    assert "model 'llama7b'" in msg and str(llama7b_folder) in msg and "does not fit cuda" in msg
    assert "needs 138.6 GiB" in msg and "40.0 GiB are free" in msg and "LoRA (lora = true in the config): " in msg
    assert e.value.field == "models.llama7b" and e.value.file == str(llama7b_folder)
    ok = guard.check_fit("llama7b", str(llama7b_folder), methods=["ga", "tv"], lora=True, device="cuda",
                         free_bytes=40 * GiB)
    assert ok["available_gib"] == 40 and 12.5 < ok["planned_gib"] < 16
    with pytest.raises(guard.ModelFitError, match="nothing tried fits 10 GiB"):
        guard.check_fit("llama7b", str(llama7b_folder), methods=["ga"], lora=False, device="cuda", free_bytes=10 * GiB)

    def no_cuda(device):
        raise AssertionError("CUDA touched on CPU")

    monkeypatch.setattr(guard, "gpu_free_bytes", no_cuda)
    assert guard.check_fit("llama7b", str(llama7b_folder), methods=["ga"], lora=False, device="cpu") is None
    assert guard.check_fit("llama7b", str(llama7b_folder), methods=["ga"], lora=False, device=None) is None


def test_check_fit_plans_the_methods_params_that_hold_memory(llama7b_folder, monkeypatch):
    """A sweep's [params.du_loop] guard and a method's sam_rho are planned: the guard's copies
    raise the peak, and each method is planned with its own parameters."""
    from deepunlearn.bench import guard
    from deepunlearn.unlearn import plan

    def planned(params, methods=("du_loop",)):
        return guard.check_fit("llama7b", str(llama7b_folder), methods=list(methods), lora=False, device="cuda",
                               free_bytes=1000 * GiB, params=params)["planned_gib"]

    plain, guarded = planned(None), planned({"du_loop": {"guard": 32}})
    want = plan.plan_memory(str(llama7b_folder), "du_loop", plan.RunShape(probe_batch=64, guard=True), fix_for=None)
    assert plain < guarded and guarded == pytest.approx(want.peak_gib, abs=0.01)
    assert planned({"du_loop": {"guard": 0, "sam_rho": 0}}) == plain
    seen, real = {}, plan.plan_memory
    monkeypatch.setattr(plan, "plan_memory", lambda config, m, shape, **kw: seen.setdefault(m, shape)
                        and real(config, m, shape, **kw))
    planned({"du_loop": {"sam_rho": 0.05, "guard": 8}, "ga": {"sam_rho": 0.1}}, methods=("du_loop", "ga", "npo"))
    assert (seen["du_loop"].sam_rho, seen["du_loop"].guard, seen["ga"].sam_rho) == (0.05, True, 0.1)
    assert not seen["ga"].guard and not seen["npo"].sam_rho


def test_sweep_on_cuda_refuses_before_loading_the_model(tmp_path, llama7b_folder, monkeypatch, capsys):
    from deepunlearn import probe
    from deepunlearn.bench import guard
    from deepunlearn.kg.io import save_kb
    from deepunlearn.kg.kb import KnowledgeBase

    kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B"), ("B", "father", "A")], targets=[0, 1])
    save_kb(kb, tmp_path / "kb.json")
    cfg = tmp_path / "sweep.toml"

    def write(lora: bool) -> None:
        cfg.write_text("\n".join([
            'kb = "kb.json"', 'output = "out"', f"lora = {str(lora).lower()}",
            "[[models]]", 'name = "big"', f'path = "{llama7b_folder}"', 'device = "cuda"',
            "[methods]", "ga = [1, 2]", "[targets]", "refs = [0]", ""]))

    loads = []

    def fake_load(*a, **kw):
        loads.append(a)
        raise probe.ModelLoadError("stop here: the model would be loaded now")

    monkeypatch.setattr(probe, "load_model", fake_load)
    monkeypatch.setattr(guard, "gpu_free_bytes", lambda device: 24 * GiB)
    write(lora=False)
    code = main(["bench", "--config", str(cfg), "--quiet", "--json"])
    out = capsys.readouterr()
    assert code == 1 and loads == []  # refused before load_model
    line = out.err.strip().splitlines()[-1]
    assert line.startswith("deepunlearn bench: error: model 'big'") and "needs 138.6 GiB" in line
    assert "24.0 GiB are free" in line and "LoRA (lora = true in the config)" in line
    assert json.loads(out.out)["field"] == "models.big"

    write(lora=True)  # fits: the check passes and the model is loaded
    code = main(["bench", "--config", str(cfg), "--quiet", "--overwrite"])
    assert code == 1 and len(loads) == 1 and "stop here" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- the benchmark script


def test_gpu_sweep_help(capsys):
    mod = load_benchmark("gpu_sweep")
    with pytest.raises(SystemExit) as e:
        mod.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--config" in out and "--lora" in out and "--out" in out and "--targets" in out


@pytest.mark.slow
def test_gpu_sweep_tiny_on_cpu(tmp_path, capsys):
    mod = load_benchmark("gpu_sweep")
    out = tmp_path / "sweep.json"
    res = mod.main(["--config", "tiny", "--targets", "2", "--device", "cpu", "--kb", "generate:12",
                    "--ref-points", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert res["targets"] == 2 and res["methods"] == ["ga", "npo", "tv", "whp"]
    assert res["points"] == 2 * (5 + 5 + 5 + 5) and res["probes"] == res["points"]
    assert all(v["points"] == 10 for v in res["per_method"].values())
    assert res["per_method"]["ga"]["steps"] == 32 and res["per_method"]["tv"]["steps"] == 20
    for key in ("points_per_s", "probed_facts_per_s", "seconds_per_target", "sweep_s", "probe_s", "plan_peak_gib"):
        assert res[key] > 0, key
    assert res["peak_gib"] is None  # no CUDA: nothing measured, nothing touched
    assert res["device"] == "cpu" and res["probe_batch"] == 64
    lim = res["gpu_limits"]
    assert lim["optimizer_steps"] == 104 and lim["optimizer_min_s"] > 0 and lim["probe_ratio"] > 0
    ref = res["reference_protocol"]
    assert ref["points"] == 1 and ref["seconds_per_point"] > 0 and ref["ratio_to_ours"] > 0
