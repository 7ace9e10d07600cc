"""Oracles: exact unlearning, the reference a deep-unlearning verdict is checked against.

An *oracle* of a target t is the original model A's own recipe retrained on the KB minus a
minimal deep-unlearning set of t (:func:`~deepunlearn.unlearn.retrain.retrain`: same base, recipe
and seed, read from A's ``deepunlearn.json``). By construction the rules cannot derive t from
what the oracle was taught, so a valid deep-unlearning verdict must call it deep; and what the
oracle still answers of its excluded set is what a model infers without being taught (names,
genders, the question's shape), the floor any unlearning method stands on.

The set is chosen over the facts A was **taught** (the KB minus A's own ``finetune --exclude``
facts, which stay out of the oracle's training too), not over what A answers: a fact A was
taught but does not answer is still taught to the oracle and could derive t. ``smallest`` picks
the minimal set with the fewest facts, ties broken by the fewest other taught facts sharing an
entity with them, then the smallest ids (:func:`deepunlearn.rules.choice.choose_set`); an
explicit set must make every target underivable (else the surviving derivation is named).
Several targets share one oracle: the union of their sets is excluded.

:func:`build_oracle` trains (or finds in the cache: the retain models' cache, keyed by base
identity, KB fingerprint, removed facts and recipe) the oracle and, with ``out_dir``, writes
it there atomically with an ``oracle`` record in its ``deepunlearn.json``: the targets, the set
of each, the excluded facts, the recipe and seed. A model whose recipe the tool does not hold
(finetuned elsewhere, a GGUF file, a hub model) is refused: judge it against chance instead
(``evaluate``'s chance figures, ``p_chance``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..kg.kb import KnowledgeBase
from ..probe.models import META_FILE, read_meta

#: the key of the oracle record in an oracle folder's ``deepunlearn.json``
RECORD = "oracle"
#: what to do instead for a model the tool cannot retrain
CHANCE_HINT = ("judge its verdicts against chance instead (deepunlearn evaluate --calibration CAL: p_chance, the "
               "probability that a model which learned none of the target's minimal-set facts is judged as it is)")


def _error(message: str, file: Any = None, field: str | None = None):
    from .methods.params import UnlearnError

    return UnlearnError(message, file=file, field=field)


def default_cache_dir() -> Path:
    """``$DEEPUNLEARN_CACHE/oracle``, else ``~/.cache/deepunlearn/oracle``."""
    from ..probe.cache import default_cache_dir as probe_cache

    return probe_cache().parent / "oracle"


def recipe_meta(model: str | os.PathLike, flag: str = "--model") -> dict:
    """The ``deepunlearn.json`` of a model the tool can retrain; anything else is one
    :class:`~deepunlearn.unlearn.methods.params.UnlearnError` saying why and pointing to chance
    figures (:data:`CHANCE_HINT`)."""
    name = os.fspath(model)
    p = Path(name).expanduser()
    if p.is_file():
        kind = "a GGUF file" if p.suffix.lower() == ".gguf" else "a single file, not a checkpoint folder"
        raise _error(f"{flag} {name}: {kind}; it records no training recipe the tool can rerun, so it has no oracle: "
                     + CHANCE_HINT, file=name, field=flag)
    if name == "tiny":
        raise _error(f"{flag} tiny: names a fresh model, not a trained one; give the checkpoint folder deepunlearn "
                     "finetune wrote", field=flag)
    if not p.is_dir():
        from ..probe.sources import looks_local

        what = ("no such checkpoint folder" if looks_local(name) else
                "a hub model: what it knows was learned in pretraining or finetuned elsewhere, with no recipe the "
                "tool holds, so it has no oracle")
        raise _error(f"{flag} {name}: {what}" + ("" if looks_local(name) else ": " + CHANCE_HINT), file=name,
                     field=flag)
    meta = read_meta(p) if (p / META_FILE).is_file() else {}
    if (p / "adapter_config.json").is_file() and not isinstance(meta.get("training"), dict):
        raise _error(f"{flag} {name}: an adapter trained elsewhere; its {META_FILE} records no base and training "
                     "recipe, so it has no oracle: " + CHANCE_HINT, file=name, field=flag)
    if not isinstance(meta.get("training"), dict) or meta.get("base") is None:
        raise _error(f"{flag} {name}: its {META_FILE} records no base and training recipe (it was not trained by "
                     "deepunlearn finetune), so the tool cannot retrain it into an oracle: " + CHANCE_HINT,
                     file=name, field=flag)
    return meta


def taught_facts(kb: KnowledgeBase, meta: dict) -> list[int]:
    """The facts the model was trained on: the KB minus its own ``finetune --exclude`` facts."""
    own = {int(i) for i in ((meta.get("trained") or {}).get("excluded") or [])}
    return [i for i in range(len(kb.facts)) if i not in own]


def _fact(kb: KnowledgeBase, i: int) -> str:
    s, r, o = kb.facts[i]
    return f"[{i}] ({s}, {r}, {o})"


def surviving_line(kb: KnowledgeBase, graph, target: int) -> str:
    """One line naming how ``target`` stays derivable from the graph's K: the target itself, or the
    rule deriving it and the facts of K the derivation rests on."""
    from ..rules.survive import leaves, steps, surviving_derivation

    if graph.in_k(int(target)):
        return "the target itself is kept"
    tree = surviving_derivation(graph, target)
    top = steps(graph, tree)[-1]
    return (f"{top['rule']} ({top['where']}): {top['datalog']}, resting on "
            + ", ".join(_fact(kb, i) for i in leaves(tree)))


def choose_sets(kb: KnowledgeBase, rules, taught: Sequence[int], targets: Sequence[int],
                chosen: str | Sequence[int] = "smallest", *, budget: int | None = None,
                flag: str = "--set") -> tuple[dict[int, list[int]], list[int], bool]:
    """(set per target, the union excluded, whether the sets were enumerated exactly).

    ``chosen == "smallest"``: each target's smallest minimal set over ``taught`` (module
    docstring). Else ``chosen`` are fact ids: they must make every target underivable from
    ``taught`` minus them (one error naming ``flag`` and the surviving derivation otherwise);
    each target's set is then the whole given set."""
    from ..rules.graph import derivation_graph
    from ..rules.metrics import Evaluator

    taught = sorted(int(i) for i in taught)
    missing = [t for t in targets if t not in set(taught)]
    if missing:
        raise _error(f"--target {_fact(kb, missing[0])}: the model was trained without it (finetune --exclude), so "
                     "there is nothing to unlearn", field="--target")
    if isinstance(chosen, str):
        if chosen != "smallest":
            raise _error(f"{flag} {chosen!r}: expected 'smallest' or fact ids", field=flag)
        from ..rules.choice import Collateral, choose_set

        ev = Evaluator(kb, rules=rules, known=taught, max_groundings=budget)
        col = Collateral(kb, taught)
        sets: dict[int, list[int]] = {}
        exact = True
        for t in targets:
            ms = ev.minimal_sets(int(t))
            exact = exact and bool(ms.exact)
            sets[int(t)] = sorted(choose_set(ms.sets, col, ()))
        return sets, sorted(set().union(*sets.values())), exact
    given = sorted({int(i) for i in chosen})
    graph = derivation_graph(kb, rules, known=sorted(set(taught) - set(given)), max_groundings=budget)
    for t in targets:
        if graph.in_closure[int(t)]:
            raise _error(f"{flag}: the set does not make target {_fact(kb, t)} underivable; it survives through "
                         f"{surviving_line(kb, graph, t)}", field=flag)
    return {int(t): given for t in targets}, given, True


