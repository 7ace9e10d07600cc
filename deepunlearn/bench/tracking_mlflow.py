"""The MLflow backend of :mod:`.tracking`: a sweep run and its trajectory runs, through
``mlflow.tracking.MlflowClient`` (mlflow-skinny is enough).

Where it writes: ``--tracker mlflow=URI`` names the store; ``--tracker mlflow`` takes
``$MLFLOW_TRACKING_URI`` when set, else ``sqlite:///OUTPUT/mlflow.db`` (MLflow's own default kind of
store; it needs ``sqlalchemy`` and ``alembic``, the ``tracking`` extra). A plain folder is MLflow's
file store (kept by MLflow in maintenance mode: the tool allows it for this process, as
``MLFLOW_ALLOW_FILE_STORE=true`` does). Artifacts of a local store go beside it
(``mlartifacts/``), never into the working directory. The experiment is ``$MLFLOW_EXPERIMENT_NAME``,
else ``deepunlearn``. MLflow's usage telemetry is off unless ``MLFLOW_DISABLE_TELEMETRY`` says
otherwise (a sweep makes no network call of its own).

Browse it with ``mlflow ui --backend-store-uri sqlite:///OUTPUT/mlflow.db`` (the full ``mlflow``
package).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

from .tracking_log import (
    KIND_TAG, SWEEP_ID_KEY, SWEEP_TAG, TRAJECTORY_TAG, TrackerError, config_params, grid_step, point_metrics,
    summary_metrics, trajectory_key,
)

DEFAULT_STORE = "mlflow.db"
ARTIFACTS = "mlartifacts"
EXPERIMENT = "deepunlearn"
_MAX_BATCH = 1000  # MLflow's log_batch limit on metrics (params: 100)


def _quiet() -> None:
    """No INFO lines of MLflow's or alembic's on stderr (the sweep's bar lives there)."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _local_path(uri: str) -> Path | None:
    """The file or folder of a local store URI (``sqlite:///x.db``, ``file:///d``, ``/d``), else None."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):])
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    if uri.startswith("file:"):
        return Path(uri[len("file:"):])
    if "://" not in uri and not uri.startswith("databricks"):
        return Path(uri)
    return None


class MlflowTracker:
    """Keeps an MLflow store in step with a sweep's results store (see :mod:`.tracking`)."""

    def __init__(self, uri: str | None, output: Path, *, warn: Callable[[str], None] | None = None):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        try:
            import mlflow.tracking  # noqa: F401
        except ImportError:
            raise TrackerError("--tracker mlflow: MLflow is not installed: pip install 'deepunlearn[tracking]' "
                               "(mlflow-skinny, sqlalchemy, alembic)", field="--tracker") from None
        _quiet()
        uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(output).resolve() / DEFAULT_STORE}"
        local = _local_path(uri)
        self.artifacts: str | None = None
        if local is not None:
            if not uri.startswith("sqlite:"):
                os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # a folder named by the user: the file store
                uri = local.resolve().as_uri()
            else:
                self._check_sqlite()
            self.artifacts = (local.resolve().parent / ARTIFACTS if uri.startswith("sqlite:")
                              else local.resolve() / ARTIFACTS).as_uri()
        self.uri = uri
        self._local = local
        self.warn = warn or (lambda text: print(text, file=sys.stderr, flush=True))
        self.failed = False
        self._runs: dict[str, str] = {}  # trajectory tag -> run id
        self._steps: dict[str, set[int]] = {}  # run id -> the steps (points) it holds
        self._grids: dict[tuple[str, str], list[float]] = {}
        self.sweep_run: str | None = None
        self.client = None

    def _connect(self) -> None:
        """Open the store and the experiment (at the sweep's start, after its own checks)."""
        from mlflow.tracking import MlflowClient

        try:
            self.client = MlflowClient(tracking_uri=self.uri)
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
            exp = self.client.get_experiment_by_name(name)
            self.experiment = exp.experiment_id if exp is not None else self.client.create_experiment(
                name, artifact_location=self.artifacts and f"{self.artifacts}/{name}")
        except Exception as e:  # an MLflow error, an unreachable server, a read-only folder
            raise TrackerError(f"--tracker mlflow={self.uri}: cannot open the tracking store: {_one_line(e)}",
                               field="--tracker") from None

    @staticmethod
    def _check_sqlite() -> None:
        import importlib.util

        missing = [m for m in ("sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
        if missing:
            raise TrackerError(f"--tracker mlflow: a SQLite tracking store needs {' and '.join(missing)}: pip install "
                               "'deepunlearn[tracking]', or name another store (--tracker mlflow=FOLDER for MLflow's "
                               "file store, mlflow=http://HOST:PORT for a server)", field="--tracker")

    # ------------------------------------------------------------------ the sweep
    def start(self, store, cfg, *, label: str | None = None) -> None:
        """Find or create the sweep's run (its id kept in the store's meta), log the configuration
        as its parameters, and log every stored point its trajectory runs do not hold yet."""
        if self._local is not None:
            self._local.resolve().parent.mkdir(parents=True, exist_ok=True)
        self._connect()
        sweep = store.meta(SWEEP_ID_KEY)
        if sweep is None:
            sweep = uuid.uuid4().hex
            store.set_meta({SWEEP_ID_KEY: sweep})
        self.sweep = sweep
        self._grids = {(m.name, meth): list(g) for m in cfg.models for meth, g in cfg.grids_for(m).items()}
        self._guard(self._open_sweep, cfg, label or Path(cfg.output).name)
        self._guard(self._sync, store.points())

    def _open_sweep(self, cfg, label: str) -> None:
        runs = self._search(f"tags.`{SWEEP_TAG}` = '{self.sweep}'")
        for r in runs:
            kind = r.data.tags.get(KIND_TAG)
            if kind == "sweep":
                self.sweep_run = r.info.run_id
            elif kind == "trajectory":
                self._runs[r.data.tags[TRAJECTORY_TAG]] = r.info.run_id
        if self.sweep_run is None:
            self.sweep_run = self.client.create_run(self.experiment, run_name=label, tags={
                SWEEP_TAG: self.sweep, KIND_TAG: "sweep", "deepunlearn.output": str(Path(cfg.output).resolve())},
            ).info.run_id
        else:
            self.client.update_run(self.sweep_run, status="RUNNING")
        have = self.client.get_run(self.sweep_run).data.params
        params = {k: v for k, v in config_params(cfg.recorded()).items() if k not in have}
        self._log(self.sweep_run, params=params)

    def _search(self, query: str) -> list:
        out, token = [], None
        while True:
            page = self.client.search_runs([self.experiment], query, max_results=1000, page_token=token)
            out += list(page)
            token = page.token
            if not token:
                return out

    def log_points(self, points: Sequence[Any]) -> None:
        """Log points just stored (the sweep's sink calls it)."""
        self._guard(self._sync, points)

    def stop(self, status: str) -> None:
        """The sweep ended (``finished`` or ``stopped: ...``): its runs get MLflow's status."""
        mlflow_status = "FINISHED" if status == "finished" else "KILLED" if "KeyboardInterrupt" in status else "FAILED"
        self._guard(self._terminate, mlflow_status)

    def _terminate(self, status: str) -> None:
        for run in [*self._runs.values(), self.sweep_run]:
            if run is not None:
                self.client.set_terminated(run, status=status)

    def finish(self, store, summary, report_dir: Path | None, files: Sequence[Path] = ()) -> None:
        """After the report: every stored point not logged yet, the summary's numbers (those that
        changed) as the sweep run's metrics, and the report folder and ``files`` as its artifacts."""
        self._guard(self._sync, store.points())

        def artifacts() -> None:
            latest = self.client.get_run(self.sweep_run).data.metrics
            changed = {k: v for k, v in summary_metrics(summary).items() if latest.get(k) != v}
            self._log(self.sweep_run, metrics=changed, step=0)
            if report_dir is not None and Path(report_dir).is_dir():
                self.client.log_artifacts(self.sweep_run, str(report_dir), "report")
            for f in files:
                if Path(f).is_file():
                    self.client.log_artifact(self.sweep_run, str(f))

        if self.sweep_run is not None:
            self._guard(artifacts)

    def describe(self) -> dict[str, Any]:
        """The command's ``tracker`` JSON: kind, store URI, experiment and sweep run id, and
        whether it stopped on a failure."""
        return {"kind": "mlflow", "uri": self.uri, "experiment": getattr(self, "experiment", None),
                "run_id": self.sweep_run, "failed": self.failed}

    # ------------------------------------------------------------------ points
    def _sync(self, points: Sequence[Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch: dict[str, list] = {}
        for p in points:
            run = self._run_of(p)
            base = p.method.split("@")[0]
            step = grid_step(self._grids.get((p.model, base)), p.param)
            if step in self._steps[run]:
                continue
            self._steps[run].add(step)  # a point's metrics go in one batch, so grid_value marks the step
            batch.setdefault(run, []).extend(Metric(k, v, now, step) for k, v in point_metrics(p).items())
        for run, metrics in batch.items():
            for i in range(0, len(metrics), _MAX_BATCH):
                self.client.log_batch(run, metrics=metrics[i:i + _MAX_BATCH])

    def _run_of(self, p: Any) -> str:
        """The trajectory run of a point: found by its tag (its logged steps read once), else created."""
        key = trajectory_key(p)
        run = self._runs.get(key)
        if run is None:
            run = self.client.create_run(self.experiment, run_name=f"{p.model} {p.method} target {p.target}"
                                         + (f" seed {p.seed}" if p.seed else ""), tags={
                SWEEP_TAG: self.sweep, KIND_TAG: "trajectory", TRAJECTORY_TAG: key,
                "mlflow.parentRunId": self.sweep_run or "", "model": p.model, "method": p.method,
                "target": str(p.target)}).info.run_id
            self._log(run, params={"model": p.model, "target": str(p.target), "method": p.method,
                                   "seed": str(p.seed), "grid": str(self._grids.get((p.model, p.method.split("@")[0])))})
            self._runs[key] = run
            self._steps[run] = set()
        elif run not in self._steps:
            self._steps[run] = {m.step for m in self.client.get_metric_history(run, "grid_value")}
        return run

    def _log(self, run: str, params: dict[str, str] | None = None, metrics: dict[str, float] | None = None,
             step: int = 0) -> None:
        from mlflow.entities import Metric, Param

        items = list((params or {}).items())
        for i in range(0, len(items), 100):
            self.client.log_batch(run, params=[Param(k, v) for k, v in items[i:i + 100]])
        now = int(time.time() * 1000)
        ms = [Metric(k, v, now, step) for k, v in (metrics or {}).items()]
        for i in range(0, len(ms), _MAX_BATCH):
            self.client.log_batch(run, metrics=ms[i:i + _MAX_BATCH])

    def _guard(self, fn: Callable, *args: Any) -> None:
        """Run ``fn``; a failure is one warning and turns the tracker off (the store keeps every point)."""
        if self.failed:
            return
        try:
            fn(*args)
        except Exception as e:
            self.failed = True
            self.warn(f"warning: tracker mlflow ({self.uri}) stopped: {_one_line(e)}; the results store keeps every "
                      "point, and running the same command again logs what it missed")


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return (text[:300] + "...") if len(text) > 300 else text or type(e).__name__
