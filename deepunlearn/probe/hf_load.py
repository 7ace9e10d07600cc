"""The one guarded way a tokenizer, a config or a PEFT adapter reaches transformers or peft.

transformers, asked for a tokenizer or config whose folder names its own Python (``auto_map``)
and given no ``trust_remote_code``, asks "Do you wish to run the custom code? [y/N]" on stdout
and runs the code on "y". Every load of deepunlearn (checkpoints, PEFT adapters, the rows of an
``evaluate --manifest``, lm-eval's ``deepunlearn-hf`` model, ``plan``, ``model info``) goes
through :func:`load_tokenizer`, :func:`load_config` or :func:`load_adapter`, which

* read a local folder's JSON files that can name code (:data:`CODE_FILES`) first and refuse an
  ``auto_map`` in any of them unless ``trust_remote_code``, naming the file and the key;
* always pass ``trust_remote_code`` explicitly, so nothing ever prompts (a hub model's request
  is refused by transformers itself and turned into the same one line);
* turn what a corrupt file makes transformers, peft or the tokenizers library raise (a Rust
  panic included) into one :class:`~.sources.ModelLoadError`, naming ``tokenizer.json`` when
  the tokenizers library cannot read it.

Chat templates, the other code a folder carries, are rendered under bounds by
:mod:`.chat_render`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ..errors import UserError, load_json
from .hf_quiet import quiet_hf
from .sources import ModelLoadError, first_line, refuse_remote_code

#: The JSON files of a model or adapter folder that can ask transformers to run the folder's code.
CODE_FILES = ("config.json", "tokenizer_config.json", "adapter_config.json")
TRUST_HINT = "pass --trust-remote-code (trust_remote_code=True) to allow it"


def local_folder(where: Any) -> Path | None:
    """``where`` as a local folder, or ``None`` (a hub name, a file)."""
    p = Path(str(where)).expanduser()
    return p if p.is_dir() else None


def check_code_files(folder: Path, *, trust_remote_code: bool = False, error: type[UserError] = ModelLoadError,
                     hint: str = TRUST_HINT) -> dict[str, dict]:
    """The :data:`CODE_FILES` present in ``folder``, parsed; one that is not a readable JSON
    object, or (unless ``trust_remote_code``) holds an ``auto_map``, is an ``error`` naming it."""
    docs: dict[str, dict] = {}
    for fname in CODE_FILES:
        f = folder / fname
        if not f.is_file():
            continue
        doc = load_json(f, error=error)
        if not isinstance(doc, dict):
            raise error(f"{f}: expected a JSON object", file=f)
        docs[fname] = doc
        if not trust_remote_code:
            refuse_remote_code(doc, folder, fname, error=error, hint=hint)
    return docs


def not_interrupt(e: BaseException) -> BaseException:
    """``e`` unless it is Ctrl-C or an exit (re-raised): a Rust panic in the tokenizers library
    (pyo3's PanicException, a BaseException) is the files' fault like any other error."""
    if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        raise e
    return e


def load_error(what: str, source: str, e: BaseException) -> ModelLoadError:
    """A ModelLoadError for an exception out of ``from_pretrained`` (its first line only)."""
    if isinstance(e, ModelLoadError):
        return e
    if "trust_remote_code" in str(e):
        return ModelLoadError(f"{source}: the model asks to run its own code; refused; {TRUST_HINT}",
                              file=source, field="auto_map")
    if "ignore_mismatched_sizes" in str(e):
        return ModelLoadError(f"{source}: the weights do not fit config.json (parameters of another shape): a "
                              "corrupt checkpoint, or a config.json from another model", file=source)
    if isinstance(e, MemoryError):
        return ModelLoadError(f"cannot load {what} {source!r}: out of memory", file=source)
    return ModelLoadError(f"cannot load {what} {source!r}: {first_line(e)}", file=source)


def diagnose_tokenizer(folder: Path) -> ModelLoadError | None:
    """``folder/tokenizer.json`` as an error naming it when the tokenizers library cannot read it."""
    f = folder / "tokenizer.json"
    if not f.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        Tokenizer.from_file(str(f))
    except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException
        not_interrupt(e)
        return ModelLoadError(f"{f}: not a tokenizer file the tokenizers library can read ({first_line(e)})", file=f)
    return None


def load_tokenizer(where: str | Path, *, source: str | None = None, trust_remote_code: bool = False,
                   check: bool = True, **kwargs):
    """``AutoTokenizer.from_pretrained(where, trust_remote_code=..., **kwargs)`` after
    :func:`check_code_files` of a local folder (``check=False``: the caller checked them);
    every failure a ModelLoadError naming ``source`` (default ``where``) or the bad file."""
    source = str(where) if source is None else source
    folder = local_folder(where)
    if check and folder is not None:
        check_code_files(folder, trust_remote_code=trust_remote_code)
    from transformers import AutoTokenizer

    try:
        with quiet_hf(errors_only=folder is not None):
            return AutoTokenizer.from_pretrained(str(where), trust_remote_code=bool(trust_remote_code), **kwargs)
    except BaseException as e:  # noqa: BLE001 - whatever the folder's files make transformers raise
        not_interrupt(e)
        bad = diagnose_tokenizer(folder) if folder is not None and "gguf_file" not in kwargs else None
        raise (bad or load_error("the tokenizer of", source, e)) from e


def load_config(where: str | Path, *, trust_remote_code: bool = False, error: type[UserError] = ModelLoadError,
                hint: str = TRUST_HINT, check: bool = True, **kwargs):
    """``AutoConfig.from_pretrained(where, trust_remote_code=..., **kwargs)`` after
    :func:`check_code_files` of a local folder (a refusal is an ``error`` ending in ``hint``);
    transformers' own exceptions pass through for the caller to word."""
    folder = local_folder(where)
    if check and folder is not None and "gguf_file" not in kwargs:
        check_code_files(folder, trust_remote_code=trust_remote_code, error=error, hint=hint)
    from transformers import AutoConfig

    with quiet_hf(errors_only=True):
        return AutoConfig.from_pretrained(str(where), trust_remote_code=bool(trust_remote_code), **kwargs)


ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def check_adapter(folder: Path, *, trust_remote_code: bool = False) -> dict:
    """A PEFT adapter folder checked before peft builds anything (:func:`check_code_files`, and
    a weights file must be there); its ``adapter_config.json``, parsed."""
    docs = check_code_files(folder, trust_remote_code=trust_remote_code)
    if not any((folder / w).is_file() for w in ADAPTER_WEIGHTS):
        raise ModelLoadError(f"{folder}: a PEFT adapter without weights ({' or '.join(ADAPTER_WEIGHTS)})", file=folder)
    return docs.get("adapter_config.json", {})


def load_adapter(model, folder: Path, *, name: str):
    """``model`` with the PEFT adapter in ``folder`` merged in (the caller ran
    :func:`check_adapter` on it); a broken adapter is a ModelLoadError naming ``name``."""
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency of LoRA mode
        raise ModelLoadError(f"--unlearned {name}: a PEFT adapter, and the peft package is not installed",
                             file=name) from None
    try:
        with quiet_hf(errors_only=True), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notes of transformers' internals, several lines each
            return PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    except BaseException as e:  # noqa: BLE001 - whatever a broken adapter makes peft raise
        not_interrupt(e)
        raise ModelLoadError(f"cannot load the PEFT adapter {name!r}: {first_line(e)}", file=name) from e
