"""The options of :class:`~deepunlearn.unlearn.loop.TargetRunner`, in five groups: how K is probed
(:class:`ProbeOptions`), where the minimal sets come from (:class:`SetOptions`), how the methods
train (:class:`TrainOptions`), what is measured at every point (:class:`MeasureOptions`) and the
checks after unlearning (:class:`CheckOptions`). A field left at ``None`` takes the protocol's
choice (:mod:`deepunlearn.probe.protocol`).

Configs and command lines name each option by one flat keyword (``probe_mode``, ``accuracy``,
``adversarial_modes``, ...); :data:`FLAT` maps every such keyword to its group and field, and
:func:`group_options` turns a set of them into the groups. ``TargetRunner`` takes either spelling.

>>> group_options(probe_mode="generate", k_mode="dataset", accuracy="full")["probing"]
ProbeOptions(mode='generate', forms=None, k_mode='dataset', cache_dir=None, batch_size=None)
>>> group_options(stride=2)
Traceback (most recent call last):
...
TypeError: TargetRunner: unknown option 'stride'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence


@dataclass(frozen=True)
class ProbeOptions:
    """How the model is probed, before unlearning (K) and at every point.

    ``mode``: the primary probe's mode (:mod:`deepunlearn.probe.modes`); ``forms``: its forms (a
    :mod:`deepunlearn.kg.forms` selection; ``None``: the primary question); ``k_mode``:
    ``"probed"`` (K = the facts the model answers before unlearning) or ``"dataset"`` (K = the
    KB); ``cache_dir``: where the baseline probe is cached; ``batch_size``: the probe's batch
    size (``None``: chosen per model)."""

    mode: str | None = None
    forms: str | None = None
    k_mode: Literal["probed", "dataset"] | None = None
    cache_dir: Any = None
    batch_size: int | str | None = None


@dataclass(frozen=True)
class SetOptions:
    """Where the minimal deep-unlearning sets come from, for recall.

    ``sets``: ``"exact"``, ``"mdus"`` (``seeds`` seeds), ``"release"`` (the release's stored
    sets) or a folder of that layout; ``tie``: which set of maximal recall is ``U*_A``
    (``"accuracy"``: the best accuracy; ``"first"``: the first, as the reference's
    ``np.argmax``); ``exact=False`` is the older spelling of ``sets="mdus"``."""

    sets: str | None = None
    tie: Literal["accuracy", "first"] | None = None
    exact: bool | None = None
    seeds: int = 100


@dataclass(frozen=True)
class TrainOptions:
    """How the methods change the model.

    ``lr``: the explicit learning rate of every method without its own, used as given (``None``: the
    rule of :mod:`deepunlearn.unlearn.lr`, with the method's multiplier);
    ``lora``: train a LoRA adapter (``lora_params``) instead of the full weights (GA, NPO), or
    reinforce the target into one and scale it by ``-alpha`` (TV) or switch it off and on (WHP);
    the adapter is removed after each run, so no weight snapshot is taken; ``unlearn_forms``:
    the forms the methods unlearn on (one row per form; ``None``: the primary question);
    ``snapshot_device``: where the original weights are kept (``"cpu"`` or ``"same"``)."""

    lr: float | None = None
    lora: bool = False
    lora_params: Any = None
    unlearn_forms: str | None = None
    snapshot_device: str = "cpu"


@dataclass(frozen=True)
class MeasureOptions:
    """What is measured at every point besides recall.

    ``accuracy``: ``"full"``, ``"sampled"`` or ``"auto"`` (sampled above 2,000 facts in K) on
    ``accuracy_sample`` facts (:mod:`deepunlearn.unlearn.sampled`); ``scores=True``: how much
    remains (likelihoods, truth ratio, exposure, ROUGE-L, Min-K%:
    :mod:`deepunlearn.unlearn.measures`), membership against the ``holdout`` KB (Min-K% with
    ``min_k`` percent); ``reference="retrain"``: also train, per target, a retain model without
    the target's reference set (cached in ``retrain_cache``) for the reference-based measures and
    the ``retrain`` baseline row."""

    accuracy: str = "auto"
    accuracy_sample: int = 300
    scores: bool = False
    holdout: Any = None
    min_k: float = 20.0
    reference: Literal["retrain"] | None = None
    retrain_cache: Any = None


@dataclass(frozen=True)
class CheckOptions:
    """The checks after unlearning (:mod:`deepunlearn.unlearn.checks`): the ``adversarial`` probe
    (under ``modes``, thresholded by ``calibration``) and the relearning / quantisation
    ``attacks``."""

    adversarial: bool = False
    attacks: Any = None
    modes: Sequence[str] | None = None
    calibration: Any = None


#: TargetRunner's keyword for each group, and the group's class
GROUPS = {"probing": ProbeOptions, "minimal_sets": SetOptions, "training": TrainOptions,
          "measures": MeasureOptions, "checks": CheckOptions}

@dataclass(frozen=True)
class RunnerOptions:
    """The five groups together, as a sweep's work specification carries them per model
    (picklable); :meth:`groups` gives TargetRunner's keywords.

    >>> RunnerOptions(training=TrainOptions(lr=1e-4)).groups()["training"].lr
    0.0001
    """

    probing: ProbeOptions = field(default_factory=ProbeOptions)
    minimal_sets: SetOptions = field(default_factory=SetOptions)
    training: TrainOptions = field(default_factory=TrainOptions)
    measures: MeasureOptions = field(default_factory=MeasureOptions)
    checks: CheckOptions = field(default_factory=CheckOptions)

    def groups(self) -> dict[str, Any]:
        """TargetRunner's keyword arguments: group keyword -> options object."""
        return {name: getattr(self, name) for name in GROUPS}


#: flat keyword -> (group keyword, field)
FLAT: dict[str, tuple[str, str]] = {
    "probe_mode": ("probing", "mode"), "forms": ("probing", "forms"), "k_mode": ("probing", "k_mode"),
    "cache_dir": ("probing", "cache_dir"), "batch_size": ("probing", "batch_size"),
    "sets": ("minimal_sets", "sets"), "tie": ("minimal_sets", "tie"), "exact": ("minimal_sets", "exact"),
    "seeds": ("minimal_sets", "seeds"),
    "lr": ("training", "lr"), "lora": ("training", "lora"), "lora_params": ("training", "lora_params"),
    "unlearn_forms": ("training", "unlearn_forms"), "snapshot_device": ("training", "snapshot_device"),
    "accuracy": ("measures", "accuracy"), "accuracy_sample": ("measures", "accuracy_sample"),
    "scores": ("measures", "scores"), "holdout": ("measures", "holdout"), "min_k": ("measures", "min_k"),
    "reference": ("measures", "reference"), "retrain_cache": ("measures", "retrain_cache"),
    "adversarial": ("checks", "adversarial"), "attacks": ("checks", "attacks"),
    "adversarial_modes": ("checks", "modes"), "adversarial_calibration": ("checks", "calibration"),
}
def group_options(groups: dict[str, Any] | None = None, **flat: Any) -> dict[str, Any]:
    """The five groups (keyword -> options object) of ``groups`` (missing ones: the defaults)
    with the flat keywords applied on top; an unknown keyword is a TypeError, as for any
    function."""
    out = {name: (groups or {}).get(name) or cls() for name, cls in GROUPS.items()}
    for key in flat:
        if key not in FLAT:
            raise TypeError(f"TargetRunner: unknown option {key!r}")
    for name in GROUPS:
        changes = {f: flat[k] for k, (g, f) in FLAT.items() if g == name and k in flat}
        if changes:
            out[name] = replace(out[name], **changes)
    return out


def flat_options(**kwargs: Any) -> dict[str, Any]:
    """TargetRunner's keyword arguments (groups, flat keywords, anything else) with the options
    spelled out: every option by its flat keyword, the other arguments as they are; the inverse
    of :func:`group_options`.

    >>> kw = flat_options(probing=ProbeOptions(mode="rank"), lr=0.1, progress=False)
    >>> kw["probe_mode"], kw["lr"], kw["accuracy"], kw["progress"]
    ('rank', 0.1, 'auto', False)
    """
    groups = {g: kwargs.pop(g) for g in GROUPS if g in kwargs}
    grouped = group_options(groups, **{k: kwargs.pop(k) for k in list(kwargs) if k in FLAT})
    return {**kwargs, **{k: getattr(grouped[g], f) for k, (g, f) in FLAT.items()}}
