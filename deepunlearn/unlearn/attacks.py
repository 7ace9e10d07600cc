"""Attacks after unlearning: has the model *really* forgotten?

Two known ways to bring "unlearned" knowledge back, each run on the model as it is and undone
exactly afterwards (the weights bit for bit, ``requires_grad`` flags, train/eval mode, gradients
and the RNG state), so the per-target loop can attack a grid point and carry on:

* :func:`relearn_attack` (Deeb & Roger; Lynch et al.): finetune a few steps on a sample of facts
  the method did NOT target (by default K minus the target's chosen minimal set) and re-probe
  after each step count of a grid such as 1, 2, 4, 8. Shallow unlearning comes back for facts
  that were never trained on during the attack. ``relearn_on = "split"`` trains instead on half
  of the target's chosen minimal set and the target's other forms and re-probes the held-out
  half and the target (``"split-set"``: the half alone, without the target's forms;
  :mod:`~deepunlearn.unlearn.relearn_pool`); :func:`relearn_batch` is the training loop all use.
* :func:`quantize_attack` (arXiv 2410.16454): quantise the Linear layers (int8 dynamic on CPU;
  4-bit ``int4`` / ``nf4`` round-to-nearest on any device, :mod:`~deepunlearn.unlearn.quant4`;
  ``nf4`` of a model on a GPU with bitsandbytes installed uses bitsandbytes' kernels), re-probe,
  then put the float modules back. Unlearning by small weight changes can fall below the
  quantisation step and vanish.

:class:`AttackParams` is the sweep option (``attacks:`` of a plan; the ``deepunlearn attack``
command builds one from its flags).

int8 uses ``torch.ao.nn.quantized.dynamic.Linear`` (torch 2.13 still ships it, but warns that
its quantized tensor types are deprecated; the warning is silenced here). GPT-2's ``Conv1D``
projections are quantised too (as the Linear of their transposed weight), and the modules of a
LoRA adapter (``lora_*``) are left in float: the adapter is quantised by its base layer's side.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Callable, Iterator, Sequence, TypeVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..limits import MAX_STEPS, bound_message, too_large
from .methods import UnlearnError

T = TypeVar("T")

#: what ``quantize`` may be
from .attack_kinds import QUANT_KINDS, AttackAt, QuantKind, RelearnOn, relearn_on_help  # noqa: E402,F401


class AttackParams(BaseModel):
    """Which attacks to run after unlearning, and where.

    ``relearn``: the relearning grid, the step counts after which to re-probe (sorted, distinct,
    each >= 1; ``[]``: no relearning); ``relearn_size``: facts drawn (seeded) from the pool;
    ``relearn_lr``: the attack's learning rate (``None``: the one the caller passes, the run's
    unlearning lr); ``relearn_on``: what the attack trains on, ``"other"`` (a sample of K minus
    the target and its chosen set), ``"split"`` (half the chosen set and the target's other
    forms) or ``"split-set"`` (the half alone; both :mod:`~deepunlearn.unlearn.relearn_pool`;
    ``relearn_size`` does not apply to them);
    ``quantize``: ``"int8"`` (CPU), ``"int4"`` / ``"nf4"`` (4-bit, any device) or ``None``;
    ``at``: attack at the ``last`` grid point only or at ``all`` of them."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    relearn: list[int] = Field(default_factory=list, description="relearning grid (steps); [] = none")
    relearn_size: int = Field(16, ge=1, description="facts sampled from the relearning pool")
    relearn_lr: float | None = Field(None, gt=0, description="relearning lr; None: the run's lr")
    relearn_on: RelearnOn = Field("other", description="what relearning trains on: " + relearn_on_help())
    quantize: QuantKind | None = None
    at: AttackAt = "last"

    @field_validator("relearn")
    @classmethod
    def _grid(cls, v: list[int]) -> list[int]:
        bad = [n for n in v if n < 1]
        if bad:
            raise ValueError(f"relearning step counts must be >= 1, got {bad[0]}")
        if v != sorted(set(v)):
            raise ValueError(f"the relearning grid must be sorted and distinct, got {v} (e.g. [1, 2, 4, 8])")
        if v and too_large(v[-1], MAX_STEPS):  # a billion relearning steps would run for ever
            raise ValueError(bound_message("relearning step count", v[-1], MAX_STEPS, "steps"))
        return v

    def enabled(self) -> bool:
        """Whether any attack is asked for."""
        return bool(self.relearn) or self.quantize is not None


