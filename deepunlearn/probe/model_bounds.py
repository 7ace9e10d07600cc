"""The sizes a model file declares, checked against the bytes it holds before anything is built.

A 2 KB GGUF file whose header declares 4,096 layers 65,536 wide, or a ``config.json`` beside a
small ``model.safetensors`` declaring the same, would make transformers allocate (or build and
randomly initialise) a model of tens of trillions of parameters: a hang, then out of memory. The
weights that back a model are what its files declare tensor by tensor (GGUF tensor infos,
safetensors headers), so a plan of the declared dimensions must fit in them:

* :func:`check_gguf_plan`: ``{arch}.block_count`` x ``{arch}.embedding_length``\\ :sup:`2` (every
  block of every architecture transformers loads from GGUF holds at least one square matrix:
  attention's query and output, Mamba's projections) plus the vocabulary's embedding must not
  exceed the elements of the file's tensors;
* :func:`safetensors_elements`: the elements a folder's safetensors headers declare, each
  header bounded (:data:`MAX_SAFETENSORS_HEADER`, as the safetensors library) and each tensor's
  data inside its file;
* :func:`check_config_plan`: the same lower bound for a ``config.json``, against those headers;
* :func:`check_fits`: then the parameters of the model built on the ``meta`` device, against
  the headers and the weights files' sizes;
* :func:`check_device_memory`: on CUDA, those parameters in the load's dtype against the
  device's free memory;
* :func:`check_gguf_merges`: BPE merges the tokenizers library would panic on.

Every refusal is a ModelLoadError naming the file and the key.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

from .sources import WEIGHT_SUFFIXES, ModelLoadError, first_line

#: The largest safetensors JSON header read (the safetensors library refuses larger ones too).
MAX_SAFETENSORS_HEADER = 100_000_000
#: Config keys of the layer count and the width, as architectures spell them.
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model")


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def plan_elements(layers: int, width: int, vocab: int) -> int:
    """The fewest parameters a decoder of these dimensions has: one ``width`` x ``width``
    matrix per layer and the ``vocab`` x ``width`` embedding."""
    return layers * width * width + vocab * width


def _config_default(model_type: str, attr: str) -> int | None:
    """transformers' default ``attr`` of ``model_type``'s config (what a key left out becomes)."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        return _count(getattr(CONFIG_MAPPING[model_type](), attr, None))
    except Exception:  # noqa: BLE001 - an architecture without such a default: nothing to plan
        return None


def check_gguf_plan(file: Path, reader, arch: str, model_type: str) -> None:
    """Refuse a GGUF file whose header declares dimensions its tensors cannot back (see the
    module docstring), naming the file and the keys. A key left out counts as the default of
    transformers' ``model_type`` config, which is what the load would build (Llama: 32 layers
    4,096 wide)."""
    def raw(key: str) -> int | None:
        f = reader.fields.get(key)
        try:
            return _count(f.contents()) if f is not None else None
        except Exception:  # noqa: BLE001 - an odd field type is as good as none
            return None

    def field(key: str, attr: str) -> tuple[int | None, str]:
        v = raw(key)
        if v is not None:
            return v, f"{key} = {v:,}"
        v = _config_default(model_type, attr)
        return v, f"{key} (absent: {v:,} by default)"

    (layers, says_layers), (width, says_width) = (field(f"{arch}.block_count", "num_hidden_layers"),
                                                  field(f"{arch}.embedding_length", "hidden_size"))
    if layers is None or width is None:
        return
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = raw(f"{arch}.vocab_size") or (len(tokens.data) if tokens is not None else 0)
    need = plan_elements(layers, width, vocab)
    held = sum(int(t.n_elements) for t in reader.tensors)
    if need > held:
        raise ModelLoadError(f"{file}: {says_layers} and {says_width} plan at least {need:,} parameters but its "
                             f"tensors hold {held:,}; refused (a damaged or forged GGUF header)",
                             file=file, field=f"{arch}.block_count")


