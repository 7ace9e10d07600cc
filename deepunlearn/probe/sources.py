"""Where a model comes from, checked before transformers sees it: a local checkpoint folder or
a hub name.

transformers, left alone, prompts on stdout before running a folder's own Python, retries a hub
it cannot reach for about a minute, takes a mistyped folder for a hub name, and answers a
corrupt file with whatever its parser raised. This module gives each of those one clear
:class:`ModelLoadError` instead:

* a local folder's ``config.json``, ``tokenizer_config.json``, ``generation_config.json`` and
  ``deepunlearn.json`` are read with :func:`deepunlearn.errors.load_json` (not UTF-8, bad JSON,
  nesting too deep: an error naming the file); a config that asks for the folder's own code
  (``auto_map``) is refused unless ``trust_remote_code``;
* a name that can only be a path (or is no valid hub id) and does not exist is "no such folder";
* a hub id is looked up only when the hub answers a quick request (:data:`HUB_TIMEOUT` seconds)
  and ``HF_HUB_OFFLINE`` is not set; otherwise it is loaded from its snapshot folder in the
  local Hugging Face cache, and a model missing from it fails at once with a message saying
  both things: no such local folder, and the hub cannot be reached;
* a weights file transformers cannot read is named in the error (:func:`diagnose_weights`).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..errors import UserError, load_json

#: Seconds the hub gets to answer before it is taken as unreachable.
HUB_TIMEOUT = 2.0
#: JSON files of a checkpoint folder that are read (and so checked) before transformers loads it.
CHECKED_JSON = ("config.json", "tokenizer_config.json", "generation_config.json")
#: Weight files transformers reads (and :func:`diagnose_weights` checks).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


class ModelLoadError(UserError, OSError):
    """A model or tokenizer cannot be loaded; the message names the path or hub name."""


def looks_local(name: str) -> bool:
    """True when ``name`` can only mean a folder: it starts like a path (``/``, ``.``, ``~``, a
    drive), holds the OS's separator (other than ``/``) or more than one ``/``, ends with ``/``,
    or is no valid hub id (``name`` or ``owner/name``; ``gpt2`` and ``tiny-edu2`` are valid)."""
    if name.startswith(("/", ".", "~")) or name in ("", ".", ".."):
        return True
    if os.sep != "/" and os.sep in name:
        return True
    if len(name) > 1 and name[1] == ":":  # a Windows drive
        return True
    if name.count("/") > 1 or name.endswith("/"):
        return True
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return True
    return False


def _truthy(value: str) -> bool:
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) forbids the network: the
    environment variable as it is now when set, else huggingface_hub's setting at import."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var):
            return _truthy(os.environ[var])
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_endpoint() -> str:
    """The hub's address (``HF_ENDPOINT``, default ``https://huggingface.co``)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def hub_reachable(timeout: float = HUB_TIMEOUT) -> bool:
    """Whether the hub answers one HEAD request within ``timeout`` seconds (any HTTP status
    counts; no retries). Uses huggingface_hub's session, so proxies from the environment apply."""
    from huggingface_hub.utils import get_session

    try:
        get_session().head(hub_endpoint(), timeout=timeout)
    except Exception:  # noqa: BLE001 - DNS, refused, timeout, TLS: all mean "cannot be reached"
        return False
    return True


def cached_snapshot(repo_id: str) -> Path | None:
    """The folder of ``repo_id``'s snapshot in the local Hugging Face cache (the one holding its
    ``config.json``), or ``None`` when the cache does not hold it."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a malformed cache entry is as good as none
        return None
    return Path(found).parent if isinstance(found, str) else None


def resolve_hub(name: str) -> Path | None:
    """Where to load the hub id ``name`` from: ``None`` when the hub can be used (transformers
    downloads or refreshes it), the local cache's snapshot folder when the hub cannot be used
    (``HF_HUB_OFFLINE``, or no answer within :data:`HUB_TIMEOUT` s) but the cache holds the
    model; otherwise a ModelLoadError at once, without retries. (A cached model is loaded from
    its snapshot folder because transformers, even with ``local_files_only``, still asks the hub
    for an adapter config, retrying for a minute.)"""
    offline = hub_offline()
    if not offline and hub_reachable():
        return None
    snapshot = cached_snapshot(name)
    if snapshot is not None:
        return snapshot
    raise ModelLoadError(hub_unreachable_message(name, offline), file=name)


def hub_unreachable_message(name: str, offline: bool) -> str:
    """Why the hub id ``name`` cannot be loaded here: no such local folder, and no hub."""
    from huggingface_hub import constants

    hub = f"the Hugging Face hub ({hub_endpoint()})"
    cache = f"the local hub cache ({constants.HF_HUB_CACHE})"
    if offline:
        return (f"model {name!r}: no such local folder, and as a hub name it cannot be downloaded: HF_HUB_OFFLINE=1 "
                f"keeps {hub} out of reach and {cache} does not hold it; give an existing checkpoint folder, "
                "or set HF_HUB_OFFLINE=0 to download it")
    return (f"model {name!r}: no such local folder, and as a hub name it cannot be looked up: {hub} cannot be "
            f"reached (no network?) and {cache} does not hold it; give an existing checkpoint folder, or connect "
            "to the network and retry")


def check_folder(path: Path, *, trust_remote_code: bool = False, torch_free: bool = False) -> dict:
    """Check a local checkpoint folder before transformers reads it and return its
    ``config.json``: a folder with a readable JSON-object config, small JSON files readable,
    and no request to run the folder's own code (``auto_map``) unless ``trust_remote_code``.
    ``torch_free``: the caller may never import torch (``model info``), so the architecture is
    looked up in transformers' source (:func:`check_model_type`)."""
    if not path.is_dir():
        raise ModelLoadError(f"model path {path} is a file; expected a checkpoint folder with config.json", file=path)
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"model folder {path} has no config.json: not a Hugging Face checkpoint", file=path)
    docs = {}
    for fname in CHECKED_JSON:
        f = path / fname
        if f.is_file():
            docs[fname] = load_json(f, error=ModelLoadError)
            if not isinstance(docs[fname], dict):
                raise ModelLoadError(f"{f}: expected a JSON object", file=f)
    if not docs["config.json"].get("auto_map"):  # custom code brings its own architecture
        check_model_type(path / "config.json", docs["config.json"], torch_free=torch_free)
    if not trust_remote_code:
        for fname in ("config.json", "tokenizer_config.json"):
            refuse_remote_code(docs.get(fname, {}), path, fname)
    return docs["config.json"]