@dataclass
class OracleResult:
    """What :func:`build_oracle` did: the folder (``out_dir``, else the cache's), whether it came
    from the cache, the targets, their sets, the excluded union and the recipe."""

    folder: Path
    cached: bool
    targets: list[int]
    sets: dict[int, list[int]]
    excluded: list[int]
    record: dict[str, Any]
    cache_folder: Path
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"oracle": str(self.folder), "cached": self.cached, "cache": str(self.cache_folder),
                "targets": self.targets, "sets": {str(t): s for t, s in self.sets.items()},
                "excluded": self.excluded, "seed": self.record["seed"], "recipe": self.record["recipe"],
                "exact": self.record["exact"], "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class SetChoice:
    """Which facts an oracle is trained without: ``chosen`` (``"smallest"``: each target's
    smallest minimal set, or explicit fact ids; module docstring) under ``rules`` (a rule set
    :func:`~deepunlearn.rules.load.load_rules` takes; ``None``: the KB's own), the sets
    enumerated within ``grounding_budget`` groundings (``None``: the default budget)."""

    chosen: str | Sequence[Any] = "smallest"
    rules: Any = None
    grounding_budget: int | None = None


def build_oracle(model: str | os.PathLike, kb: KnowledgeBase, targets: Sequence[Any], choice: SetChoice | None = None,
                 *, seed: int | None = None, cache_dir: str | os.PathLike | None = None,
                 out_dir: str | os.PathLike | None = None, progress: bool = True,
                 device: str | None = None) -> OracleResult:
    """The oracle of ``model`` (a checkpoint folder ``deepunlearn finetune`` wrote) for
    ``targets`` (fact ids or references) on ``kb`` (the model's own KB): trained, or taken from
    ``cache_dir`` (default :func:`default_cache_dir`); with ``out_dir`` it is written there
    (atomically, with its ``oracle`` record). ``choice``: which facts it is trained without
    (:class:`SetChoice`; default: each target's smallest set under the KB's rules). ``seed``
    overrides the recipe's seed (a second oracle to judge against the first). Errors are
    :class:`~deepunlearn.unlearn.methods.params.UnlearnError` (one line)."""
    from ..kg.fingerprint import kb_fingerprint
    from ..kg.kb import KBError
    from ..rules.load import load_rules
    from .retrain import plan_retrain, train_planned

    t0 = time.perf_counter()
    choice = choice or SetChoice()
    chosen, rules = choice.chosen, choice.rules
    meta = recipe_meta(model)
    cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
    plan_retrain(model, kb, [], cache_dir=cache_dir, seed=seed)  # recipe and KB checked before the sets
    rules = load_rules(rules if rules is not None else kb.metadata.get("rules", "family"))
    try:
        tids = list(dict.fromkeys(kb.resolve(t) for t in targets))
        given = chosen if isinstance(chosen, str) else [kb.resolve(f) for f in chosen]
    except KBError as e:
        raise _error(str(e), field="--target") from None
    if not tids:
        raise _error("no target given", field="--target")
    taught = taught_facts(kb, meta)
    sets, excluded, exact = choose_sets(kb, rules, taught, tids, given, budget=choice.grounding_budget)
    own = sorted(set(range(len(kb.facts))) - set(taught))
    plan = plan_retrain(model, kb, sorted(set(excluded) | set(own)), cache_dir=cache_dir, seed=seed)
    cached = plan.cached
    folder = train_planned(plan, kb, progress=progress, device=device)
    record = {"of": os.fspath(model), "targets": tids, "target_facts": [list(kb.facts[t]) for t in tids],
              "choice": chosen if isinstance(chosen, str) else "given", "sets": {str(t): s for t, s in sets.items()},
              "excluded": excluded, "removed": plan.ids, "model_excluded": own, "exact": exact, "rules": rules.name,
              "kb": {"name": kb.name, "fingerprint": kb_fingerprint(kb)}, "recipe": plan.recipe.model_dump(),
              "seed": plan.recipe.seed, "base": plan.identity, "key": plan.key}
    out = folder
    if out_dir is not None:
        out = write_oracle(folder, out_dir, record)
    return OracleResult(folder=Path(out), cached=cached, targets=tids, sets=sets, excluded=excluded, record=record,
                        cache_folder=folder, seconds=time.perf_counter() - t0)


