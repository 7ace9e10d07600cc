"""What a checkpoint folder says about its model, read from its files alone: no torch, no
transformers module executed, so ``deepunlearn model info`` answers in well under a second and
the checks before a load cost milliseconds (torch and transformers are imported by the load itself).

transformers' tables of architectures and classes are read from its source
(:mod:`.hf_tables`). :func:`folder_summary` is ``model info``'s description of a folder whose
config names its sizes and whose tokenizer is a ``tokenizer.json``; ``None`` (anything it cannot
state for sure) sends ``model info`` to transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import load_json
from .hf_load import not_interrupt
from .hf_tables import auto_table
from .model_bounds import LAYER_KEYS, WIDTH_KEYS, read_safetensors_header
from .sources import ModelLoadError


def safetensors_summary(folder: Path) -> tuple[int, dict[str, int]] | None:
    """Elements and dtype counts of the folder's safetensors headers; ``None`` without any."""
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if not files:
        return None
    total, dtypes = 0, {}
    for f in files:
        for key, info in read_safetensors_header(f).items():
            if key == "__metadata__" or not isinstance(info, dict):
                continue
            shape = info.get("shape")
            if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
                return None
            n = 1
            for d in shape:
                n *= d
            total += n
            dtypes[str(info.get("dtype"))] = dtypes.get(str(info.get("dtype")), 0) + 1
    return total, dtypes


def _token(v: Any) -> str | None:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def tokenizer_summary(folder: Path) -> dict[str, Any] | None:
    """Size (added tokens included), pad/eos/bos and chat template of a ``tokenizer.json``
    tokenizer, read with the tokenizers library (no transformers); ``None`` for any other kind."""
    tok_file, cfg_file = folder / "tokenizer.json", folder / "tokenizer_config.json"
    if not (tok_file.is_file() and cfg_file.is_file()) or (folder / "special_tokens_map.json").exists():
        return None
    cfg = load_json(cfg_file, error=ModelLoadError)
    if not isinstance(cfg, dict) or cfg.get("auto_map") or cfg.get("added_tokens_decoder"):
        return None  # added tokens declared beside tokenizer.json: transformers' arithmetic decides
    try:
        from tokenizers import Tokenizer

        size = Tokenizer.from_file(str(tok_file)).get_vocab_size(with_added_tokens=True)
    except BaseException as e:  # noqa: BLE001 - a Rust panic too; transformers' path names the file's problem
        not_interrupt(e)
        return None
    chat = bool(cfg.get("chat_template")) or (folder / "chat_template.jinja").is_file() \
        or (folder / "chat_template.json").is_file()
    return {"size": size, "pad": _token(cfg.get("pad_token")),
            "eos": _token(cfg.get("eos_token")), "bos": _token(cfg.get("bos_token")), "chat_template": chat}


def folder_summary(folder: Path, config: dict) -> dict[str, Any] | None:
    """``model info``'s fields of a checkpoint folder from its headers, or ``None`` when a field
    would need transformers (a size left to the config's defaults, no safetensors files, tied
    weights stored twice, another kind of tokenizer)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = next((text[k] for k in LAYER_KEYS if isinstance(text.get(k), int)), None)
    width = next((text[k] for k in WIDTH_KEYS if isinstance(text.get(k), int)), None)
    vocab = text.get("vocab_size")
    classes = auto_table("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
    model_type = config.get("model_type")
    if None in (layers, width) or not isinstance(vocab, int) or not classes or model_type not in classes:
        return None
    if text is not config:  # a multimodal config: transformers picks the class and counts the towers
        return None
    held = safetensors_summary(folder)
    tok = tokenizer_summary(folder)
    if held is None or tok is None:
        return None
    params, dtypes = held
    if config.get("tie_word_embeddings", True) and _stores_both_embeddings(folder):
        return None  # a tied head stored twice would count twice here, once in the model
    dtype = ", ".join(f"{k} ({v})" for k, v in sorted(dtypes.items(), key=lambda kv: -kv[1]))
    return {"architecture": model_type, "class": classes[model_type], "parameters": params, "layers": layers,
            "hidden_size": width, "vocab_size": vocab, "dtype": dtype, "tokenizer": tok}


def _stores_both_embeddings(folder: Path) -> bool:
    names: set[str] = set()
    for f in sorted(folder.glob("*.safetensors")):
        names.update(read_safetensors_header(f))
    return any(n.endswith("lm_head.weight") for n in names) and any(n.endswith("embed_tokens.weight") for n in names)
