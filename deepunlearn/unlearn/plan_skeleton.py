"""What a model holds, for a memory plan: its parameters, LoRA parameters, buffer bytes and MLP
kind (:class:`Skeleton`), counted by formula without torch where :mod:`.plan_count` knows the
architecture, else on torch's ``meta`` device (:func:`meta_skeleton`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .plan_config import PlanError
from .plan_count import count


@dataclass
class Skeleton:
    """What the meta-device model says: parameters, LoRA parameters, buffer bytes, MLP kind."""

    params: int
    lora: int
    buffer_bytes: int
    gated: bool


_SKELETONS: dict[tuple[str, int | None], Skeleton] = {}


def skeleton(config: Any, *, lora_r: int | None = None, source: str = "config") -> Skeleton:
    """Count the model's parameters (tied tensors once) and buffer bytes; with ``lora_r``, also
    peft's default LoRA adapter of that rank for the architecture. By formula, without torch,
    for the architectures :func:`~.plan_count.count` knows; else by :func:`meta_skeleton`. Remembered
    per config (a sweep plans every method of a model; the fix re-plans)."""
    key = (config.to_json_string(use_diff=False), lora_r)
    if key not in _SKELETONS:
        if len(_SKELETONS) > 32:
            _SKELETONS.clear()
        _SKELETONS[key] = _skeleton(config, lora_r, source)
    return _SKELETONS[key]


def _skeleton(config: Any, lora_r: int | None, source: str) -> Skeleton:
    counted = count(config, lora_r)
    if counted is not None:
        return Skeleton(*counted)
    return meta_skeleton(config, lora_r, source)


def meta_skeleton(config: Any, lora_r: int | None, source: str = "config") -> Skeleton:
    """:class:`Skeleton` of the model built on torch's ``meta`` device (imports torch,
    transformers' model classes and, with ``lora_r``, peft): the count for an architecture
    :func:`~.plan_count.count` has no formula for, and the reference its formulas are tested against."""
    import torch
    from transformers import AutoModelForCausalLM

    from ..probe.sources import first_line

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - a config transformers cannot build as a causal LM
        raise PlanError(f"{source}: not a causal-LM config transformers can build ({first_line(e)})",
                        file=source) from None
    n = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    gated = any(name.endswith(("gate_proj", "gate_up_proj")) for name, _ in model.named_modules())
    n_lora = 0
    if lora_r:
        from peft import LoraConfig
        from peft.tuners.lora import LoraModel

        try:
            with torch.device("meta"):
                LoraModel(model, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, task_type="CAUSAL_LM"), "plan")
        except Exception as e:  # noqa: BLE001 - peft has no default target modules for this architecture
            raise PlanError(f"{source}: peft cannot apply LoRA to {config.model_type!r} ({first_line(e)})",
                            file=source) from None
        n_lora = sum(p.numel() for name, p in model.named_parameters() if "lora_" in name)
    return Skeleton(params=n, lora=n_lora, buffer_bytes=buffers, gated=gated)
