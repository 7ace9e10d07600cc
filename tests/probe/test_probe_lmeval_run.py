"""lm-eval itself on exported tasks: its per-fact ``acc`` equals ``probe --mode exact`` fact for
fact. Skipped only where lm-eval is not installed (CI installs it: ``.ci/run``).

Two runs of lm-eval's own command line on the five-person fixture KB, offline, on CPU:

* the fixture model (``llama`` format, whose question part ends in a newline) with
  ``deepunlearn-hf`` (``python -m deepunlearn.probe.lmeval_model``), which cuts context and
  continuation as the exact probe does;
* a model finetuned in the ``gpt2`` format (question part ending in ``" Answer:"``, no
  whitespace to move) with lm-eval's plain ``hf`` model.

The samples files are read back with ``data import-lm-eval-samples``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from deepunlearn.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _lm_eval(model: str, model_dir: Path, tasks: Path, out: Path, tmp_path: Path) -> list[Path]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    cmd = [sys.executable, "-m", "deepunlearn.probe.lmeval_model", "--model", model,
           "--model_args", f"pretrained={model_dir},dtype=float32", "--device", "cpu", "--batch_size", "8",
           "--include_path", str(tasks), "--tasks", "deepunlearn", "--log_samples", "--output_path", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(out.rglob("samples_*.jsonl"))
    assert len(files) == 2, files  # one per relation group
    return files


def _agree(kb, kb_file, model_dir, model, tmp_path, capsys):
    from deepunlearn.probe import load_model
    from deepunlearn.probe.probing import probe

    tasks = tmp_path / f"tasks-{model}"
    assert main(["data", "export", "--kb", str(kb_file), "--format", "lm-eval", "--model", str(model_dir),
                 "-o", str(tasks), "--json"]) == 0
    capsys.readouterr()
    files = _lm_eval(model, model_dir, tasks, tmp_path / f"out-{model}", tmp_path)
    known = tmp_path / f"known-{model}.json"
    assert main(["data", "import-lm-eval-samples", "--kb", str(kb_file), *map(str, files), "-o", str(known)]) == 0
    lm = json.loads(known.read_text())
    exact = probe(load_model(model_dir, device="cpu"), kb, mode="exact", progress=False)
    assert lm["total"] == len(kb.facts) and lm["model"] == str(model_dir)  # read from results_*.json
    assert lm["fact_ids"] == sorted(exact.known_ids())  # fact for fact
    return lm


@pytest.fixture
def kb_file(five_people_kb, tmp_path):
    from deepunlearn.kg.io import save_kb

    return save_kb(five_people_kb, tmp_path / "kb.json")


def test_lm_eval_agrees_with_the_exact_probe(five_people_kb, five_people_model_dir, kb_file, tmp_path, capsys):
    lm = _agree(five_people_kb, kb_file, five_people_model_dir, "deepunlearn-hf", tmp_path, capsys)
    assert lm["known"] >= 0.95 * len(five_people_kb.facts)  # the fixture model knows its facts


def test_plain_hf_agrees_where_the_question_part_ends_in_no_whitespace(five_people_kb, kb_file, tmp_path, capsys):
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.probe.prompts import PromptFormat
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = tmp_path / "gpt2-format"
    build_tiny_model(five_people_kb, d, seed=0, hidden=64, layers=1, heads=4, prompt=PromptFormat.named("gpt2"))
    finetune(load_model(d, device="cpu"), five_people_kb, FinetuneConfig.tiny(epochs=60, batch_size=4), out_dir=d,
             progress=False)
    lm = _agree(five_people_kb, kb_file, d, "hf", tmp_path, capsys)
    assert lm["known"] > 0
