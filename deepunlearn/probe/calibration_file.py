"""The calibration file's schema: every field checked on read, so a hand-edited or foreign file is
one line naming the file and the field (a :class:`~deepunlearn.probe.calibration.CalibrationError`),
never a crash later on.

Files written before calibration per relation (``entries`` per mode and group only, no
``relations``) read as before.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .modes import ANY_MODES

_STRICT = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)
Count = Field(ge=0)


class EntryModel(BaseModel):
    """``entries.MODE.GROUP`` (``fpr`` / ``tpr`` are derived and not read back)."""

    model_config = _STRICT
    threshold: Optional[float]
    n_neg: int = Count
    fp: int = Count
    n_pos: int = Count
    tp: int = Count
    informative: bool
    reason: Optional[str] = None
    any_threshold: Optional[float] = None

    @model_validator(mode="after")
    def _counts(self):
        if self.fp > self.n_neg:
            raise ValueError(f"fp ({self.fp}) is more than n_neg ({self.n_neg})")
        if self.tp > self.n_pos:
            raise ValueError(f"tp ({self.tp}) is more than n_pos ({self.n_pos})")
        return self


class RelationModel(BaseModel):
    """``relations.MODE.RELATION`` (:mod:`.calibration_relations`)."""

    model_config = _STRICT
    group: str
    source: Literal["relation", "group"]
    n_neg: int = Count
    raw_fp: int = Count
    own_n_neg: int = Count
    own_raw_fp: int = Count
    n_pos: int = Count
    raw_tp: int = Count
    threshold: Optional[float] = None
    threshold_set: bool = False
    fp: Optional[int] = Field(default=None, ge=0)
    tp: Optional[int] = Field(default=None, ge=0)
    any_threshold: Optional[float] = None
    note: Optional[str] = None

    @model_validator(mode="after")
    def _counts(self):
        if self.raw_fp > self.n_neg:
            raise ValueError(f"raw_fp ({self.raw_fp}) is more than n_neg ({self.n_neg})")
        if self.own_raw_fp > self.own_n_neg:
            raise ValueError(f"own_raw_fp ({self.own_raw_fp}) is more than own_n_neg ({self.own_n_neg})")
        if self.raw_tp > self.n_pos:
            raise ValueError(f"raw_tp ({self.raw_tp}) is more than n_pos ({self.n_pos})")
        if self.threshold_set and self.source == "group":
            raise ValueError("a relation that falls back to its group has no threshold of its own")
        return self


class CalibrationModel(BaseModel):
    """A whole calibration (``format`` is checked before, for a clearer message)."""

    model_config = _STRICT
    format: str
    fpr: float = Field(gt=0, lt=1)
    min_tpr: float = Field(default=0.5, ge=0, le=1)
    meta: dict[str, Any] = {}
    entries: dict[Literal[ANY_MODES + ("any",)], dict[str, EntryModel]] = Field(min_length=1)  # type: ignore
    relations: dict[Literal[ANY_MODES + ("any_raw",)], dict[str, RelationModel]] = {}  # type: ignore
    min_relation_negatives: int = Field(default=20, ge=1)


#: plainer words for pydantic's messages
_MESSAGES = {"float_type": "expected a JSON number", "int_type": "expected a JSON integer",
             "bool_type": "expected true or false", "string_type": "expected a JSON string",
             "dict_type": "expected a JSON object", "missing": "missing",
             "finite_number": "expected a finite number"}


def _loc(err: dict) -> str:
    parts = [str(x) for x in err["loc"] if x != "[key]"]
    return ".".join(p if p.isprintable() and p else json.dumps(p) for p in parts) or "(top level)"


def validate(obj: Any, source: str) -> CalibrationModel:
    """The checked calibration; a problem is a ``CalibrationError`` naming ``source`` and the field."""
    from .calibration_base import CalibrationError

    try:
        doc = CalibrationModel.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        where = _loc(err)
        msg = _MESSAGES.get(err["type"], err["msg"].removeprefix("Value error, "))
        if err["type"] == "literal_error" and err["loc"][-1] == "[key]":
            msg = f"unknown {'mode' if err['loc'][0] in ('entries', 'relations') else 'key'} {err['input']!r} " \
                  f"(expected {err.get('ctx', {}).get('expected', '')})"
        elif "input" in err and err["type"] not in ("missing", "value_error"):
            msg += f", found {json.dumps(err['input'], default=repr)[:60]}"
        raise CalibrationError(f"{source}: field {where}: {msg}", file=source, field=where) from None
    modes = [m for m in doc.entries if m != "any"]
    problem = None
    if not modes:
        problem = "entries", "holds no probe mode (exact, yesno, rank or generate)"
    for m, by in doc.entries.items():
        if not by and problem is None:
            problem = f"entries.{m}", "holds no relation group"
    for m, by in doc.relations.items():
        for r, e in by.items():
            if problem is None and modes and doc.entries[modes[0]] and e.group not in doc.entries[modes[0]]:
                problem = f"relations.{m}.{r}.group", f"group {e.group!r} is not among the groups of entries"
    if problem is not None:
        raise CalibrationError(f"{source}: field {problem[0]}: {problem[1]}", file=source, field=problem[0])
    return doc
