"""Where a memory plan's model config comes from (:func:`load_config`): a config object or
dict, a ``config.json``, a checkpoint folder, a ``.gguf`` file, a preset name or a hub name.
Every bad input is one :class:`PlanError` naming the file or flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError, load_json

_LLAMA = {"model_type": "llama", "hidden_act": "silu", "rms_norm_eps": 1e-5, "max_position_embeddings": 4096}
#: configs by name, for planning without a checkpoint (shapes as published)
PRESETS: dict[str, dict[str, Any]] = {
    "llama-1.3b": {**_LLAMA, "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "intermediate_size": 6144, "vocab_size": 32000},
    "llama-2-7b": {**_LLAMA, "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "intermediate_size": 11008, "vocab_size": 32000},
    "llama-3-8b": {**_LLAMA, "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                   "rope_theta": 500000.0, "max_position_embeddings": 8192},
    "smollm2-135m": {**_LLAMA, "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
                     "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152,
                     "tie_word_embeddings": True, "max_position_embeddings": 8192},
}
#: layers a config may ask for (as probe.model_bounds.check_fits)
MAX_LAYERS = 4096


class PlanError(UserError, ValueError):
    """A model config that cannot be planned: the message names the file or flag."""


def load_config(spec: Any, *, flag: str = "--model") -> tuple[str, Any]:
    """``(name, PretrainedConfig)`` from a config object or dict, a ``config.json`` file, a
    checkpoint folder (its ``config.json``, or the one ``.gguf`` file in it), a ``.gguf`` file,
    a :data:`PRESETS` name or a hub name (its config only; the hub rules of
    :mod:`deepunlearn.probe.sources` apply). Errors are :class:`PlanError` naming ``flag``/the file."""
    if hasattr(spec, "to_dict") and hasattr(spec, "model_type"):
        return getattr(spec, "name_or_path", "") or spec.model_type, spec
    if isinstance(spec, dict):
        return str(spec.get("model_type", "config")), config_from_dict(spec, source="config")
    name = str(spec)
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            data = _read_json(path / "config.json", flag)
            _refuse_remote_code(data, path, "config.json")
            return name, config_from_dict(data, source=str(path / "config.json"))
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return name, _gguf_config(ggufs[0], flag)
        raise PlanError(f"{flag} {name}: the folder has no config.json" + (
            f" and {len(ggufs)} .gguf files (name one)" if ggufs else " (not a Hugging Face checkpoint)"),
            file=path, field=flag)
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return name, _gguf_config(path, flag)
        data = _read_json(path, flag)
        _refuse_remote_code(data, path.parent, path.name)
        return name, config_from_dict(data, source=name)
    if name.lower() in PRESETS:
        return name.lower(), config_from_dict(PRESETS[name.lower()], source=f"preset {name.lower()}")
    from ..probe.sources import looks_local, resolve_hub

    if looks_local(name):
        raise PlanError(f"{flag} {name}: no such file or folder (expected a config.json, a checkpoint folder, a .gguf "
                        f"file, a hub name or one of {', '.join(PRESETS)})", file=path, field=flag)
    folder = resolve_hub(name)
    from ..probe.hf_load import load_config as hf_config

    try:
        return name, hf_config(str(folder) if folder is not None else name, error=PlanError, hint=_NO_CODE)
    except PlanError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the hub or the file makes transformers raise
        from ..probe.sources import first_line

        raise PlanError(f"{flag} {name}: cannot read its config ({first_line(e)})", field=flag) from None


#: How a plan refuses a model that asks for its own code.
_NO_CODE = "the plan covers architectures transformers knows, without a folder's own code"


def _refuse_remote_code(data: dict, folder: Path, fname: str) -> None:
    """Refuse a config that asks for its own code (``auto_map``) as loading the model does: the
    plan would describe a model that is not the one the folder's code builds."""
    from ..probe.sources import refuse_remote_code

    refuse_remote_code(data, folder, fname, error=PlanError, hint=_NO_CODE)


def _read_json(path: Path, flag: str) -> dict:
    data = load_json(path, error=PlanError)
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a JSON object (a model config)", file=path)
    return data


def _gguf_config(path: Path, flag: str):
    from ..probe.hf_load import load_config as hf_config
    from ..probe.sources import first_line

    import struct

    try:
        return hf_config(path.parent, gguf_file=path.name)
    except struct.error:  # the header ends before its fields do
        raise PlanError(f"{path}: a truncated or corrupt GGUF file (its header ends early)", file=path,
                        field=flag) from None
    except Exception as e:  # noqa: BLE001 - not GGUF, an architecture transformers cannot read
        raise PlanError(f"{path}: cannot read the model config from this GGUF file ({first_line(e)})",
                        file=path, field=flag) from None


def config_from_dict(data: dict, *, source: str) -> Any:
    """The config of a ``config.json`` document: a :class:`~.plan_count.PlainConfig` (no torch)
    for an architecture :mod:`.plan_count` counts, else transformers' config; an unknown or
    missing ``model_type`` or bad values is a :class:`PlanError` naming ``source`` and the field."""
    from transformers import __version__ as tf_version

    from ..probe.hf_tables import known_model_types

    mt = data.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise PlanError(f"{source}: field model_type: missing (which architecture is this?)", file=source,
                        field="model_type")
    known = known_model_types()
    if known is None or mt not in known:  # the table read from source may lack a name added later
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        known = CONFIG_MAPPING
    if mt not in known:
        extra = " (the config asks for its own code, auto_map: not supported)" if data.get("auto_map") else ""
        raise PlanError(f"{source}: field model_type: unknown architecture {mt!r} (transformers {tf_version} does not "
                        f"know it){extra}", file=source, field="model_type")
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        v = data.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > MAX_LAYERS:
            raise PlanError(f"{source}: field {key}: {v:,} layers; refused (more than {MAX_LAYERS})", file=source,
                            field=key)
        if key in data and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise PlanError(f"{source}: field {key}: {v!r}; expected a whole number of layers >= 1", file=source,
                            field=key)
    from .plan_count import plain_config

    plain = plain_config(data)  # an architecture counted by formula: no transformers config class, no torch
    if plain is not None:
        return plain
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[mt].from_dict({k: v for k, v in data.items() if k != "model_type"})
    except Exception as e:  # noqa: BLE001 - a value the config class refuses
        from ..probe.sources import first_line

        raise PlanError(f"{source}: not a valid {mt} config ({first_line(e)})", file=source) from None
