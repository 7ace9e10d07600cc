"""Loading causal language models (a hub name, a local checkpoint folder or a GGUF file) for probing.

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

import contextlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import atomic_write_text, load_json
from .hf_quiet import quiet_hf  # noqa: F401  (re-exported: many modules import it from here)
from .gguf import find_gguf, gguf_architecture, quiet_gguf, strip_quantization
from .chat import chat_format, template_file
from .hf_load import load_error, load_tokenizer, not_interrupt
from .prompts import PromptFormat
from .model_bounds import check_device_memory, check_fits
from .sources import ModelLoadError, check_folder, diagnose_weights, first_line, looks_local, resolve_hub

#: Values of ``load_model(answer_format=...)`` (the field ``Protocol.answer_format``).
ANSWER_FORMATS = ("recorded", "family", "chat")

#: Name of the metadata file saved beside a checkpoint.
META_FILE = "deepunlearn.json"
META_FORMAT = "deepunlearn-model"


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
    #: when a generated answer counts (:mod:`deepunlearn.probe.answer_rule`; None: the reference's)
    answer_rule: Any = None

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


def check_device(device: str | None, *, flag: str | None = None) -> str:
    """The device to load on: ``None`` gives :func:`default_device`; otherwise ``cpu``,
    ``cuda``, ``cuda:N`` or ``mps``, present on this machine. Anything else is a ModelLoadError
    naming ``flag`` (e.g. ``--device``), raised before any model is read."""
    import torch

    if device is None:
        return default_device()
    where = f"{flag} {device!r}" if flag else f"device {device!r}"
    try:
        dev = torch.device(str(device))
    except (RuntimeError, ValueError, TypeError):
        raise ModelLoadError(f"{where}: not a device; expected cpu, cuda, cuda:N or mps", field=flag) from None
    if dev.type == "cpu":
        return str(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"{where}: CUDA is not available on this machine (use --device cpu)", field=flag)
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise ModelLoadError(f"{where}: this machine has {n} CUDA device(s), cuda:0 to cuda:{n - 1}", field=flag)
        return str(device)
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ModelLoadError(f"{where}: MPS is not available on this machine (use --device cpu)", field=flag)
        return str(device)
    raise ModelLoadError(f"{where}: unsupported device type {dev.type!r}; expected cpu, cuda, cuda:N or mps",
                         field=flag)


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


def read_meta(folder: str | Path) -> dict:
    """The ``deepunlearn.json`` of a checkpoint folder, or ``{}`` where there is none; a file
    that is not UTF-8, not JSON, nested too deep or not an object is a ModelLoadError naming it."""
    f = Path(folder) / META_FILE
    if not f.is_file():
        return {}
    data = load_json(f, error=ModelLoadError)
    if not isinstance(data, dict):
        raise ModelLoadError(f"{f}: expected a JSON object", file=f)
    return data


def prompt_from_meta(meta: dict, source: Path) -> PromptFormat | None:
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
    trust_remote_code: bool = False,
) -> ModelBundle:
    """Load a causal LM and its tokenizer from a hub name or a local folder.

    Parameters
    ----------
    name_or_dir : str or Path
        A checkpoint folder, a hub name, or a ``.gguf`` file (or a folder holding exactly one and
        no ``config.json``): that loads with ``from_pretrained(folder, gguf_file=name)``,
        dequantised to ``dtype`` (~15-30 s for SmolLM2-135M on one CPU thread, so ``deepunlearn
        model import`` it once), and loses its ``quantization_config`` so that
        :func:`save_bundle` works on it.
    device : str, optional
        Where the model goes (default: CUDA when there is one, else the CPU). On CUDA the model
        asks for SDPA attention (a class without it keeps its default).
    dtype : torch.dtype or str, optional
        Default: bf16 on CUDA (fp16 where bf16 is unsupported), fp32 on the CPU.
    prompt : PromptFormat, str or dict, optional
        The answer format (a :class:`PromptFormat` or what :meth:`PromptFormat.parse` takes;
        ``"chat"`` resolves here from the tokenizer's chat template,
        :func:`~deepunlearn.probe.chat.chat_format`).
    answer_format : {"recorded", "family", "chat"}, default "recorded"
        Without ``prompt``: ``recorded`` takes the folder's ``deepunlearn.json`` and, when it
        records none, the model family's reference format (:meth:`PromptFormat.for_model` of
        ``config.model_type``); ``family`` always the family's.
    trust_remote_code : bool, default False
        Run code from the model's folder or repository; without it a config with ``auto_map`` is
        refused (nothing prompts).

    Returns
    -------
    ModelBundle
        The model (in eval mode), its tokenizer (always with a pad token, the EOS token when it
        has none, padding on the left as batched generation needs) and its answer format.

    Raises
    ------
    ModelLoadError
        Naming the folder, file or hub name: a path that does not exist ("no such folder", before
        any hub lookup), a bad ``device``, a malformed JSON or weights file, weights that do not
        fit the config (never silently replaced by random ones), a tokenizer with neither a pad
        nor an EOS token, a hub name when the hub cannot be reached and the model is not in the
        local Hugging Face cache (at once, no retries; :mod:`deepunlearn.probe.sources`).
    ValueError
        An unknown ``answer_format``.

    Examples
    --------
    >>> import tempfile
    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> from deepunlearn.probe.tiny import build_tiny_model
    >>> folder = build_tiny_model(generate_family(5, seed=0), tempfile.mkdtemp(), hidden=32, layers=1, heads=2)
    >>> bundle = load_model(folder, device="cpu")
    >>> bundle.prompt.name, bundle.model.config.model_type, bundle.tokenizer.padding_side
    ('llama', 'llama', 'left')
    >>> load_model(str(folder) + "-missing")
    Traceback (most recent call last):
    ...
    deepunlearn.probe.sources.ModelLoadError: no such folder: ...-missing (a model is a checkpoint folder or a hub name; this path does not exist)
    """
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"unknown answer_format {answer_format!r}: expected one of {ANSWER_FORMATS}")
    if prompt is not None:
        prompt = PromptFormat.parse(prompt)
    device = check_device(device)
    name = str(name_or_dir)
    path = Path(name).expanduser()
    local = path.exists()
    gguf, folder, source, meta, config, extra = _locate(name_or_dir, name, path, local, trust_remote_code)
    torch_dtype = resolve_dtype(dtype, device)
    kwargs: dict[str, Any] = {_dtype_kwarg(): torch_dtype, **extra}
    if gguf is not None:
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)  # plain tensors: trainable, saveable
    if str(device).startswith("cuda"):
        kwargs["device_map"] = {"": device}  # load straight onto the GPU
        kwargs["attn_implementation"] = "sdpa"  # dropped again below where the class has no SDPA
    from transformers import AutoModelForCausalLM

    where = str(folder) if folder is not None else name
    with quiet_hf(errors_only=folder is not None), (quiet_gguf() if gguf is not None else contextlib.nullcontext()):
        if gguf is None and folder is not None and not config.get("auto_map"):  # custom code: its classes decide
            check_device_memory(check_fits(folder, config), torch_dtype, device, source)
        tokenizer = load_tokenizer(where, source=source, check=gguf is None, **extra)
        _check_pad(tokenizer, source)  # before the (long) model load
        chat = None
        if prompt is None and answer_format == "chat" and getattr(tokenizer, "chat_template", None) \
                or prompt is not None and prompt.pending:  # the template renders before the long load, too
            chat = chat_format(tokenizer, source=source, flag="--answer-format",
                               template=template_file(folder if gguf is None else None, source))
        try:
            model, info = _from_pretrained(AutoModelForCausalLM, where, kwargs)
        except BaseException as e:  # noqa: BLE001
            not_interrupt(e)
            bad = diagnose_weights(folder) if folder is not None and gguf is None else None
            raise (bad or load_error("model", source, e)) from e
    _check_loading_info(info, source)
    if gguf is not None:
        strip_quantization(model)
    if "device_map" not in kwargs:
        model.to(device)
    model.eval()

    _ensure_pad(model, tokenizer)
    prompt, source_kind = _answer_prompt(prompt, chat, answer_format, name, gguf, folder, source, meta,
                                         model, tokenizer)
    return ModelBundle(model=model, tokenizer=tokenizer, prompt=prompt, device=str(device), name=name,
                       path=path.resolve() if local else None, meta=meta, prompt_source=source_kind)


def _locate(name_or_dir: str | Path, name: str, path: Path, local: bool, trust_remote_code: bool) -> tuple:
    """A model's GGUF file, folder (None: from the hub), source, meta, config and load keywords, checked early."""
    if not local and (isinstance(name_or_dir, Path) or looks_local(name)):
        raise ModelLoadError(f"no such folder: {name} (a model is a checkpoint folder or a hub name; this path "
                             "does not exist)", file=path)
    gguf = find_gguf(path) if local else None
    meta, config = {}, None
    extra: dict[str, Any] = {"trust_remote_code": bool(trust_remote_code)}
    if gguf is not None:  # a GGUF file (or a folder holding one): checked before the long load
        gguf_architecture(gguf)
        folder, source = gguf.parent, str(gguf)
        extra["gguf_file"] = gguf.name
    else:
        folder = path if local else resolve_hub(name)  # None: transformers fetches it from the hub
        if folder is not None:
            config = check_folder(folder, trust_remote_code=trust_remote_code)
            meta = read_meta(folder)
        source = str(folder) if folder is not None else name
    return gguf, folder, source, meta, config, extra