def refuse_remote_code(doc: dict, path: Path, fname: str, *, error: type[UserError] = ModelLoadError,
                       hint: str = "pass --trust-remote-code (trust_remote_code=True) to allow it") -> None:
    """Raise ``error`` naming ``path / fname`` when the JSON document ``doc`` asks to run the
    folder's own code (``auto_map``); what loading, planning and describing a model all refuse."""
    auto = doc.get("auto_map")
    if auto:
        refs = ", ".join(sorted({str(v) for v in (auto.values() if isinstance(auto, dict) else [auto])}))
        raise error(f"{path}: {fname} asks to run the folder's own code (auto_map {refs}); refused; {hint}",
                    file=path / fname, field="auto_map")


#: Architectures named in an "unknown architecture" error (when none is close to the bad one).
COMMON_ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "phi", "gpt2", "gpt_neox", "olmo2")


def check_model_type(config_file: Path, config: dict, *, torch_free: bool = False) -> None:
    """Refuse a ``config.json`` whose ``model_type`` transformers does not know, naming the
    closest ones it does (and how many it knows): "unknown architecture 'foo'; transformers
    knows ...". A config without ``model_type`` is left to transformers. A load imports
    transformers anyway, so only ``torch_free`` callers read its table from the source first."""
    if "model_type" not in config:
        return
    mt = config["model_type"]
    if torch_free:  # transformers' table read from its source (0.2 s); importing it imports torch (seconds)
        from .hf_tables import known_model_types

        known_fast = known_model_types()
        if isinstance(mt, str) and known_fast is not None and mt in known_fast:
            return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if isinstance(mt, str) and mt in CONFIG_MAPPING_NAMES:
        return
    import difflib

    import transformers

    known = sorted(CONFIG_MAPPING_NAMES)
    close = difflib.get_close_matches(str(mt), known, n=5, cutoff=0.6)
    names = close or [a for a in COMMON_ARCHS if a in CONFIG_MAPPING_NAMES]
    raise ModelLoadError(
        f"{config_file}: unknown architecture {mt!r} (model_type); transformers {transformers.__version__} knows "
        f"{len(known)} architectures, {'the closest being' if close else 'e.g.'} {', '.join(names)}",
        file=config_file, field="model_type")


def first_line(e: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, at most ``limit`` characters."""
    text = (str(e).strip().splitlines() or [""])[0]
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def diagnose_weights(path: Path) -> ModelLoadError | None:
    """The first weights file in ``path`` that cannot be read, as an error naming it (or None).
    Safetensors files are opened (header only); PyTorch files are read with
    ``weights_only=True`` (no code runs) onto the ``meta`` device (no memory for the values)."""
    import torch

    for f in sorted(path.iterdir()):
        if not f.is_file() or f.suffix not in WEIGHT_SUFFIXES:
            continue
        try:
            if f.suffix == ".safetensors":
                from safetensors import safe_open

                with safe_open(str(f), framework="pt") as h:
                    h.keys()
            else:
                with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the error says enough
                    warnings.simplefilter("ignore")
                    torch.load(f, map_location="meta", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any failure to read is the file's fault
            text = str(e)
            if "Weights only load failed" in text:  # torch's long advice; keep the reason only
                reason = text.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()
                why = reason[0] if reason and "Weights only" not in reason[0] else "refused"
                return ModelLoadError(f"{f}: not a weights file PyTorch can read without running code ({why})", file=f)
            kind = "safetensors" if f.suffix == ".safetensors" else "PyTorch"
            return ModelLoadError(f"{f}: not a readable {kind} weights file ({first_line(e)})", file=f)
    return None
