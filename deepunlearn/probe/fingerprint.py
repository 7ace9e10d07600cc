"""Content fingerprints of knowledge bases and models, the keys of the probe cache.

A model's fingerprint covers its weights, config, tokenizer and prompt format. The weights are
hashed where they live (GPU or CPU) with an exact integer checksum per tensor, so a 7B model
on a GPU is fingerprinted without copying it to the host: each tensor's raw bits, read as
integers, are multiplied by fixed odd pseudo-random 64-bit weights and summed modulo 2**64.
Integer arithmetic makes the sum independent of reduction order, and because every weight is
odd, changing any single element always changes the sum.
"""

from __future__ import annotations

import hashlib
import json

from ..kg.fingerprint import kb_fingerprint  # noqa: F401  (re-exported: the probe cache's key)
from ..kg.kb import KnowledgeBase

_CHUNK = 1 << 24  # elements hashed at a time (bounds the int64 temporaries)
_MIX_A = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64
_MIX_B = -4658895280553007687  # 0xBF58476D1CE4E5B9 as a signed int64


def _int_view(t):
    """The tensor's raw bits as a flat integer tensor of the same element size."""
    import torch

    t = t.detach().contiguous().reshape(-1)
    size = t.element_size()
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    if not t.is_floating_point() and not t.is_complex():
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def tensor_checksum(t) -> int:
    """Exact order-independent checksum of a tensor's bits (an int in ``[0, 2**64)``)."""
    import torch

    flat = _int_view(t)
    total = 0
    for start in range(0, flat.numel(), _CHUNK):
        x = flat[start:start + _CHUNK].to(torch.int64)
        i = torch.arange(start, start + x.numel(), device=x.device, dtype=torch.int64)
        w = i * _MIX_A
        w = (w ^ (w >> 31)) * _MIX_B
        w = w | 1
        total = (total + int((x * w).sum().item())) % (1 << 64)
    return total


def weights_fingerprint(model) -> str:
    """Hash of every parameter and buffer of a model (names, shapes, dtypes and values)."""
    h = hashlib.sha256()
    seen = set()
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if id(t) in seen:  # tied weights count once
            continue
        seen.add(id(t))
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|{tensor_checksum(t)}\n".encode())
    return h.hexdigest()[:32]


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        text = backend.to_str()
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False)
    extra = json.dumps([tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id])
    return hashlib.sha256((text + extra).encode()).hexdigest()[:32]


def config_fingerprint(config) -> str:
    d = {k: v for k, v in config.to_dict().items() if not k.startswith("_") and k != "transformers_version"}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:32]


def model_fingerprint(bundle) -> str:
    """Hash of a loaded model: weights, config, tokenizer and prompt format."""
    parts = [
        weights_fingerprint(bundle.model),
        config_fingerprint(bundle.model.config),
        tokenizer_fingerprint(bundle.tokenizer),
        bundle.prompt.model_dump_json(),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def check_trained_on(bundle, kb: KnowledgeBase, kb_file=None) -> str | None:
    """A warning when ``bundle`` records (in its ``deepunlearn.json``, key ``kb.fingerprint``)
    training on a KB other than ``kb``, else ``None`` (same KB, or nothing recorded: a hub model,
    a checkpoint from elsewhere). The text names the model folder and ``kb_file`` (or the KB's
    name) and says that the results are not comparable; the caller prints it, once.

    Fingerprints are compared on their common prefix, so a 64-hex one recorded elsewhere
    matches the 32-hex :func:`kb_fingerprint` of the same KB."""
    rec = bundle.meta.get("kb") if isinstance(getattr(bundle, "meta", None), dict) else None
    recorded = rec.get("fingerprint") if isinstance(rec, dict) else None
    if not isinstance(recorded, str) or not recorded:
        return None
    current = kb_fingerprint(kb)
    n = min(len(recorded), len(current))
    if recorded[:n].lower() == current[:n]:
        return None
    model = bundle.path if getattr(bundle, "path", None) is not None else bundle.name
    trained = rec.get("name")
    trained = f"KB {trained!r} (fingerprint {recorded[:12]})" if isinstance(trained, str) else \
        f"a KB with fingerprint {recorded[:12]}"
    target = kb_file if kb_file is not None else kb.name
    return (f"model {model} was trained on {trained}, not on {target} (fingerprint {current[:12]}); "
            "its results on this KB are not comparable with its results on the KB it was trained on")
