"""A sweep followed in MLflow (``bench --tracker mlflow[=URI]``): the runs read back with
``MlflowClient`` hold the configuration and every stored point (stepped by grid index), and a
resumed sweep reuses its runs and logs no point twice."""

from __future__ import annotations

import json

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.metrics import is_deep
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import ResultsStore
from deepunlearn.bench.tracking import (
    KIND_TAG, SWEEP_TAG, TRAJECTORY_TAG, config_params, open_tracker, parse_tracker, trajectory_key,
)
from deepunlearn.cli import main

from bench_helpers import FakeExecutor


class StopAfter(FakeExecutor):
    """A FakeExecutor interrupted (Ctrl-C) after ``n`` points."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def run(self, spec, jobs, sink):
        count = 0

        def counting(job, ev):
            nonlocal count
            if ev.get("event") == "point":
                if count == self.n:
                    raise KeyboardInterrupt
                count += 1
            sink(job, ev)

        super().run(spec, jobs, counting)


def _runs(uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("deepunlearn")
    runs = client.search_runs([exp.experiment_id], f"tags.`{SWEEP_TAG}` != ''", max_results=1000)
    out: dict[str, list] = {"sweep": [], "trajectory": []}
    for r in runs:
        out[r.data.tags[KIND_TAG]].append(r)
    return client, out


def _check_against_store(client, runs, out, cfg):
    """Every stored point is in its trajectory run, once, at its grid index, with the store's values."""
    with ResultsStore(out, readonly=True) as store:
        points = store.points()
        sweep_id = store.meta("sweep_id")
    by_key = {r.data.tags[TRAJECTORY_TAG]: r for r in runs["trajectory"]}
    assert sorted(by_key) == sorted({trajectory_key(p) for p in points})
    assert all(r.data.tags[SWEEP_TAG] == sweep_id for r in runs["trajectory"] + runs["sweep"])
    for key, run in by_key.items():
        mine = sorted((p for p in points if trajectory_key(p) == key), key=lambda p: p.param)
        grid = cfg.methods[mine[0].method]
        assert run.data.tags["mlflow.parentRunId"] == runs["sweep"][0].info.run_id
        for name, field in (("recall", "recall"), ("accuracy", "accuracy"), ("grid_value", "param")):
            hist = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))
            assert hist == [(grid.index(p.param), float(getattr(p, field))) for p in mine], (key, name)
        deep = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "deep"))
        assert deep == [(grid.index(p.param), float(is_deep(p.to_dict()))) for p in mine]
        tf = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "target_forgotten"))
        assert tf == [(grid.index(p.param), float(p.target_forgotten)) for p in mine]
    return points


def test_a_tracked_sweep_reads_back_equal_to_the_store_and_resumes_without_duplicates(sweep_files, tmp_path):
    cfg = load_config(sweep_files())
    uri = (tmp_path / "mlruns").as_uri()
    with pytest.raises(KeyboardInterrupt):  # stopped after 3 of 8 points
        run_sweep(cfg, executor=StopAfter(3), progress=False,
                  tracker=open_tracker(parse_tracker(f"mlflow={tmp_path / 'mlruns'}"), cfg.output_dir))
    client, runs = _runs(uri)
    assert len(runs["sweep"]) == 1 and runs["sweep"][0].info.status == "KILLED"
    assert len(_check_against_store(client, runs, cfg.output_dir, cfg)) == 3

    tracker = open_tracker(parse_tracker(f"mlflow={tmp_path / 'mlruns'}"), cfg.output_dir)
    outcome = run_sweep(cfg, executor=FakeExecutor(), progress=False, tracker=tracker)
    assert outcome.resumed and outcome.computed == 5
    with ResultsStore(cfg.output_dir, readonly=True) as store:
        tracker.finish(store, outcome.summary, None)
    client, runs = _runs(uri)
    assert len(runs["sweep"]) == 1 and len(runs["trajectory"]) == 4  # 2 targets x (ga, tv): no run twice
    assert {r.info.status for r in runs["sweep"] + runs["trajectory"]} == {"FINISHED"}
    assert len(_check_against_store(client, runs, cfg.output_dir, cfg)) == 8
    sweep = runs["sweep"][0]
    with ResultsStore(cfg.output_dir, readonly=True) as store:  # the resolved configuration the store is bound to
        assert sweep.data.params == config_params(json.loads(store.meta("config")))
    assert sweep.data.params["methods.ga"] == "[1, 2]" and sweep.data.params["kb"] == cfg.kb
    summary = outcome.summary["tiny"]["ga"]
    assert sweep.data.metrics["tiny/ga/acc_at_recall_0.8"] == pytest.approx(summary["acc_at_recall_0.8"])

    # a third run computes nothing and logs nothing again
    tracker = open_tracker(parse_tracker(f"mlflow={tmp_path / 'mlruns'}"), cfg.output_dir)
    assert run_sweep(cfg, executor=FakeExecutor(), progress=False, tracker=tracker).computed == 0
    client, runs = _runs(uri)
    assert len(runs["trajectory"]) == 4
    _check_against_store(client, runs, cfg.output_dir, cfg)


