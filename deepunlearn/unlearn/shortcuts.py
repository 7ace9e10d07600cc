"""The shortcut floor of a KB: how much a model that knows none of its facts still "knows".

A probe counts a fact known when the model answers its question. Some questions can be answered
without the fact: in the paper's family data a child carries the father's surname, and "Who is
{o2} to {o1}?" has one of eleven relation words for an answer, so two names and a gender often
give it away. The *shortcut floor* measures that: a baseline model is trained with the same
recipe on a KB drawn by the same generator but sharing no person and no fact with the KB
(:func:`deepunlearn.kg.holdout.make_holdout`: new people named with the KB's own words), then
probed on the KB's facts, none of which it saw. Per relation and probe mode, the share it
answers is the accuracy of a model that answers from names and attributes alone: a model
"knowing" a fact at that rate shows nothing, and an unlearned model that still answers at that
rate may have forgotten everything.

The trained baseline is cached under ``cache_dir`` by a sha256 of (base model, recipe, KB
fingerprint, holdout seed), and each mode's probe beside it, so a second run (or one resumed
after an interruption) neither trains nor probes again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..kg.kb import KnowledgeBase
from ..kg.shortcut_floor import floor_text  # noqa: F401  (the floor's table, shared with data show)

#: The probe modes the floor is measured under by default.
FLOOR_MODES = ("exact", "rank")


def _key(identity: dict, recipe: dict, kb_fp: str, holdout_seed: int) -> str:
    doc = {"base": identity, "recipe": recipe, "kb": kb_fp, "holdout_seed": int(holdout_seed), "what": "shortcuts"}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _wilson(k: int, n: int, z: float = 1.959964) -> list[float] | None:
    """Wilson's 95 % interval of a share k/n (``None`` for n = 0).

    >>> _wilson(0, 20), _wilson(17, 20)
    ([0.0, 0.161125], [0.639581, 0.947631])
    """
    if n == 0:
        return None
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * ((p * (1 - p) + z * z / (4 * n)) / n) ** 0.5 / d
    return [round(max(0.0, mid - half), 6), round(min(1.0, mid + half), 6)]


def _table(kb: KnowledgeBase, known: dict[str, Sequence[bool]]) -> tuple[dict, dict, dict]:
    """Per relation, per group and overall: ``n`` and, per mode, the share known, the count and
    Wilson's 95 % interval of the share."""
    def row(ids: list[int]) -> dict:
        out: dict[str, Any] = {"n": len(ids)}
        for mode, k in known.items():
            hits = int(sum(bool(k[i]) for i in ids))
            out[mode] = round(hits / len(ids), 6) if ids else None
            out[f"{mode}_known"] = hits
            out[f"{mode}_ci95"] = _wilson(hits, len(ids))
        return out

    by_rel: dict[str, list[int]] = {}
    by_group: dict[str, list[int]] = {}
    for i, (_, r, _) in enumerate(kb.facts):
        by_rel.setdefault(r, []).append(i)
        by_group.setdefault(kb.relations[r].group, []).append(i)
    relations = {r: {"group": kb.relations[r].group, **row(ids)} for r, ids in by_rel.items()}
    return relations, {g: row(ids) for g, ids in by_group.items()}, row(list(range(len(kb.facts))))


@dataclass(frozen=True)
class FloorBaseline:
    """The baseline model a shortcut floor trains on the holdout: what it starts from and its
    finetuning recipe.

    ``base``: ``"tiny"`` (built for the KB with ``tiny``: arch, hidden, layers, heads, seed) or a
    model folder or hub name to finetune, with ``prompt`` and ``answer_format``; ``recipe_from``:
    a checkpoint ``deepunlearn finetune`` made, whose base and recipe are reused (instead of
    ``base`` and ``config``). ``config``: a :class:`~deepunlearn.unlearn.finetune.FinetuneConfig`;
    ``make_config(bundle)`` builds one from the loaded base where ``config`` is None
    (``recipe_key``: what that recipe is made from, for the cache key)."""

    base: str | None = "tiny"
    recipe_from: str | Path | None = None
    config: Any = None
    make_config: Callable[[Any], Any] | None = None
    recipe_key: dict | None = None
    tiny: dict | None = None
    prompt: Any = None
    answer_format: str = "recorded"


