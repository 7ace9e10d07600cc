"""The sweep runner: every (model, target, method) trajectory over its grid, every point written
to the results store the moment it exists, resumable after any interruption.

Use::

    from deepunlearn.bench import load_config, run_sweep
    outcome = run_sweep(load_config("sweep.toml"))
    outcome.summary["tiny"]["ga"]["acc_at_recall_0.8"]

Resumption: a (model, target, method) job that finished (or was skipped because the model never
knew the target) is not run again; a job stopped half-way runs again with its finished grid values
as ``skip_params`` (an unlearning trajectory still takes its optimisation steps, but finished
points are neither probed nor scored again). The store refuses a second copy of a point, and its
``evaluations`` log records every point computed, so "nothing finished was recomputed" is checkable.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import atomic_write_text, check_output, dumps
from ..kg.io import load_kb, to_dict
from ..kg.kb import KBError, KnowledgeBase
from ..probe.cache import CacheDirError, check_cache_dir
from ..probe.fingerprint import kb_fingerprint
from ..probe.protocol import get_protocol
from .config import SET_NAMES, SweepConfig
from .config_run import model_paths, per_seed, run_seeds, seeds_manifest
from .config_accuracy import check_accuracy
from .config_probe import check_attacks, check_forms
from .executors import Executor, make_executor
from .guard import SweepLock, check_children, check_models, model_identity, overlaps_model, record_models
from .jobs import work_spec
from .oracle import ORACLE, check_oracle, oracle_cache
from .point_controls import check_chance
from .scheduling import grids_with_baselines, plan_jobs  # noqa: F401  (plan_jobs: re-exported)
from .target_selection import select_targets  # noqa: F401  (re-exported)
from .progress import SweepBar
from .metrics import summarize
from .store import Point, ResultsStore
from .sweep_sink import PointSink

MANIFEST = "manifest.json"
RESOLVED_CONFIG = "config.yaml"


@dataclass
class SweepOutcome:
    """What a finished sweep hands back: where it wrote, its points and their summary."""

    output: Path
    points: list[Point]
    summary: dict[str, dict[str, dict[str, float]]]
    targets: list[int]
    skipped: dict[tuple[str, int, str], str] = field(default_factory=dict)
    resumed: bool = False
    computed: int = 0  # points computed by this invocation
    seconds: float = 0.0
    config: SweepConfig | None = None


def _sweep_kb_key(kb: KnowledgeBase, kb_fp: str) -> str:
    """What the sweep's results depend on in the KB: the probe layer's fingerprint (facts and
    their question/answer pairs, the one recorded in model files and manifests) plus what the rules
    read beyond it, the entities' attributes (gender decides ``female(X)``) and the KB's targets."""
    rest = json.dumps([sorted((e, sorted(a.items())) for e, a in kb.entities.items()), list(kb.targets)],
                      ensure_ascii=False)
    return kb_fp + ":" + hashlib.sha256(rest.encode()).hexdigest()[:16]


def _versions() -> dict[str, str]:
    from .. import __version__

    out = {"deepunlearn": __version__, "python": platform.python_version()}
    for mod in ("torch", "transformers", "tokenizers", "peft", "numpy", "clingo", "ray"):
        m = sys.modules.get(mod)
        if m is None:
            try:
                from importlib.metadata import version

                out[mod] = version(mod)
            except Exception:
                continue
        else:
            out[mod] = getattr(m, "__version__", "?")
    return out


def _write_json_atomic(path: Path, obj: Any) -> None:
    """Write strict JSON (NaN/inf become null) atomically: a reader never sees half a file."""
    atomic_write_text(path, dumps(obj, indent=1, default=str) + "\n")


def resolved_rules(cfg: SweepConfig, kb: KnowledgeBase) -> str:
    """The rule set a sweep uses: the config's, else the KB's own (``metadata["rules"]``), else
    ``family`` (what the unlearn layer does with ``rules=None``), so config.yaml and the report agree."""
    return cfg.rules or str(kb.metadata.get("rules") or "family")


def check_config(cfg: SweepConfig) -> None:
    """What the schema cannot check: method names against the catalogue (a plug-in's spec read and
    its Params imported), every model's grids by each method's kind, local model folders and a sets
    folder that do not exist. Torch-free: no method's class is imported (``[params]`` tables were
    checked into each method's Params when the file was read, :mod:`.config_params`)."""
    from ..unlearn.methods import catalog
    from ..unlearn.methods.params import check_grid

    for name in cfg.methods:
        try:
            catalog.load_params(catalog.get_spec(name))
        except ValueError as e:
            known = f"unknown method; known: {catalog.help_names()}" if name not in catalog.names() else str(e)
            raise cfg.error(f"methods.{name}", known) from None
    for i, m in enumerate(cfg.models):
        looks_local = m.path.startswith((".", "/", "~")) or os.sep in m.path and not _hub_like(m.path)
        for path in dict.fromkeys(per_seed(m.path, s) for s in run_seeds(cfg)):  # {seed}: every seed's
            if looks_local and not Path(path).expanduser().is_dir():
                raise cfg.error(f"models.{i}.path", f"no model folder {path}")
        sources = cfg.grid_sources(m)
        for name, grid in cfg.grids_for(m).items():
            try:
                check_grid(name, catalog.kind_of(name), grid)
            except ValueError as e:
                if isinstance(m.grids, dict) and name in m.grids:
                    field = f"models.{i}.grids.{name}"
                else:
                    field = f"models.{i}.grids" if sources[name].startswith("preset") else f"methods.{name}"
                raise cfg.error(field, f"{sources[name]} grid {grid}: {e}") from None
    if cfg.targets.sequential or cfg.targets.batch:
        if cfg.measured:
            raise cfg.error("targets", "scores / reference measure single-target runs; batch and sequential "
                            "requests record recall, deep and accuracy only: set scores = false and reference = 'none'")
    if cfg.targets.sequential:
        bad = [m for m in cfg.methods if catalog.kind_of(m) != "steps"]
        if bad:
            raise cfg.error(f"methods.{bad[0]}", "sequential requests keep each request's weights: use gradient "
                            f"methods (ga, npo, graddiff, du_loop, ...), not {catalog.titles('strength')}")
        if cfg.lora:
            raise cfg.error("lora", "sequential requests need full mode (a weight snapshot), not LoRA")
    check_attacks(cfg)
    check_accuracy(cfg)
    if cfg.sets is not None and cfg.sets not in SET_NAMES and not Path(cfg.sets).is_dir():
        raise cfg.error("sets", f"no folder {cfg.sets} (expected {', '.join(SET_NAMES)} or a folder of minimal sets)")


