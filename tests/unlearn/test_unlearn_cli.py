"""``deepunlearn unlearn`` end to end on the fixture model, in a subprocess as a user runs it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "deepunlearn", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def kb_file(small_kb, tmp_path_factory) -> Path:
    from deepunlearn.kg.io import save_kb

    return save_kb(small_kb, tmp_path_factory.mktemp("cli") / "kb.json")


@pytest.fixture(scope="module")
def known(tiny_model_dir, small_kb) -> set[int]:
    from deepunlearn.probe import load_model, probe

    return probe(load_model(tiny_model_dir, device="cpu"), small_kb, progress=False).known_ids()


@pytest.mark.slow
def test_unlearn_json_on_the_fixture_model(tiny_model_dir, kb_file, small_kb, known, tmp_path):
    t = next(t for t in small_kb.targets if t in known)
    s, r, o = small_kb.facts[t]
    res = run_cli("unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "ga",
                  "--target", f"{s}|{r}|{o}", "--grid", "1,16", "--cache-dir", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1  # exactly one JSON object on stdout; progress went to stderr
    out = json.loads(lines[0])
    assert out["method"] == "ga" and out["target"] == [s, r, o]
    assert [p["param"] for p in out["points"]] == [1, 16]
    for p in out["points"]:
        assert {"param", "recall", "accuracy", "target_forgotten", "accuracy_family", "accuracy_biography",
                "forgotten", "set", "exact", "lr"} <= set(p)
        assert 0 <= p["recall"] <= 1 and 0 <= p["accuracy"] <= 1
        assert all(isinstance(f, list) and len(f) == 3 for f in p["forgotten"])
    assert out["points"][-1]["target_forgotten"] is True
    assert out["points"][-1]["lr"] == pytest.approx(1e-4)
    assert out["known"] == len(known) and out["total"] == len(small_kb)


@pytest.mark.slow
def test_unlearn_all_targets_skips_those_the_model_does_not_know(tiny_model_dir, small_kb, known, tmp_path):
    from deepunlearn.kg.io import save_kb

    knew = [t for t in small_kb.targets if t in known][:2]
    missed = [i for i in range(len(small_kb)) if i not in known][:1]
    kb = dataclasses.replace(small_kb, targets=knew + missed)
    kb_path = save_kb(kb, tmp_path / "kb.json")
    res = run_cli("unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_path), "--method", "tv",
                  "--target", "all", "--grid", "10", "--cache-dir", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["target"] for r in out["targets"]] == [list(kb.facts[t]) for t in knew]
    assert all([p["param"] for p in r["points"]] == [10] for r in out["targets"])
    assert out["skipped"] == [list(kb.facts[t]) for t in missed]
    if missed:
        assert "warning: skipping target" in res.stderr


def test_unlearn_errors_exit_1_with_a_message(tiny_model_dir, kb_file, small_kb, tmp_path):
    res = run_cli("unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "sgd_magic",
                  "--target", "0", "--json")
    assert res.returncode == 1 and set(json.loads(res.stdout)) == {"error", "file", "field"}
    assert "unknown unlearning method 'sgd_magic'" in res.stderr and "ga, graddiff, idk, npo, npo_gdr, rmu, simnpo, tv, whp" in res.stderr
    res = run_cli("unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "ga",
                  "--target", "0", "--grid", "1,x", "--json")
    assert res.returncode == 2 and "--grid: 'x' is not a number" in res.stderr  # a flag's value: usage
    res = run_cli("unlearn", "--model", str(tmp_path / "nowhere"), "--kb", str(kb_file), "--method", "ga",
                  "--target", "0", "--json")
    assert res.returncode == 1 and "does not exist" in res.stderr
