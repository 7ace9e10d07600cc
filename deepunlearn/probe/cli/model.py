"""``deepunlearn model import|info``: turn a GGUF file into a Hugging Face folder once, and say
what a model is before loading it.

``deepunlearn model import FILE.gguf -o DIR [--dtype fp32|bf16|fp16] [--force] --json`` loads
the GGUF file (dequantised, ~15-30 s for SmolLM2-135M) and writes DIR as a normal checkpoint
folder: ``model.safetensors``, the tokenizer files, ``config.json`` (without
``quantization_config``), ``generation_config.json`` and ``deepunlearn.json`` recording
``origin: {"gguf": name, "sha256": ...}`` and no prompt (the family's format applies, as for any
model not finetuned here). Later loads of DIR take about a second. DIR is written through
:func:`deepunlearn.errors.atomic_dir`: on any failure nothing of it is left and an existing DIR
is untouched. An existing DIR is replaced only when it is a model folder (it holds
``config.json``) or empty; any other non-empty folder is refused unless ``--force`` (so a typo
cannot wipe a folder of other files; a symbolic link likewise), and a DIR holding the GGUF file
itself always is (:func:`deepunlearn.outputs.check_output`).
Prints ``{"output", "architecture", "parameters", "dtype", "seconds"}``.

``deepunlearn model info NAME|DIR|FILE.gguf [--json]`` prints architecture (``model_type`` and
class), parameters (counted on the ``meta`` device from the config, or from a GGUF file's tensor
infos: no weights are read), layers, hidden size, vocabulary, the stored weights' dtype, the
tokenizer (size, pad/eos/bos, chat template) and the answer format a load would use (name,
pieces, and whether it is recorded in ``deepunlearn.json`` or the family's).
"""

from __future__ import annotations

import argparse
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
    ``out_dir`` (see the module docstring); returns the ``--json`` object. Every failure is a
    UserError (ModelLoadError for the file, CLIError for ``-o``) and leaves ``out_dir`` as it was.
    ``bundle``: this file already loaded with :func:`load_model` (spares a second long load)."""
    from ...cli import CLIError
    from ...errors import atomic_dir, atomic_write_text
    from ..gguf import check_gguf, file_sha256, find_gguf
    from ..models import META_FILE, META_FORMAT, load_model, quiet_hf
    from ..sources import ModelLoadError

    src = Path(file).expanduser()
    if not src.exists():
        raise ModelLoadError(f"{src}: no such file", file=src)
    gguf = find_gguf(src) if src.is_dir() else src
    if gguf is None:
        raise ModelLoadError(f"{src}: no GGUF file in this folder", file=src)
    check_gguf(gguf)  # magic and header before anything else (a non-.gguf name included)
    from ...outputs import check_output, model_dir

    out = Path(out_dir).expanduser()
    if out.is_dir() and not out.is_symlink() and gguf.resolve().is_relative_to(out.resolve()):
        raise CLIError(f"-o {out}: holds the GGUF file being imported; choose another folder", file=out,
                       field="-o")
    check_output(out, force=force, folder=True, ours=model_dir, what="a model folder (no config.json)")
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
    (see the module docstring); no weights are loaded. Errors are ModelLoadError naming the
    file: no such folder, an unknown architecture, a damaged GGUF or JSON file."""
    from ..gguf import find_gguf, gguf_summary
    from ..model_headers import folder_summary
    from ..models import prompt_from_meta, quiet_hf, read_meta
    from ..prompts import PromptFormat
    from ..sources import ModelLoadError, check_folder, first_line, looks_local, resolve_hub

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
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        with quiet_hf(errors_only=True):
            try:
                cfg = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
                with torch.device("meta"):
                    skeleton = AutoModelForCausalLM.from_config(cfg, trust_remote_code=trust_remote_code)
            except Exception as e:  # noqa: BLE001 - a config transformers cannot build is the file's fault
                raise ModelLoadError(f"{source}: not a causal-LM config transformers can build ({first_line(e)})",
                                     file=source) from None
            try:
                tok = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
            except Exception as e:  # noqa: BLE001
                raise ModelLoadError(f"cannot load the tokenizer of {source!r}: {first_line(e)}", file=source) from None
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
    from ..models import prompt_from_meta
    from ..prompts import PromptFormat

    recorded = prompt_from_meta(meta, folder) if folder is not None else None
    fmt, where = (recorded, "recorded") if recorded is not None else \
        (PromptFormat.for_model(info["architecture"], text), "family")
    if meta.get("origin") is not None:
        info["origin"] = meta["origin"]
    info["prompt_format"] = {**fmt.describe(), "source": where}
    info["seconds"] = round(time.perf_counter() - t0, 3)
    return info


def _info_text(d: dict[str, Any]) -> str:
    tok, fmt = d["tokenizer"], d["prompt_format"]
    return "\n".join([
        f"{d['model']}: {d['architecture']} ({d['class']}), {d['parameters']:,} parameters",
        f"  layers {d['layers']}, hidden size {d['hidden_size']}, vocabulary {d['vocab_size']}, weights {d['dtype']}",
        f"  tokenizer: {tok['size']} tokens, pad {tok['pad']!r}, eos {tok['eos']!r}, bos {tok['bos']!r}, "
        f"chat template: {'yes' if tok['chat_template'] else 'no'}",
        f"  answer format: {fmt['name']} {fmt['spec']!r} ({fmt['source']})",
    ])


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_json, add_threads

    p = sub.add_parser("model", help="import a GGUF model into a checkpoint folder, or describe a model")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    msub.required = True
    imp = msub.add_parser("import", help="convert a GGUF file into a Hugging Face checkpoint folder (loads in ~1 s)")
    imp.add_argument("file", metavar="FILE.gguf", help="the GGUF file (or a folder holding exactly one)")
    imp.add_argument("-o", "--output", required=True, metavar="DIR",
                     help="the checkpoint folder to write (replaced only on success; see --force)")
    imp.add_argument("--dtype", choices=IMPORT_DTYPES, default="fp32",
                     help="dtype of the stored, dequantised weights (default: fp32)")
    imp.add_argument("--force", action="store_true",
                     help="replace DIR even when it is a non-empty folder that is not a model folder, or a symbolic "
                          "link (the link itself is replaced)")
    add_threads(imp)
    add_json(imp)
    imp.set_defaults(handler=_import)
    info = msub.add_parser("info", help="architecture, parameters, dtype, tokenizer and answer format of a model "
                                        "(no weights are loaded)")
    info.add_argument("model", metavar="NAME|DIR|FILE.gguf", help="hub name, checkpoint folder or GGUF file")
    info.add_argument("--trust-remote-code", action="store_true",
                      help="allow a config that names its own Python code (auto_map)")
    add_json(info)
    info.set_defaults(handler=_info)


def _import(args: argparse.Namespace) -> int:
    from ...cli import apply_threads, emit

    apply_threads(args)
    out = import_gguf(args.file, args.output, dtype=args.dtype, force=args.force)
    emit(args, out, lambda: (f"imported {args.file} -> {out['output']} ({out['architecture']}, "
                             f"{out['parameters']:,} parameters, {out['dtype']}, {out['seconds']:.1f}s)"))
    return 0


def _info(args: argparse.Namespace) -> int:
    from ...cli import emit

    out = model_info(args.model, trust_remote_code=args.trust_remote_code)
    emit(args, out, lambda: _info_text(out))
    return 0
