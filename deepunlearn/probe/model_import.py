"""Import a GGUF model into a Hugging Face checkpoint folder once (:func:`import_gguf`), and say
what a model is before loading it (:func:`model_info`): the work behind ``deepunlearn model
import|info`` (:mod:`deepunlearn.probe.cli.model`, whose docstring describes both in full)."""

from __future__ import annotations

import json
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any

IMPORT_DTYPES = ("fp32", "bf16", "fp16")


def import_gguf(file: str | Path, out_dir: str | Path, *, dtype: str = "fp32", force: bool = False,
                bundle=None) -> dict[str, Any]:
    """Convert a GGUF file (or a folder holding one) into a Hugging Face checkpoint folder
    ``out_dir`` (see :mod:`deepunlearn.probe.cli.model`); returns the ``--json`` object. Every failure is a
    UserError (ModelLoadError for the file, CLIError for ``-o``) and leaves ``out_dir`` as it was.
    ``bundle``: this file already loaded with :func:`load_model` (spares a second long load)."""
    from ..cli import CLIError
    from ..errors import atomic_dir, atomic_write_text
    from .gguf import check_gguf, file_sha256, find_gguf
    from .models import META_FILE, META_FORMAT, load_model, quiet_hf
    from .sources import ModelLoadError

    src = Path(file).expanduser()
    if not src.exists():
        raise ModelLoadError(f"{src}: no such file", file=src)
    gguf = find_gguf(src) if src.is_dir() else src
    if gguf is None:
        raise ModelLoadError(f"{src}: no GGUF file in this folder", file=src)
    check_gguf(gguf)  # magic and header before anything else (a non-.gguf name included)
    from ..outputs import check_output, model_dir

    out = Path(out_dir).expanduser()
    if out.is_dir() and not out.is_symlink() and gguf.resolve().is_relative_to(out.resolve()):
        raise CLIError(f"-o {out}: holds the GGUF file being imported; choose another folder", file=out,
                       field="-o")
    check_output(out, force=force, folder=True, ours=model_dir, what="a model folder of this tool (no deepunlearn.json)",
                 inputs={"GGUF": src})
    t0 = time.perf_counter()
    sha = file_sha256(gguf)
    with atomic_dir(out) as tmp:
        if bundle is None:
            bundle = load_model(gguf, device="cpu", dtype=dtype)
        with quiet_hf():
            bundle.model.save_pretrained(tmp)
            bundle.tokenizer.save_pretrained(tmp)
        meta = {"format": META_FORMAT, "version": 1, "origin": {"gguf": gguf.name, "sha256": sha}}
        atomic_write_text(tmp / META_FILE, json.dumps(meta, indent=2) + "\n")
    return {"output": str(out), "architecture": bundle.model.config.model_type,
            "parameters": bundle.num_parameters(), "dtype": str(bundle.dtype).removeprefix("torch."),
            "seconds": round(time.perf_counter() - t0, 3)}


def _safetensors_dtypes(folder: Path) -> Counter:
    """Tensor dtypes of the folder's safetensors files, read from their JSON headers alone."""
    counts: Counter = Counter()
    for f in sorted(folder.glob("*.safetensors")):
        try:
            with open(f, "rb") as h:
                (n,) = struct.unpack("<Q", h.read(8))
                header = json.loads(h.read(min(n, 1 << 28)))
        except (OSError, ValueError, struct.error):
            continue
        counts.update(v.get("dtype") for k, v in header.items() if k != "__metadata__" and isinstance(v, dict))
    return counts


def _tokenizer_info(tok) -> dict[str, Any]:
    return {"size": len(tok), "pad": tok.pad_token, "eos": tok.eos_token, "bos": tok.bos_token,
            "chat_template": bool(getattr(tok, "chat_template", None))}


