"""``deepunlearn demo``: the paper's whole evaluation on the embedded default, end to end.

1. a synthetic KB of a domain (``--domain``, default ``family``: ``generate_family``; another
   domain's declarative generator, ``generate_domain``), or the user's ``--kb``,
2. the ``tiny`` model built for it and finetuned on its question/answer pairs,
3. a sweep of GA, NPO, TV and WHP (the paper's grids), GradDiff (GA with a retain set) and
   du_loop (rule-aware closed loop) over one target per relation (stratified), under the
   ``default`` protocol (``DEMO_PROTOCOL``; printed with the sweep); ``--methods`` picks any of
   the registered methods (each on its default grid),
4. the report and the Table 3 summary.

Every stage is kept in the output folder and reused when the demo runs again with the same KB
and seed, so an interrupted demo resumes (the sweep from its last stored point). A folder holding
the results of another demo (another KB or seed) is refused before any work unless
``--overwrite``; a folder of other files is refused unless ``--force``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import atomic_dir, atomic_write_text, dumps
from ..kg.io import load_kb, save_kb
from ..probe.fingerprint import kb_fingerprint
from .config import ModelSpec, SweepConfig, TargetSpec
from ..unlearn.methods import catalog
from .grids import family_default
from .jobs import safe_name, torch_threads
from .guard import SWEEP_NAMES, SweepLock, check_children, results_folder
from .store import STORE_NAME, StoreError
from .runner import SweepOutcome, run_sweep, select_targets

#: people in the generated family: big enough for every relation to have targets and for the
#: minimal sets to be non-trivial, small enough for the whole demo to take minutes on 2 CPU cores.
DEFAULT_PEOPLE = 50
#: width of the demo's tiny model: the 512-wide one of docs/models.md probes ~4x slower on
#: 2 cores; 256 wide (2 layers) still learns a 50-person family (>= 95 % of its facts).
DEMO_HIDDEN = 256
#: torch threads of the demo: the tiny model's matrices are too small for intra-op threading to
#: pay, and on a busy 2-core machine OpenMP's spin-waiting made 2 threads ~3x slower than 1
#: (measured: the whole demo in 2:50 with 1 thread, 9:04 with 2, same results).
DEMO_THREADS = 1
#: the demo's methods (the catalogue's ``demo`` ones): the paper's four, one retain-regularised and
#: one rule-aware method (the others run in sweeps: ``deepunlearn bench``)
DEMO_METHODS = catalog.demo_methods()
DEMO_FILE = "demo.json"
#: the demo's protocol (deepunlearn.probe.protocol): the tiny model's targets are drawn among the
#: facts it knows when probed the default protocol's way
DEMO_PROTOCOL = "default"


def _say(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _want(kb, seed: int) -> dict:
    """What the demo's model (and so its results) depend on: the stamp ``demo.json`` records it."""
    return {"kb_fingerprint": kb_fingerprint(kb), "seed": seed, "hidden": DEMO_HIDDEN}


