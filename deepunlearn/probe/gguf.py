"""Models stored as GGUF files (llama.cpp's format): found, checked and described before
transformers loads them.

transformers loads a ``.gguf`` file with ``from_pretrained(folder, gguf_file=name)`` (the
``gguf`` package reads it) and dequantises its 4- or 8-bit blocks into a normal torch model,
which takes seconds to minutes; a file it cannot read fails somewhere deep inside that. This
module gives the checks that come first and their one-line :class:`ModelLoadError`:

* :func:`find_gguf`: which ``.gguf`` file a model argument means (the file itself, or the only
  one in a folder that has no ``config.json``; several: an error listing them);
* :func:`check_gguf`: the 4-byte magic ``GGUF`` (checked by us first: "not a GGUF file"), then
  the header read with the ``gguf`` package's :class:`GGUFReader` (errors: "not a readable GGUF
  file"), then that every tensor's data lies inside the file ("truncated") and that the header's
  dimensions fit its tensors (:func:`~deepunlearn.probe.model_bounds.check_gguf_plan`);
* :func:`gguf_summary`: what ``deepunlearn model info`` prints for a GGUF file, from the header
  and tensor infos alone (nothing is dequantised: about 3 s for SmolLM2-135M, against ~15-20 s
  to load it);
* :func:`strip_quantization`: after loading, what would stop ``save_pretrained`` (the config's
  ``quantization_config``, a quantizer) is dropped: the weights are plain dequantised tensors.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from .sources import ModelLoadError, first_line

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"
GGUF_SUFFIX = ".gguf"
#: GGUF architecture names whose transformers ``model_type`` is spelt otherwise.
_ARCH_TO_MODEL_TYPE = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss",
                       "minimax-m2": "minimax_m2", "gemma3n": "gemma3n"}


def find_gguf(path: str | Path) -> Path | None:
    """The GGUF file that the model argument ``path`` means, or ``None`` when it means none.

    A file ending in ``.gguf`` is itself; a folder holding ``config.json`` is a Hugging Face
    checkpoint (``None``, even beside a ``.gguf``); a folder without one holding exactly one
    ``.gguf`` file means that file, and several are a ModelLoadError listing them."""
    p = Path(path)
    if p.is_file():
        return p if p.suffix.lower() == GGUF_SUFFIX else None
    if not p.is_dir() or (p / "config.json").is_file():
        return None
    found = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() == GGUF_SUFFIX)
    if len(found) > 1:
        names = ", ".join(f.name for f in found)
        raise ModelLoadError(f"model folder {p} holds {len(found)} GGUF files ({names}) and no config.json: "
                             "name the one to load (--model FOLDER/FILE.gguf)", file=p)
    return found[0] if found else None


def check_gguf(file: str | Path):
    """Check a GGUF file and return its :class:`gguf.GGUFReader` (header and tensor infos read,
    tensor data memory-mapped, nothing dequantised). ModelLoadError naming the file: not a file,
    no ``GGUF`` magic, a header the reader cannot parse, tensor data running past the end."""
    import stat

    f = Path(file)
    try:
        if not stat.S_ISREG(f.stat().st_mode) and not f.is_dir():  # opening a FIFO would block
            raise ModelLoadError(f"{f}: not a regular file (a device, FIFO or socket), expected a GGUF file", file=f)
        with open(f, "rb") as h:
            magic = h.read(4)
    except IsADirectoryError:
        raise ModelLoadError(f"{f}: is a folder, expected a GGUF file", file=f) from None
    except OSError as e:
        raise ModelLoadError(f"{f}: cannot read ({e.strerror or e})", file=f) from None
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"{f}: not a GGUF file (it starts with {magic!r}, a GGUF file with {GGUF_MAGIC!r})",
                             file=f)
    from gguf import GGUFReader

    size = f.stat().st_size
    try:
        reader = GGUFReader(str(f))
    except Exception as e:  # noqa: BLE001 - whatever the reader raises on a damaged header
        raise ModelLoadError(f"{f}: not a readable GGUF file ({size:,} bytes; truncated or damaged: "
                             f"{first_line(e)})", file=f) from None
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        raise ModelLoadError(f"{f}: truncated GGUF file ({size:,} bytes; its tensors need {end:,})", file=f)
    if not reader.tensors:
        raise ModelLoadError(f"{f}: a GGUF file without tensors (no model weights)", file=f)
    arch = _field(reader, "general.architecture")
    if isinstance(arch, str):  # dimensions its tensors cannot back: refused before anything is built
        from .model_bounds import check_gguf_merges, check_gguf_plan

        check_gguf_plan(f, reader, arch, gguf_model_type(arch))
        check_gguf_merges(f, reader)
    return reader


def _field(reader, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    try:
        return f.contents()
    except Exception:  # noqa: BLE001 - an odd field type is as good as none
        return default


def gguf_model_type(architecture: str) -> str:
    """The transformers ``model_type`` of a GGUF ``general.architecture`` (mostly the same name)."""
    return _ARCH_TO_MODEL_TYPE.get(architecture, architecture.replace("-", "_"))


def gguf_summary(file: str | Path) -> dict[str, Any]:
    """What a GGUF file holds, from its header and tensor infos (:func:`check_gguf`): the
    architecture, parameters (elements of all tensors), layers, hidden size, vocabulary, the
    stored weight types (most common first) and the tokenizer (size, special tokens, chat
    template). An architecture transformers cannot load from GGUF is a ModelLoadError."""
    f = Path(file)
    reader = check_gguf(f)
    arch = gguf_architecture(f, reader)
    model_type = gguf_model_type(arch)
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    n_tokens = len(tokens.data) if tokens is not None else None

    def token(key: str) -> str | None:
        i = _field(reader, f"tokenizer.ggml.{key}_token_id")
        if not isinstance(i, int) or tokens is None or not 0 <= i < n_tokens:
            return None
        return str(tokens.contents(i))

    types = Counter(t.tensor_type.name for t in reader.tensors)
    vocab = _field(reader, f"{arch}.vocab_size", n_tokens)
    return {
        "architecture": model_type,
        "gguf_architecture": arch,
        "class": causal_lm_class(model_type),
        "parameters": int(sum(int(t.n_elements) for t in reader.tensors)),
        "layers": _field(reader, f"{arch}.block_count"),
        "hidden_size": _field(reader, f"{arch}.embedding_length"),
        "vocab_size": vocab,
        "dtype": ", ".join(f"{k} ({v})" for k, v in types.most_common()),
        "tokenizer": {"size": n_tokens, "pad": token("padding"), "eos": token("eos"), "bos": token("bos"),
                      "chat_template": bool(_field(reader, "tokenizer.chat_template"))},
        "name": _field(reader, "general.name"),
    }


def causal_lm_class(model_type: str) -> str | None:
    """The transformers causal-LM class name of ``model_type`` (``LlamaForCausalLM``), or None."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)


