"""A model's parameters, LoRA parameters and buffer bytes counted from its config alone, for the
architectures the tool builds (:data:`deepunlearn.probe.tiny.ARCHS`), without importing torch.

:func:`plain_config` reads a ``config.json`` document into a :class:`PlainConfig`: the document's
values over the defaults of transformers' config class for its ``model_type``, read from the
class's source text (:func:`config_defaults`, as :mod:`deepunlearn.probe.hf_tables` reads
transformers' tables; importing a config class imports torch). :func:`count` gives the counts
by each architecture's formula (tied embeddings once; peft's default LoRA target modules for the
architecture, read from peft's source the same way). Where either source cannot be read, or for
another architecture, they return ``None`` and the plan builds the model on torch's ``meta``
device instead (:func:`~.plan_skeleton.skeleton`).
``tests/unlearn/test_unlearn_plan_count.py`` checks every formula against that count.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

#: architectures counted by formula: llama-style decoders (gated MLP, RMSNorm, rotary), Phi,
#: GPT-2 and GPT-NeoX
COUNTED = ("llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma2", "phi", "gpt_neox", "gpt2")
#: GPT-2's names of the shared config fields (its config class's ``attribute_map``)
GPT2_NAMES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions"}
#: the size fields a config must give as whole numbers >= 1 to be counted by formula
SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
#: partial rotary embeddings by default: the share of a head rotated (Phi, GPT-NeoX)
ROTARY_SHARE = {"phi": 0.5, "gpt_neox": 0.25}


def _source(package: str, *parts: str) -> ast.Module | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return ast.parse(Path(list(spec.submodule_search_locations)[0], *parts).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def config_defaults(model_type: str) -> dict[str, Any] | None:
    """The literal class-level defaults of transformers' config class for ``model_type``
    (``vocab_size: int = 32000``, ...), read from its source; ``None`` when unreadable."""
    tree = _source("transformers", "models", model_type, f"configuration_{model_type}.py")
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
            out: dict[str, Any] = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        out[item.target.id] = ast.literal_eval(item.value)
                    except ValueError:
                        continue
            return out if "vocab_size" in out else None
    return None


@functools.lru_cache(maxsize=None)
def lora_targets(model_type: str) -> tuple[str, ...] | None:
    """peft's default LoRA target modules for ``model_type``, read from its source."""
    tree = _source("peft", "utils", "constants.py")
    for node in tree.body if tree is not None else ():
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING"
                        for t in node.targets)):
            try:
                table = ast.literal_eval(node.value)
            except ValueError:
                return None
            got = table.get(model_type)
            return tuple(got) if isinstance(got, list) else None
    return None


