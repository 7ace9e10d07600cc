"""Following a sweep in an experiment tracker: ``bench --tracker mlflow[=URI]``, or ``tracker =
"mlflow"`` in the sweep file (the flag wins).

The results store (``results.sqlite``) stays the record; the tracker gets a copy, kept in step with
it while the sweep runs:

* one **sweep run** per sweep, its parameters the resolved configuration (nested keys joined with
  dots: ``models.0.path``, ``methods.ga``), its artifacts the report folder (``report.md``,
  ``report.html``, ``summary.json``, ``points.csv``, the figures), ``config.yaml`` and
  ``manifest.json``, and its metrics the summary's numbers (``MODEL/METHOD/acc_at_recall_0.8``);
* one **trajectory run** per (model, target, method, run seed), nested under it, whose metrics are
  the points, stepped by the grid index (step 0 is the grid's first value): ``recall``,
  ``accuracy``, ``deep``, ``target_forgotten``, the accuracy's parts and groups, and whatever checks
  the point carries (``recall_adv``, ``deep_model``, ``deep_oracle``, ``p_chance``, ...), each a
  number; ``grid_value`` is the grid's own value at that step.

Runs are found again by their tags: ``deepunlearn.sweep`` (the sweep's id, kept in the store, so a
resumed sweep reuses its runs and a sweep started over with ``--overwrite`` gets new ones) and
``deepunlearn.trajectory`` (``MODEL/TARGET/METHOD/seed-S``). A point is logged once: a resumed
sweep logs only the steps its runs do not hold yet, the points stored while the tracker was off
included. Tracking never stops a sweep: a tracker that fails mid-way is one warning, and the next
run of the command fills in what it missed.

The MLflow backend is :mod:`.tracking_mlflow`; what is logged, :mod:`.tracking_log`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .tracking_log import (  # noqa: F401  (re-exported)
    KIND_TAG, SWEEP_ID_KEY, SWEEP_TAG, TRAJECTORY_TAG, TrackerError, config_params, grid_step, metric_name,
    point_metrics, summary_metrics, trajectory_key,
)

TRACKERS = ("mlflow",)
TRACKER_HELP = ("follow the sweep in an experiment tracker: 'mlflow' (a local store in the output folder, "
                "OUTPUT/mlflow.db, or $MLFLOW_TRACKING_URI when set) or 'mlflow=URI' (sqlite:///FILE.db, a folder "
                "for MLflow's file store, http://HOST:PORT); 'none': no tracker")
@dataclass(frozen=True)
class TrackerSpec:
    """A parsed ``--tracker`` value: the kind and its URI (None: the kind's default store)."""

    kind: str
    uri: str | None = None


def parse_tracker(text: str | None, *, where: str = "--tracker", base: Path | None = None,
                  file: str | os.PathLike | None = None) -> TrackerSpec | None:
    """``mlflow``, ``mlflow=URI`` or ``none``; a plain path in the URI is taken relative to ``base``
    (the sweep file's folder; default the working directory). ``file``: the sweep file it came
    from (its field is then ``tracker``).

    >>> parse_tracker("mlflow"), parse_tracker("none")
    (TrackerSpec(kind='mlflow', uri=None), None)
    >>> parse_tracker("mlflow=http://localhost:5000").uri
    'http://localhost:5000'
    >>> parse_tracker("wandb")
    Traceback (most recent call last):
    ...
    deepunlearn.bench.tracking_log.TrackerError: --tracker wandb: unknown tracker; known: mlflow, none
    """
    if text is None or text.strip().lower() in ("", "none"):
        return None
    field = "tracker" if file is not None else where
    kind, sep, uri = text.strip().partition("=")
    kind = kind.strip().lower()
    if kind not in TRACKERS:
        raise TrackerError(f"{where} {text}: unknown tracker; known: {', '.join(TRACKERS)}, none", field=field,
                           file=file)
    uri = uri.strip()
    if sep and not uri:
        raise TrackerError(f"{where} {text}: empty URI after '=' (give mlflow alone for the default store)",
                           field=field, file=file)
    if uri and "://" not in uri and not uri.startswith(("file:", "databricks")):
        uri = str((base or Path.cwd()) / Path(uri).expanduser())  # a plain path: a folder or FILE.db
    return TrackerSpec(kind, uri or None)


def open_tracker(spec: TrackerSpec, output: str | os.PathLike, *, warn=None):
    """The tracker of ``spec`` for the sweep writing into ``output``; raises :class:`TrackerError`
    (one line) before the sweep starts when it cannot be used."""
    from .tracking_mlflow import MlflowTracker

    return MlflowTracker(spec.uri, Path(output), warn=warn)
