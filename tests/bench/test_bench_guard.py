"""The sweep runner's guards (with the fake executor of conftest.py):
a replaced checkpoint is never resumed, one sweep per results folder, a sweep whose targets are
all skipped reports it cleanly, every JSON file is strict JSON, metadata agree."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.guard import LOCK_NAME, SweepLock
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import STORE_NAME, ResultsStore, StoreError
from deepunlearn.cli import main

from bench_helpers import FakeExecutor


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} in JSON")

    return json.loads(text, parse_constant=refuse)


def _resave(model_dir, data: bytes) -> None:
    """Replace the checkpoint's weights as a re-save does (new file, other bytes)."""
    tmp = model_dir / "model.safetensors.new"
    tmp.write_bytes(data)
    os.replace(tmp, model_dir / "model.safetensors")


# ------------------------------------------------------------------------- resume with changed weights


def test_resume_against_replaced_checkpoint_is_refused(sweep_files, fake_model):
    cfg = load_config(sweep_files())
    first = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert first.computed == 8
    with ResultsStore(cfg.output) as s:  # as if killed half-way: one job to redo
        s._tx([("DELETE FROM points WHERE method = 'tv' AND target = 2", ()),
               ("DELETE FROM jobs WHERE method = 'tv' AND target = 2", ())])
    _resave(fake_model, b"\1" * 64)  # same size, other weights
    ex = FakeExecutor()
    with pytest.raises(StoreError) as e:
        run_sweep(cfg, executor=ex, progress=False)
    assert str(e.value) == (f"model 'tiny' at {fake_model} changed since this sweep started (its weights, "
                            f"config, tokenizer or answer format differ); use --overwrite to start over, or a new "
                            f"--output (results in {cfg.output})")
    assert e.value.file == str(fake_model) and ex.calls == 0
    again = run_sweep(cfg, executor=FakeExecutor(), progress=False, overwrite=True)
    assert again.computed == 8 and not again.resumed and len(again.points) == 8


def test_resume_with_unchanged_checkpoint_still_resumes(sweep_files, fake_model):
    cfg = load_config(sweep_files())
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    os.utime(fake_model / "config.json")  # config.json is identified by content, not by time
    again = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert again.resumed and again.computed == 0


@pytest.fixture
def fake_executor(monkeypatch):
    """``deepunlearn bench`` runs its jobs on a FakeExecutor (the CLI builds its own executor)."""
    import deepunlearn.bench.runner as runner

    made = []
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: made.append(FakeExecutor()) or made[-1])
    return made


def test_replaced_checkpoint_via_cli_is_one_error_line(sweep_files, fake_model, fake_executor, capsys):
    path = str(sweep_files())
    assert main(["bench", "--config", path, "--quiet", "--json"]) == 0
    capsys.readouterr()
    _resave(fake_model, b"\2" * 80)
    assert main(["bench", "--config", path, "--quiet", "--json"]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("deepunlearn bench: error: model 'tiny' at ")
    obj = _strict_json(out)
    assert obj["file"] == str(fake_model) and obj["field"] == "models.tiny"
    assert "weights, config, tokenizer or answer format differ" in obj["error"]
    assert main(["bench", "--config", path, "--quiet", "--json", "--overwrite"]) == 0
    assert _strict_json(capsys.readouterr().out)["computed"] == 8


# ------------------------------------------------------------------------- one sweep per folder


def test_second_sweep_on_a_locked_folder_is_refused_and_computes_nothing(sweep_files, tmp_path):
    cfg = load_config(sweep_files())
    out = tmp_path / "out"
    out.mkdir()
    holder = open(out / LOCK_NAME, "a+")  # another open file description: what another process holds
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.write(json.dumps({"pid": 4242, "host": "elsewhere", "started": "2025-01-01T00:00:00"}))
    holder.flush()
    ex = FakeExecutor()
    try:
        with pytest.raises(StoreError) as e:
            run_sweep(cfg, executor=ex, progress=False)
    finally:
        holder.close()
    assert str(e.value) == (f"{out}: another sweep is running on this results folder (process 4242 on elsewhere, "
                            "started 2025-01-01T00:00:00); wait for it to finish or stop it, or choose another --output")
    assert e.value.file == str(out) and ex.calls == 0 and not (out / STORE_NAME).exists()
    # the holder gone, the sweep runs; afterwards the lock is free again and names this process
    assert run_sweep(cfg, executor=FakeExecutor(), progress=False).computed == 8
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
    with SweepLock(out):
        pass


def test_lock_of_a_killed_process_is_free(sweep_files, tmp_path):
    out = tmp_path / "out"
    code = (f"from deepunlearn.bench.guard import SweepLock; import time; l = SweepLock({str(out)!r}); "
            "l.acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match=rf"process {proc.pid} on "):
            SweepLock(out).acquire()
        rc = main(["bench", "--config", str(sweep_files()), "--json"])
    finally:
        proc.kill()
        proc.wait()
    assert rc == 1
    with SweepLock(out):  # kill -9: the kernel dropped the lock
        pass


def test_manifest_is_written_atomically_and_strict(sweep_files, tmp_path, monkeypatch):
    import deepunlearn.bench.runner as runner

    writes = []
    real = runner.atomic_write_text
    monkeypatch.setattr(runner, "atomic_write_text", lambda p, t: (writes.append(p.name), real(p, t))[1])
    cfg = load_config(sweep_files())
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert writes.count("manifest.json") == 2 and "config.yaml" in writes
    m = _strict_json((tmp_path / "out" / "manifest.json").read_text())
    assert m["runs"][-1]["status"] == "finished"
    assert not [f for f in (tmp_path / "out").iterdir() if f.name.endswith(".tmp")]
