"""The session a method runs in: the model, the forget batch, the retain sampler, the rules
context and the optimiser loop (:meth:`Session.descend`), its settings one frozen
:class:`~deepunlearn.unlearn.lr.OptimiserConfig`; and the grid point a trajectory yields
(:class:`Step`), the learning-rate schedule (:func:`lr_factor`) and AdamW's parameter groups
(:func:`decay_groups`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterator, Sequence

import torch

from ..lr import OptimiserConfig
from ..sam import sam_gradients
from ..snapshot import LoraAdapter, WeightSnapshot
from .params import UnlearnError
from .retain import RetainSampler

#: ``model_fn(input_ids, attention_mask) -> logits [B, T, V]``: replaces the model's forward
#: while probing (the probe layer's hook; WHP uses it for its mixed distribution).
ModelFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: the settings a :class:`Session` reads from its :class:`~deepunlearn.unlearn.lr.OptimiserConfig`
OPTIMISER_FIELDS = tuple(f.name for f in fields(OptimiserConfig))


@dataclass
class Step:
    """One grid point of a trajectory: the model is in the state to probe. ``model_fn`` replaces
    the model's forward while probing (None: probe the model as it is)."""

    param: float
    model_fn: ModelFn | None = None
    #: what the point records besides its metrics (du_loop: steps used, rounds, sets chosen)
    info: dict = field(default_factory=dict)


def lr_factor(step: int, total: int, schedule: str = "linear", warmup: int = 0) -> float:
    """The learning-rate multiplier of optimiser step ``step`` (0-based) of ``total``: Hugging
    Face's ``get_linear_schedule_with_warmup`` (``linear``: ``s / w`` while ``s < w``, then linear
    decay reaching 0 at ``total``) or ``get_constant_schedule_with_warmup`` (``constant``).

    The reference (``forget.py``: 16 steps, ``warmup_steps=1``) gives step 1 a zero rate, so the
    cumulative rate after T = 1, 2, 4, 8, 16 steps is 0, 1, 2.8, 5.6, 8 base rates:

    >>> [round(sum(lr_factor(s, 16, "linear", 1) for s in range(T)), 6) for T in (1, 2, 4, 8, 16)]
    [0.0, 1.0, 2.8, 5.6, 8.0]
    >>> [round(sum(lr_factor(s, 16, "linear", 0) for s in range(T)), 4) for T in (1, 2, 4, 8, 16)]
    [1.0, 1.9375, 3.625, 6.25, 8.5]
    """
    if step < warmup:
        return step / max(1, warmup)
    if schedule == "constant":
        return 1.0
    if schedule != "linear":
        raise UnlearnError(f"unknown lr schedule {schedule!r}; expected 'linear' or 'constant'")
    return max(0.0, (total - step) / max(1, total - warmup))