def check_steps(steps: Sequence[int]) -> list[int]:
    """``steps`` as a list of ints, sorted, distinct and >= 1, else an :class:`UnlearnError`."""
    out = []
    for n in steps:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise UnlearnError(f"relearning steps must be integers, got {n!r}", field="relearn")
        out.append(int(n))
    if any(n < 1 for n in out) or out != sorted(set(out)):
        raise UnlearnError(f"relearning steps must be sorted, distinct and >= 1, got {out}", field="relearn")
    if out and too_large(out[-1], MAX_STEPS):
        raise UnlearnError(bound_message("relearning step count", out[-1], MAX_STEPS, "steps"), field="relearn")
    return out


def relearn_sample(pool: Sequence[int], size: int, seed: int = 0) -> list[int]:
    """The facts a relearning attack trains on: ``min(size, len(pool))`` distinct facts of the
    sorted pool drawn by ``numpy.random.default_rng(seed)``, sorted.

    >>> relearn_sample([5, 3, 9], 10)
    [3, 5, 9]
    """
    if size < 1:
        raise UnlearnError(f"relearn_size must be >= 1, got {size}", field="relearn_size")
    ordered = sorted({int(i) for i in pool})
    k = min(int(size), len(ordered))
    if k == 0:
        return []
    picked = np.random.default_rng(seed).choice(len(ordered), size=k, replace=False)
    return sorted(ordered[int(j)] for j in picked)


