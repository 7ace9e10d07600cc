"""How many facts one probe batch may hold: the per-row memory cost of a probe and the batch size
that fits the free accelerator memory ("probe batches sized to memory").

A probe row costs (see :mod:`deepunlearn.probe.probing`):

* **logits**: the model's logits of the kept positions (``keep = longest answer + 1`` for the
  model's own forward; every position for a ``model_fn``), in the model's dtype, then the
  gathered answer positions (model dtype), their float32 copy and its log-softmax (float32):
  ``positions x vocab x (2 d + 8)`` bytes with ``d`` the dtype's bytes. A ``model_fn`` (WHP mixes
  two models' distributions in float64) is charged ``positions x vocab x (2 d + 64)``: both
  models' logits and up to seven float64 ``[T, V]`` tensors of :func:`whp_logprobs`;
* **activations** of inference (nothing is kept for a backward pass): about one layer's
  transient tensors, ``seq x (d (6 h + 3 I) + 4 h)`` bytes (hidden states, q/k/v, attention out,
  the MLP's up/gate/act, a float32 norm), ``h`` the width and ``I`` the MLP's;
* **KV cache** in a mode that decodes (``generate``, ``compose``: ``ProbeModeSpec.decodes``):
  ``2 x layers x (seq + 10) x kv_width x d``.

:func:`auto_batch_size` divides the free memory (times a safety fraction) by that cost. On CPU
the probe keeps its fixed default (:data:`CPU_BATCH`): host memory is not the limit there, and
larger batches only pad more.
"""

from __future__ import annotations

from typing import Any

from .modes import probe_mode

#: the probe's batch size on CPU and when sizing is not possible
CPU_BATCH = 64
#: the largest batch :func:`auto_batch_size` picks (more rows buy no speed once the GPU is busy)
MAX_AUTO_BATCH = 1024
#: share of the free memory a probe batch may take (the allocator fragments; other tensors appear)
FREE_FRACTION = 0.8
#: positions and sequence length assumed when the batch's are not known yet (EDU-RELAT answers
#: are 1-4 tokens after a 10-30 token question with BPE tokenizers)
DEFAULT_POSITIONS = 16
DEFAULT_SEQ = 64


def config_dims(config: Any) -> dict[str, int]:
    """``hidden``, ``intermediate``, ``layers``, ``heads``, ``kv`` (key/value width) and ``vocab`` of
    a transformers config (GPT-2's ``n_embd``/``n_inner`` included: an unset MLP width is 4 h)."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    h = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0) or 0)
    inter = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * h
    heads = int(getattr(cfg, "num_attention_heads", 0) or getattr(cfg, "n_head", 0) or 1)
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or (h // heads if heads else h))
    return {"hidden": h, "intermediate": int(inter), "layers": int(getattr(cfg, "num_hidden_layers", 0) or 0),
            "heads": heads, "kv": kv_heads * head_dim, "vocab": int(getattr(cfg, "vocab_size", 0) or 0)}


def probe_row_bytes(config: Any, *, dtype_bytes: int = 2, positions: int = DEFAULT_POSITIONS,
                    seq: int = DEFAULT_SEQ, mode: str = "exact", model_fn: bool = False) -> int:
    """Bytes one probe row needs at its peak (module docstring), for a transformers config.

    >>> from transformers import LlamaConfig
    >>> cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    ...                   vocab_size=1000)
    >>> probe_row_bytes(cfg, dtype_bytes=2, positions=4, seq=10)   # 4*1000*12 + 10*(2*(384+384) + 256)
    65920
    """
    d = config_dims(config)
    per_logit = 2 * dtype_bytes + (64 if model_fn else 8)
    kept = seq if model_fn else positions
    logits = kept * d["vocab"] * per_logit
    acts = seq * (dtype_bytes * (6 * d["hidden"] + 3 * d["intermediate"]) + 4 * d["hidden"])
    kv = 2 * d["layers"] * (seq + 10) * d["kv"] * dtype_bytes if probe_mode(mode).decodes else 0
    return int(logits + acts + kv)


def auto_batch_size(free_bytes: int, row_bytes: int, *, fraction: float = FREE_FRACTION,
                    cap: int = MAX_AUTO_BATCH) -> int:
    """The probe batch for ``free_bytes`` of free memory at ``row_bytes`` a row: the largest that
    keeps the batch under ``fraction`` of the free memory, at least 1, at most ``cap``.

    >>> auto_batch_size(10 * 2**30, 2**20)       # 10 GiB free, 1 MiB a row: 8192 fit, capped
    1024
    >>> auto_batch_size(100 * 2**20, 2**20)      # 100 MiB free: 80 rows
    80
    >>> auto_batch_size(0, 2**20)                # nothing free: one row at a time
    1
    """
    if row_bytes <= 0:
        return cap
    return max(1, min(cap, int(max(0, free_bytes) * fraction) // int(row_bytes)))


def cuda_free_bytes(device: Any) -> int:
    """Free memory of a CUDA device as the caching allocator can use it: what the driver reports
    free plus what torch reserved but does not use. Only call it for a CUDA device."""
    import torch

    free, _total = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def resolve_batch_size(batch_size: int | str | None, model: Any, device: Any, *, positions: int, seq: int,
                       mode: str = "exact", model_fn: bool = False, free_bytes: int | None = None) -> int:
    """The probe's batch size: an integer is used as given; ``None`` or ``"auto"`` sizes it to the
    free memory on CUDA (``free_bytes`` overrides the measurement, for tests) and is
    :data:`CPU_BATCH` elsewhere, so CPU runs never touch CUDA."""
    if batch_size is not None and batch_size != "auto":
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, None or 'auto', got {batch_size!r}")
        return batch_size
    if getattr(device, "type", str(device)) != "cuda" and free_bytes is None:
        return CPU_BATCH
    import torch

    dtype = next(model.parameters()).dtype
    dtype_bytes = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else 4
    row = probe_row_bytes(model.config, dtype_bytes=dtype_bytes, positions=positions, seq=seq, mode=mode,
                          model_fn=model_fn)
    free = cuda_free_bytes(device) if free_bytes is None else free_bytes
    return auto_batch_size(free, row)
