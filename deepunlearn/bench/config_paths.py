"""Where a sweep configuration's files are: the paths of a config file resolved against its folder,
and the digests that tie a results store to the files' contents.

``sets`` is either one of :data:`SET_NAMES` (a way to get the minimal sets) or a folder of stored
minimal sets; only a folder is a path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

__all__ = ["SET_NAMES", "file_digest", "resolve_paths"]

#: ``sets`` values that name a way to get the minimal sets (anything else is a folder).
SET_NAMES = ("exact", "mdus", "release")


def file_digest(p: Path) -> str:
    """``sha256:`` and the hex digest of the file's bytes (a rules or holdout file in the results key)."""
    return "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()


def resolve_paths(cfg: Any, base: Path) -> Any:
    """A copy of the :class:`~.config.SweepConfig` ``cfg`` with its paths resolved: paths in a config
    file are relative to that file; model paths only where such a folder exists (otherwise they
    are hub names)."""

    def resolve(p: Path, field: str) -> str:
        try:
            return str(p.resolve())
        except (RuntimeError, OSError):  # a symbolic link loop (RuntimeError before Python 3.13)
            raise cfg.error(field, f"{p}: a loop of symbolic links") from None

    def rel(p: str | None, field: str) -> str | None:
        if p is None or Path(p).is_absolute():
            return p
        return resolve(base / p, field) if p else p

    from .config_run import is_per_seed, per_seed

    models = []
    first = cfg.run.seeds[0] if cfg.run is not None and cfg.run.seeds else cfg.seed
    for m in cfg.models:
        if is_per_seed(m.path) and not Path(m.path).is_absolute():  # one checkpoint per run seed
            if (base / per_seed(m.path, first)).exists():
                models.append(m.model_copy(update={"path": str(base.resolve() / m.path)}))
                continue
        cand = base / m.path
        models.append(m.model_copy(update={"path": resolve(cand, "models")}) if not Path(m.path).is_absolute() and cand.exists() else m)
    rules = cfg.rules
    if rules and ((base / rules).is_file() or rules.endswith((".dl", ".pl", ".txt"))):
        rules = rel(rules, "rules")
    sets = cfg.sets if cfg.sets is None or cfg.sets in SET_NAMES else rel(cfg.sets, "sets")
    if sets is not None and sets not in SET_NAMES and not Path(sets).is_dir():
        raise cfg.error("sets", f"no folder {sets} (expected 'exact', 'mdus', 'release' or a folder of minimal sets)")
    return cfg.model_copy(update={
        "kb": rel(cfg.kb, "kb"), "holdout": rel(cfg.holdout, "holdout"), "output": rel(cfg.output, "output"),
        "cache_dir": rel(cfg.cache_dir, "cache_dir"), "models": models, "rules": rules,
        "adversarial_calibration": rel(cfg.adversarial_calibration, "adversarial_calibration"),
        "chance_calibration": rel(cfg.chance_calibration, "chance_calibration"),
        "sets": sets,
    })