@contextlib.contextmanager
def _preserved(model) -> Iterator[None]:
    """The block may train ``model``: afterwards its weights (bit for bit), ``requires_grad``
    flags, every module's train/eval mode, the parameters' ``.grad`` and torch's RNG state are
    as before, also when the block raises."""

    from .snapshot import WeightSnapshot

    snapshot = WeightSnapshot(model, device="cpu")
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    modes = {n: m.training for n, m in model.named_modules()}
    grads = {n: p.grad for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = None  # backward would accumulate into a grad the caller holds
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        snapshot.restore(model)
        params = dict(model.named_parameters())
        for n, p in params.items():
            p.requires_grad_(flags.get(n, p.requires_grad))
            p.grad = grads.get(n)
        for n, m in model.named_modules():
            if n in modes:
                m.train(modes[n])


def relearn_attack(model, encode: Callable[[Sequence[int]], dict], pool: Sequence[int], steps: Sequence[int], *,
                   lr: float, size: int = 16, seed: int = 0, known: Callable[[], set[int]],
                   on_step: Callable[[int], None] | None = None) -> dict[int, set[int]]:
    """Relearn: finetune on a seeded sample of ``pool`` and record ``known()`` after each step
    count in ``steps``; return ``{N: known set}``. The model is exactly as before afterwards.

    The sample is :func:`relearn_sample` (``size``, ``seed``). The attack trains the model's
    currently trainable parameters (``requires_grad``; in LoRA mode that is the adapter) with
    AdamW (``lr``, no weight decay, no schedule, no clipping), every step on one batch holding
    all sampled facts, ``encode(ids)`` (the collated answer-only-labelled batch on the model's
    device, as :meth:`TargetRunner.encode`), with finetuning's answer-only cross-entropy; the
    model is in train mode for the steps and in eval mode for ``known()``. Half-precision
    parameters get float32 master copies (as the methods' optimiser loop). ``on_step(s)`` is
    called after every optimiser step (a progress bar). An empty pool or grid: ``{}``, nothing run.
    """

    steps = check_steps(steps)
    _check_lr(lr)
    facts = relearn_sample(pool, size, seed)
    if not facts or not steps:
        return {}
    return relearn_batch(model, lambda: encode(facts), steps, lr=lr, known=known, on_step=on_step)


def _check_lr(lr) -> None:
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise UnlearnError(f"the relearning lr must be a finite number > 0, got {lr!r}", field="relearn_lr")


def relearn_batch(model, batch: Callable[[], dict], steps: Sequence[int], *, lr: float,
                  known: Callable[[], set[int]],
                  on_step: Callable[[int], None] | None = None) -> dict[int, set[int]]:
    """The training loop of :func:`relearn_attack` on the batch ``batch()`` gives (called once,
    after the model's state is saved): ``{N: known set}`` after each step count N of ``steps``;
    the model is exactly as before afterwards. An empty grid: ``{}``."""
    steps = check_steps(steps)
    _check_lr(lr)
    if not steps:
        return {}
    with _preserved(model):
        return _train(model, batch(), steps, lr, known, on_step)


def relearn_then(model, batch: Callable[[], dict], steps: int, then: Callable[[], T], *, lr: float) -> T:
    """Relearn ``steps`` steps on ``batch()`` as :func:`relearn_batch` does, call ``then()`` on the
    relearned model (in eval mode; it may take gradients) and return what it returns; the model
    is exactly as before afterwards. du_loop's tamper phase uses it to probe the model a
    relearning attack would leave and to take the forget loss's gradient there."""
    _check_lr(lr)
    with _preserved(model):
        _train(model, batch(), check_steps([steps]), lr)
        model.eval()
        return then()


def _train(model, data: dict, steps: list[int], lr: float, known: Callable[[], set[int]] | None = None,
           on_step: Callable[[int], None] | None = None) -> dict[int, set[int]]:
    """AdamW steps 1..steps[-1] on ``data`` (answer-only cross-entropy); ``{N: known()}`` after
    each N of ``steps`` (``{}`` without ``known``). Call inside :func:`_preserved`."""
    from .finetune import answer_loss

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise UnlearnError("relearning attack: the model has no trainable parameters")
    masters = [p.detach().float().clone().requires_grad_(True) if p.dtype in (torch.float16, torch.bfloat16)
               else p for p in params]
    opt = torch.optim.AdamW(masters, lr=float(lr), weight_decay=0.0)
    wanted, out = set(steps), {}
    for step in range(1, steps[-1] + 1):
        model.train()
        for p, m in zip(params, masters):
            p.grad, m.grad = None, None
        logits = model(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
        loss, _, _ = answer_loss(logits, data["labels"])
        loss.backward()
        for p, m in zip(params, masters):
            if m is not p and p.grad is not None:
                m.grad, p.grad = p.grad.float(), None
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, masters):
                if m is not p:
                    p.copy_(m)
        if on_step is not None:
            on_step(step)
        if known is not None and step in wanted:
            model.eval()
            out[step] = {int(i) for i in known()}
    for p in params:
        p.grad = None
    del opt, masters
    return out


# ----------------------------------------------------------------------------------- quantisation
def _linear_leaves(model) -> list[tuple[str, object]]:
    """The modules to quantise: every ``nn.Linear`` and GPT-2 ``Conv1D``, not a LoRA adapter's."""

    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover
        Conv1D = ()  # noqa: N806
    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, (torch.nn.Linear, Conv1D)) and n and not any(part.startswith("lora_")
                                                                          for part in n.split("."))]


def _as_float_linear(mod):
    """A float32 CPU ``nn.Linear`` copy of a Linear or Conv1D (the module itself when it is one)."""

    if type(mod) is torch.nn.Linear and mod.weight.dtype == torch.float32 and mod.weight.device.type == "cpu":
        return mod
    conv = not isinstance(mod, torch.nn.Linear)
    w = mod.weight.detach().float().cpu()
    w = w.t() if conv else w
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=mod.bias is not None)
    with torch.no_grad():
        lin.weight.copy_(w)
        if mod.bias is not None:
            lin.bias.copy_(mod.bias.detach().float().cpu())
    return lin