def _answer_prompt(prompt: PromptFormat | None, chat: PromptFormat | None, answer_format: str, name: str,
                   gguf: Path | None, folder: Path | None, source: str, meta: dict,
                   model, tokenizer) -> tuple[PromptFormat, str]:
    """The answer format and where it came from: given, the chat template, recorded, or the family's."""
    source_kind = "explicit"
    if chat is not None:  # "chat": the pieces come from this tokenizer's chat template
        source_kind = "explicit" if prompt is not None else "chat"
        prompt = chat
    if prompt is None and answer_format in ("recorded", "chat") and folder is not None and gguf is None:
        prompt = prompt_from_meta(meta, folder)
        source_kind = "recorded"
    if prompt is None:
        prompt = PromptFormat.for_model(getattr(model.config, "model_type", ""), name)
        source_kind = "family"
    if prompt.pending:  # "chat" recorded in a checkpoint's deepunlearn.json: resolved by its tokenizer
        prompt = chat_format(tokenizer, source=source, flag="--answer-format",
                             template=template_file(folder if gguf is None else None, source))
    return prompt, source_kind


def _from_pretrained(auto_cls, where: str, kwargs: dict[str, Any]):
    """``from_pretrained`` with loading info; on CUDA SDPA attention is asked for, and a model
    class without SDPA support loads with its default attention instead (silently)."""
    with warnings.catch_warnings():  # torch's two-line note on an odd pickle; our error says it all
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        try:
            return auto_cls.from_pretrained(where, output_loading_info=True, **kwargs)
        except ValueError as e:
            if "attn_implementation" not in kwargs or "sdpa" not in str(e).lower():
                raise
            rest = {k: v for k, v in kwargs.items() if k != "attn_implementation"}
            return auto_cls.from_pretrained(where, output_loading_info=True, **rest)


