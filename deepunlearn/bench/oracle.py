"""The ``oracle`` row of a sweep (``oracle = true``): exact unlearning, per target.

For every target the sweep runs one more job, method ``oracle``, param 0: the model's own
finetune recipe (read from its ``deepunlearn.json``: base, architecture, answer format, learning
rate, schedule, epochs or early-stop rule, seed) retrained on the KB minus the target's chosen
minimal deep-unlearning set (:func:`oracle_set`: the smallest over the sweep's K, the first of equal
size in the rules layer's order, unless what the model was taught still derives the target without
it; then the smallest over the taught facts) by
:func:`~deepunlearn.unlearn.retrain.retrain`. Retrained models are cached in ``CACHE/retrain``
by (base identity, KB fingerprint, removed facts, recipe and seed), the folder ``reference =
"retrain"`` uses for the same model, so a resumed sweep, or the same target in another run seed
on the same checkpoint, finds it trained.

The retrained weights are then put in place of the model's (the runner's weights are restored
afterwards) and the point is probed and judged exactly as a grid point of a method: recall,
accuracy and its parts, ``deep``, target forgotten, the sampled accuracy, the measures and the
adversarial aggregate where the sweep asks for them (attacks are not run on it). The point is
stored like any other, so every table of the report gets an ``oracle`` row: the ceiling any
method can reach under this probe, and the accuracy exact unlearning keeps. Its notes add
``oracle_removed`` (the excluded set), ``answers_target`` / ``answers_set`` (what the retrained
model still answers of it: knowledge it infers from what it kept) and ``oracle_key`` (the cache
key).

A model whose recipe the tool does not hold (not finetuned by ``deepunlearn finetune``: a hub
model, a GGUF file, a checkpoint without a recipe in its ``deepunlearn.json``) or that was
finetuned on another KB is refused before any work (:func:`check_oracle`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

#: the method label of the oracle rows
ORACLE = "oracle"

ORACLE_SEEDS_HELP = ("with oracle = true: more seeds of each target's oracle (the model's recipe with another seed); "
                     "deep_oracle then compares each point against the strongest of them, each fact beyond "
                     "their own disagreement on it (the oracle row stays the model's own seed); [] (default): one oracle")

ORACLE_HELP = ("per target also retrain the model's own finetune recipe on the KB minus the target's smallest "
               "minimal set (exact unlearning, cached in CACHE/retrain) and store it as an 'oracle' row, probed and "
               "judged like a grid point; needs a model deepunlearn finetuned")


def oracle_cache(cache_path: Path) -> Path:
    """Where a sweep keeps its retrained models (shared with ``reference = "retrain"``)."""
    return Path(cache_path) / "retrain"


def with_oracle(methods: list[str], on: bool) -> list[str]:
    """The row labels of a sweep: its methods, then ``oracle`` when ``oracle = true``.

    >>> with_oracle(["ga", "npo"], True), with_oracle(["ga"], False)
    (['ga', 'npo', 'oracle'], ['ga'])
    """
    return [*methods, ORACLE] if on and ORACLE not in methods else list(methods)


def check_oracle(cfg: Any, kb: Any) -> None:
    """Refuse, before any work, an ``oracle = true`` sweep with a model the tool cannot retrain:
    one line naming the file and ``models.N.path`` and saying why."""
    if not getattr(cfg, "oracle", False):
        return
    from ..probe.fingerprint import kb_fingerprint
    from ..probe.models import META_FILE, read_meta
    from ..user_error import UserError
    from .config_run import per_seed, run_seeds

    fp = kb_fingerprint(kb)
    why_not = ("oracle = true retrains each target's exact-unlearning model from the model's own finetune recipe, "
               "which the tool holds only for a model `deepunlearn finetune` made")
    for i, m in enumerate(cfg.models):
        for path in dict.fromkeys(per_seed(m.path, s) for s in run_seeds(cfg)):
            folder = Path(path).expanduser()
            if not folder.is_dir():
                kind = "a GGUF file" if folder.suffix.lower() == ".gguf" else (
                    "a file" if folder.is_file() else "a hub model, not a local checkpoint folder")
                raise cfg.error(f"models.{i}.path", f"{path} is {kind}: {why_not}; set oracle = false")
            try:
                meta = read_meta(folder)
            except UserError as e:
                raise cfg.error(f"models.{i}.path", str(e)) from None
            if not isinstance(meta.get("training"), dict) or meta.get("base") is None:
                raise cfg.error(f"models.{i}.path", f"{path}: its {META_FILE} records no base and training recipe "
                                f"(it was not finetuned by deepunlearn): {why_not}; set oracle = false")
            learned = meta.get("kb") if isinstance(meta.get("kb"), dict) else {}
            if learned.get("fingerprint") not in (None, fp):
                raise cfg.error(f"models.{i}.path", f"{path} was finetuned on KB {learned.get('name')!r}, not on the "
                                f"sweep's {kb.name!r}: an oracle is retrained on the model's own KB")


def oracle_set(runner: Any, target: int) -> list[int]:
    """The facts the oracle of ``target`` is retrained without: the smallest minimal set over the
    sweep's K (the first of equal size, :func:`~deepunlearn.unlearn.measures.reference_set`) when
    the rest of what the model was *taught* no longer derives the target; else (a taught fact the
    model does not answer still derives it) the smallest minimal set over the taught facts, as
    ``deepunlearn oracle`` chooses (:func:`~deepunlearn.unlearn.oracle.choose_sets`). Facts the
    model was finetuned without (``finetune --exclude``) stay out too."""
    from ..rules.graph import derivation_graph
    from ..unlearn.measures import reference_set
    from ..unlearn.oracle import choose_sets, taught_facts

    kb, rules = runner.kb, runner.evaluator.rules
    taught = taught_facts(kb, runner.bundle.meta or {})
    own = set(range(len(kb.facts))) - set(taught)
    removed = reference_set(runner.evaluator, target)
    if derivation_graph(kb, rules, known=sorted(set(taught) - set(removed))).in_closure[int(target)]:
        removed = choose_sets(kb, rules, taught, [int(target)])[1]
    return sorted(set(removed) | own)


def oracle_points(runner: Any, target: int, cache_dir: str | Path) -> Iterator[Any]:
    """The oracle point of ``target``: retrain (or find cached) the exact-unlearning model, put its
    weights in the runner's model, probe and judge it like a grid point; the weights are the
    oracle's while the point is yielded and the runner's again afterwards."""
    import torch

    from ..probe import load_model
    from ..unlearn.methods import UnlearnError
    from ..unlearn.retrain import retrain
    from ..unlearn.snapshot import WeightSnapshot

    t0 = time.perf_counter()
    removed = oracle_set(runner, target)
    model = runner.bundle.model
    device = str(next(model.parameters()).device)
    path = retrain(runner.bundle, runner.kb, removed, cache_dir=cache_dir, progress=runner.progress, device=device)
    oracle = load_model(str(path), device="cpu")
    snapshot = runner.snapshot or WeightSnapshot(model)  # LoRA mode keeps no snapshot of its own
    try:
        try:
            with torch.no_grad():
                model.load_state_dict(oracle.model.state_dict())
        except RuntimeError as e:
            raise UnlearnError(f"oracle of target {target}: the retrained model in {path} does not fit the sweep's "
                               f"model ({' '.join(str(e).split())[:300]})") from None
        del oracle
        model.eval()
        yield _judge(runner, target, removed, path, t0)
    finally:
        snapshot.restore(model)


def _judge(runner: Any, target: int, removed: list[int], path: Path, t0: float) -> Any:
    """The point of the model as it is now (the oracle's weights), as a method's grid point is made."""
    if runner.sampler.sampled:  # the target's cone plus a sample of K, as the methods' points
        probed = runner.sampler.plan(target)["probe"]
        forgotten = sorted(set(probed) - runner.known_among(probed))
        point = runner.sampler.point(target, ORACLE, 0, forgotten, None)
        answered = set(probed) - set(forgotten)  # the cone holds every minimal set
    else:
        answered = runner.known_after()
        forgotten = sorted(runner.known - answered)
        point = runner.point_for(target, ORACLE, 0, forgotten, None,
                                 runner.baselines.measure(target, None, forgotten, runner.baselines.reference(target)))
    point.notes.update(deep=runner.deep(target, forgotten), seconds=round(time.perf_counter() - t0, 3),
                       oracle_removed=list(removed), oracle_key=Path(path).name,
                       answers_target=target in answered, answers_set=sorted(i for i in removed if i in answered))
    if runner.checks.adversarial:
        runner.checks.adversarial_check([point], forgotten)
    return point
