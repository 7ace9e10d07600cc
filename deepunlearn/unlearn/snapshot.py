"""Undo an unlearning run in memory: a weight snapshot, or a LoRA adapter that is removed.

The per-target loop (EasyEdit's "measure before and after, restore in between") unlearns one
target, probes, and must give the next target the *original* model. Reloading a checkpoint from
disk for every target and grid point is slow and writing one is pointless, so:

* :class:`WeightSnapshot` clones the state dict once (on CPU by default, or on the model's device)
  and :meth:`WeightSnapshot.restore` copies it back in place, bit for bit. The optimizer state of
  a run is simply dropped with its optimizer.
* :class:`LoraAdapter` is for models whose full optimizer state does not fit: the base weights stay
  frozen, a fresh adapter is trained, and :meth:`LoraAdapter.remove` takes it out again, which
  restores the original modules (and the original ``requires_grad`` flags).

LoRA serves every method. GA and NPO train the adapter instead of the weights. TV and WHP
reinforce the target by training the adapter, so the reinforced model is ``θ + ΔW`` with
``ΔW = s·B·A`` (``s = lora_alpha / r``) on the adapted projections, and:

* TV's ``θ - α·(θ_reinf - θ) = θ - α·ΔW`` is the same adapter with its scale set to ``-α·s``
  (:meth:`LoraAdapter.scale` with factor ``-α``): no weight is written, nothing is copied;
* WHP's two distributions are the one model with the adapter switched on (reinforced) and off
  (original, :meth:`LoraAdapter.disabled`).

Neither keeps a second copy of the weights (full-mode TV keeps ``θ_reinf`` beside the snapshot,
full-mode WHP a reinforced copy of the model) nor full AdamW states (16 bytes a parameter), which
is what lets every method run on a 7-8B model on one 80 GB GPU.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserError


def _unique_tensors(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``state_dict`` entries with tied tensors (same storage) listed once."""
    seen: set[tuple[int, int]] = set()
    for name, t in model.state_dict(keep_vars=True).items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset()) if t.numel() else (id(t), 0)
        if key in seen:
            continue
        seen.add(key)
        yield name, t


