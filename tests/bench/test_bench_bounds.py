"""Bounds and store faults on the bench side: grid step counts past the bound (one rule for 1e21
and 2**63-1), a damaged or truncated results store, and a store the disk refuses to write (a
full disk, a read-only folder): each is exit 1 with one line naming the field or the file."""

from __future__ import annotations

import os
import sqlite3

import pytest

from deepunlearn.bench import runner
from deepunlearn.bench.config import ConfigError, load_config
from deepunlearn.bench.grids import check_grid
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import STORE_NAME, Point, ResultsStore, StoreError
from deepunlearn.cli import main
from deepunlearn.limits import ALLOW_LARGE_ENV

from bench_helpers import FakeExecutor


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("value, shown", [("1e21", "1e+21"), ("9223372036854775807", "9,223,372,036,854,775,807"),
                                          ("100001", "100,001")])
def test_a_step_grid_past_the_bound_is_refused_naming_the_method(sweep_files, monkeypatch, capsys, value, shown):
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)
    p = sweep_files()
    p.write_text(p.read_text().replace("ga = [1, 2]", f"ga = [1, {value}]"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert f"method 'ga': grid value: {shown} steps is more than the bound of 100,000 steps" in str(e.value)
    assert f"set {ALLOW_LARGE_ENV}=1 to lift it" in str(e.value) and str(e.value).startswith(str(p))
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(p), "--quiet"]) == 1
    assert "grid value" in _one_line(capsys.readouterr().err)


def test_the_step_bound_is_lifted_by_the_environment(monkeypatch):
    monkeypatch.setenv(ALLOW_LARGE_ENV, "1")
    assert check_grid("ga", [1, 10**6]) == [1, 10**6]
    monkeypatch.delenv(ALLOW_LARGE_ENV)
    with pytest.raises(ValueError, match="bound of 100,000 steps"):
        check_grid("npo", [10**6])
    assert check_grid("tv", [1e21]) == [1e21]  # a strength, not steps: no bound


def _real_store(folder):
    with ResultsStore(folder) as s:
        s.bind("fp", {"kb": "kb.json"})
        s.add_points([Point("tiny", t, "ga", p, recall=0.5, accuracy=0.9, forgotten=(t,))
                      for t in range(40) for p in (1, 2, 4)])
        s.finish_job("tiny", 0, "ga")
    return folder / STORE_NAME


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_damaged_store_is_one_error_naming_it_and_overwrite_starts_over(sweep_files, tmp_path, monkeypatch,
                                                                          capsys, damage):
    good = _real_store(tmp_path / "good")
    cfg_path = sweep_files()
    out = tmp_path / "out"
    out.mkdir()
    store = out / STORE_NAME
    data = good.read_bytes()
    store.write_bytes(data[: len(data) // 2] if damage == "truncated" else os.urandom(len(data)))
    with pytest.raises(StoreError) as e:
        ResultsStore(out).points()
    assert str(e.value).startswith(f"{store}: not a readable results store (") and e.value.file == str(store)
    assert "pass --overwrite to start the sweep over" in str(e.value)

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(cfg_path), "--quiet"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert str(store) in line and "--overwrite" in line
    assert main(["bench", "--config", str(cfg_path), "--quiet", "--overwrite", "--json"]) == 0
    capsys.readouterr()
    with ResultsStore(out, readonly=True) as s:
        assert s.count_points() == 8  # two targets x (GA's two steps + TV's two strengths)


class _FullDisk:
    """A connection whose writes of points fail as sqlite3 does on a full disk or a read-only folder."""

    def __init__(self, db, message):
        self._db, self._message = db, message

    def cursor(self):
        return _FullDisk(self._db.cursor(), self._message)

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith("INSERT INTO POINTS"):
            raise sqlite3.OperationalError(self._message)
        return self._db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._db, name)


@pytest.mark.parametrize("message", ["database or disk is full", "disk I/O error",
                                     "attempt to write a readonly database"])
def test_a_store_the_disk_refuses_is_one_error_naming_it(sweep_files, tmp_path, monkeypatch, capsys, message):
    real_open = ResultsStore._open

    def failing_open(self):
        real_open(self)
        self._db = _FullDisk(self._db, message)

    monkeypatch.setattr(ResultsStore, "_open", failing_open)
    cfg = load_config(sweep_files())
    with pytest.raises(StoreError) as e:
        run_sweep(cfg, executor=FakeExecutor(), progress=False)
    store = cfg.output_dir / STORE_NAME
    assert str(e.value) == (f"{store}: cannot write the results store ({message}): a read-only folder or a full "
                            "disk? every point stored before is kept; make room or choose another output folder, "
                            "then run again to resume")
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(sweep_files()), "--quiet"]) == 1
    assert _one_line(capsys.readouterr().err).endswith(str(e.value))


def test_demo_people_past_the_bound_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)
    out = tmp_path / "demo"
    assert main(["demo", "--people", "100000000", "-o", str(out)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "--people 100000000: 100,000,000 people is more than the bound of 2,000,000 people" in line
    assert not out.exists()


def test_a_cache_dir_that_is_a_file_is_one_line_naming_the_field(sweep_files, tmp_path, monkeypatch, capsys):
    (tmp_path / "small.json").write_text("{}")
    p = sweep_files(extra='cache_dir = "small.json"')
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(p), "--quiet"]) == 1
    assert _one_line(capsys.readouterr().err).endswith(
        f"{p}: field cache_dir: {tmp_path / 'small.json'}: is a file, expected a folder")
    assert not (tmp_path / "out" / STORE_NAME).exists()  # refused before the store is made


def test_an_output_that_is_a_file_is_one_line_naming_the_field(sweep_files, tmp_path, monkeypatch, capsys):
    p = sweep_files()
    p.write_text(p.read_text().replace('output = "out"', 'output = "kb.json"'))
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(p), "--quiet"]) == 1
    assert _one_line(capsys.readouterr().err).endswith(
        f"--config {p}: output {tmp_path / 'kb.json'}: exists and is not a folder")