def write_oracle(cached: Path, out_dir: str | os.PathLike, record: dict) -> Path:
    """Copy the cached oracle into ``out_dir`` (files hard-linked where the file system allows,
    ``deepunlearn.json`` rewritten with ``record``), atomically."""
    import json
    import shutil

    from ..errors import atomic_dir

    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        for src in sorted(Path(cached).rglob("*")):
            dst = tmp / src.relative_to(cached)
            if src.is_dir():
                dst.mkdir(parents=True, exist_ok=True)
            elif src.name != META_FILE or src.parent != Path(cached):
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy2(src, dst)
        meta = {**read_meta(cached), RECORD: record}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False, default=str) + "\n")
    return out


def read_record(folder: str | os.PathLike, flag: str = "--oracle") -> dict:
    """The oracle record of a folder: its ``oracle`` entry, else (a retain model from the cache)
    one built from its ``retrain`` entry. A folder with neither is one error naming ``flag``."""
    p = Path(folder)
    meta = read_meta(p) if (p / META_FILE).is_file() else {}
    if isinstance(meta.get(RECORD), dict):
        return meta[RECORD]
    rt = meta.get("retrain")
    if isinstance(rt, dict) and isinstance(rt.get("removed"), list):
        return {"of": rt.get("of"), "targets": None, "excluded": rt["removed"], "removed": rt["removed"],
                "kb": meta.get("kb"), "seed": rt.get("seed")}
    raise _error(f"{flag} {folder}: not an oracle folder (its {META_FILE} has no 'oracle' or 'retrain' record; make "
                 "one with deepunlearn oracle)", file=folder, field=flag)