class PlainConfig:
    """A ``config.json`` document over its class's defaults, read as attributes (GPT-2's own
    names answer to the shared ones too). It has what a plan reads of a transformers config."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)
        self.model_type = str(values["model_type"])

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        if self.__dict__.get("model_type") == "gpt2" and name in GPT2_NAMES:
            return values.get(GPT2_NAMES[name])
        raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def to_json_string(self, use_diff: bool = False) -> str:
        return json.dumps(self._values, sort_keys=True, default=str)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def plain_config(data: dict[str, Any]) -> PlainConfig | None:
    """The :class:`PlainConfig` of ``data`` when its architecture is :data:`COUNTED`, its class's
    defaults are readable and its sizes are whole numbers (heads dividing the width unless
    ``head_dim`` is given); else ``None`` (transformers reads it, and says what is wrong)."""
    mt = data.get("model_type")
    defaults = config_defaults(mt) if mt in COUNTED else None
    if defaults is None:
        return None
    cfg = PlainConfig({**defaults, **data})
    sizes = [getattr(cfg, k, None) for k in SIZES]
    if not all(_whole(v) for v in sizes):
        return None
    for key in ("intermediate_size", "num_key_value_heads", "head_dim"):
        v = getattr(cfg, key, None)
        if v is not None and not _whole(v):
            return None
    if getattr(cfg, "head_dim", None) is None and cfg.hidden_size % cfg.num_attention_heads:
        return None
    return cfg


def _rotary_share(config: Any) -> float:
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("partial_rotary_factor") is not None:
        return float(rope["partial_rotary_factor"])
    for key in ("partial_rotary_factor", "rotary_pct"):
        v = getattr(config, key, None)
        if v is not None:
            return float(v)
    return ROTARY_SHARE.get(config.model_type, 1.0)


def count(config: Any, lora_r: int | None = None) -> tuple[int, int, int, bool] | None:
    """``(parameters, LoRA parameters, buffer bytes, gated MLP)`` of the causal LM of ``config``
    (a transformers config or a :class:`PlainConfig`), LoRA of rank ``lora_r`` on peft's default
    targets (0 without); ``None`` for an architecture without a formula here."""
    mt = str(getattr(config, "model_type", ""))
    if mt not in COUNTED:
        return None
    targets = lora_targets(mt) if lora_r else ()
    if targets is None or getattr(config, "add_cross_attention", False):  # GPT-2 with cross-attention
        return None
    def g(key: str, default: Any = None) -> Any:  # GPT-2's own names (not all are in its attribute_map)
        return getattr(config, GPT2_NAMES.get(key, key) if mt == "gpt2" else key, default)

    h, L, V, nh = g("hidden_size"), g("num_hidden_layers"), g("vocab_size"), g("num_attention_heads")
    hd = g("head_dim") or h // nh
    nkv = g("num_key_value_heads") or nh
    q, kv = nh * hd, nkv * hd
    inter = g("intermediate_size") or 4 * h
    # name -> (in, out, bias) of every linear layer of one block
    if mt == "gpt2":
        linears = {"c_attn": (h, 3 * h, True), "attn.c_proj": (h, h, True), "c_fc": (h, inter, True),
                   "mlp.c_proj": (inter, h, True)}
        norms, gated = 2 * 2 * h, False
    elif mt == "gpt_neox":
        bias = bool(g("attention_bias", True))
        linears = {"query_key_value": (h, 3 * h, bias), "attention.dense": (h, h, bias),
                   "dense_h_to_4h": (h, inter, True), "dense_4h_to_h": (inter, h, True)}
        norms, gated = 2 * 2 * h, False
    elif mt == "phi":
        linears = {"q_proj": (h, q, True), "k_proj": (h, kv, True), "v_proj": (h, kv, True),
                   "dense": (q, h, True), "fc1": (h, inter, True), "fc2": (inter, h, True)}
        norms, gated = 2 * h + (4 * hd if g("qk_layernorm") else 0), False
    else:  # llama-style: RMSNorm weights, gated MLP
        qkv_bias = True if mt == "qwen2" else bool(g("attention_bias", False))
        mlp_bias = bool(g("mlp_bias", False))
        linears = {"q_proj": (h, q, qkv_bias), "k_proj": (h, kv, qkv_bias), "v_proj": (h, kv, qkv_bias),
                   "o_proj": (q, h, qkv_bias and mt != "qwen2"), "gate_proj": (h, inter, mlp_bias),
                   "up_proj": (h, inter, mlp_bias), "down_proj": (inter, h, mlp_bias)}
        norms = {"gemma2": 4 * h, "qwen3": 2 * h + 2 * hd, "olmo2": 2 * h + q + kv}.get(mt, 2 * h)
        gated = True
    block = norms + sum(i * o + (o if b else 0) for i, o, b in linears.values())
    final_norm = 2 * h if mt in ("gpt2", "gpt_neox", "phi") else h
    embeddings = V * h + (g("n_positions") * h if mt == "gpt2" else 0)
    head = (0 if g("tie_word_embeddings", False) else V * h) + (V if mt == "phi" else 0)  # Phi's bias stays
    params = embeddings + L * block + final_norm + head
    lora = L * sum(lora_r * (i + o) for name, (i, o, _) in linears.items() if name.split(".")[-1] in targets)
    buffers = 0
    if mt != "gpt2":  # rotary inv_freq and its original, float32
        rotated = int(hd * _rotary_share(config))
        buffers = 2 * 4 * ((rotated + 1) // 2)
    if mt == "gemma2":
        buffers += 4  # the embedding scale
    return params, lora, buffers, gated
