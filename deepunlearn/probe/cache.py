"""On-disk cache of the probe of a model before unlearning.

Every unlearning run starts from the same model's knowledge base, so the probe of a
(model, KB) pair is computed once and kept. The key is a fingerprint of what the result
depends on: the model's weights, config, tokenizer and prompt format, the KB's facts and
questions, the probe mode, the form selection (and the modes ``any`` combines) and the facts probed; change
any of them and the entry is not used. The KB fingerprint covers the KB's forms and their splits.
A probe with today's selection (``forms`` ``None`` or ``"default"``, mode exact or generate)
keeps the key it had before forms existed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import UserError, atomic_write_text, dumps, load_json
from ..kg.kb import KnowledgeBase
from .fingerprint import kb_fingerprint, model_fingerprint
from .models import ModelBundle
from .probing import Mode, ProbeResult, probe

CACHE_FORMAT = "deepunlearn-probe-cache"


class CacheDirError(UserError):
    """A cache folder that is a file (or lies under one)."""


def check_cache_dir(path: str | Path, *, where: str) -> Path:
    """``path`` as a folder to cache in, or a CacheDirError naming ``where`` (the flag, field or
    environment variable) when it, or the nearest part of it that exists, is a file: caching
    under it would fail later, after the model has loaded, with "Not a directory"."""
    p = Path(path).expanduser()
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                what = "is a file" if q == p else f"lies under {q}, a file"
                raise CacheDirError(f"{where} {p}: {what}, expected a folder", file=q, field=where)
            break
    return p


def default_cache_dir() -> Path:
    """``$DEEPUNLEARN_CACHE/probe``, else ``~/.cache/deepunlearn/probe``."""
    root = os.environ.get("DEEPUNLEARN_CACHE")
    base = check_cache_dir(root, where="DEEPUNLEARN_CACHE") if root else Path.home() / ".cache" / "deepunlearn"
    return base / "probe"


def probe_key(bundle: ModelBundle, kb: KnowledgeBase, mode: str, fact_ids: Iterable[int] | None = None, *,
              forms: str | None = None, any_modes: Sequence[str] | None = None) -> str:
    """The cache key of probing ``bundle`` on ``kb`` (module docstring)."""
    ids = "all" if fact_ids is None else ",".join(str(int(i)) for i in fact_ids)
    parts = [model_fingerprint(bundle), kb_fingerprint(kb), mode, bundle.prompt.model_dump_json(), ids]
    if forms is not None and str(forms).strip() != "default":
        parts.append(f"forms={forms}")
    if any_modes is not None:
        parts.append("any=" + ",".join([any_modes] if isinstance(any_modes, str) else list(any_modes)))
    from .answer_rule import rule_of_bundle

    if rule_of_bundle(bundle).key():
        parts.append(rule_of_bundle(bundle).key())
    text = "|".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def cached_probe(
    bundle: ModelBundle,
    kb: KnowledgeBase,
    *,
    mode: Mode = "exact",
    cache_dir: str | Path | None = None,
    fact_ids: Iterable[int] | None = None,
    forms: str | None = None,
    any_modes: Sequence[str] | None = None,
    **kw,
) -> ProbeResult:
    """:func:`~deepunlearn.probe.probing.probe` with its result kept on disk under ``cache_dir``
    (:func:`default_cache_dir` by default). Meant for the probe before unlearning; a
    ``model_fn`` cannot be cached (it is not part of the key) and is refused."""
    if kw.get("model_fn") is not None:
        raise ValueError("cached_probe caches the model's own probe; a model_fn cannot be cached")
    kw.pop("model_fn", None)
    ids = None if fact_ids is None else [int(i) for i in fact_ids]
    key = probe_key(bundle, kb, mode, ids, forms=forms, any_modes=any_modes)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"probe-{key}.json"
    cached = read_entry(path, key)
    if cached is not None:
        return cached
    result = probe(bundle, kb, ids, mode=mode, forms=forms, any_modes=any_modes, **kw)
    doc = {"format": CACHE_FORMAT, "key": key, "model": bundle.name, "kb": kb.name, "mode": mode, "forms": forms,
           "result": result.to_json()}
    atomic_write_text(path, dumps(doc))
    return result


def read_entry(path: Path, key: str) -> ProbeResult | None:
    """The probe result kept in the cache file ``path`` under ``key``, or ``None`` when there is
    none or it cannot be used (truncated, not JSON, not UTF-8, another key or format, a field
    missing or mistyped): such an entry is recomputed and overwritten, never an error."""
    if not path.is_file():
        return None
    try:
        data = load_json(path)
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("key") != key:
            return None
        return ProbeResult.from_json(data.get("result"), source=str(path))
    except (UserError, OSError):
        return None