class WeightSnapshot:
    """The model's parameters and buffers at one moment, to copy back in place.

    ``device``: where the copy lives: ``"cpu"`` (default; costs host memory, not accelerator
    memory) or ``"same"`` (each tensor beside the original: fastest restore). Tied weights are
    stored once.

    Examples
    --------
    >>> import torch
    >>> m = torch.nn.Linear(3, 2)
    >>> snap = WeightSnapshot(m)
    >>> with torch.no_grad():
    ...     _ = m.weight.add_(1.0)
    >>> snap.equal(m)
    False
    >>> snap.restore(m)
    >>> snap.equal(m)
    True
    """

    def __init__(self, model: torch.nn.Module, device: str | torch.device = "cpu"):
        self.device = device
        self._saved: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, t in _unique_tensors(model):
                target = t.device if device == "same" else torch.device(device)
                self._saved[name] = t.detach().to(target, copy=True)
        self.names = list(self._saved)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._saved[name]

    def _live(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        live = model.state_dict(keep_vars=True)
        missing = [n for n in self._saved if n not in live]
        if missing:
            raise ValueError(
                f"model does not match its snapshot: {len(missing)} tensors are gone, first {missing[0]!r} "
                "(was a LoRA adapter left in the model?)"
            )
        return live

    def restore(self, model: torch.nn.Module) -> None:
        """Copy the saved tensors back into the model's own tensors (in place, no reallocation)."""
        live = self._live(model)
        with torch.no_grad():
            for name, saved in self._saved.items():
                live[name].copy_(saved, non_blocking=False)

    def equal(self, model: torch.nn.Module) -> bool:
        """True iff every saved tensor is bitwise equal to the model's (``torch.equal``)."""
        live = self._live(model)
        with torch.no_grad():
            return all(torch.equal(live[n].detach().to(s.device), s) for n, s in self._saved.items())


class LoraParams(BaseModel):
    """The adapter trained in LoRA mode (peft's ``LoraConfig``). ``target_modules=None`` lets peft
    choose its default projections for the architecture (``q_proj``/``v_proj`` for Llama)."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | str | None = None


class LoraAdapter:
    """A LoRA adapter injected into ``model`` in place (the object stays the same, so probing and
    ``generate`` use the adapter), removed again by :meth:`remove`.

    The base weights are frozen while it is in; removing it puts the original modules back and
    the ``requires_grad`` flags as they were, so the model is exactly the one before.
    """

    ADAPTER = "deepunlearn"

    def __init__(self, model: torch.nn.Module, params: LoraParams | None = None, *, seed: int = 0):
        from peft import LoraConfig
        from peft.tuners.lora import LoraLayer, LoraModel

        params = params or LoraParams()
        self.model = model
        self._requires_grad = {n: p.requires_grad for n, p in model.named_parameters()}
        config = LoraConfig(
            r=params.r, lora_alpha=params.alpha, lora_dropout=params.dropout,
            target_modules=params.target_modules or default_target_modules(model), task_type="CAUSAL_LM",
            fan_in_fan_out=_has_conv1d(model),  # GPT-2's Conv1D stores its weight transposed
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the adapter's random init (lora_A) is reproducible
            self._lora = LoraModel(model, config, self.ADAPTER)
        self._layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
        self._params = [p for n, p in model.named_parameters() if "lora_" in n]
        self.removed = False

    def parameters(self) -> list[torch.nn.Parameter]:
        """The adapter's trainable parameters."""
        return [p for p in self._params if p.requires_grad]

    def scale(self, factor: float) -> None:
        """Set every adapted layer's scale to ``factor · lora_alpha / r`` (peft's
        ``LoraLayer.set_scale``): 1 is the trained adapter (``θ + ΔW``), ``-α`` gives
        ``θ - α·ΔW``, TV's negated task vector, without touching a weight."""
        for layer in self._layers:
            layer.set_scale(self.ADAPTER, factor)

    def enable(self, on: bool = True) -> None:
        """Switch the adapter on (the model is ``θ + scale·B·A``) or off (exactly the base model:
        peft calls only the original layer)."""
        if on:
            self._lora.enable_adapter_layers()
        else:
            self._lora.disable_adapter_layers()

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        """The block runs the base model (adapter off); the adapter is on again after it."""
        self.enable(False)
        try:
            yield
        finally:
            self.enable(True)

    def without(self, fn: Callable) -> Callable:
        """``fn`` (a logits function of the model) run with the adapter off: WHP's original model."""

        def call(*args, **kwargs):
            with self.disabled():
                return fn(*args, **kwargs)

        return call

    def remove(self) -> None:
        """Take the adapter out (no merge): the original modules and flags come back."""
        if self.removed:
            return
        self._lora.unload()
        for n, p in self.model.named_parameters():
            p.requires_grad_(self._requires_grad.get(n, p.requires_grad))
        self.removed = True


def default_target_modules(model: torch.nn.Module) -> list[str] | None:
    """The projections LoRA adapts when :class:`LoraParams` names none: peft's default for the
    architecture where it has one (``None``: peft picks it), else the attention's query and
    value projections that the model has (``q_proj``/``v_proj``, e.g. OLMo 2, which peft's table
    lacks)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    if getattr(getattr(model, "config", None), "model_type", None) in DEFAULTS:
        return None
    leaves = {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    found = [n for n in ("q_proj", "v_proj") if n in leaves]
    if not found:
        raise UserError(f"no default LoRA target modules for model type "
                         f"{getattr(getattr(model, 'config', None), 'model_type', None)!r}: name them in "
                         "LoraParams.target_modules", field="target_modules")
    return found


def _has_conv1d(model: torch.nn.Module) -> bool:
    """Whether the model's projections are transformers' ``Conv1D`` (GPT-2), whose weight is
    (in, out): peft then needs ``fan_in_fan_out=True`` (it would set it itself, with a warning)."""
    from transformers.pytorch_utils import Conv1D

    return any(isinstance(m, Conv1D) for m in model.modules())
