"""Repeated runs of a sweep: the ``[run]`` table and the two meanings of ``seeds``.

``[run] seeds = [0, 1, 2]`` runs every (model, target, method) trajectory once per seed; each
seed's points are stored with the seed (``ResultsStore``, column ``seed``) and the summary
aggregates over seeds × targets (:mod:`.bootstrap`: the bootstrap resamples targets, each with all
its seeds). Seed ``s`` derives its jobs' seeds as ``job_seed(s, model, target, method)``, so the
run with ``s`` equal to the sweep's ``seed`` gives the very points a sweep without ``[run]`` gives.

What a seed changes: the unlearning run's own randomness (dropout, sampled retain facts, relearning
draws, a sampled accuracy). GA, NPO, TV and WHP on a model without dropout are deterministic
given the model, so with one model per sweep their points repeat across seeds. The variance of
finetuning comes in through a model ``path`` holding ``{seed}`` (``path = "tiny-edu-s{seed}"``):
seed ``s`` then unlearns its own checkpoint, finetuned beforehand with ``deepunlearn finetune
--seed s``; the sweep does not finetune, and its probe cache is kept per seed
(``CACHE/MODEL/seed-S``). ``adversarial_calibration`` may hold ``{seed}`` too (one calibration per
seed's model).

The older top-level ``seeds = N`` (an integer) keeps its meaning: the DUS+RP seeds of the
approximate (MDUS) minimal sets, now spelled ``mdus_seeds``. A list there, an integer under
``[run]``, or both ``seeds`` and ``mdus_seeds`` at the top level is refused with one line naming
the file and the field, never guessed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from ..limits import MAX_MDUS_SEEDS, count_problem, max_threads, seed_problem
from .modelspec import StrictModel


def _seed(v: Any) -> Any:
    problem = seed_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _bounded(bound, unit: str):
    """A check of a count from 1 to ``bound`` (a number, or a function giving it)."""
    def check(v: Any) -> Any:
        problem = None if v is None else count_problem(v, bound() if callable(bound) else bound, unit)
        if problem:
            raise ValueError(problem)
        return v
    return check


#: a sweep's ``seed``: an integer from 0 to 2**63 - 1 (limits.MAX_SEED), never a float or a bool
Seed = Annotated[int, BeforeValidator(_seed)]
#: ``mdus_seeds``: an integer from 1 to limits.MAX_MDUS_SEEDS
MdusSeeds = Annotated[int, BeforeValidator(_bounded(MAX_MDUS_SEEDS, "seeds"))]
#: ``threads``: an integer from 1 to limits.max_threads() (4 x the CPUs, at least 64)
Threads = Annotated[int, BeforeValidator(_bounded(max_threads, "threads"))]

#: the placeholder of a per-seed path (model checkpoint, calibration file)
SEED_FIELD = "{seed}"

RUN_HELP = ("repeated runs: [run] seeds = [0, 1, 2] runs every trajectory once per seed and aggregates over "
            "seeds x targets; None: one run with the sweep's seed")
MDUS_HELP = "DUS+RP seeds when sets are approximated (MDUS); the top-level 'seeds = N' of older configs"


class RunOptions(StrictModel):
    """The ``[run]`` table."""

    seeds: list[int] | None = Field(default=None, min_length=1, description="the seeds of the repeated runs")

    @field_validator("seeds", mode="before")
    @classmethod
    def _list_of_ints(cls, v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"expected a list of integer seeds such as [0, 1, 2], got {v!r}; the number of MDUS "
                             "seeds is the top-level mdus_seeds")
        bad = [x for x in v if seed_problem(x)]
        if bad:
            raise ValueError(f"seeds: {seed_problem(bad[0])}")
        dup = sorted({x for x in v if list(v).count(x) > 1})
        if dup:
            raise ValueError(f"seed {dup[0]} is listed twice")
        return list(v)


def split_seeds(data: Any) -> Any:
    """The decoded config with the top-level ``seeds`` read in its old meaning (``mdus_seeds``);
    a value that cannot be that is refused (the model validator's ``field seeds: ...`` line)."""
    if not isinstance(data, dict) or "seeds" not in data:
        return data
    v = data["seeds"]
    if isinstance(v, (list, tuple)):
        raise ValueError("field seeds: a list of run seeds goes under [run] (seeds = [...] in a [run] table); "
                         "a top-level seeds is the number of MDUS seeds (mdus_seeds)")
    if "mdus_seeds" in data:
        raise ValueError("field seeds: both seeds and mdus_seeds give the number of MDUS seeds; keep mdus_seeds")
    problem = count_problem(v, MAX_MDUS_SEEDS, "seeds")
    if problem:
        raise ValueError(f"field seeds: the number of MDUS seeds: {problem}")
    out = {k: x for k, x in data.items() if k != "seeds"}
    out["mdus_seeds"] = v
    return out


def run_seeds(cfg: Any) -> list[int]:
    """The seeds a sweep runs: ``[run] seeds``, else the sweep's ``seed`` alone."""
    return list(cfg.run.seeds) if cfg.run is not None and cfg.run.seeds else [cfg.seed]


def check_seed(data: Any, cfg: Any) -> None:
    """A sweep ``seed`` given beside ``[run] seeds`` must be one of them (its points are that seed's);
    without it, the sweep's seed is the first run seed (set by the caller)."""
    if cfg.run is None or not cfg.run.seeds or not isinstance(data, dict) or "seed" not in data:
        return
    if cfg.seed not in cfg.run.seeds:
        raise ValueError(f"field seed: seed = {cfg.seed} is not among [run] seeds {cfg.run.seeds}; give only "
                         "[run] seeds (the first is the sweep's seed) or list it there")


def per_seed(path: str | None, seed: int) -> str | None:
    """``path`` with ``{seed}`` replaced by ``seed`` (a path without it is shared by every seed).

    >>> per_seed("models/tiny-s{seed}", 2), per_seed("models/tiny", 2), per_seed(None, 1)
    ('models/tiny-s2', 'models/tiny', None)
    """
    return None if path is None else path.replace(SEED_FIELD, str(int(seed)))


def is_per_seed(path: str | None) -> bool:
    return path is not None and SEED_FIELD in path


def model_paths(cfg: Any) -> dict[str, str]:
    """``{name: path}`` of every checkpoint a sweep loads: a per-seed model is one per run seed,
    named ``NAME@seedS`` (each fingerprinted like a model of its own)."""
    return {(f"{m.name}@seed{s}" if is_per_seed(m.path) else m.name): per_seed(m.path, s)
            for m in cfg.models for s in run_seeds(cfg)}


def seeds_manifest(cfg: Any) -> dict[str, Any]:
    """What the manifest records of repeated runs: the run seeds and each seed's calibration digest."""
    import hashlib
    from pathlib import Path

    out: dict[str, Any] = {"run_seeds": run_seeds(cfg)} if cfg.run is not None and cfg.run.seeds else {}
    if is_per_seed(cfg.adversarial_calibration):
        out["calibrations"] = {s: "sha256:" + hashlib.sha256(Path(per_seed(cfg.adversarial_calibration, s))
                                                             .read_bytes()).hexdigest() for s in run_seeds(cfg)}
    return out