def _check_loading_info(info: dict, source: str) -> None:
    """A checkpoint whose weights do not fit its config (parameters missing, or of another
    shape) would load with random weights in their place: refuse it instead."""
    missing = sorted(info.get("missing_keys") or [])
    mismatched = sorted(str(k[0] if isinstance(k, (tuple, list)) else k) for k in info.get("mismatched_keys") or [])
    if missing or mismatched:
        what = [f"{len(missing)} parameter(s) missing (e.g. {missing[0]})"] if missing else []
        what += [f"{len(mismatched)} of another shape (e.g. {mismatched[0]})"] if mismatched else []
        raise ModelLoadError(f"{source}: the weights do not fit config.json ({', '.join(what)}): a corrupt "
                             "checkpoint, or a config.json from another model", file=source)


def _dtype_kwarg() -> str:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56 (``torch_dtype`` before,
    deprecated since)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _check_pad(tokenizer, source: str) -> None:
    """A tokenizer needs a pad token or, to pad with, an EOS token. (One with neither once got a
    new ``<pad>`` token and resized embeddings: a silently changed model. Now it is refused.)"""
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is None:
        raise ModelLoadError(f"the tokenizer of {source} has neither a pad token nor an EOS token; give it one "
                             "(pad_token or eos_token in its tokenizer_config.json / special_tokens_map.json) and "
                             "load it again; adding one here would resize the model's embeddings",
                             file=source, field="pad_token")


def _ensure_pad(model, tokenizer) -> None:
    """Pad with the EOS token where the tokenizer has no pad token (padding positions are masked
    by lengths, never by token id, so pad == EOS keeps every answer's EOS in the loss and in
    probing) and make decoder-only batches pad on the left. :func:`_check_pad` ran before."""
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
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
    transformers' progress bars are silenced while it writes (:func:`quiet_hf`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_hf():
        bundle.model.save_pretrained(out)
        bundle.tokenizer.save_pretrained(out)
    data = dict(bundle.meta)
    data.update(meta or {})
    data["format"] = META_FORMAT
    data["version"] = 1
    data["prompt"] = bundle.prompt.model_dump()
    atomic_write_text(out / META_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    bundle.meta = data
    return out
