"""On-disk cache of the probe of a model before unlearning.

Every unlearning run starts from the same model's knowledge base, so the probe of a
(model, KB) pair is computed once and kept. The key is a fingerprint of what the result
depends on: the model's weights, config, tokenizer and prompt format, the KB's facts and
questions, the probe mode and the facts probed; change any of them and the entry is not used.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from ..kg.kb import KnowledgeBase
from .fingerprint import kb_fingerprint, model_fingerprint
from .models import ModelBundle
from .probing import Mode, ProbeResult, probe

CACHE_FORMAT = "deepunlearn-probe-cache"


def default_cache_dir() -> Path:
    """``$DEEPUNLEARN_CACHE/probe``, else ``~/.cache/deepunlearn/probe``."""
    root = os.environ.get("DEEPUNLEARN_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "deepunlearn"
    return base / "probe"


def probe_key(bundle: ModelBundle, kb: KnowledgeBase, mode: str, fact_ids: Iterable[int] | None = None) -> str:
    """The cache key of probing ``bundle`` on ``kb``."""
    ids = "all" if fact_ids is None else ",".join(str(int(i)) for i in fact_ids)
    text = "|".join([model_fingerprint(bundle), kb_fingerprint(kb), mode, bundle.prompt.model_dump_json(), ids])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def cached_probe(
    bundle: ModelBundle,
    kb: KnowledgeBase,
    *,
    mode: Mode = "exact",
    cache_dir: str | Path | None = None,
    fact_ids: Iterable[int] | None = None,
    **kw,
) -> ProbeResult:
    """:func:`~deepunlearn.probe.probing.probe` with its result kept on disk under ``cache_dir``
    (:func:`default_cache_dir` by default). Meant for the probe before unlearning; a
    ``model_fn`` cannot be cached (it is not part of the key) and is refused."""
    if kw.get("model_fn") is not None:
        raise ValueError("cached_probe caches the model's own probe; a model_fn cannot be cached")
    kw.pop("model_fn", None)
    ids = None if fact_ids is None else [int(i) for i in fact_ids]
    key = probe_key(bundle, kb, mode, ids)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"probe-{key}.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") == CACHE_FORMAT and data.get("key") == key:
                return ProbeResult.from_json(data["result"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # an unreadable entry is recomputed and overwritten
    result = probe(bundle, kb, ids, mode=mode, **kw)
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"format": CACHE_FORMAT, "key": key, "model": bundle.name, "kb": kb.name, "mode": mode,
           "result": result.to_json()}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(path)
    return result
