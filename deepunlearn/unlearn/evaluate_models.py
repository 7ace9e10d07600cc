"""Loading the models ``evaluate`` compares: the original A, and each unlearned B as whatever
:func:`~deepunlearn.probe.models.load_model` accepts or a PEFT adapter folder on A.

B must share A's tokenizer: the probe compares answers token by token, so a model with another
vocabulary would be judged on other questions. Such a B is refused, naming both models.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..probe.models import ModelBundle, load_model
from ..errors import UserError
from ..probe.sources import ModelLoadError

ADAPTER_CONFIG = "adapter_config.json"


class EvaluateError(UserError, ValueError):
    """An unlearned model that cannot be judged against the original (another tokenizer, an
    adapter on another base, a target the original does not know, ...)."""


def load_original(name: str, kb, *, device=None, dtype=None, prompt=None, answer_format: str = "recorded",
                  trust_remote_code: bool = False) -> ModelBundle:
    """A, with its own answer format (recorded, else its family's) unless ``prompt`` is given."""
    if is_adapter(name):
        raise EvaluateError(f"--original {name}: a PEFT adapter; give the model it was trained into "
                            "(merge it first, or pass its base as --original)", file=name, field="--original")
    return load_model(name, device=device, dtype=dtype, prompt=prompt,
                      answer_format=answer_format, trust_remote_code=trust_remote_code)


def is_adapter(name: str) -> bool:
    return (Path(name).expanduser() / ADAPTER_CONFIG).is_file()


def _same_model(base: str, original: str) -> bool:
    """Whether the adapter's recorded base names A: the same folder, or the same hub name."""
    b, a = Path(base).expanduser(), Path(original).expanduser()
    if b.exists() and a.exists():
        return b.resolve() == a.resolve()
    return base.rstrip("/") == original.rstrip("/")


#: Fields of an adapter_config.json that size the tensors peft allocates before it reads the weights.
ADAPTER_SIZES = ("r", "num_virtual_tokens", "token_dim")


def check_sizes(folder: Path, cfg: dict) -> None:
    """Where the adapter's weights are a safetensors file, every size field
    (:data:`ADAPTER_SIZES`, ``rank_pattern`` values) must be a positive integer no larger than the
    largest dimension its header declares: peft allocates the layers a config describes before it
    reads the weights (``r = 100000000`` on a 16-wide model asked for 6.4 GB)."""
    from ..probe.model_bounds import read_safetensors_header

    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        return
    header = read_safetensors_header(weights)
    dims = [d for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)
            for d in (v.get("shape") if isinstance(v.get("shape"), list) else []) if isinstance(d, int)]
    largest = max(dims, default=0)
    sizes = [(k, cfg[k]) for k in ADAPTER_SIZES if cfg.get(k) is not None]
    if isinstance(cfg.get("rank_pattern"), dict):
        sizes += [(f"rank_pattern.{k}", v) for k, v in cfg["rank_pattern"].items()]
    where = folder / ADAPTER_CONFIG
    for key, v in sizes:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= largest:
            raise ModelLoadError(f"{where}: field {key} = {v!r}: expected a positive integer no larger than the "
                                 f"largest dimension of {weights.name} ({largest})", file=where, field=key)


def _adapter_base(folder: Path) -> str:
    from ..errors import load_json

    cfg = load_json(folder / ADAPTER_CONFIG, error=ModelLoadError)
    base = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    if not isinstance(base, str) or not base:
        raise ModelLoadError(f"{folder / ADAPTER_CONFIG}: field base_model_name_or_path: missing; cannot tell "
                             "which model the adapter belongs to", file=folder / ADAPTER_CONFIG,
                             field="base_model_name_or_path")
    return base


def load_unlearned(name: str, original: ModelBundle, *, original_name: str, original_rows: int, device=None,
                   dtype=None, trust_remote_code: bool = False) -> ModelBundle:
    """B in A's answer format; a PEFT adapter is merged into a fresh copy of A (its recorded
    base must be A). A tokenizer or vocabulary other than A's is an :class:`EvaluateError`.
    An adapter's files are checked before anything is loaded
    (:func:`~deepunlearn.probe.hf_load.check_adapter`, :func:`check_sizes`): an ``auto_map`` in
    its adapter, tokenizer or model config is refused unless ``trust_remote_code``, sizes its
    weights do not back are refused, and its tokenizer loads as every tokenizer does."""
    from ..probe.hf_load import check_adapter, load_adapter, load_tokenizer

    folder = Path(name).expanduser()
    if is_adapter(name):
        check_sizes(folder, check_adapter(folder, trust_remote_code=trust_remote_code))
        base = _adapter_base(folder)
        if not _same_model(base, original_name):
            raise EvaluateError(f"--unlearned {name}: a PEFT adapter on base model {base!r}, but --original is "
                                f"{original_name!r}; judge it against its own base", file=name, field="--unlearned")
        own_tokenizer = None
        if any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
            own_tokenizer = load_tokenizer(folder, source=name, trust_remote_code=trust_remote_code, check=False)
        bundle = load_model(original_name, device=device, dtype=dtype, prompt=original.prompt,
                            trust_remote_code=trust_remote_code)
        bundle.model = load_adapter(bundle.model, folder, name=name)
        bundle.model.eval()
        bundle.name, bundle.path = name, folder.resolve()
        if own_tokenizer is not None:
            check_vocab(own_tokenizer, bundle.model, original, original_rows, name, original_name)
        check_vocab(bundle.tokenizer, bundle.model, original, original_rows, name, original_name)
        return bundle
    bundle = load_model(name, device=device, dtype=dtype, prompt=original.prompt, trust_remote_code=trust_remote_code)
    check_vocab(bundle.tokenizer, bundle.model, original, original_rows, name, original_name)
    return bundle


def _vocab_signature(tokenizer) -> tuple:
    specials = (tokenizer.bos_token_id, tokenizer.eos_token_id)
    return json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False), specials


def check_vocab(tokenizer, model, original: ModelBundle, original_rows: int, name: str, original_name: str) -> None:
    """Refuse a B whose tokenizer (vocabulary, BOS/EOS) or embedding rows differ from A's."""
    va, vb = len(original.tokenizer.get_vocab()), len(tokenizer.get_vocab())
    if _vocab_signature(tokenizer) != _vocab_signature(original.tokenizer):
        raise EvaluateError(f"--unlearned {name}: its tokenizer ({vb} tokens) is not the tokenizer of --original "
                            f"{original_name} ({va} tokens); an unlearned model must keep its original's vocabulary",
                            file=name, field="--unlearned")
    rows_b = model.get_input_embeddings().weight.shape[0]
    rows_a = original_rows
    if rows_b != rows_a:
        raise EvaluateError(f"--unlearned {name}: its embedding has {rows_b} rows, --original {original_name} has "
                            f"{rows_a}; an unlearned model must keep its original's vocabulary",
                            file=name, field="--unlearned")
