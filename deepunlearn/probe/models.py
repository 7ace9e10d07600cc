"""Loading causal language models (a hub name or a local checkpoint folder) for probing.

Every model goes through the same path, ``AutoModelForCausalLM.from_pretrained`` and
``AutoTokenizer.from_pretrained``: Phi-1.5 or Llama-3-8b from the hub, a finetuned checkpoint,
or the small model :mod:`deepunlearn.probe.tiny` builds locally. A checkpoint folder may hold
``deepunlearn.json`` (see :func:`save_bundle`): the answer format the model was trained with and
how it was trained, so a finetuned model keeps its format and the unlearning layer can scale its
learning rates to the model's training.

Which answer format a load uses (:func:`load_model`): an explicit ``prompt`` wins; else
``answer_format="recorded"`` takes the checkpoint's ``deepunlearn.json`` and falls back to the
model family's reference format, and ``answer_format="family"`` always takes the family's (the
reference evaluates every checkpoint in its family's format from ``config/model_config.yaml``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .prompts import PromptFormat

#: Values of ``load_model(answer_format=...)`` (the field ``Protocol.answer_format``).
ANSWER_FORMATS = ("recorded", "family")

#: Name of the metadata file saved beside a checkpoint.
META_FILE = "deepunlearn.json"
META_FORMAT = "deepunlearn-model"


class ModelLoadError(UserError, OSError):
    """A model or tokenizer cannot be loaded; the message names the path or hub name."""


@dataclass
class ModelBundle:
    """A causal LM with its tokenizer, prompt format and where it came from.

    ``path`` is the local checkpoint folder (``None`` for a hub model); ``meta`` is the content
    of the folder's ``deepunlearn.json`` (empty when there is none); ``prompt_source`` says where
    ``prompt`` came from: ``"explicit"``, ``"recorded"`` (the checkpoint's file) or ``"family"``.
    """

    model: Any
    tokenizer: Any
    prompt: PromptFormat
    device: str
    name: str
    path: Path | None = None
    meta: dict = field(default_factory=dict)
    prompt_source: str = "explicit"

    @property
    def dtype(self):
        return next(self.model.parameters()).dtype

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def eos_id(self) -> int | None:
        e = self.tokenizer.eos_token_id
        return None if e is None else int(e)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def default_device() -> str:
    """``"cuda"`` when a GPU is present, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


_DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32",
}


def resolve_dtype(dtype, device: str):
    """A torch dtype from ``None`` (bf16 on CUDA when supported, fp16 on older GPUs, fp32 on
    CPU), a torch dtype, or a name such as ``"bf16"`` / ``"float32"``."""
    import torch

    if dtype is None or dtype == "auto":
        if str(device).startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    key = str(dtype).lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: expected one of {sorted(_DTYPES)} or 'auto'")
    return getattr(torch, _DTYPES[key])


def _looks_local(name: str) -> bool:
    """True when ``name`` can only mean a folder: a hub id is ``name`` or ``owner/name``."""
    if name.startswith(("/", "./", "../", "~", ".\\", "..\\")) or name in (".", ".."):
        return True
    if os.sep != "/" and os.sep in name:
        return True
    if len(name) > 1 and name[1] == ":":  # a Windows drive
        return True
    return name.count("/") > 1 or name.endswith("/")