def model_manifest(cfg: SweepConfig, name: str) -> dict[str, Any]:
    """What the manifest records of a model: its files, its resolved protocol (and the fields
    that differ from the ``default`` preset), its sets, its grids and where each comes from."""
    m = cfg.model(name)
    proto = cfg.protocol_for(m).describe()
    default = get_protocol("default").describe()
    sources = cfg.grid_sources(m)
    out = {
        "path": m.path, "identity": model_identity(m.path), "protocol": proto,
        "protocol_differs": {k: v for k, v in proto.items() if k != "name" and v != default[k]},
        "sets": cfg.sets_for(m), "grids": cfg.grids_for(m), "grid_sources": sources,
    }
    if cfg.probe_mode_for(m) != proto["probe_mode"]:  # a mode the protocol cannot hold (yesno, rank, any)
        out["probe_mode"] = cfg.probe_mode_for(m)
    if any(s == "auto gpt2-xl" for s in sources.values()):
        out["note"] = ("GPT-2-family model with empty grids under a protocol with family_grids: it runs the "
                       "reference's GPT2-XL grids (" + ", ".join(k for k, s in sources.items() if s == "auto gpt2-xl")
                       + ")")
    return out


def _hub_like(path: str) -> bool:
    """``owner/name`` (one slash, no dots or tildes at the start) may be a hub id."""
    return path.count("/") == 1 and not path.startswith((".", "/", "~"))


def _checked_inputs(cfg: SweepConfig, kb: KnowledgeBase | None) -> tuple[KnowledgeBase, list[int], Any, Any]:
    """Everything a sweep checks before it writes anything: the KB (read unless given), the
    targets, the configuration against the KB, the oracle, the p_chance calibration, the holdout
    and the output and cache folders. Returns the KB, the targets, the calibration and the
    holdout, read; the flat keys' notes print once every check passed."""
    if kb is None:
        try:
            kb = load_kb(cfg.kb)
        except KBError as e:
            raise cfg.error("kb", str(e)) from None
    targets = select_targets(kb, cfg.targets, cfg)
    if not targets:
        raise cfg.error("targets", "no target facts selected")
    check_config(cfg)
    check_forms(cfg, kb)
    check_oracle(cfg, kb)  # a model the tool cannot retrain, before anything is written
    chance = check_chance(cfg)  # p_chance's calibration, read before anything is written
    holdout = _holdout(cfg, kb)  # checked before anything is written
    for key, folder in (("output", cfg.output_dir), ("cache_dir", cfg.cache_path)):  # folders, not files
        try:
            check_cache_dir(folder, where=key)
        except CacheDirError as e:
            raise cfg.error(key, str(e).removeprefix(f"{key} ")) from None
    for line in cfg.notes:  # flat keys read in their groups (config_groups): once the checks passed
        print(line, file=sys.stderr)
    return kb, targets, chance, holdout


