"""RMU, Representation Misdirection for Unlearning (Li et al., 2024, "The WMDP Benchmark:
Measuring and Reducing Malicious Use With Unlearning", section 5 and its ``rmu/unlearn.py``).

At one middle layer ℓ, the forget rows' hidden states are pushed toward a fixed random direction
scaled up, and the retain rows' hidden states are held at the original model's:

``L = MSE(h_ℓ(forget), c · u)  +  α · MSE(h_ℓ(retain), h_ℓ^orig(retain))``

(:func:`~deepunlearn.unlearn.losses.masked_mse`: mean over the features and the positions that
predict an answer token, i.e. the answer tag and the answer; WMDP averages over every token of
its documents, open-unlearning over the answer tokens).

Choices, each documented where it differs from WMDP's code:

* ``h_ℓ``: the output of decoder layer ℓ (0-based), read with a forward hook on the layer as
  WMDP and open-unlearning do (``model.model.layers[ℓ]`` for Llama-style models,
  ``model.transformer.h[ℓ]`` for GPT-2-style ones, found generically: :func:`decoder_layers`).
  The forward stops right after that layer: RMU needs no logits. ``layer=None`` picks
  ``(n_layers - 1) // 2``: 15 of 32 (WMDP uses 7 of Zephyr-7B's 32), 0 of the tiny model's 2
  (the last layer's output would be read after its final norm in some families).
* ``u``: a fixed random unit vector, as WMDP ``torch.rand`` (uniform in [0, 1), normalised),
  drawn from a generator seeded with ``seed``.
* ``c``: WMDP's steering coefficient is absolute (6.5 for Zephyr-7B, 20 in its code's defaults,
  300 for Mixtral): the activations' scale differs by model, so here ``c = steering × the mean
  norm of the original model's forget activations at ℓ`` (computed once before the trajectory).
  The default ``steering = 4`` puts the target direction well outside the forget activations.
* trained parameters: the MLP output projection (Llama's ``down_proj``, GPT-2's ``c_proj``,
  Phi's ``fc2``: the MLP's last weight matrix) of layers ℓ-2..ℓ, as WMDP's ``param_ids=[6]`` of
  ``layer_ids=[5, 6, 7]``; ``train="mlp"`` trains every weight matrix of those MLPs. The other
  parameters are frozen for the run. LoRA mode trains the adapter.
* ``α`` is ``retain_weight``, default 1: open-unlearning's TOFU setting (``configs/trainer/RMU.yaml``:
  ``alpha: 1``, ``retain_loss_type: EMBED_DIFF``), the one meant for question/answer facts. WMDP's
  code defaults to 100 (1200 in its README for Zephyr-7B) for its hazard corpus; on the tiny model
  (64 wide, 2 layers) α = 100 or 10 held layer ℓ so firmly that 16 steps barely moved the target
  (log-likelihood -1.59 -> -1.60 / -1.63 at the default rate), α = 1 moved it to -1.63, and
  ``train="mlp"`` to -2.07. ``retain="nll"`` or ``"kl"`` replaces the activation term by the
  shared retain terms; ``"none"`` drops it.

Learning rate: WMDP's 5e-5, 2.5 times the EDU-RELAT paper's finetuning rate 2e-5.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import torch

from ..losses import IGNORE_INDEX, masked_mse
from .base import GradientUnlearner, Session, Step, UnlearnError
from .params.rmu import RMUParams
from .retain import RetainPoolError, retain_term


class _Stop(Exception):
    """Raised by the hook after layer ℓ: the rest of the forward is not needed."""


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's decoder layers: the first ``ModuleList`` whose length is the config's layer
    count (``model.model.layers``, ``model.transformer.h``, ``model.gpt_neox.layers``, also inside
    a LoRA-injected model)."""
    cfg = getattr(model, "config", None)
    n = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    for _, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0 and (n is None or len(m) == n):
            return m
    raise UnlearnError(f"rmu: cannot find the decoder layers of {type(model).__name__} (no ModuleList of "
                       f"{n} layers)")


def mlp_matrices(layer: torch.nn.Module, how: str = "down") -> list[torch.nn.Parameter]:
    """The weight matrices RMU trains in one decoder layer: its MLP's last weight matrix (the
    output projection) for ``how="down"``, every MLP matrix for ``"mlp"``."""
    mlp = getattr(layer, "mlp", None) or getattr(layer, "feed_forward", None)
    if mlp is None:
        raise UnlearnError(f"rmu: decoder layer {type(layer).__name__} has no mlp")
    mats = [p for _, p in mlp.named_parameters() if p.ndim >= 2]
    if not mats:
        raise UnlearnError(f"rmu: the mlp of {type(layer).__name__} has no weight matrix")
    return mats if how == "mlp" else mats[-1:]


