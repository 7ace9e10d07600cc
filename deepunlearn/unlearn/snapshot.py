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
"""

from __future__ import annotations

from typing import Iterator

import torch
from pydantic import BaseModel, ConfigDict, Field


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

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._saved.values())

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
        from peft.tuners.lora import LoraModel

        params = params or LoraParams()
        self.model = model
        self._requires_grad = {n: p.requires_grad for n, p in model.named_parameters()}
        config = LoraConfig(
            r=params.r, lora_alpha=params.alpha, lora_dropout=params.dropout,
            target_modules=params.target_modules, task_type="CAUSAL_LM",
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the adapter's random init (lora_A) is reproducible
            self._lora = LoraModel(model, config, self.ADAPTER)
        self.removed = False

    def parameters(self) -> list[torch.nn.Parameter]:
        """The adapter's trainable parameters."""
        return [p for n, p in self.model.named_parameters() if p.requires_grad and "lora_" in n]

    def remove(self) -> None:
        """Take the adapter out (no merge): the original modules and flags come back."""
        if self.removed:
            return
        self._lora.unload()
        for n, p in self.model.named_parameters():
            p.requires_grad_(self._requires_grad.get(n, p.requires_grad))
        self.removed = True