def check_gguf_merges(file: Path, reader) -> None:
    """Refuse BPE merges the tokenizer library cannot build: a merge ``"x y"`` whose parts or
    result ``xy`` are not tokens makes it panic (a Rust panic, which no ``except Exception``
    catches, with a backtrace on stderr) instead of raising."""
    merges, tokens = reader.fields.get("tokenizer.ggml.merges"), reader.fields.get("tokenizer.ggml.tokens")
    if merges is None or tokens is None:
        return
    try:
        vocab, pairs = set(tokens.contents()), merges.contents()
    except Exception:  # noqa: BLE001 - an odd field type: the tokenizer's own error names it
        return
    for i, m in enumerate(pairs if isinstance(pairs, list) else []):
        parts = m.split(" ") if isinstance(m, str) else []
        if len(parts) == 2 and all(p in vocab for p in parts) and "".join(parts) not in vocab:
            raise ModelLoadError(f"{file}: tokenizer.ggml.merges[{i}] = {m!r} makes {''.join(parts)!r}, which is not "
                                 "in tokenizer.ggml.tokens; refused (a damaged tokenizer)", file=file,
                                 field="tokenizer.ggml.merges")


def read_safetensors_header(f: Path) -> dict:
    """The JSON header of a safetensors file, bounded and checked: every tensor's data lies inside
    the file. A ModelLoadError naming the file otherwise."""
    try:
        size = f.stat().st_size
        with open(f, "rb") as h:
            raw = h.read(8)
            if len(raw) < 8:
                raise ModelLoadError(f"{f}: not a safetensors file ({size:,} bytes, no header)", file=f)
            (n,) = struct.unpack("<Q", raw)
            if n > MAX_SAFETENSORS_HEADER:
                raise ModelLoadError(f"{f}: safetensors header of {n:,} bytes; refused (more than "
                                     f"{MAX_SAFETENSORS_HEADER:,})", file=f)
            if n > size - 8:
                raise ModelLoadError(f"{f}: truncated safetensors file (its header needs {n:,} bytes, the file has "
                                     f"{size:,})", file=f)
            header = json.loads(h.read(n))
    except ModelLoadError:  # an OSError too
        raise
    except OSError as e:
        raise ModelLoadError(f"{f}: cannot read ({e.strerror or e})", file=f) from None
    except (ValueError, RecursionError) as e:
        raise ModelLoadError(f"{f}: not a readable safetensors header ({type(e).__name__})", file=f) from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{f}: not a readable safetensors header (not a JSON object)", file=f)
    data = size - 8 - n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(o) is not None for o in offsets)):
            raise ModelLoadError(f"{f}: tensor {name!r} has no valid data_offsets", file=f, field=name)
        if offsets[1] > data:
            raise ModelLoadError(f"{f}: truncated safetensors file (tensor {name!r} ends at byte {offsets[1]:,} of "
                                 f"{data:,} data bytes)", file=f, field=name)
    return header


def safetensors_elements(folder: Path) -> int | None:
    """The elements all ``*.safetensors`` files of ``folder`` declare (``None``: none there)."""
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if not files:
        return None
    total = 0
    for f in files:
        for name, info in read_safetensors_header(f).items():
            shape = info.get("shape") if name != "__metadata__" and isinstance(info, dict) else None
            if isinstance(shape, list) and all(_count(d) is not None for d in shape):
                total += math.prod(shape)
    return total


def check_config_plan(folder: Path, config: dict) -> None:
    """Refuse a ``config.json`` whose dimensions the folder's safetensors headers cannot back
    (no safetensors files: nothing to compare, :func:`check_fits`
    still compares the built skeleton with the weights files' sizes)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = next(((k, v) for k in LAYER_KEYS if (v := _count(text.get(k))) is not None), None)
    width = next(((k, v) for k in WIDTH_KEYS if (v := _count(text.get(k))) is not None), None)
    if layers is None or width is None:
        return
    try:
        held = safetensors_elements(folder)
    except ModelLoadError:  # a damaged file: the load names it (diagnose_weights), as before
        return
    if held is None:
        return
    need = plan_elements(layers[1], width[1], _count(text.get("vocab_size")) or 0)
    if need > 2 * held + (1 << 20):  # 4-bit weights pack two to a stored element
        cfg = folder / "config.json"
        raise ModelLoadError(
            f"{cfg}: {layers[0]} = {layers[1]:,} and {width[0]} = {width[1]:,} plan at least {need:,} parameters "
            f"but the safetensors headers declare {held:,}; refused (it would be built with random weights)",
            file=cfg, field=layers[0])


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


def check_layers_held(folder: Path, config: dict) -> None:
    """Refuse a ``config.json`` that builds fewer layers than the folder's safetensors hold:
    transformers would load it and silently drop the weights of the layers past the count."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = next(((k, v) for k in LAYER_KEYS if (v := _count(text.get(k))) is not None), None)
    if layers is None:
        return
    top = -1
    try:
        for f in sorted(folder.glob("*.safetensors")):
            for name in read_safetensors_header(f):
                m = _LAYER_INDEX.search(name)
                if m:
                    top = max(top, int(m.group(1)))
    except ModelLoadError:  # a damaged file: the load names it (diagnose_weights)
        return
    if top >= layers[1]:
        cfg = folder / "config.json"
        raise ModelLoadError(f"{cfg}: {layers[0]} = {layers[1]} but the safetensors hold layers up to {top}; refused "
                             f"(the weights of {top + 1 - layers[1]} layer(s) would be dropped)", file=cfg,
                             field=layers[0])


