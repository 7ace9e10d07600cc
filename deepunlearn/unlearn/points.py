"""What the per-target loop hands out: :class:`Point` (one grid point's metrics), the error for a
target the model never knew, seeding, and the rules layer's Evaluator for a sets spec."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

from .methods import UnlearnError
from .point_fields import group_fields


class TargetNotKnownError(UnlearnError):
    """The model did not know the target before unlearning, so there is nothing to unlearn."""


@dataclass
class Point:
    """One grid point of one method on one target: the metrics of the model at that point.

    ``forgotten``: fact ids in K the model no longer answers; ``set``: the minimal deep-unlearning
    set that maximises recall (``U*_A``); ``exact``: whether the sets were enumerated exactly.
    ``accuracy_groups``: the accuracy per relation group of the KB's domain (the KB's order), also
    flat as ``accuracy_{group}`` in :meth:`to_dict` (``accuracy_family`` / ``accuracy_biography``
    in the family domain)."""

    target: int
    method: str
    param: float
    recall: float
    accuracy: float
    accuracy_rule: float | None
    accuracy_other: float | None
    target_forgotten: bool
    forgotten: list[int]
    exact: bool
    set: list[int] = field(default_factory=list)
    lr: float | None = None
    #: accuracy per relation group (``{group: accuracy}``, the KB's groups in order)
    accuracy_groups: dict[str, float | None] = field(default_factory=dict)
    #: how much remains (:mod:`deepunlearn.unlearn.measures`); None when scores are off
    measures: dict | None = None
    #: anything else a row records (a retain model's ``answers_target`` / ``answers_set``)
    notes: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The point as a dict: each group's accuracy flat after ``accuracy``, then the other
        fields, then the notes."""
        d = asdict(self)
        notes = d.pop("notes")
        at = list(d).index("accuracy") + 1
        items = list(d.items())
        d = dict(items[:at] + list(group_fields(self.accuracy_groups).items()) + items[at:])
        d.update(notes)
        return d

    @classmethod
    def from_evaluation(cls, ev, method: str, param, forgotten: list[int], lr: float | None,
                        measures: dict | None = None) -> "Point":
        """The point of a rules-layer :class:`~deepunlearn.rules.Evaluation` (NaN parts -> None)."""
        return cls(
            target=ev.target, method=method, param=param, recall=float(ev.recall), accuracy=float(ev.accuracy),
            accuracy_rule=opt(ev.accuracy_rule), accuracy_other=opt(ev.accuracy_other),
            target_forgotten=ev.target in forgotten, forgotten=forgotten, exact=bool(ev.exact),
            set=[int(i) for i in ev.set], lr=lr, measures=measures,
            accuracy_groups={g: opt(a) for g, a in ev.accuracy_groups.items()},
        )


def target_seed(seed: int, targets: Sequence[int]) -> int:
    """A seed of its own for a run on ``targets`` (the retain draws differ between targets)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{list(targets)}".encode()).digest()[:4], "big")


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), numpy and ``random``."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def evaluator(kb, rules, known, sets: str, tie: str, seeds: int):
    """The rules layer's Evaluator for a sets spec (``exact``, ``mdus``, ``release`` or a folder)."""
    from ..rules import Evaluator, stored_sets

    if sets == "release" and "release_dir" not in (getattr(kb, "metadata", None) or {}):
        sets = "mdus"  # not an imported release: no stored sets, the reference's MDUS (100 seeds)
    if sets in ("exact", "mdus"):
        return Evaluator(kb, rules=rules, known=known, exact=sets == "exact", seeds=seeds, tie=tie)
    try:
        stored = stored_sets(kb, sets)
    except (OSError, ValueError) as e:
        raise UnlearnError(f"sets {sets!r}: {e}") from None
    # the reference computes MDUS with 100 seeds where no stored sets exist
    return Evaluator(kb, rules=rules, known=known, exact=False, seeds=seeds, sets=stored, tie=tie)


def lora_methods() -> list[str]:
    """The names of the methods that can run on LoRA adapters, sorted."""
    from .methods import METHODS

    return sorted(n for n, c in METHODS.items() if c.supports_lora)


def number(x: float) -> float | int:
    """Step counts print as integers, alphas as floats."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def opt(x) -> float | None:
    """A float, or None for a missing value (None or NaN: a group the KB does not have)."""
    return None if x is None or x != x else float(x)