def answer_positions(labels: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` mask of the positions whose next token is an answer token."""
    mask = torch.zeros_like(labels, dtype=torch.bool)
    mask[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    return mask


def layer_output(model: torch.nn.Module, layer: int, batch: dict) -> torch.Tensor:
    """The output hidden states ``[B, T, D]`` of decoder layer ``layer`` on ``batch`` (with the
    gradient if grad is enabled); the forward stops after that layer."""
    got: list[torch.Tensor] = []

    def hook(_module, _inputs, output):
        got.append(output[0] if isinstance(output, tuple) else output)
        raise _Stop

    handle = decoder_layers(model)[layer].register_forward_hook(hook)
    try:
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
    except _Stop:
        pass
    finally:
        handle.remove()
    if not got:
        raise UnlearnError(f"rmu: decoder layer {layer} was not run by the model's forward")
    return got[0]


class RMU(GradientUnlearner):
    """Misdirect layer ℓ's forget activations toward ``c·u``, hold its retain activations."""

    name = "rmu"
    Params = RMUParams
    default_retain = "activations"

    layer: int = 0
    control: torch.Tensor | None = None

    def _layer(self, session: Session) -> int:
        n = len(decoder_layers(session.model))
        ell = (n - 1) // 2 if self.params.layer is None else self.params.layer
        if ell >= n:
            raise UnlearnError(f"rmu: layer {ell} does not exist (the model has {n} decoder layers)", field="layer")
        return ell

    def original_activations(self, session: Session, batch: dict) -> torch.Tensor:
        with torch.no_grad():
            if session.lora is not None:
                with session.lora.disabled():
                    return layer_output(session.model, self.layer, batch)
            return layer_output(session.original_model(), self.layer, batch)

    def prepare(self, session: Session) -> None:
        """Layer ℓ, the direction ``u`` and the scaled target ``c·u`` (``c`` from the original
        model's forget activations)."""
        self.layer = self._layer(session)
        h = self.original_activations(session, session.batch).float()
        mask = answer_positions(session.batch["labels"])
        norm = h.norm(dim=-1)[mask].mean() if mask.any() else h.norm(dim=-1).mean()
        gen = torch.Generator().manual_seed(int(self.params.seed))
        u = torch.rand(h.shape[-1], generator=gen)
        self.control = (u / u.norm() * self.params.steering * norm).to(h.device)

    def train_parameters(self, session: Session) -> list[torch.nn.Parameter] | None:
        if session.lora is not None:
            return None
        layers = decoder_layers(session.model)
        return [p for i in range(max(0, self.layer - 2), self.layer + 1)
                for p in mlp_matrices(layers[i], self.params.train)]

    def loss(self, session: Session) -> torch.Tensor:
        h = layer_output(session.model, self.layer, session.batch)
        target = self.control.to(h.dtype).expand_as(h)
        return masked_mse(h, target, answer_positions(session.batch["labels"]))

    def retain_activations(self, session: Session) -> torch.Tensor:
        if session.retain is None:
            raise RetainPoolError("rmu's retain term needs a retain set, and this run has none", field="retain")
        batch = session.retain.batch(session.step)
        h = layer_output(session.model, self.layer, batch)
        return masked_mse(h, self.original_activations(session, batch), answer_positions(batch["labels"]))

    def total_loss(self, session: Session) -> torch.Tensor:
        loss = self.loss(session)
        kind, w = self.retain_kind, self.params.retain_weight
        if kind == "none" or w == 0:
            return loss
        term = self.retain_activations(session) if kind == "activations" else retain_term(session, kind)
        return loss + w * term

    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        """The shared trajectory with every parameter but the trained ones frozen (full mode)."""
        with self._frozen(session):
            yield from super().trajectory(session, grid)

    @contextlib.contextmanager
    def _frozen(self, session: Session):
        frozen: list[torch.nn.Parameter] = []
        if session.lora is None:
            self.layer = self._layer(session)
            keep = {id(p) for p in self.train_parameters(session)}
            frozen = [p for p in session.model.parameters() if p.requires_grad and id(p) not in keep]
        for p in frozen:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in frozen:
                p.requires_grad_(True)
