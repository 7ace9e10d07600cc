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
from typing import Any

from ..model_import import IMPORT_DTYPES, import_gguf, model_info


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
