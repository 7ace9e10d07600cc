"""bench layer: sweeps over models x targets x methods x grids, the paper's metrics, a resumable
results store, reports with figures, the ``bench`` and ``demo`` commands, local or Ray execution.

torch is imported only when a sweep runs (by the workers), not when this package is imported.
"""

from .config import ConfigError, ModelSpec, SweepConfig, TargetSpec, load_config, parse_config
from .grids import GRID_PRESETS, PAPER_GRIDS, is_gpt2_family, job_seed
from .metrics import (
    acc_at_recall,
    acc_at_superficial,
    auc,
    format_table,
    mean_curve,
    per_target,
    recall_at_acc,
    summarize,
    summarize_by,
)
from .store import Point, ResultsStore, StoreError

__all__ = [
    "PAPER_GRIDS", "GRID_PRESETS", "is_gpt2_family", "job_seed", "ConfigError", "ModelSpec", "SweepConfig", "TargetSpec", "load_config", "parse_config",
    "acc_at_recall", "acc_at_superficial", "auc", "format_table", "mean_curve", "per_target", "recall_at_acc",
    "summarize", "summarize_by", "Point", "ResultsStore", "StoreError",
    "run_sweep", "select_targets", "SweepOutcome", "build_report", "write_report", "run_demo",
]


def __getattr__(name: str):
    # The runner, report and demo pull in matplotlib / the unlearn layer: load them on first use.
    if name in ("run_sweep", "select_targets", "SweepOutcome", "plan_jobs"):
        from . import runner

        return getattr(runner, name)
    if name in ("build_report", "write_report"):
        from . import report

        return getattr(report, name)
    if name == "run_demo":
        from .demo import run_demo

        return run_demo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