def decay_groups(params: Sequence[torch.nn.Parameter], weight_decay: float) -> list[dict]:
    """AdamW parameter groups as Hugging Face's Trainer builds them: weight decay on matrices
    (weights, embeddings), none on vectors (biases, norm weights)."""
    decay = [p for p in params if p.ndim >= 2]
    rest = [p for p in params if p.ndim < 2]
    return [g for g in ({"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0})
            if g["params"]]


class Session:
    """What one method run works on: its optimiser settings (:attr:`optimiser`, a frozen
    :class:`~deepunlearn.unlearn.lr.OptimiserConfig`) and its run state.

    ``batch``: the target's question/answer, collated (``input_ids``, ``attention_mask``,
    ``labels`` with -100 on the prompt), on the model's device. ``snapshot``: the original
    weights (full mode); ``lora``: the adapter being trained (LoRA mode); exactly one is set.
    The optimiser settings are given as ``optimiser`` or by their names (``lr``, ``schedule``,
    ``warmup_steps``, ...: :class:`~deepunlearn.unlearn.lr.OptimiserConfig`'s fields), and read
    by the same names (``session.lr``); setting one replaces :attr:`optimiser` by a copy.
    """

    def __init__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor], lr: float | None = None, *,
                 optimiser: OptimiserConfig | None = None, snapshot: WeightSnapshot | None = None,
                 lora: LoraAdapter | None = None, forget_ids: Sequence[int] = (), targets: Sequence[int] = (),
                 retain: "RetainSampler | None" = None, encode: Callable[[list[int]], dict] | None = None,
                 encode_pairs: Callable[[list[tuple[str, str]]], dict] | None = None,
                 qa: Callable[[list[int]], list[tuple[str, str]]] | None = None,
                 row_keys: Callable[[list[int]], list] | None = None, rules: Any = None, step_guard: Any = None,
                 **settings: Any):
        unknown = sorted(set(settings) - set(OPTIMISER_FIELDS))
        if unknown:
            raise TypeError(f"Session: unknown argument {unknown[0]!r}")
        if optimiser is None:
            if lr is None:
                raise TypeError("Session: give lr or optimiser")
            optimiser = OptimiserConfig(lr=lr, **settings)
        elif lr is not None or settings:
            optimiser = replace(optimiser, **({"lr": lr} if lr is not None else {}), **settings)
        self.optimiser: OptimiserConfig = optimiser  # the optimiser settings (frozen)
        self.model, self.batch, self.snapshot, self.lora = model, batch, snapshot, lora
        #: the loss and the learning rate of every optimiser step taken so far (reinforcement included)
        self.losses: list[float] = []
        self.rates: list[float] = []
        #: the facts of ``batch``, one per row (the forget set), and the targets they serve
        self.forget_ids, self.targets = list(forget_ids), list(targets)
        #: retain batches (:class:`~.retain.RetainSampler`; None: the method uses none); fact ids ->
        #: collated batch (``encode``); (question, answer) pairs -> batch, answer-only labels
        #: (``encode_pairs``); fact ids -> their pairs (``qa``); fact ids -> one key per row of
        #: ``encode`` (``row_keys``: (fact, form name) with several forms)
        self.retain, self.encode, self.encode_pairs, self.qa, self.row_keys = retain, encode, encode_pairs, qa, row_keys
        #: what rule-aware methods ask about the rules (probe facts, choose sets, check derivability)
        self.rules = rules
        #: the optimiser step being taken (1-based; 0 before the first)
        self.step = 0
        #: checks every step of :meth:`descend` and may undo it (:class:`~.du_guard.StepGuard`)
        self.step_guard = step_guard
        self._original: torch.nn.Module | None = None

    def logits(self, model: torch.nn.Module | None = None) -> torch.Tensor:
        """The logits of ``model`` (default: the session's) on the forget batch."""
        return self.logits_of(self.batch, model)

    def logits_of(self, batch: dict, model: torch.nn.Module | None = None) -> torch.Tensor:
        m = self.model if model is None else model
        return m(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).logits

    def rows(self) -> list:
        """One key per row of the forget batch: ``(fact id, form name)``; ``(fact id, None)``
        when each fact has one row (no ``row_keys``)."""
        return list(self.row_keys(self.forget_ids)) if self.row_keys else [(int(i), None) for i in self.forget_ids]

    def set_forget(self, ids: Sequence[int]) -> None:
        """Make ``ids`` the forget set: the batch is their questions/answers, one row each."""
        if self.encode is None:
            raise UnlearnError("this session cannot change its forget set (no encoder)")
        self.forget_ids = [int(i) for i in ids]
        self.batch = self.encode(self.forget_ids)

    def original_logits(self, batch: dict) -> torch.Tensor:
        """Logits of the model as it was before the run (no gradient): LoRA mode switches the
        adapter off; full mode keeps a frozen copy with the snapshot's weights for the run."""
        with torch.no_grad():
            if self.lora is not None:
                with self.lora.disabled():
                    return self.logits_of(batch)
            return self.logits_of(batch, self.original_model())

    def original_model(self) -> torch.nn.Module:
        """A frozen copy of the model with its original weights (full mode; built once per run)."""
        if self._original is None:
            if self.snapshot is None:
                raise UnlearnError("the original model is needed (KL retain term, RMU) but this run has no weight "
                                   "snapshot or LoRA adapter")
            import copy

            self._original = copy.deepcopy(self.model).eval().requires_grad_(False)
            self.snapshot.restore(self._original)
        return self._original

    def trainable(self) -> list[torch.nn.Parameter]:
        if self.lora is not None:
            return self.lora.parameters()
        return [p for p in self.model.parameters() if p.requires_grad]

    def descend(self, loss_fn: Callable[["Session"], torch.Tensor], steps: int, *, schedule: str | None = None,
                warmup: int | None = None, params: Sequence[torch.nn.Parameter] | None = None) -> Iterator[int]:
        """The shared optimisation loop: a fresh AdamW (weight decay on matrices only, as Hugging
        Face's Trainer) on the trainable parameters (the LoRA adapter in LoRA mode), ``steps``
        steps on ``loss_fn(session)`` with the rate ``lr * lr_factor(s, steps, schedule, warmup)``
        (default: the session's schedule); yields the step number after each step with the model
        in eval mode. Stopping early (closing the iterator) leaves the model exactly where the
        full run was at that step, so every grid point lies on ONE trajectory. The optimizer state
        is dropped at the end. A zero-rate step (the reference's warm-up step) still updates
        AdamW's moment estimates, as in the reference. ``params``: the parameters to train
        instead of :meth:`trainable` (RMU trains a few MLP matrices only).

        ``sam_rho > 0`` makes every step a sharpness-aware one (:func:`~deepunlearn.unlearn.sam.sam_gradients`:
        the gradient is taken again at ``w + rho * g / ||g||`` and the step uses it); the loss
        recorded is the one at ``w``. ``sam_rho = 0`` runs exactly the plain step.

        Half-precision (bf16/fp16) parameters get float32 master copies that the optimizer
        updates (``master_weights``, default on): a step of lr 1e-5 is below bf16's resolution
        (2^-8 relative) and would mostly round away. The model itself stays in its dtype, so every
        grid point is probed as the model would be used.

        ``step_guard`` may undo a step (weights and AdamW state back) and have it taken again at
        the rate times its ``scale``; step numbers, ``rates`` and ``losses`` count accepted steps.
        """
        params = self.trainable() if params is None else list(params)
        if not params:
            raise UnlearnError("the model has no trainable parameters")
        cfg = self.optimiser
        masters = [
            p.detach().float().clone().requires_grad_(True)
            if cfg.master_weights and p.dtype in (torch.float16, torch.bfloat16) else p
            for p in params
        ]
        schedule = cfg.schedule if schedule is None else schedule
        warmup = cfg.warmup_steps if warmup is None else warmup
        opt = torch.optim.AdamW(decay_groups(masters, cfg.weight_decay), lr=cfg.lr)
        guard, state = self.step_guard, params + [m for p, m in zip(params, masters) if m is not p]
        try:
            for step in range(1, steps + 1):
                while True:  # a guard may undo the step and have it taken again (at a smaller rate)
                    if guard is not None:
                        guard.save(state, opt)
                    scale = guard.scale if guard else 1.0  # the rate is read per step (it may be changed between steps)
                    rate = self.optimiser.lr * lr_factor(step - 1, steps, schedule, warmup) * scale
                    self._one_step(loss_fn, opt, params, masters, rate)
                    if guard is None or guard.accept(state, opt):
                        break
                    del self.rates[-1], self.losses[-1]  # undone: the records keep accepted steps only
                    self.step -= 1
                yield step
        finally:
            for p in params:
                p.grad = None
            del opt, masters, state
            self.model.eval()

    def _one_step(self, loss_fn, opt, params, masters, rate: float) -> None:
        for group in opt.param_groups:
            group["lr"] = rate
        self.rates.append(rate)
        self.step += 1
        self.model.train()
        for p, m in zip(params, masters):
            p.grad = None
            m.grad = None
        loss = loss_fn(self)
        loss.backward()
        cfg = self.optimiser
        if cfg.sam_rho:
            sam_gradients(params, lambda: loss_fn(self), cfg.sam_rho)
        for p, m in zip(params, masters):
            if m is not p and p.grad is not None:
                m.grad, p.grad = p.grad.float(), None
        if cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(masters, cfg.max_grad_norm)
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, masters):
                if m is not p:
                    p.copy_(m)
        self.losses.append(float(loss.detach()))
        self.model.eval()

    def restore(self) -> None:
        """Give the model its original weights back (full mode) or take the adapter out (LoRA)."""
        self._original = None
        if self.lora is not None:
            self.lora.remove()
        if self.snapshot is not None:
            self.snapshot.restore(self.model)


def _optimiser_setting(name: str) -> property:
    def get(self: Session) -> Any:
        return getattr(self.optimiser, name)

    def put(self: Session, value: Any) -> None:
        self.optimiser = replace(self.optimiser, **{name: value})

    return property(get, put, doc=f"``optimiser.{name}`` (setting it replaces :attr:`Session.optimiser` by a copy)")


for _name in OPTIMISER_FIELDS:
    setattr(Session, _name, _optimiser_setting(_name))