class _CastLinear(torch.nn.Module):
    """A quantised Linear for a model in another dtype (bf16, fp16): float32 in, the model's dtype out."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.float()).to(x.dtype)


def _int8(mod):
    """``mod`` as a dynamic int8 quantised Linear (inputs cast to float32 and back when the model
    is in another dtype)."""
    import torch.ao.nn.quantized.dynamic as nnqd
    from torch.ao.quantization import default_dynamic_qconfig

    src = _as_float_linear(mod)
    had = "qconfig" in src.__dict__
    old = src.__dict__.get("qconfig")
    src.qconfig = default_dynamic_qconfig
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = nnqd.Linear.from_float(src)
    finally:
        if had:
            src.qconfig = old
        else:
            del src.qconfig
    if mod.weight.dtype == torch.float32:
        return q
    return _CastLinear(q)


def _nf4(mod):
    """``mod`` as a bitsandbytes NF4 ``Linear4bit`` on the module's CUDA device."""
    import bitsandbytes as bnb

    lin = _as_float_linear(mod)
    dtype = mod.weight.dtype if mod.weight.dtype in (torch.float16, torch.bfloat16) else torch.float32
    q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None, compute_dtype=dtype,
                          quant_type="nf4")
    q.weight = bnb.nn.Params4bit(lin.weight.detach().to(dtype).clone(), requires_grad=False, quant_type="nf4")
    if lin.bias is not None:
        q.bias = torch.nn.Parameter(lin.bias.detach().to(dtype).clone(), requires_grad=False)
    return q.to(mod.weight.device)  # Params4bit quantises on its way to the GPU


def check_quantize(model, how: str) -> None:
    """Refuse (one-line :class:`UnlearnError`) a quantisation that cannot run here: int8 needs the
    model on CPU; int4 and nf4 run anywhere."""

    if how not in QUANT_KINDS:
        raise UnlearnError(f"quantize must be one of {', '.join(QUANT_KINDS)}, got {how!r}", field="quantize")
    if how == "int8":
        if any(p.device.type != "cpu" for p in model.parameters()):
            raise UnlearnError("int8 dynamic quantisation runs on CPU; use quantize = 'int4' or 'nf4' on a GPU",
                               field="quantize")


def _maker(model, how: str):
    """The function that makes a module's quantised copy: torch's dynamic int8, bitsandbytes' NF4
    for a model on CUDA when bitsandbytes is installed, else the plain-torch 4-bit one."""
    import importlib.util

    from .quant4 import fake_linear

    if how == "int8":
        return _int8
    on_cuda = any(p.device.type == "cuda" for p in model.parameters())
    if how == "nf4" and on_cuda and importlib.util.find_spec("bitsandbytes") is not None:
        return _nf4
    return lambda mod: fake_linear(mod, how)


@contextlib.contextmanager
def quantized(model, how: str = "int8") -> Iterator[list[str]]:
    """Inside the block ``model``'s Linear (and Conv1D) modules are quantised copies, swapped in
    place (the model object stays the same, so probing and ``generate`` use them); afterwards the
    original modules are back, untouched. Yields the names of the swapped modules."""
    check_quantize(model, how)
    make = _maker(model, how)
    swapped: list[tuple[object, str, object]] = []
    try:
        for name, mod in _linear_leaves(model):
            parent_name, _, leaf = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            q = make(mod)
            q.train(mod.training)
            setattr(parent, leaf, q)
            swapped.append((parent, leaf, mod))
        yield [f"{_name(model, p)}{leaf}" for p, leaf, _ in swapped]
    finally:
        for parent, leaf, mod in reversed(swapped):
            setattr(parent, leaf, mod)


def _name(model, parent) -> str:
    for n, m in model.named_modules():
        if m is parent:
            return f"{n}." if n else ""
    return ""


def quantize_attack(model, known: Callable[[], set[int]], *, how: str = "int8") -> set[int]:
    """Quantise the model (:func:`quantized`: ``"int8"`` dynamic on CPU, ``"int4"`` / ``"nf4"``
    4-bit on any device), return ``known()`` measured on it, and put the float modules back (their
    parameters never change, so the model is bit for bit as before). A model on CUDA asked for
    int8 is a one-line :class:`UnlearnError`."""
    with quantized(model, how):
        return {int(i) for i in known()}