def gguf_architecture(file: Path, reader=None) -> str:
    """The file's ``general.architecture`` (header checked by :func:`check_gguf` unless
    ``reader`` is given), refused when transformers cannot load it from GGUF."""
    reader = check_gguf(file) if reader is None else reader
    arch = _field(reader, "general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelLoadError(f"{file}: GGUF header has no general.architecture", file=file,
                             field="general.architecture")
    check_gguf_architecture(file, arch)
    return arch


def check_gguf_architecture(file: Path, arch: str) -> None:
    """Refuse a GGUF architecture transformers cannot load from GGUF, naming those it can."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES as known
    except ImportError:  # pragma: no cover - another transformers layout: let it decide
        return
    known = [a for a in known if a not in ("general", "tokenizer")]
    if arch not in known and gguf_model_type(arch) not in known and arch.replace("-", "") not in known:
        raise ModelLoadError(f"{file}: unknown GGUF architecture {arch!r}; transformers loads GGUF files of: "
                             f"{', '.join(sorted(known))}", file=file, field="general.architecture")


def strip_quantization(model) -> None:
    """Make a model loaded from GGUF (dequantised) saveable: drop ``config.quantization_config``
    (a GgufConfig; ``save_pretrained`` refuses a model whose config keeps one: "The model is
    quantized with gguf and is not serializable") and any quantizer left on the model. The
    weights are plain tensors already, so nothing else changes."""
    for obj in (model.config, getattr(model, "generation_config", None)):
        if obj is not None and hasattr(obj, "quantization_config"):
            delattr(obj, "quantization_config")
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def quiet_gguf() -> Iterator[None]:
    """Silence transformers' "Converting and de-quantizing GGUF tensors" bar (a bare tqdm that
    :func:`~deepunlearn.probe.models.quiet_hf` does not reach) for the block."""
    try:
        import transformers.modeling_gguf_pytorch_utils as mod
    except ImportError:  # pragma: no cover - another transformers layout
        yield
        return
    old = getattr(mod, "tqdm", None)
    if old is None:  # pragma: no cover
        yield
        return
    mod.tqdm = functools.partial(old, disable=True)
    try:
        yield
    finally:
        mod.tqdm = old