def model_info(name: str | Path, *, trust_remote_code: bool = False) -> dict[str, Any]:
    """What ``deepunlearn model info`` prints for a hub name, a checkpoint folder or a GGUF file
    (see :mod:`deepunlearn.probe.cli.model`); no weights are loaded. Errors are ModelLoadError naming the
    file: no such folder, an unknown architecture, a damaged GGUF or JSON file."""
    from .gguf import find_gguf, gguf_summary
    from .model_headers import folder_summary
    from .models import quiet_hf, read_meta
    from .prompts import PromptFormat
    from .sources import ModelLoadError, check_folder, first_line, looks_local, resolve_hub

    t0 = time.perf_counter()
    text = str(name)
    path = Path(text).expanduser()
    if not path.exists() and (isinstance(name, Path) or looks_local(text)):
        raise ModelLoadError(f"no such folder or file: {text}", file=path)
    gguf = find_gguf(path) if path.exists() else None
    if gguf is not None:
        info = gguf_summary(gguf)
        info.update(source="gguf", model=str(gguf))
        fmt, where = PromptFormat.for_model(info["architecture"], text), "family"
    else:
        folder = path if path.exists() else resolve_hub(text)
        meta, config = {}, {}
        if folder is not None:
            config = check_folder(folder, trust_remote_code=trust_remote_code, torch_free=True)
            meta = read_meta(folder)
        source = str(folder) if folder is not None else text
        fast = folder_summary(folder, config) if folder is not None and not config.get("auto_map") else None
        if fast is not None:  # from the files' headers: no torch, no transformers (well under a second)
            return _finish({**fast, "source": "folder", "model": source}, meta, folder, text, t0)
        import torch
        from transformers import AutoModelForCausalLM

        from .hf_load import load_config, load_tokenizer

        with quiet_hf(errors_only=True):
            try:  # check_folder above read the folder's files
                cfg = load_config(source, trust_remote_code=trust_remote_code, check=False)
                with torch.device("meta"):
                    skeleton = AutoModelForCausalLM.from_config(cfg, trust_remote_code=trust_remote_code)
            except Exception as e:  # noqa: BLE001 - a config transformers cannot build is the file's fault
                raise ModelLoadError(f"{source}: not a causal-LM config transformers can build ({first_line(e)})",
                                     file=source) from None
            tok = load_tokenizer(source, trust_remote_code=trust_remote_code)
        text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        stored = _safetensors_dtypes(folder) if folder is not None else Counter()
        dtype = ", ".join(f"{k} ({v})" for k, v in stored.most_common()) if stored else \
            str(getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None) or "unknown").removeprefix("torch.")
        params = sum(p.numel() for p in skeleton.parameters())  # tied weights count once
        info = {"architecture": cfg.model_type, "class": type(skeleton).__name__,
                "parameters": int(params), "layers": getattr(text_cfg, "num_hidden_layers", None),
                "hidden_size": getattr(text_cfg, "hidden_size", None),
                "vocab_size": getattr(text_cfg, "vocab_size", None), "dtype": dtype,
                "tokenizer": _tokenizer_info(tok), "source": "folder" if folder is not None else "hub",
                "model": source}
        return _finish(info, meta, folder, text, t0)
    info["prompt_format"] = {**fmt.describe(), "source": where}
    info["seconds"] = round(time.perf_counter() - t0, 3)
    return info


def _finish(info: dict[str, Any], meta: dict, folder: Path | None, text: str, t0: float) -> dict[str, Any]:
    """A folder's or hub model's info with its answer format (recorded, else the family's)."""
    from .models import prompt_from_meta
    from .prompts import PromptFormat

    recorded = prompt_from_meta(meta, folder) if folder is not None else None
    fmt, where = (recorded, "recorded") if recorded is not None else \
        (PromptFormat.for_model(info["architecture"], text), "family")
    if meta.get("origin") is not None:
        info["origin"] = meta["origin"]
    info["prompt_format"] = {**fmt.describe(), "source": where}
    info["seconds"] = round(time.perf_counter() - t0, 3)
    return info