def run_sweep(cfg: SweepConfig, *, executor: Executor | None = None, overwrite: bool = False,
              progress: bool = True, kb: KnowledgeBase | None = None, tracker=None) -> SweepOutcome:
    r"""Run (or resume) a sweep; see the module docstring.

    Parameters
    ----------
    cfg : SweepConfig
        The configuration, as :func:`~deepunlearn.bench.config.load_config` returns it.
    executor : Executor, optional
        Where the jobs run (default: the configuration's ``executor``, local processes).
    overwrite : bool, default False
        Discard the stored results of another sweep in the output folder instead of refusing.
    progress : bool, default True
        Progress on stderr.
    kb : KnowledgeBase, optional
        The configuration's KB, already loaded.
    tracker : optional
        Gets every point as it is stored, and the points stored before (:mod:`.tracking`).

    Returns
    -------
    SweepOutcome
        The summary of all stored points: the points, how many were computed in this run, and the
        output folder.

    Raises
    ------
    ConfigError
        A configuration the sweep cannot run (an unreadable KB, no target selected, a cache folder
        inside a model's folder), before the first point.
    StoreError
        The output folder holds another sweep's results and ``overwrite`` is not set.

    Examples
    --------
    One model, one target, GA at one step (an untrained model with K = the whole KB, so that
    nothing needs finetuning); a second run finds the point stored and computes nothing:

    >>> import tempfile, pathlib, deepunlearn
    >>> from deepunlearn.probe.tiny import build_tiny_model
    >>> work = pathlib.Path(tempfile.mkdtemp())
    >>> kb = deepunlearn.generate_family(5, seed=0)
    >>> _ = deepunlearn.save_kb(kb, work / "kb.json"), build_tiny_model(kb, work / "tiny", hidden=32, layers=1, heads=2)
    >>> _ = (work / "sweep.toml").write_text(f'kb = "kb.json"\noutput = "out"\nk_mode = "dataset"\n[[models]]\nname = "tiny"\n'
    ...     f'path = "tiny"\n[methods]\nga = [1]\n[targets]\nrefs = [{kb.targets[0]}]\n')
    >>> out = run_sweep(deepunlearn.load_config(work / "sweep.toml"), progress=False)
    >>> out.computed, [(p.method, p.param, p.recall) for p in out.points], (out.output / "results.sqlite").exists()
    (1, [('ga', 1, 1.0)], True)
    >>> run_sweep(deepunlearn.load_config(work / "sweep.toml"), progress=False).computed
    0

    ``tracker`` (:mod:`.tracking`) gets every point as it is stored, and the points stored before.
    """
    t0 = time.perf_counter()
    kb, targets, chance, holdout = _checked_inputs(cfg, kb)
    cfg = cfg.model_copy(update={"rules": resolved_rules(cfg, kb)})
    executor = executor or make_executor(cfg.executor, cfg.ray_address)
    out = cfg.output_dir
    kb_fp = kb_fingerprint(kb)
    fp = cfg.fingerprint(_sweep_kb_key(kb, kb_fp))
    models = model_paths(cfg)  # a per-seed model: one checkpoint per run seed, each checked as a model
    for key, folder in (("output", out), ("cache_dir", cfg.cache_path)):
        inside = overlaps_model(folder, models)
        if inside is not None:  # written there, the model would change under every resume
            raise cfg.error(key, f"{folder} lies inside the folder of model {inside!r} ({models[inside]}); "
                                 "writing there changes the model, so no rerun could resume: choose a folder outside it")
    check_children(out, f"output {out}")

    check_output(out, flag="output", force=True, folder=True)  # a file or device there is one line, not a crash
    with SweepLock(out), ResultsStore(out, discard_damaged=overwrite) as store:
        if store.meta("fingerprint") == fp and check_models(store, models, overwrite=overwrite):
            store.clear()
        resumed = store.bind(fp, cfg.recorded(), overwrite=overwrite)
        record_models(store, models)
        if tracker is not None:
            tracker.start(store, cfg)
        atomic_write_text(out / RESOLVED_CONFIG, cfg.to_yaml())
        manifest_path = out / MANIFEST
        manifest = _read_manifest(manifest_path) if resumed else {"runs": []}
        manifest.update(_manifest_fields(cfg, kb, targets, fp, kb_fp, chance is not None, store))
        jobs, done_points = plan_jobs(cfg, targets, store)
        run_rec = {"started": _dt.datetime.now().isoformat(timespec="seconds"), "host": socket.gethostname(),
                   "pid": os.getpid(), "executor": executor.name, "points_before": done_points, "status": "running"}
        manifest["runs"].append(run_rec)
        _write_json_atomic(manifest_path, manifest)

        requests = bool(cfg.targets.batch or cfg.targets.sequential)
        total = len(run_seeds(cfg)) * len(targets) * len(cfg.targets.batch or [1]) * sum(len(g) for m in cfg.models for g in (
            cfg.grids_for(m) if requests else grids_with_baselines(cfg, m)).values())
        bar = SweepBar(total, done_points, progress)
        sink = PointSink(store, kb, bar, tracker, {k: r or "" for k, (s, r) in store.jobs().items() if s == "skipped"})
        n_jobs = len(jobs)

        if resumed and progress:
            print(f"resuming {out}: {done_points} of {total} points already stored, {n_jobs} job(s) to run",
                  file=sys.stderr)
        try:
            executor.run(work_spec(cfg, kb, holdout, chance), jobs, sink)
            run_rec["status"] = "finished"
        except BaseException as e:
            run_rec["status"] = f"stopped: {type(e).__name__}"
            raise
        finally:
            bar.close()
            if tracker is not None:
                tracker.stop(run_rec["status"])
            run_rec.update({"ended": _dt.datetime.now().isoformat(timespec="seconds"), "points_computed": sink.computed,
                            "seconds": round(time.perf_counter() - t0, 3)})
            _write_json_atomic(manifest_path, manifest)
        points = [p for p in store.points() if p.target in set(targets) and p.seed in run_seeds(cfg)
                  and (cfg.oracle or p.method != ORACLE)]  # oracle is not in the fingerprint: rows of an earlier run
    return SweepOutcome(out, points, summarize(points, groups=kb.groups), targets, sink.skipped, resumed, sink.computed,
                        time.perf_counter() - t0, cfg)


