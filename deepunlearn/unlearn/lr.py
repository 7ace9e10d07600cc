"""Which learning rate an unlearning run uses.

The paper (appendix D) unlearns at the rate it finetuned with: GA (and the reinforcing step of TV
and WHP) at the finetuning rate 2e-5, NPO at twice that, and 1e-5 / 2e-5 for the 7-8B models
that were finetuned at 1e-5. Those rates suit pretrained 1-8B models. They do not suit a small
model trained from scratch at 1e-3 with a one-cycle schedule: there docs/models.md
measured GA with AdamW for 16 steps at lr 1e-4 (a tenth of the training rate) forgetting the
target after 2-4 steps and losing 3-7 % of the other known facts, while 3e-4 lost 12-24 % and
1e-3 85-94 %. So the rate follows how the model was trained. The rule, in two parts:

**The base rate** is

1. an explicit rate, if one is given: a method's own ``lr`` (``[params] lr`` of a sweep,
   ``--param lr=...``, ``Params.lr``), else the run's (``--lr``, ``[[models]] lr`` of a sweep,
   ``TrainOptions(lr=...)`` of ``TargetRunner``);
2. else, if the checkpoint's ``deepunlearn.json`` records the (peak) training rate
   (``training.lr``, written by ``deepunlearn finetune``): the method's paper ratio times that
   rate (GA, TV, WHP: 1; NPO: 2), times :data:`FROM_SCRATCH_FACTOR` = 1/10 when the model was
   trained from scratch (``origin: "tiny"``, the small local model);
3. else the paper's rate for the method, the 7-8B one for models of 5B parameters or more.

   In LoRA mode the rate of 2 and 3 is multiplied by :data:`LORA_LR_FACTOR` = 10 (adapters are
   usually trained at about ten times the full-finetuning rate). The paper ratio, the from-scratch
   factor and the LoRA factor say which rate to use when none is given: an explicit rate is taken
   as it is, for the mode and the model it is given for.

**The method's multiplier** then multiplies the rule's rate (2 and 3): a method that runs
another method's loss at a rate relative to it says so in ``lr_multiplier``. The rule-aware
methods (``du_oracle``, ``du_loop``) take their base's rate (NPO's rule for an NPO base) times
:data:`~deepunlearn.unlearn.methods.du.BASE_LR_FACTOR` for their base (RMU: 16) times
``lr_scale`` (``du_loop``: 0.5; ``du_oracle`` has none: 1). Every other built-in method's
multiplier is 1.

**An explicit rate is the rate the method runs at**: no paper ratio, from-scratch factor, LoRA
factor or multiplier touches it. So ``--lr 1e-4`` runs GA, NPO and ``du_loop`` at 1e-4, as an
optimiser's ``lr`` would, and a result measured with an explicit rate reproduces with it; to
run ``du_loop`` at half the rate of the other methods of a sweep, give it its own ``lr``
(``[params] du_loop.lr``).

Examples
--------
>>> from deepunlearn.unlearn.methods import get_method
>>> tiny = {"origin": "tiny", "training": {"lr": 1e-3}}
>>> choose_lr(get_method("ga"), meta=tiny, n_params=8_700_000)
LearningRate(value=0.0001, source='checkpoint')
>>> choose_lr(get_method("npo"), meta=tiny, n_params=8_700_000).value
0.0002
>>> choose_lr(get_method("npo"), meta={"origin": "finetuned", "training": {"lr": 1e-5}}, n_params=7_000_000_000).value
2e-05
>>> choose_lr(get_method("npo"), meta={}, n_params=1_400_000_000)
LearningRate(value=4e-05, source='paper')
>>> choose_lr(get_method("ga"), meta={}, n_params=7_000_000_000, lora=True).value
0.0001
>>> choose_lr(get_method("ga"), meta=tiny, n_params=10, lr=3e-4)
LearningRate(value=0.0003, source='given')
>>> loop = get_method("du_loop")()
>>> loop.lr_multiplier, choose_lr(loop, meta=tiny, n_params=10).value, choose_lr(loop, meta=tiny, n_params=10, lr=3e-4)
(0.5, 0.0001, LearningRate(value=0.0003, source='given'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: models at least this large use the paper's 7-8B learning rates
LARGE_MODEL_PARAMETERS = 5_000_000_000
#: LoRA rate / full-finetuning rate
LORA_LR_FACTOR = 10.0
#: unlearning rate / paper-ratio rate for models trained from scratch (docs/models.md)
FROM_SCRATCH_FACTOR = 0.1
#: ``origin`` values in ``deepunlearn.json`` of models trained from scratch
FROM_SCRATCH_ORIGINS = ("tiny",)


@dataclass(frozen=True)
class LearningRate:
    value: float
    #: ``given``, ``checkpoint`` (scaled from the recorded training lr) or ``paper``
    source: str


def training_lr(meta: Mapping[str, Any] | None) -> float | None:
    """The (peak) learning rate a checkpoint was trained with, from its ``deepunlearn.json``
    content: ``training.lr`` (what ``deepunlearn finetune`` writes), ``finetune.lr`` or ``lr``."""
    if not meta:
        return None
    for section in ("training", "finetune"):
        sub = meta.get(section)
        if isinstance(sub, Mapping) and isinstance(sub.get("lr"), (int, float)) and sub["lr"] > 0:
            return float(sub["lr"])
    lr = meta.get("lr")
    return float(lr) if isinstance(lr, (int, float)) and lr > 0 else None


def choose_lr(method, *, meta: Mapping[str, Any] | None, n_params: int, lr: float | None = None,
              lora: bool = False) -> LearningRate:
    """The learning rate for ``method`` by the rule in this module's docstring.

    Parameters
    ----------
    method : Unlearner or type of Unlearner
        The method (a class or an instance): its paper rates (``paper_lr``, ``paper_lr_large``,
        ``paper_lr_ratio``) and its ``lr_multiplier``.
    meta : mapping, optional
        The checkpoint's ``deepunlearn.json`` content (its recorded training rate and ``origin``).
    n_params : int
        The model's parameter count (5B or more: the paper's 7-8B rates).
    lr : float, optional
        An explicit rate, used as it is; else the rule's: the paper ratio times the recorded
        training rate (times 1/10 for a model trained from scratch), else the paper's rate, times
        the method's ``lr_multiplier``.
    lora : bool, default False
        LoRA mode: the rule's base rate times :data:`LORA_LR_FACTOR` (an explicit one stays).

    Returns
    -------
    LearningRate
        The explicit rate, else the rule's base rate times the method's ``lr_multiplier``, and
        where it came from (``given``, ``checkpoint`` or ``paper``).

    Raises
    ------
    ValueError
        ``lr`` is not positive.

    Examples
    --------
    >>> from deepunlearn.unlearn.methods import get_method
    >>> choose_lr(get_method("npo"), meta={"origin": "tiny", "training": {"lr": 1e-3}}, n_params=10)
    LearningRate(value=0.0002, source='checkpoint')
    >>> choose_lr(get_method("du_loop")(), meta=None, n_params=10, lr=1e-4, lora=True)
    LearningRate(value=0.0001, source='given')
    >>> choose_lr(get_method("ga"), meta=None, n_params=10, lr=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: learning rate must be positive, got -1.0
    """
    multiplier = getattr(method, "lr_multiplier", 1.0)
    if lr is not None:
        if lr <= 0:
            raise ValueError(f"learning rate must be positive, got {lr}")
        return LearningRate(float(lr), "given")
    factor = LORA_LR_FACTOR if lora else 1.0
    trained = training_lr(meta)
    if trained is not None:
        if meta.get("origin") in FROM_SCRATCH_ORIGINS:
            factor *= FROM_SCRATCH_FACTOR
        return LearningRate(_tidy(method.paper_lr_ratio * multiplier * trained * factor), "checkpoint")
    base = (method.paper_lr_large if n_params >= LARGE_MODEL_PARAMETERS else method.paper_lr) * multiplier
    return LearningRate(_tidy(base * factor), "paper")


def _tidy(x: float) -> float:
    """Drop float noise such as 1.0000000000000002e-4 so rates print as the rule says."""
    return float(f"{x:.12g}")


@dataclass(frozen=True)
class OptimiserConfig:
    """The optimiser settings of one method run (what :meth:`~deepunlearn.unlearn.methods.Session.descend`
    builds its AdamW and schedule from); the run's state (model, batches, step counts) is the
    :class:`~deepunlearn.unlearn.methods.Session`'s.

    ``lr``: the base rate; ``schedule`` / ``warmup_steps``: how the rate moves over a trajectory
    (:func:`~deepunlearn.unlearn.methods.session.lr_factor`); ``max_grad_norm``: gradient clipping
    (None: none); ``weight_decay``: AdamW's, on matrices only; the ``reinforce_*`` settings: TV's
    and WHP's reinforcing run; ``master_weights``: float32 copies of half-precision weights;
    ``sam_rho``: the sharpness-aware radius (0: plain steps)."""

    lr: float
    max_grad_norm: float | None = None
    weight_decay: float = 0.01
    schedule: str = "linear"
    warmup_steps: int = 0
    reinforce_steps: int = 10
    reinforce_schedule: str = "linear"
    reinforce_warmup_steps: int = 0
    master_weights: bool = True
    sam_rho: float = 0.0


def run_lr(method, *, lr: float | None, lora: bool, bundle) -> float:
    """The rate a run of ``method`` on ``bundle``'s model uses: :func:`choose_lr` with the
    method's own ``lr``, else the run's ``lr`` (``TrainOptions.lr``), as the explicit rate."""
    given = method.params.lr if method.params.lr is not None else lr
    n_params = sum(p.numel() for p in bundle.model.parameters())
    return choose_lr(method, meta=getattr(bundle, "meta", None), n_params=n_params, lr=given, lora=lora).value


def optimiser_config(method, *, lr: float | None, lora: bool, bundle, protocol) -> OptimiserConfig:
    """The :class:`OptimiserConfig` of a run of ``method``: its rate (:func:`run_lr`), the
    method's own optimisation settings where it sets them, else the ``protocol``'s
    (:class:`~deepunlearn.probe.protocol.Protocol`)."""
    pr, mp = protocol, method.params
    pick = lambda own, default: default if own is None else own  # noqa: E731
    return OptimiserConfig(
        lr=run_lr(method, lr=lr, lora=lora, bundle=bundle),
        max_grad_norm=pick(mp.max_grad_norm, pr.max_grad_norm) or None,
        weight_decay=pick(mp.weight_decay, pr.weight_decay), schedule=pick(mp.schedule, pr.schedule),
        warmup_steps=pick(mp.warmup_steps, pr.warmup_steps), reinforce_steps=pr.reinforce_steps,
        reinforce_schedule=pr.reinforce_schedule, reinforce_warmup_steps=pr.reinforce_warmup_steps)


def runner_lr(runner, method) -> float:
    """The rate a :class:`~deepunlearn.unlearn.loop.TargetRunner` run of ``method`` uses
    (:func:`run_lr` with the runner's ``lr`` and ``lora``)."""
    return run_lr(method, lr=runner.lr, lora=runner.lora, bundle=runner.bundle)