def _read_stamp(out: Path) -> dict:
    try:
        stamp = json.loads((out / DEMO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def check_demo_folder(out: Path, kb, seed: int, overwrite: bool) -> None:
    """Refuse, before anything is written or trained, a folder holding the results of another
    demo (another KB, seed or model width) or of a sweep that is no demo, unless ``overwrite``."""
    if overwrite or not (out / STORE_NAME).is_file():
        return
    stamp, want = _read_stamp(out), _want(kb, seed)
    if {k: stamp.get(k) for k in want} == want:
        return
    what = (f"of a demo with another KB or seed (seed {stamp.get('seed')}, KB fingerprint "
            f"{str(stamp.get('kb_fingerprint'))[:12]})" if stamp else "of a sweep that is not this demo")
    raise StoreError(f"-o {out}: holds results {what}; choose another output folder or pass --overwrite to "
                     "discard them", file=out, field="-o")


def prepare_kb(out: Path, kb_path: str | None, people: int, seed: int, progress: bool = True,
               domain: str = "family", overwrite: bool = True):
    """The demo's KB: the given file, or one generated from ``domain`` saved as ``OUT/kb.json``;
    the folder is checked (:func:`check_demo_folder`) before the KB is saved."""
    if kb_path:
        kb = load_kb(kb_path)
        check_demo_folder(out, kb, seed, overwrite)
        _say(f"[1/4] KB {kb_path}: {len(kb.entities)} entities, {len(kb)} facts", progress)
        return kb, str(Path(kb_path).resolve())
    from ..rules.generate import generate_kb

    kb = generate_kb(domain, people, seed=seed)
    check_demo_folder(out, kb, seed, overwrite)
    path = out / "kb.json"
    if not path.exists() or kb_fingerprint(load_kb(path)) != kb_fingerprint(kb):
        save_kb(kb, path)
    _say(f"[1/4] generated a KB of the {domain} domain, {people} people: {len(kb)} facts ("
         + ", ".join(f"{int(m.sum())} {g}" for g, m in kb.group_masks.items()) + ")", progress)
    return kb, str(path.resolve())


def prepare_model(out: Path, kb, seed: int, progress: bool = True) -> Path:
    """Build and finetune the tiny model, or reuse the one a previous run left for this KB and seed."""
    model_dir = out / "model"
    stamp_path = out / DEMO_FILE
    want = _want(kb, seed)
    if stamp_path.exists() and model_dir.is_dir():
        stamp = _read_stamp(out)
        if {k: stamp.get(k) for k in want} == want:
            ft = stamp.get("finetune", {})
            _say(f"[2/4] reusing the finetuned tiny model in {model_dir} "
                 f"({ft.get('known')} of {ft.get('total')} facts known)", progress)
            return model_dir
    from ..probe import build_tiny_model, load_model
    from ..unlearn.finetune import FinetuneConfig, finetune

    t0 = time.perf_counter()
    # the untrained model lives in a scratch folder; the finetuned one replaces model/ only once
    # complete, so a crash or Ctrl-C leaves a previous model/ whole
    with tempfile.TemporaryDirectory(prefix=".model-init-", dir=out) as init_dir, atomic_dir(model_dir) as tmp:
        build_tiny_model(kb, init_dir, seed=seed, hidden=DEMO_HIDDEN)
        bundle = load_model(init_dir)
        _say(f"[2/4] finetuning the tiny model ({bundle.num_parameters() / 1e6:.1f}M parameters) on {len(kb)} facts",
             progress)
        result = finetune(bundle, kb, FinetuneConfig.tiny(seed=seed), out_dir=tmp)
    result.checkpoint = model_dir
    stamp = {**want, "finetune": result.to_json(), "seconds": round(time.perf_counter() - t0, 3)}
    atomic_write_text(stamp_path, dumps(stamp, indent=1) + "\n")
    _say(f"      known {result.known} of {result.total} facts after {result.epochs} epochs ({result.seconds:.0f} s)",
         progress)
    return model_dir


def known_before(out: Path, kb, model_dir: Path) -> frozenset[int]:
    """The facts the finetuned model knows, probed once and cached where the sweep looks for it."""
    from ..probe import cached_probe, get_protocol, load_model

    bundle = load_model(model_dir)
    mode = get_protocol(DEMO_PROTOCOL).probe_mode
    return frozenset(cached_probe(bundle, kb, mode=mode, cache_dir=out / "cache" / safe_name(MODEL_NAME),
                                  progress=False).known_ids())


MODEL_NAME = "tiny"


def demo_config(out: Path, kb_file: str, model_dir: Path, targets: Sequence[int], *,
                methods: Sequence[str] | None = None, executor: str = "local",
                ray_address: str | None = None, threads: int | None = None) -> SweepConfig:
    """The demo's sweep: its methods on their default grids (the paper's for GA, NPO, TV, WHP)
    over the given targets, under the ``default`` protocol."""
    methods = list(methods or DEMO_METHODS)
    unknown = [m for m in methods if m not in catalog.names()]
    if unknown:
        from .config import ConfigError

        raise ConfigError(f"--methods: unknown method {', '.join(unknown)}; known: {catalog.help_names()}",
                          field="--methods")
    return SweepConfig(
        kb=kb_file, rules=None,  # the KB's own rule set (family for a generated one)
        models=[ModelSpec(name=MODEL_NAME, path=str(model_dir.resolve()))],
        methods={m: list(family_default(m, False)) for m in methods},
        targets=TargetSpec(refs=list(targets)), protocol=DEMO_PROTOCOL,
        output=str(out.resolve()), cache_dir=str((out / "cache").resolve()),
        executor=executor, ray_address=ray_address, threads=threads,
    )


def run_demo(output: str | Path, *, kb_path: str | None = None, domain: str = "family", people: int = DEFAULT_PEOPLE,
             seed: int = 0,
             per_relation: int = 1, methods: Sequence[str] | None = None, executor: str = "local",
             ray_address: str | None = None, threads: int | None = DEMO_THREADS, overwrite: bool = False,
             force: bool = False, progress: bool = True) -> SweepOutcome:
    """Run the demo into ``output`` (see the module docstring) and return the sweep's outcome."""
    from ..outputs import check_output

    if kb_path is None:  # a wrong --domain is one line before the output folder is made
        from ..kg.domain import load_domain

        load_domain(domain)
    out = check_output(output, force=force, folder=True, what="a demo folder (no demo.json or results.sqlite)",
                       ours=results_folder(SWEEP_NAMES + ("kb.json", "model", DEMO_FILE), (DEMO_FILE, STORE_NAME)))
    check_children(out, f"-o {out}")
    with SweepLock(out):  # a second demo on the folder stops here, before touching the model
        demo = DemoChoices(kb_path=kb_path, domain=domain, people=people, seed=seed, per_relation=per_relation,
                           methods=methods, executor=executor, ray_address=ray_address, threads=threads)
        return _run_demo(out, demo, overwrite=overwrite, progress=progress)


@dataclass(frozen=True)
class DemoChoices:
    """What a demo is run on and how (:func:`run_demo`'s keywords of the same names): the KB
    (``kb_path``, else ``people`` of ``domain`` generated with ``seed``), ``per_relation`` targets
    per relation, the ``methods`` swept and the sweep's ``executor``, ``ray_address`` and
    ``threads``."""

    kb_path: str | None
    domain: str
    people: int
    seed: int
    per_relation: int
    methods: Sequence[str] | None
    executor: str
    ray_address: str | None
    threads: int | None


def _run_demo(out: Path, demo: DemoChoices, *, overwrite: bool, progress: bool) -> SweepOutcome:
    seed, threads = demo.seed, demo.threads
    kb, kb_file = prepare_kb(out, demo.kb_path, demo.people, seed, progress, domain=demo.domain, overwrite=overwrite)
    with torch_threads(threads):
        model_dir = prepare_model(out, kb, seed, progress)
        known = known_before(out, kb, model_dir)
    targets = select_targets(kb, TargetSpec(stratified=demo.per_relation, seed=seed), known=known)
    cfg = demo_config(out, kb_file, model_dir, targets, methods=demo.methods, executor=demo.executor,
                      ray_address=demo.ray_address, threads=threads)
    _say(f"[3/4] sweeping {', '.join(m.upper() for m in cfg.methods)} over {len(targets)} targets "
         f"({demo.per_relation} per relation, among the {len(known)} facts the model knows) on their default grids, "
         f"protocol {cfg.protocol!r}", progress)
    outcome = run_sweep(cfg, overwrite=overwrite, progress=progress, kb=kb)
    _say("[4/4] writing the report", progress)
    return outcome
