"""Retain models: the same base, recipe and seed as a finetuned model, trained without some facts.

TOFU's forget quality and MUSE's PrivLeak compare an unlearned model with a *retain model*
(retrained from scratch without the forget set): the gold standard of unlearning.
:func:`retrain` builds one for a model that ``deepunlearn finetune`` (or
:func:`~deepunlearn.unlearn.finetune.finetune` with ``out_dir``) trained: it reads the
checkpoint's ``deepunlearn.json`` for the model it started from (``base``), the recipe
(``training``: :class:`~deepunlearn.unlearn.finetune.FinetuneConfig` fields) and the seed, and
trains that base on K minus ``removed``.

- ``base == "tiny"``: the tiny model is rebuilt from the checkpoint's ``tiny`` entry
  (architecture, sizes, seed) on the FULL KB, so its vocabulary and initial weights are those
  the finetuned model started from (a vocabulary that differs is refused);
- otherwise the base is loaded by its hub name or folder, with the finetuned model's answer format.

Retrained models are cached in ``cache_dir/<key>/`` where ``key`` is a sha256 of (base identity,
KB fingerprint, sorted removed ids, recipe, seed): a second call returns the folder without
training. The folder is written through :func:`deepunlearn.errors.atomic_dir` (complete or
absent). Its ``deepunlearn.json`` holds ``retrain`` (``{"of", "key", "removed", "seed", "base"}``)
and, from finetuning, ``trained`` (the facts trained on, ``excluded_known``: removed facts the
retain model still answers, knowledge it *infers* from what it kept). A model finetuned on several
forms per fact (``finetune --forms``) is retrained on the same forms.

:func:`plan_retrain` works out the key and folder without training (``.cached`` says whether the
cache holds the model); :func:`train_planned` trains it. Oracles (:mod:`.oracle`) build on both.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..kg.kb import KBError, KnowledgeBase
from ..probe.models import META_FILE, ModelBundle, read_meta

_TINY_KEYS = ("arch", "seed", "hidden", "layers", "heads")


def _error(message: str, file: Any = None, field: str | None = None):
    from .methods.base import UnlearnError

    return UnlearnError(message, file=file, field=field)


def model_source(model: str | Path | ModelBundle) -> tuple[dict, str, Path | None]:
    """(meta, name for messages, folder) of a bundle or a checkpoint folder."""
    if isinstance(model, ModelBundle):
        return dict(model.meta or {}), str(model.path or model.name), model.path
    folder = Path(model)
    if not (folder / "config.json").is_file() and not (folder / META_FILE).is_file():
        raise _error(f"model {folder}: not a checkpoint folder (no config.json or {META_FILE})", file=folder)
    return read_meta(folder), str(folder), folder


def training_recipe(meta: dict, name: str, seed: int | None):
    """The FinetuneConfig a model was trained with (from its meta), with ``seed`` if given."""
    from pydantic import ValidationError

    from .finetune import FinetuneConfig

    training = meta.get("training")
    if not isinstance(training, dict) or meta.get("base") is None:
        raise _error(f"model {name}: its {META_FILE} records no base and training recipe (it was not finetuned by "
                     "deepunlearn); a retain model needs the base the model started from and the recipe it was "
                     "trained with", file=name)
    try:
        config = FinetuneConfig(**{k: v for k, v in training.items() if k in FinetuneConfig.model_fields})
        if seed is not None:
            config = FinetuneConfig(**{**config.model_dump(), "seed": seed})
    except ValidationError as e:
        raise _error(f"model {name}: training recipe in {META_FILE}: {' '.join(str(e).split())}", file=name) from None
    return config


def base_identity(meta: dict, name: str, seed: int | None) -> dict:
    """What identifies the model a finetuned model started from: a tiny spec or a base model."""
    base = meta["base"]
    # A model built from scratch (origin "tiny") starts from a fresh tiny model whatever its
    # ``base`` says (older checkpoints recorded their own folder there).
    if base == "tiny" or meta.get("origin") == "tiny":
        tiny = meta.get("tiny")
        if not isinstance(tiny, dict) or any(k not in tiny for k in _TINY_KEYS):
            raise _error(f"model {name}: base 'tiny' but {META_FILE} has no complete 'tiny' entry "
                         f"({', '.join(_TINY_KEYS)}) to rebuild it from", file=name)
        spec = {k: tiny[k] for k in _TINY_KEYS}
        if seed is not None:
            spec["seed"] = seed
        return {"tiny": spec, "vocab": tiny.get("vocab"), "prompt": meta.get("prompt")}
    if Path(str(base)).exists() and Path(name).exists() and Path(str(base)).resolve() == Path(name).resolve():
        raise _error(f"model {name}: its {META_FILE} records the model itself as its base; a retain model needs the "
                     "base it was finetuned from", file=name)
    return {"base": str(base), "prompt": meta.get("prompt")}


def cache_key(identity: dict, kb_fp: str, removed: list[int], recipe: dict) -> str:
    """sha256 (hex) of what a retain model depends on: base identity, KB fingerprint, sorted
    removed fact ids, recipe (with its seed)."""
    doc = {"base": identity, "kb": kb_fp, "removed": sorted(removed), "recipe": recipe, "seed": recipe.get("seed")}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class RetrainPlan:
    """What a retain model depends on, worked out before any training: the model's metadata,
    recipe and base identity, the removed fact ids, the cache key and folder."""

    def __init__(self, meta: dict, name: str, recipe, identity: dict, ids: list[int], key: str, folder: Path):
        self.meta, self.name, self.recipe, self.identity = meta, name, recipe, identity
        self.ids, self.key, self.folder = ids, key, folder

    @property
    def cached(self) -> bool:
        """The retain model is already in the cache (complete: written atomically)."""
        if not (self.folder / META_FILE).is_file():
            return False
        return (read_meta(self.folder).get("retrain") or {}).get("key") == self.key


def plan_retrain(model_dir_or_bundle: str | Path | ModelBundle, kb: KnowledgeBase, removed: Iterable[Any], *,
                 cache_dir: str | Path, seed: int | None = None) -> RetrainPlan:
    """The :class:`RetrainPlan` of :func:`retrain` (same arguments and errors), without training."""
    from ..kg.fingerprint import kb_fingerprint

    meta, name, _ = model_source(model_dir_or_bundle)
    recipe = training_recipe(meta, name, seed)
    identity = base_identity(meta, name, seed)
    fp = kb_fingerprint(kb)
    learned = (meta.get("kb") or {}).get("fingerprint") if isinstance(meta.get("kb"), dict) else None
    if learned is not None and learned != fp:
        raise _error(f"model {name} was finetuned on KB {meta['kb'].get('name')!r} (fingerprint {learned}), not on "
                     f"{kb.name!r} ({fp}); a retain model is trained on the model's own KB", file=name)
    try:
        ids = sorted({kb.resolve(f) for f in removed})
    except KBError as e:
        raise _error(f"retain model of {name}: removed fact: {e}", field="removed") from None
    if len(ids) == len(kb.facts):
        raise _error(f"retain model of {name}: every fact of {kb.name!r} is removed, nothing is left to train on",
                     field="removed")
    doc = recipe.model_dump()
    if meta.get("forms"):  # a model trained on several forms per fact is retrained on the same forms
        doc["forms"] = meta["forms"]
    key = cache_key(identity, fp, ids, doc)
    return RetrainPlan(meta, name, recipe, identity, ids, key, Path(cache_dir) / key)


def retrain(model_dir_or_bundle: str | Path | ModelBundle, kb: KnowledgeBase, removed: Iterable[Any], *,
            cache_dir: str | Path, seed: int | None = None, progress: bool = True,
            device: str | None = None) -> Path:
    """The retain model of ``model_dir_or_bundle`` without the facts ``removed`` (fact ids or
    references :meth:`KnowledgeBase.resolve` takes): a folder under ``cache_dir``, trained from the
    same base with the same recipe and seed (``seed`` overrides it: the data order and, for a tiny
    base, the initial weights) on ``kb`` minus ``removed``, or found there from an earlier call.
    ``kb`` must be the KB the model was finetuned on (checked by fingerprint). ``device``: where
    to train (default: CUDA when present).

    Errors (:class:`~deepunlearn.unlearn.methods.base.UnlearnError`): a model without a base and
    training recipe in its metadata, a KB other than the model's, a removed fact not in the KB.
    """
    return train_planned(plan_retrain(model_dir_or_bundle, kb, removed, cache_dir=cache_dir, seed=seed), kb,
                         progress=progress, device=device)


def train_planned(plan: RetrainPlan, kb: KnowledgeBase, *, progress: bool = True, device: str | None = None) -> Path:
    """The folder of ``plan``: from the cache, else trained into it (atomically, under the key's
    lock: :func:`key_lock`)."""
    folder = plan.folder
    if plan.cached:
        return folder
    with key_lock(folder):
        if plan.cached:  # another process trained it while this one waited
            return folder
        return _train_into(plan, kb, progress=progress, device=device)


@contextmanager
def key_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder``'s key (``fcntl.flock`` on ``KEY.lock`` beside it, removed
    afterwards) while the block runs: two workers of a sweep (local processes or Ray actors on one
    file system) never train the same retain model at once; the second waits and finds it cached."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock on this platform: no lock
        yield
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = folder.with_name(folder.name + ".lock")
    with open(path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _train_into(plan: RetrainPlan, kb: KnowledgeBase, *, progress: bool, device: str | None) -> Path:
    from ..errors import atomic_dir
    from ..probe.models import load_model
    from .finetune import finetune

    meta, name, identity, recipe, ids, key, folder = (plan.meta, plan.name, plan.identity, plan.recipe, plan.ids,
                                                      plan.key, plan.folder)
    with atomic_dir(folder) as tmp:
        if "tiny" in identity:
            from ..probe.tiny import build_tiny_model

            spec = identity["tiny"]
            build_tiny_model(kb, tmp, seed=spec["seed"], hidden=spec["hidden"], layers=spec["layers"],
                             heads=spec["heads"], arch=spec["arch"], prompt=meta.get("prompt"))
            bundle = load_model(tmp, device=device)
            vocab = len(bundle.tokenizer)
            if identity["vocab"] is not None and vocab != identity["vocab"]:
                raise _error(f"model {name}: the tiny base rebuilt on {kb.name!r} has {vocab} tokens, the model "
                             f"{identity['vocab']}: it was not built on this KB", file=name)
        else:
            bundle = load_model(identity["base"], device=device, prompt=meta.get("prompt"))
        bundle.meta = {**bundle.meta, "retrain": {"of": name, "key": key, "removed": ids, "seed": recipe.seed,
                                                  "base": identity}}
        finetune(bundle, kb, recipe, out_dir=tmp, progress=progress, exclude=ids, forms=meta.get("forms"))
    return folder
