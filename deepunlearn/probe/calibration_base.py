"""The threshold rule and the error of calibration (:mod:`deepunlearn.probe.calibration`), apart
so that the modules of per-relation rates and of the file's checks share them. Numpy only."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..user_error import UserError


class CalibrationError(UserError, ValueError):
    """A bad calibration argument or a calibration file that cannot be read back."""


def threshold(negatives: Sequence[float], fpr: float) -> float:
    """The threshold passing at most ``floor(fpr * n)`` of ``negatives`` (the rule of
    :mod:`deepunlearn.probe.calibration`).

    >>> threshold([-math.inf] * 18 + [0.3, 0.9], 0.05)   # k = 1: the 2nd largest
    0.3
    >>> threshold([-math.inf] * 19 + [0.9], 0.05)        # the raw rule passes only k = 1
    -inf
    """
    x = np.sort(np.asarray(negatives, dtype=np.float64))[::-1]
    if not len(x):
        raise CalibrationError("no never-seen facts to set a threshold on", field="negatives")
    k = int(math.floor(fpr * len(x) + 1e-9))
    return -math.inf if k >= len(x) else float(x[k])


def check_rate(value: Any, name: str) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < float(value) < 1
    if not ok:
        raise CalibrationError(f"{name} must be a number in (0, 1), got {value!r}", field=name)
    return float(value)