def _manifest_fields(cfg: SweepConfig, kb: KnowledgeBase, targets: list[int], fp: str, kb_fp: str, chance: bool,
                     store: ResultsStore) -> dict[str, Any]:
    """What the manifest records of this run's sweep: its fingerprints, KB, targets, versions,
    models, seeds, the oracle's cache and the p_chance calibration when asked, and the store."""
    return {
        "config_fingerprint": fp, "kb_fingerprint": kb_fp, "kb": cfg.kb, "kb_name": kb.name,
        "kb_facts": len(kb), "targets": targets, "versions": _versions(),
        "models": {m.name: model_manifest(cfg, m.name) for m in cfg.models},
        "seed": cfg.seed, "job_seed": "first 4 bytes (big-endian) of sha256(json [seed, model, target, method])",
        **seeds_manifest(cfg),
        **({"oracle": {"cache": str(oracle_cache(cfg.cache_path)), "removed": "each target's smallest minimal "
                       "set over K (the first of equal size)"}} if cfg.oracle else {}),
        **({"chance_calibration": {"path": cfg.chance_calibration, "sha256": _digest(cfg.chance_calibration)}}
           if chance else {}),
        "store": str(store.path),
    }


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the sweep being resumed; an unreadable one starts a new run list."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"runs": []}
    return data if isinstance(data, dict) and isinstance(data.get("runs"), list) else {"runs": []}


def _holdout(cfg: SweepConfig, kb: KnowledgeBase) -> dict[str, Any] | None:
    """The holdout KB's document, checked to share no fact or person with the KB."""
    if cfg.holdout is None:
        return None
    from ..kg.holdout import check_disjoint

    try:
        hold = load_kb(cfg.holdout)
        check_disjoint(kb, hold, cfg.holdout)
    except KBError as e:
        raise cfg.error("holdout", str(e)) from None
    return to_dict(hold)
