"""Two runs of the same sweep config give identical points, a GPT-2 model with dropout included.

Unlearning runs the model in training mode, so a GPT-2 model whose config has dropout (as GPT-2
checkpoints have: resid/attn/embd_pdrop 0.1) takes different gradient steps on every run unless
each trajectory is seeded; every job gets its own seed from the sweep's ``seed``
(``grids.job_seed``), set by ``TargetRunner.run(..., seed=...)`` right before the trajectory.
"""

from __future__ import annotations

import json

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.runner import run_sweep
from deepunlearn.kg.io import save_kb

GRIDS = {"ga": [1, 2], "npo": [2], "tv": [5], "whp": [1e3]}
DROPOUT = 0.1


@pytest.fixture(scope="module")
def gpt2_dropout_dir(small_kb, tmp_path_factory):
    """A tiny GPT-2-architecture model finetuned on ``small_kb`` (without dropout, so it learns
    quickly), then given GPT-2's dropout of 0.1 in its config.json for unlearning."""
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    build_tiny_model(small_kb, folder, seed=1, hidden=128, arch="gpt2")
    finetune(load_model(folder, device="cpu"), small_kb, FinetuneConfig.tiny(), out_dir=folder, progress=False)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "gpt2"
    cfg.update(resid_pdrop=DROPOUT, attn_pdrop=DROPOUT, embd_pdrop=DROPOUT)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    assert load_model(folder, device="cpu").model.config.resid_pdrop == DROPOUT
    return folder


@pytest.fixture(scope="module")
def seeded_config(tmp_path_factory, small_kb, tiny_model_dir, gpt2_dropout_dir):
    from deepunlearn.probe import load_model, probe

    known = [set(probe(load_model(d, device="cpu"), small_kb, mode="exact", progress=False).known_ids())
             for d in (tiny_model_dir, gpt2_dropout_dir)]
    target = next(t for t in list(small_kb.targets) + small_kb.entity_facts() if all(t in k for k in known))
    d = tmp_path_factory.mktemp("seeded")
    save_kb(small_kb, d / "kb.json")
    lines = ['kb = "kb.json"', 'rules = "family"', "threads = 1", "seed = 5",
             "[[models]]", 'name = "tiny"', f'path = "{tiny_model_dir}"',
             "[[models]]", 'name = "gpt2-dropout"', f'path = "{gpt2_dropout_dir}"',
             "[methods]", *[f"{m} = {json.dumps(g)}" for m, g in GRIDS.items()],
             "[targets]", f"refs = [{target}]"]
    (d / "sweep.toml").write_text("\n".join(lines) + "\n")
    return d / "sweep.toml"


@pytest.mark.slow
def test_two_runs_of_one_config_give_identical_points(seeded_config, tmp_path):
    runs = [run_sweep(load_config(seeded_config, output=str(tmp_path / f"run{i}")), progress=False) for i in (1, 2)]
    n = 2 * sum(len(g) for g in GRIDS.values())
    for r in runs:
        assert len(r.points) == n == r.computed and not r.skipped
    a, b = ([p.to_dict(timing=False) for p in r.points] for r in runs)
    assert {p["model"] for p in a} == {"tiny", "gpt2-dropout"}
    assert a == b      # every metric, every forgotten fact, every recorded extra
    manifest = json.loads((runs[0].output / "manifest.json").read_text())
    assert manifest["seed"] == 5 and manifest["models"]["gpt2-dropout"]["protocol"]["name"] == "default"
