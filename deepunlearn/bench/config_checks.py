"""The checks that tie a sweep configuration's fields together, and the part of it that decides
its results (its fingerprint's key): functions of a :class:`~.config.SweepConfig`, kept apart
from its fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_accuracy import accuracy_options
from .config_paths import SET_NAMES, file_digest
from .config_probe import probe_results_key
from .grids import family_default, folder_digest


def cross_checks(cfg: Any) -> Any:
    """The checks of a sweep configuration that tie its fields together; the first failing one is
    a ``ValueError`` naming the field (the configuration's error names the file)."""
    names = [m.name for m in cfg.models]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"models: names must be unique, {sorted(dup)} repeat (set name = ...)")
    for i, m in enumerate(cfg.models):
        for method, grid in (m.grids.items() if isinstance(m.grids, dict) else ()):
            if method not in cfg.methods:
                raise ValueError(f"field models.{i}.grids.{method}: method {method!r} is not in [methods] "
                                 f"({', '.join(cfg.methods)}); add it there to run it")
            if not grid and family_default(method, False) is None:
                raise ValueError(f"field models.{i}.grids.{method}: method {method!r} has no default grid: "
                                 "give its parameters")
    if cfg.adversarial_calibration is not None and not cfg.adversarial:
        raise ValueError("field adversarial_calibration: calibrates the adversarial aggregate: set adversarial = "
                         "true too")
    if cfg.adversarial_modes is not None and not cfg.adversarial:
        raise ValueError("field adversarial_modes: the modes of the adversarial aggregate: set adversarial = true too")
    if cfg.model_derived and "whp" in cfg.methods:
        raise ValueError("field model_derived: WHP changes the output distribution, not the weights; drop whp")
    if cfg.oracle_seeds and not cfg.oracle:
        raise ValueError("field oracle_seeds: more seeds of each target's oracle: set oracle = true too")
    if len(set(cfg.oracle_seeds)) != len(cfg.oracle_seeds):
        raise ValueError(f"field oracle_seeds: a seed given twice in {cfg.oracle_seeds}")
    if cfg.oracle and (cfg.targets.batch or cfg.targets.sequential):
        raise ValueError("field oracle: an oracle is retrained per target; batch and sequential requests are "
                         "not single targets: set oracle = false or drop the requests")
    if cfg.holdout is not None and not (cfg.scores or cfg.reference != "none"):
        raise ValueError("field holdout: the holdout facts serve the measures: set scores = true too")
    if cfg.exact is not None and cfg.sets is not None and cfg.sets != ("exact" if cfg.exact else "mdus"):
        raise ValueError(f"field exact: exact = {str(cfg.exact).lower()} means sets = "
                         f"{'exact' if cfg.exact else 'mdus'!r}, but sets = {cfg.sets!r}; give only sets")
    return cfg


def results_key(cfg: Any, kb_fingerprint: str) -> dict[str, Any]:
    """The part of a sweep configuration that decides the results (not where or how they run):
    per model its resolved protocol, sets and grids (not how they were spelled)."""
    def sets(m: Any) -> str:
        s = cfg.sets_for(m)
        return s if s in SET_NAMES else f"{s} ({folder_digest(s) if Path(s).is_dir() else 'missing'})"

    return {
        "kb": kb_fingerprint,
        "rules": file_digest(Path(cfg.rules)) if cfg.rules and Path(cfg.rules).is_file() else cfg.rules,
        "models": [{**m.model_dump(exclude={"device", "protocol", "grids"}), "protocol": cfg.protocol_for(m).describe(),
                    "sets": sets(m), "grids": cfg.grids_for(m)} for m in cfg.models],
        "methods": list(cfg.methods),
        **({"params": cfg.param_tables()} if cfg.params else {}),
        "targets": cfg.targets.results_key(),
        "seeds": cfg.mdus_seeds,  # the MDUS seed count, under its older key: fingerprints unchanged
        "seed": cfg.seed,  # [run] seeds are not in the key: every point is stored with its seed
        "lora": cfg.lora,
        **probe_results_key(cfg),
        **({"model_derived": True} if cfg.model_derived else {}),
        **({"oracle_seeds": list(cfg.oracle_seeds)} if cfg.oracle_seeds else {}),  # deep_oracle's references
        **accuracy_options(cfg),
        **({"measures": {"min_k": cfg.min_k, "reference": cfg.reference, "holdout":
                         file_digest(Path(cfg.holdout)) if cfg.holdout and Path(cfg.holdout).is_file()
                         else cfg.holdout}} if cfg.measured else {}),
    }