def test_bench_tracker_mlflow_defaults_to_a_sqlite_store_in_the_sweep_folder(sweep_files, tmp_path, capsys,
                                                                             monkeypatch):
    import deepunlearn.bench.runner as runner

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--config", str(sweep_files()), "--quiet", "--tracker", "mlflow", "--json"]) == 0
    out = tmp_path / "out"
    obj = json.loads(capsys.readouterr().out)
    assert obj["points"] == 8
    client, runs = _runs(f"sqlite:///{out / 'mlflow.db'}")
    assert obj["tracker"] == {"kind": "mlflow", "uri": f"sqlite:///{out / 'mlflow.db'}", "failed": False,
                              "experiment": runs["sweep"][0].info.experiment_id, "run_id": runs["sweep"][0].info.run_id}
    assert len(runs["sweep"]) == 1 and len(runs["trajectory"]) == 4
    _check_against_store(client, runs, out, load_config(sweep_files()))
    arts = {a.path for a in client.list_artifacts(runs["sweep"][0].info.run_id, "report")}
    assert {"report/report.md", "report/report.html", "report/summary.json", "report/points.csv"} <= arts
    assert {a.path for a in client.list_artifacts(runs["sweep"][0].info.run_id)} >= {"config.yaml", "manifest.json"}
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlartifacts").exists()  # nothing in the cwd
    assert (out / "mlartifacts").is_dir()


@pytest.mark.parametrize("value, message", [
    ("wandb", "--tracker wandb: unknown tracker; known: mlflow, none"),
    ("mlflow=", "--tracker mlflow=: empty URI after '='"),
])
def test_a_bad_tracker_is_one_line_before_any_work(sweep_files, tmp_path, capsys, value, message):
    assert main(["bench", "--config", str(sweep_files()), "--quiet", "--tracker", value]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"deepunlearn bench: error: {message}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_tracker_in_the_sweep_file_is_checked_with_its_field(sweep_files, capsys):
    path = sweep_files(extra='tracker = "neptune"')
    assert main(["bench", "--config", str(path), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"deepunlearn bench: error: {path}: field tracker neptune: unknown tracker")
    assert err.count("\n") == 1


def test_an_unreachable_tracking_server_is_one_line(sweep_files, capsys, monkeypatch):
    import deepunlearn.bench.runner as runner

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    code = main(["bench", "--config", str(sweep_files()), "--quiet", "--tracker", "mlflow=http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("deepunlearn bench: error: --tracker mlflow=http://127.0.0.1:9: cannot open "
                                        "the tracking store")
    assert err.count("\n") == 1



def test_a_tracker_failing_mid_sweep_is_one_warning_and_the_next_run_logs_what_it_missed(sweep_files, tmp_path):
    cfg = load_config(sweep_files())
    warnings: list[str] = []
    tracker = open_tracker(parse_tracker(f"mlflow={tmp_path / 'mlruns'}"), cfg.output_dir, warn=warnings.append)

    class Gone(FakeExecutor):  # the tracking server goes away after the sweep started
        def run(self, spec, jobs, sink):
            def fail(*a, **k):
                raise RuntimeError("connection refused")

            tracker.client.log_batch = fail
            super().run(spec, jobs, sink)

    assert run_sweep(cfg, executor=Gone(), progress=False, tracker=tracker).computed == 8
    assert len(warnings) == 1 and "tracker mlflow" in warnings[0] and "connection refused" in warnings[0]
    assert tracker.describe()["failed"] is True
    client, runs = _runs((tmp_path / "mlruns").as_uri())
    assert len(runs["trajectory"]) == 1  # the first point's run was created, then logging failed
    assert run_sweep(cfg, executor=FakeExecutor(), progress=False,
                     tracker=open_tracker(parse_tracker(f"mlflow={tmp_path / 'mlruns'}"), cfg.output_dir)).computed == 0
    client, runs = _runs((tmp_path / "mlruns").as_uri())
    assert len(runs["sweep"]) == 1 and len(runs["trajectory"]) == 4
    assert len(_check_against_store(client, runs, cfg.output_dir, cfg)) == 8


def test_a_tracker_in_the_sweep_file_is_relative_to_it_and_the_flag_turns_it_off(sweep_files, tmp_path, capsys,
                                                                                monkeypatch):
    import deepunlearn.bench.runner as runner

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    path = sweep_files(extra='tracker = "mlflow=tracked"')  # a folder: MLflow's file store, beside the file
    assert main(["bench", "--config", str(path), "--quiet", "--tracker", "none"]) == 0
    assert not (tmp_path / "tracked").exists()
    assert main(["bench", "--config", str(path), "--quiet"]) == 0
    assert not (tmp_path / "elsewhere" / "tracked").exists()
    client, runs = _runs((tmp_path / "tracked").as_uri())
    assert len(runs["sweep"]) == 1 and len(runs["trajectory"]) == 4  # the points stored untracked, logged now
    _check_against_store(client, runs, tmp_path / "out", load_config(path))
