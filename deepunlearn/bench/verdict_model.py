"""What a verdict line of ``evaluate --manifest -o VERDICTS.jsonl`` must hold before
``evaluate-report`` stores it: a pydantic model of the fields the store and the report read.

A line that is not one (``target_id`` 999 or ``"abc"``, ``"recall": "x"`` or NaN, ``"forgotten":
5``, a list for ``"original"``) is refused with one line naming the file, the line and the field,
never stored and never an internal error later in the report. Fields the store does not read are
left as they are (a newer ``evaluate`` may add some).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

#: a share in [0, 1], an integer or a float, never text, a bool, NaN or inf
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)]
FactId = Annotated[StrictInt, Field(ge=0)]


def _no_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected a number, got a true/false value")
    return v


class _Checks(BaseModel):
    """The check results stored under a sweep's point keys: numbers, flags, text or None."""

    model_config = ConfigDict(extra="allow")

    @classmethod
    def check_values(cls, v: Any, name: str) -> Any:
        if v is None:
            return v
        if not isinstance(v, dict):
            raise ValueError(f"{name} must be an object or null, got {type(v).__name__}")
        for k, x in v.items():
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"{name}.{k} is {x}, expected a finite number or null")
            # recall_adv, accuracy_relearn, ...: the report averages them
            measure = str(k).startswith(("recall", "accuracy")) or k in ("relearn_lr", "superficial")
            if measure and isinstance(x, dict):  # per relearning step count: recall_relearn {"1": 0.3, ...}
                for step, y in x.items():
                    if y is not None and (isinstance(y, (bool, str, list, dict)) or
                                          (isinstance(y, float) and not math.isfinite(y))):
                        raise ValueError(f"{name}.{k}.{step} is {y!r:.40}, expected a finite number or null")
            elif measure and x is not None and (isinstance(x, (str, list)) or
                                                (k != "superficial" and isinstance(x, bool))):
                raise ValueError(f"{name}.{k} is {x!r:.40}, expected a number or null")
        return v


class Verdict(BaseModel):
    """The fields of one verdict line that the results store and the report read."""

    model_config = ConfigDict(extra="allow")

    original: StrictStr = Field(min_length=1)
    target_id: FactId
    recall: Share
    accuracy: Share
    forgotten: list[FactId]
    accuracy_rule: Share | None = None
    accuracy_other: Share | None = None
    accuracy_groups: dict[StrictStr, Share | None] | None = None
    target_forgotten: StrictBool = False
    exact: StrictBool = True
    deep: StrictBool | None = None
    superficial: StrictBool | None = None
    deep_p: Share | None = None  # soft rules' probability that the target is still derivable
    method: StrictStr | None = None
    param: Annotated[float, Field(allow_inf_nan=False, strict=True)] | StrictStr | None = None
    row: dict[str, Any] | None = None
    unlearned: StrictStr | None = None
    kb: StrictStr | None = None
    adversarial: Any = None
    attacks: Any = None
    scores: dict[str, Any] | None = None

    @field_validator("recall", "accuracy", "accuracy_rule", "accuracy_other", "param", "deep_p", mode="before")
    @classmethod
    def _numbers(cls, v: Any) -> Any:
        return _no_bool(v)

    @field_validator("accuracy_groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for x in v.values():
                _no_bool(x)
        return v

    @field_validator("adversarial", "attacks")
    @classmethod
    def _checks(cls, v: Any, info) -> Any:
        return _Checks.check_values(v, info.field_name)


def verdict_problem(obj: dict[str, Any], n_facts: int | None = None) -> tuple[str, str] | None:
    """``(field, problem)`` of the first thing wrong with a verdict line, or None. ``n_facts``:
    the KB's fact count, when the KB is at hand (fact ids past it are refused)."""
    try:
        Verdict.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(line)"
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
        return field, f"{msg} (got {shown[:80]})"
    if n_facts is not None:
        if obj["target_id"] >= n_facts:
            return "target_id", f"fact {obj['target_id']} is not in the KB ({n_facts} facts)"
        bad = [i for i in obj["forgotten"] if i >= n_facts]
        if bad:
            return "forgotten", f"fact {bad[0]} is not in the KB ({n_facts} facts)"
    return None