def read_meta(folder: str | Path) -> dict:
    """The ``deepunlearn.json`` of a checkpoint folder, or ``{}`` where there is none."""
    f = Path(folder) / META_FILE
    if not f.is_file():
        return {}
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{f}: line {e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{f}: expected a JSON object")
    return data


def _prompt_from_meta(meta: dict, source: Path) -> PromptFormat | None:
    if "prompt" not in meta:
        return None
    try:
        return PromptFormat.parse(meta["prompt"])
    except ValueError as e:  # also pydantic.ValidationError
        raise ModelLoadError(f"{source / META_FILE}: field prompt: {e}") from None


def load_model(
    name_or_dir: str | Path,
    *,
    device: str | None = None,
    dtype=None,
    prompt: PromptFormat | str | dict | None = None,
    answer_format: str = "recorded",
) -> ModelBundle:
    """Load a causal LM and its tokenizer from a hub name or a local folder.

    On CUDA the model loads in bf16 (fp16 where bf16 is unsupported), on CPU in fp32, unless
    ``dtype`` says otherwise. The tokenizer always gets a pad token (the EOS token when it has
    none) and pads on the left, as batched generation with decoder-only models needs. The answer
    format is ``prompt`` when given (a :class:`PromptFormat` or what :meth:`PromptFormat.parse`
    takes); else, with ``answer_format="recorded"``, the folder's ``deepunlearn.json`` and, when
    it records none, the model family's reference format (:meth:`PromptFormat.for_model` of
    ``config.model_type``); with ``answer_format="family"`` always the family's.

    A path that does not exist raises :class:`ModelLoadError` naming it, before any hub lookup.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"unknown answer_format {answer_format!r}: expected one of {ANSWER_FORMATS}")
    if prompt is not None:
        prompt = PromptFormat.parse(prompt)
    name = str(name_or_dir)
    path = Path(name).expanduser()
    local = path.exists()
    if not local and (isinstance(name_or_dir, Path) or _looks_local(name)):
        raise ModelLoadError(f"model folder {path} does not exist")
    if local:
        if not path.is_dir():
            raise ModelLoadError(f"model path {path} is a file; expected a checkpoint folder with config.json")
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"model folder {path} has no config.json: not a Hugging Face checkpoint")
    meta = read_meta(path) if local else {}

    device = device or default_device()
    torch_dtype = resolve_dtype(dtype, device)
    source = str(path) if local else name
    kwargs: dict[str, Any] = {_dtype_kwarg(): torch_dtype}
    if str(device).startswith("cuda"):
        kwargs["device_map"] = {"": device}  # load straight onto the GPU
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot load the tokenizer of {source!r}: {e}") from e
    try:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot load model {source!r}: {e}") from e
    if "device_map" not in kwargs:
        model.to(device)
    model.eval()

    _ensure_pad(model, tokenizer)
    source_kind = "explicit"
    if prompt is None and answer_format == "recorded" and local:
        prompt = _prompt_from_meta(meta, path)
        source_kind = "recorded"
    if prompt is None:
        prompt = PromptFormat.for_model(getattr(model.config, "model_type", ""), name)
        source_kind = "family"
    return ModelBundle(model=model, tokenizer=tokenizer, prompt=prompt, device=str(device), name=name,
                       path=path.resolve() if local else None, meta=meta, prompt_source=source_kind)


def _dtype_kwarg() -> str:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56 (``torch_dtype`` before,
    deprecated since)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _ensure_pad(model, tokenizer) -> None:
    """Give the tokenizer a pad token and make decoder-only batches pad on the left."""
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            tokenizer.add_special_tokens({"pad_token": "<pad>"})
            model.resize_token_embeddings(len(tokenizer))
    tokenizer.padding_side = "left"
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    gc = getattr(model, "generation_config", None)
    if gc is not None and gc.pad_token_id is None:
        gc.pad_token_id = tokenizer.pad_token_id


def save_bundle(bundle: ModelBundle, out_dir: str | Path, meta: dict | None = None) -> Path:
    """Save model and tokenizer with ``save_pretrained`` plus ``deepunlearn.json``.

    The metadata written is the bundle's own, updated with ``meta``, with the answer format
    (``bundle.prompt``'s fields) and file format always set; :func:`load_model` reads it back.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bundle.model.save_pretrained(out)
    bundle.tokenizer.save_pretrained(out)
    data = dict(bundle.meta)
    data.update(meta or {})
    data["format"] = META_FORMAT
    data["version"] = 1
    data["prompt"] = bundle.prompt.model_dump()
    tmp = out / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out / META_FILE)
    bundle.meta = data
    return out
