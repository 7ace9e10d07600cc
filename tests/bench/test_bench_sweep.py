"""End-to-end sweeps on the tiny finetuned model: resumption after SIGKILL gives exactly the
results of an uninterrupted run without recomputing finished points; the Ray executor gives the
same results as the local one."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import STORE_NAME, ResultsStore
from deepunlearn.kg.io import save_kb

ROOT = Path(__file__).resolve().parents[2]
GRIDS = {"ga": [1, 2, 4], "npo": [1, 4], "tv": [0.5, 5], "whp": [10, 1e5]}
N_TARGETS = 2


@pytest.fixture(scope="module")
def sweep_targets(small_kb, tiny_model_dir):
    """Family targets of different relations that the tiny model knows."""
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(tiny_model_dir, device="cpu"), small_kb, mode="exact", progress=False).known_ids()
    chosen, rels = [], set()
    for t in list(small_kb.targets) + small_kb.entity_facts():
        r = small_kb.facts[t][1]
        if t in known and r not in rels:
            chosen.append(t)
            rels.add(r)
        if len(chosen) == N_TARGETS:
            break
    assert len(chosen) == N_TARGETS
    return chosen


@pytest.fixture(scope="module")
def sweep_config(tmp_path_factory, small_kb, tiny_model_dir, sweep_targets):
    d = tmp_path_factory.mktemp("sweep")
    save_kb(small_kb, d / "kb.json")
    lines = [
        # one torch thread, as in each Ray worker: the executors are compared, not thread counts
        'kb = "kb.json"', 'rules = "family"', 'output = "out"', "threads = 1",
        "[[models]]", 'name = "tiny"', f'path = "{tiny_model_dir}"',
        "[methods]", *[f"{m} = {json.dumps(g)}" for m, g in GRIDS.items()],
        "[targets]", f"refs = {json.dumps(sweep_targets)}",
    ]
    (d / "sweep.toml").write_text("\n".join(lines) + "\n")
    return d / "sweep.toml"


def _key(p):
    """Everything a point holds (metrics, forgotten facts, the maximising set, the lr) but its wall time."""
    return p.to_dict(timing=False)


@pytest.fixture(scope="module")
def reference(sweep_config, tmp_path_factory):
    """The uninterrupted run (local executor)."""
    out = tmp_path_factory.mktemp("ref")
    outcome = run_sweep(load_config(sweep_config, output=str(out)), progress=False)
    return outcome


@pytest.mark.slow
def test_uninterrupted_sweep_is_complete_and_sane(reference, sweep_targets):
    n = len(sweep_targets) * sum(len(g) for g in GRIDS.values())
    assert len(reference.points) == n == reference.computed
    assert not reference.skipped
    for p in reference.points:
        assert 0.0 <= p.recall <= 1.0 and 0.0 <= p.accuracy <= 1.0
        assert p.exact
        assert p.target_forgotten == (p.target in p.forgotten)
    # GA runs one trajectory: more steps never make the model know more of its target's set
    for t in sweep_targets:
        ga = sorted((p for p in reference.points if p.target == t and p.method == "ga"), key=lambda p: p.param)
        assert [p.param for p in ga] == GRIDS["ga"]
    s = reference.summary["tiny"]
    assert set(s) == set(GRIDS) and all(s[m]["n_targets"] == N_TARGETS for m in GRIDS)
    # a second run finds everything done and computes nothing
    again = run_sweep(_reload(reference), progress=False)
    assert again.computed == 0 and again.resumed and [_key(p) for p in again.points] == [_key(p) for p in reference.points]


def _reload(outcome):
    import yaml

    from deepunlearn.bench.config import SweepConfig

    return SweepConfig.model_validate(yaml.safe_load((Path(outcome.output) / "config.yaml").read_text()))


def _count(store_path: Path) -> int:
    if not store_path.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_killed_sweep_resumes_to_identical_results(sweep_config, reference, tmp_path):
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "deepunlearn", "bench", "--config", str(sweep_config), "-o", str(out), "--json",
           "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop_at = 4  # the first NPO point: its trajectory is then half done
    deadline = time.time() + 240
    try:
        while _count(out / STORE_NAME) < stop_at:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "the sweep did not store points in time"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with ResultsStore(out, readonly=True) as s:
        stored_at_kill = s.count_points()
        finished_jobs = s.jobs()
        partial = [(t, m) for t in {p.target for p in s.points()} for m in GRIDS
                   if s.done_params("tiny", t, m) and ("tiny", t, m) not in finished_jobs]
    total = len(reference.points)
    assert stop_at <= stored_at_kill < total
    assert partial, "the kill should leave a trajectory half done (resumed with skip_params)"

    resumed = run_sweep(load_config(sweep_config, output=str(out)), progress=False)
    assert resumed.resumed
    assert resumed.computed == total - stored_at_kill       # nothing finished was recomputed
    assert [_key(p) for p in resumed.points] == [_key(p) for p in reference.points]
    with ResultsStore(out, readonly=True) as s:
        log = s.evaluations()
        assert set(finished_jobs) <= set(s.jobs())
    keys = [e[:4] for e in log]
    assert len(keys) == total and len(set(keys)) == total     # every point computed exactly once
    pids = [e[4] for e in log]
    assert len(set(pids[:stored_at_kill])) == 1 and set(pids[stored_at_kill:]) == {os.getpid()}
    assert pids[0] != os.getpid()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r["status"] for r in manifest["runs"]] == ["running", "finished"]   # the first run was killed


@pytest.mark.slow
def test_ray_executor_gives_the_same_results(sweep_config, reference, tmp_path):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        out = tmp_path / "ray"
        outcome = run_sweep(load_config(sweep_config, output=str(out), executor="ray"), progress=False)
    finally:
        ray.shutdown()
    assert outcome.computed == len(reference.points)
    assert [_key(p) for p in outcome.points] == [_key(p) for p in reference.points]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"][-1]["executor"] == "ray" and manifest["runs"][-1]["status"] == "finished"


def test_a_folder_of_another_sweep_is_refused(sweep_config, tmp_path):
    from deepunlearn.bench.store import StoreError

    out = tmp_path / "other"
    with ResultsStore(out) as s:
        s.bind("fingerprint-of-another-sweep", {})
    with pytest.raises(StoreError, match="different sweep"):
        run_sweep(load_config(sweep_config, output=str(out)), progress=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "bench", "--config", str(sweep_config), "-o", str(out),
                        "--json"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 1 and set(json.loads(r.stdout)) == {"error", "file", "field"} and "--overwrite" in r.stderr