def shortcut_floor(kb: KnowledgeBase, baseline: FloorBaseline | None = None, *, holdout_seed: int = 0,
                   modes: Sequence[str] = FLOOR_MODES, cache_dir: str | Path | None = None,
                   device: str | None = None, dtype: str | None = None, progress: bool = True) -> dict:
    """The shortcut floor of ``kb`` (module docstring) as a JSON-ready dict: ``relations`` (per
    relation: ``group``, ``n`` and, per mode, the share known and ``<mode>_known``), ``groups``,
    ``overall``, ``holdout`` (seed, people, facts, and how much of it the baseline learned), the
    ``recipe`` and ``base``, and ``cached`` (whether the baseline was found trained).

    ``baseline``: the model trained on the holdout (:class:`FloorBaseline`; default: a tiny model
    with the tool's recipe). Errors: a KB whose domain has no holdout generator
    (:class:`~deepunlearn.kg.kb.KBError`), a checkpoint without a recipe
    (:class:`~deepunlearn.unlearn.methods.base.UnlearnError`).
    """
    b = baseline or FloorBaseline()
    base, recipe_from, config, prompt = b.base, b.recipe_from, b.config, b.prompt
    make_config, recipe_key, answer_format = b.make_config, b.recipe_key, b.answer_format
    from tqdm.auto import tqdm

    from ..errors import atomic_dir, atomic_write_text, load_json
    from ..kg.fingerprint import kb_fingerprint
    from ..kg.holdout import make_holdout
    from ..probe.cache import default_cache_dir
    from ..probe.models import META_FILE, load_model, read_meta
    from ..probe.probing import probe
    from .finetune import FinetuneConfig, finetune

    hold = make_holdout(kb, int(holdout_seed))  # first: a KB without a holdout generator fails at once
    tiny = {"arch": "llama", "hidden": 512, "layers": 2, "heads": 8, "seed": 0, **(b.tiny or {})}
    if recipe_from is not None:
        from .retrain import base_identity, model_source, training_recipe

        meta, name, _ = model_source(recipe_from)
        config = training_recipe(meta, name, None)
        identity = base_identity(meta, name, None)
        prompt = meta.get("prompt") if prompt is None else prompt
    elif base == "tiny":
        identity = {"tiny": tiny, "prompt": getattr(prompt, "describe", lambda: prompt)()}
    else:
        identity = {"base": str(base), "prompt": getattr(prompt, "describe", lambda: prompt)()}
    fp = kb_fingerprint(kb)
    # a recipe made from the loaded base (make_config) is keyed by what it is made from
    recipe_doc = config.model_dump() if config is not None else {"from_base": recipe_key or {}}
    key = _key(identity, recipe_doc, fp, holdout_seed)
    folder = (Path(cache_dir) if cache_dir is not None else default_cache_dir().parent / "shortcuts") / key
    steps = ["train", *(f"probe {m}" for m in modes)]
    bar = tqdm(total=len(steps), desc="shortcuts", unit="step", disable=not progress)
    cached = (folder / META_FILE).is_file() and (read_meta(folder).get("shortcuts") or {}).get("key") == key
    try:
        bar.set_postfix_str("train on the holdout")
        if not cached:
            with atomic_dir(folder) as tmp:
                if "tiny" in identity:
                    from ..probe.tiny import build_tiny_model

                    spec = identity["tiny"]
                    build_tiny_model(kb, tmp, seed=spec["seed"], hidden=spec["hidden"], layers=spec["layers"],
                                     heads=spec["heads"], arch=spec["arch"], prompt=prompt)
                    bundle = load_model(tmp, device=device, dtype=dtype)
                else:
                    bundle = load_model(identity["base"], device=device, dtype=dtype, prompt=prompt,
                                        answer_format=answer_format)
                cfg = config if config is not None else (make_config(bundle) if make_config is not None
                                                         else FinetuneConfig.for_bundle(bundle))
                bundle.meta = {**bundle.meta, "shortcuts": {"key": key, "of": kb.name, "kb_fingerprint": fp,
                                                           "holdout_seed": int(holdout_seed), "base": identity}}
                res = finetune(bundle, hold, cfg, out_dir=tmp, progress=progress)
                atomic_write_text(tmp / "holdout.json", json.dumps(
                    {"people": len(hold.entities), "facts": len(hold.facts), "known": res.known, "total": res.total,
                     "epochs": res.epochs, "recipe": cfg.model_dump()}))
        bar.update(1)
        learned = load_json(folder / "holdout.json")
        bundle = None
        known: dict[str, list[bool]] = {}
        for mode in modes:
            bar.set_postfix_str(f"probe {mode} on the KB")
            cache = folder / f"probe-{mode}-{fp[:16]}.json"
            if cache.is_file():
                known[mode] = [bool(x) for x in load_json(cache)["known"]]
            else:
                if bundle is None:
                    bundle = load_model(folder, device=device, dtype=dtype)
                r = probe(bundle, kb, mode=mode, progress=progress)
                known[mode] = [bool(x) for x in r.known]
                atomic_write_text(cache, json.dumps({"kb_fingerprint": fp, "mode": mode, "known": known[mode]}))
            bar.update(1)
    finally:
        bar.close()
    relations, groups, overall = _table(kb, known)
    from ..kg.domains.family.questions import question_format

    params = kb.metadata.get("params") if isinstance(kb.metadata, dict) else None
    return {"kb": kb.name, "kb_fingerprint": fp, "modes": list(modes),
            "names": params.get("names", "inherited") if isinstance(params, dict) else None,
            "questions": question_format(kb),
            "holdout": {"seed": int(holdout_seed), "people": learned["people"], "facts": learned["facts"],
                        "baseline_known": learned["known"], "baseline_total": learned["total"],
                        "epochs": learned["epochs"]},
            "base": identity, "recipe": learned["recipe"], "baseline": str(folder), "cached": bool(cached),
            "relations": relations, "groups": groups, "overall": overall}