#: Layers a config may ask for before it is refused unbuilt (the largest public LLMs have < 200).
MAX_LAYERS = 4096


def check_fits(path: Path, config: dict) -> int:
    """Refuse, before anything is allocated, a ``config.json`` describing a model far larger than
    the folder's weights files: transformers would build it and fill the missing weights with
    random values (``{"model_type": "llama"}`` alone is Llama-2-7B's default size, 27 GB in fp32,
    which the fuzz test's random configs once used to exhaust a 24 GB machine). The model is
    built on the ``meta`` device (no memory for values) to count its parameters, and it needs at
    least half a byte per parameter (4-bit weights) in its weights files. Returns the count.

    The headers are checked first (:func:`check_config_plan`: a forged config is refused in
    milliseconds, before any skeleton). The skeleton stays, on every device: only it counts what
    transformers would build (an extra size key of any architecture included), and it costs
    ~20 ms of CPU once the model's module is imported, which the load that follows imports
    anyway (the seconds a profile shows here are those imports)."""
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        v = config.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > MAX_LAYERS:
            raise ModelLoadError(f"{path / 'config.json'}: {key} = {v:,} layers; refused (more than {MAX_LAYERS})",
                                 file=path / "config.json", field=key)
        if key in config and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ModelLoadError(f"{path / 'config.json'}: {key} = {v!r}; expected a whole number of layers >= 1",
                                 file=path / "config.json", field=key)
    check_layers_held(path, config)
    check_config_plan(path, config)  # from the headers alone, before the skeleton below is built
    import torch
    from transformers import AutoModelForCausalLM

    from .hf_load import load_config

    weight_bytes = sum(f.stat().st_size for f in path.iterdir() if f.is_file() and f.suffix in WEIGHT_SUFFIXES)
    try:
        cfg = load_config(path, check=False)  # the caller checked the folder's files
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(cfg, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - a config transformers cannot build is the file's fault
        raise ModelLoadError(f"{path / 'config.json'}: not a causal-LM config transformers can build "
                             f"({first_line(e)})", file=path / "config.json") from None
    n = sum(p.numel() for p in skeleton.parameters())
    if n / 2 > weight_bytes + (1 << 20):
        raise ModelLoadError(
            f"{path}: config.json describes a model of {n:,} parameters but its weights files hold "
            f"{weight_bytes:,} bytes; refused (it would be built with random weights)", file=path / "config.json")
    weights = [f for f in path.iterdir() if f.is_file() and f.suffix in WEIGHT_SUFFIXES]
    try:  # file sizes alone would pass a small header padded to a large file
        held = safetensors_elements(path) if all(f.suffix == ".safetensors" for f in weights) else None
    except ModelLoadError:  # a damaged file: the load names it (diagnose_weights)
        held = None
    if held is not None and n > 2 * held + (1 << 20):
        raise ModelLoadError(
            f"{path}: config.json describes a model of {n:,} parameters but its safetensors headers declare "
            f"{held:,}; refused (it would be built with random weights)", file=path / "config.json")
    return n


def check_device_memory(params: int, dtype, device: str, source: str | Path) -> None:
    """Refuse, before anything is allocated there, a model whose weights alone (``params`` in
    ``dtype``) exceed the free memory of the CUDA ``device``: the load would fail part-way
    with CUDA's out-of-memory error after seconds of copying. Other devices: no check (CPU
    memory is the operating system's to give)."""
    if not str(device).startswith("cuda") or params <= 0:
        return
    import torch

    free, total = torch.cuda.mem_get_info(torch.device(device))
    need = params * torch.empty((), dtype=dtype).element_size()
    if need > free:
        gib = 1 << 30
        raise ModelLoadError(f"{source}: {params:,} parameters in {str(dtype).removeprefix('torch.')} need "
                             f"{need / gib:.1f} GiB, but {device} has {free / gib:.1f} GiB free of "
                             f"{total / gib:.1f} GiB; refused before loading (try --dtype bf16, or a larger GPU)",
                             file=source)
