"""Calibrated probe verdicts: a fact is known only when its evidence beats facts the model never saw.

A probe mode's raw rule can call a fact "known" by chance: a relation-name answer among a few
names is guessed from the question's shape (``rank``), a yes/no answer is right half the time.
Calibration measures that floor on facts the model never saw (*negatives*: a holdout KB from
``deepunlearn data holdout``, or the facts a retain model was finetuned without) and raises
each mode's bar above it.

Evidence (per fact and mode; :mod:`deepunlearn.probe.evidence` computes it): ``-inf`` when the
mode's raw rule does not call the fact known, else a continuous score, the larger the surer:

``exact``, ``generate``
    the answer's teacher-forced log-probability, **mean per answer token** (comparable across
    answers of different token lengths), of the best form on which the raw rule holds.
``rank``
    the margin of the gold answer's length-normalised log-probability over the best wrong
    candidate's (``> 0`` iff the raw rule's rank is 1), best rankable form.
``yesno``
    ``log P(yes) - log P(no)`` oriented by the form's answer (positive = answered right), the
    smallest over the fact's yes/no forms (the raw rule needs every one right).

Threshold (per mode and relation group): with ``n`` negatives and target false-positive rate
``fpr``, at most ``k = floor(fpr * n)`` negatives may pass. The threshold is the ``(k+1)``-th
largest negative evidence and a fact is known iff its evidence is **strictly greater**, so
negatives tied at the threshold all fail and the measured FPR on the negatives is ``<= fpr``
(ties and small ``n`` make it smaller, never larger). ``n < 1/fpr`` gives ``k = 0``: the
threshold is the largest negative. A threshold of ``-inf`` (written ``null``) means the raw rule
already passes at most ``k`` negatives: the calibrated verdict equals the raw one. So calibration
only ever takes verdicts away.

Informative: a mode whose TPR (share of the positives, the model's own facts, known after
calibration) is below ``min_tpr`` (default 0.5) is *uninformative* in that group, with the reason
recorded, and left out of the calibrated ``any``: the OR over the ``m`` informative modes of the
fact's group, each at its own threshold for ``fpr / m`` (Bonferroni: an OR of ``m`` modes each at
``fpr`` could pass up to ``m * fpr`` of the negatives; split this way it passes at most ``fpr``
of them). The calibration records ``any``'s measured FPR and TPR per group: the floor an
adversarial number is measured against. Everything here is numpy only (no torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..user_error import UserError

FORMAT = "deepunlearn-calibration"
#: default target false-positive rate and minimum true-positive rate of an informative mode
DEFAULT_FPR, DEFAULT_MIN_TPR = 0.05, 0.5


class CalibrationError(UserError, ValueError):
    """A bad calibration argument or a calibration file that cannot be read back."""


def threshold(negatives: Sequence[float], fpr: float) -> float:
    """The threshold passing at most ``floor(fpr * n)`` of ``negatives`` (module docstring).

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


@dataclass
class Entry:
    """One mode in one relation group: its threshold and what it measured."""

    threshold: float
    n_neg: int
    fp: int
    n_pos: int
    tp: int
    informative: bool = True
    reason: str | None = None
    #: the threshold inside the calibrated ``any`` (for ``fpr / m``; ``-inf`` when unused)
    any_threshold: float = -math.inf

    @property
    def fpr(self) -> float:
        return self.fp / self.n_neg if self.n_neg else math.nan

    @property
    def tpr(self) -> float:
        return self.tp / self.n_pos if self.n_pos else math.nan

    def to_json(self) -> dict:
        return {"threshold": self.threshold if math.isfinite(self.threshold) else None, "n_neg": self.n_neg,
                "fp": self.fp, "fpr": _r(self.fpr), "n_pos": self.n_pos, "tp": self.tp, "tpr": _r(self.tpr),
                "informative": self.informative, "reason": self.reason,
                "any_threshold": self.any_threshold if math.isfinite(self.any_threshold) else None}


def _r(x: float):
    return None if not math.isfinite(x) else round(x, 6)


@dataclass
class Calibration:
    """Thresholds per mode and group (``entries[mode][group]``; ``any``'s entry holds no threshold,
    only the aggregate's measured FPR/TPR) and where they came from (``meta``)."""

    fpr: float
    min_tpr: float
    entries: dict[str, dict[str, Entry]]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m in self.entries if m != "any")

    def informative(self, group: str, modes: Sequence[str] | None = None) -> list[str]:
        """The informative modes of ``group`` (among ``modes``), in the calibration's order."""
        return [m for m in self.modes if (modes is None or m in modes) and self.entry(m, group).informative]

    def entry(self, mode: str, group: str) -> Entry:
        if mode not in self.entries:
            raise CalibrationError(f"the calibration has no mode {mode!r} (it has {', '.join(self.modes)})",
                                   field="modes")
        if group not in self.entries[mode]:
            raise CalibrationError(f"the calibration has no relation group {group!r} for mode {mode!r} "
                                   f"(it has {', '.join(self.entries[mode])})", field="groups")
        return self.entries[mode][group]

    def known(self, mode: str, evidence: np.ndarray, groups: Sequence[str], *, within_any: bool = False) -> np.ndarray:
        """Calibrated verdicts of ``mode`` from per-fact ``evidence`` and each fact's group
        (``within_any``: at the mode's threshold inside the calibrated ``any``)."""
        ev = np.asarray(evidence, dtype=np.float64)
        key = "any_threshold" if within_any else "threshold"
        thr = np.array([getattr(self.entry(mode, g), key) for g in groups], dtype=np.float64)
        return ev > thr if len(ev) else np.zeros(0, dtype=bool)

    def known_any(self, evidence: Mapping[str, np.ndarray], groups: Sequence[str],
                  modes: Sequence[str] | None = None) -> np.ndarray:
        """The calibrated ``any``: per fact, known under any mode informative in its group (of
        ``modes`` when given, else of the evidence's modes)."""
        use = [m for m in evidence if modes is None or m in modes]
        out = np.zeros(len(groups), dtype=bool)
        cal = {m: self.known(m, evidence[m], groups, within_any=True) for m in use}
        for j, g in enumerate(groups):
            ok = set(self.informative(g, use))
            out[j] = any(cal[m][j] for m in ok)
        return out

    def floor(self) -> float | None:
        """The calibrated ``any``'s measured FPR on the never-seen facts, pooled over groups."""
        ent = list(self.entries.get("any", {}).values())
        n = sum(e.n_neg for e in ent)
        return sum(e.fp for e in ent) / n if n else None

    def to_json(self) -> dict:
        return {"format": FORMAT, "fpr": self.fpr, "min_tpr": self.min_tpr, "floor": _r(self.floor() or math.nan),
                "meta": self.meta,
                "entries": {m: {g: e.to_json() for g, e in by.items()} for m, by in self.entries.items()}}

    @classmethod
    def from_json(cls, obj: Any, *, source: str = "calibration") -> "Calibration":
        """What :meth:`to_json` wrote, alone or under ``"calibration"`` of a ``probe -o`` file;
        anything else is a :class:`CalibrationError` naming ``source`` and the field."""
        if isinstance(obj, dict) and isinstance(obj.get("calibration"), dict):
            obj = obj["calibration"]
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise CalibrationError(f"{source}: not a calibration file (no \"format\": \"{FORMAT}\"; write one with "
                                   "deepunlearn probe --calibrate)", file=source, field="format")
        ents = obj.get("entries")
        if not isinstance(ents, dict) or not ents:
            raise CalibrationError(f"{source}: field 'entries' must be an object of modes", file=source,
                                   field="entries")
        entries: dict[str, dict[str, Entry]] = {}
        for m, by in ents.items():
            if not isinstance(by, dict):
                raise CalibrationError(f"{source}: field 'entries.{m}' must be an object of groups", file=source,
                                       field=f"entries.{m}")
            entries[m] = {}
            for g, e in by.items():
                try:
                    thr = e["threshold"]
                    at = e.get("any_threshold")
                    entries[m][g] = Entry(threshold=-math.inf if thr is None else float(thr),
                                          **{k: int(e[k]) for k in ("n_neg", "fp", "n_pos", "tp")},
                                          informative=bool(e["informative"]), reason=e.get("reason"),
                                          any_threshold=-math.inf if at is None else float(at))
                except (KeyError, TypeError, ValueError) as err:
                    raise CalibrationError(f"{source}: field 'entries.{m}.{g}' is malformed ({err!r})", file=source,
                                           field=f"entries.{m}.{g}") from None
        return cls(fpr=check_rate(obj.get("fpr"), "fpr"), min_tpr=float(obj.get("min_tpr", DEFAULT_MIN_TPR)),
                   entries=entries, meta=obj.get("meta") if isinstance(obj.get("meta"), dict) else {})


def load_calibration(path, *, flag: str = "--calibration") -> Calibration:
    """Read a calibration file (or a ``probe -o`` file holding one); errors name ``flag`` and the file."""
    from ..errors import load_json

    return Calibration.from_json(load_json(path, flag=flag, error=CalibrationError), source=str(path))


def calibrate(neg: Mapping[str, np.ndarray], neg_groups: Sequence[str], pos: Mapping[str, np.ndarray],
              pos_groups: Sequence[str], *, fpr: float = DEFAULT_FPR, min_tpr: float = DEFAULT_MIN_TPR,
              meta: Mapping[str, Any] | None = None) -> Calibration:
    """Thresholds per mode (the keys of ``neg``) and group from the negatives' evidence, each
    mode's FPR/TPR measured on the negatives and the positives, and the calibrated ``any``'s."""
    fpr = check_rate(fpr, "fpr")
    if isinstance(min_tpr, bool) or not isinstance(min_tpr, (int, float)) or not 0 <= min_tpr <= 1:
        raise CalibrationError(f"min_tpr must be a number in [0, 1], got {min_tpr!r}", field="min_tpr")
    neg_groups, pos_groups = np.asarray(neg_groups, dtype=object), np.asarray(pos_groups, dtype=object)
    groups = sorted(set(neg_groups) | set(pos_groups))
    entries: dict[str, dict[str, Entry]] = {}
    for m in neg:
        entries[m] = {}
        for g in groups:
            nm, pm = neg_groups == g, pos_groups == g
            if not nm.any():
                raise CalibrationError(f"no never-seen facts of relation group {g!r}: the holdout (or the excluded "
                                       "facts) must cover every group of the KB", field="groups")
            n_ev, p_ev = np.asarray(neg[m])[nm], np.asarray(pos[m])[pm]
            t = threshold(n_ev, fpr)
            e = Entry(threshold=t, n_neg=int(nm.sum()), fp=int((n_ev > t).sum()), n_pos=int(pm.sum()),
                      tp=int((p_ev > t).sum()))
            if not e.n_pos or e.tpr < min_tpr:
                e.informative = False
                e.reason = (f"TPR {e.tp}/{e.n_pos} on the model's own facts is below {min_tpr:.0%} at FPR <= {fpr:.0%}"
                            if e.n_pos else "no known facts of this group to measure a TPR on")
            entries[m][g] = e
    cal = Calibration(fpr=fpr, min_tpr=min_tpr, entries=entries, meta=dict(meta or {}))
    entries["any"] = {}
    for g in groups:
        nm, pm = neg_groups == g, pos_groups == g
        used = cal.informative(g)
        for m in used:
            entries[m][g].any_threshold = threshold(np.asarray(neg[m])[nm], fpr / len(used))
        n_any = cal.known_any({m: np.asarray(v)[nm] for m, v in neg.items()}, list(neg_groups[nm]))
        p_any = cal.known_any({m: np.asarray(v)[pm] for m, v in pos.items()}, list(pos_groups[pm]))
        entries["any"][g] = Entry(threshold=math.nan, n_neg=int(nm.sum()), fp=int(n_any.sum()), n_pos=int(pm.sum()),
                                  tp=int(p_any.sum()), informative=bool(used),
                                  reason=None if used else "no informative mode in this group")
    return cal


def raw_rates(neg: Mapping[str, np.ndarray], neg_groups: Sequence[str], pos: Mapping[str, np.ndarray],
              pos_groups: Sequence[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """The raw rules' (FPR, TPR) per mode and group (evidence ``> -inf``), ``any_raw`` included."""
    ng, pg = np.asarray(neg_groups, dtype=object), np.asarray(pos_groups, dtype=object)
    out: dict[str, dict[str, tuple[float, float]]] = {}
    modes = list(neg)
    for m in modes + ["any_raw"]:
        out[m] = {}
        for g in sorted(set(ng) | set(pg)):
            def rate(ev, mask):
                if not mask.any():
                    return math.nan
                hit = np.zeros(int(mask.sum()), dtype=bool)
                for mm in (modes if m == "any_raw" else [m]):
                    hit |= np.asarray(ev[mm])[mask] > -math.inf
                return float(hit.mean())
            out[m][g] = (rate(neg, ng == g), rate(pos, pg == g))
    return out


def verdicts(cal, mode: str, ev: dict, groups: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(calibrated, raw) verdicts of ``mode`` (``any``, ``any_raw`` or one mode) from the evidence."""
    raw_modes = list(ev) if mode in ("any", "any_raw") else [mode]
    raw = np.zeros(len(groups), dtype=bool)
    for m in raw_modes:
        raw |= ev[m] > -np.inf
    if mode == "any_raw":
        return raw, raw
    cal_known = cal.known_any(ev, groups) if mode == "any" else cal.known(mode, ev[mode], groups)
    return cal_known, raw


def table(cal: Calibration, raw: Mapping[str, Mapping[str, tuple[float, float]]] | None = None) -> str:
    """The calibration as a text table: mode x group, threshold, measured FPR / TPR (and the raw
    rule's, when given), informative or why not."""
    lines = [f"calibration: target FPR {cal.fpr:.0%}, informative = TPR >= {cal.min_tpr:.0%}"
             + ("" if cal.floor() is None else f"; calibrated any's floor (FPR) {cal.floor():.1%}"),
             f"{'mode':<9} {'group':<11} {'threshold':>9} {'FPR':>14} {'TPR':>14}"
             + ("  raw FPR / TPR" if raw else "") + "  verdict"]
    for m, by in cal.entries.items():
        for g, e in by.items():
            t = "-" if not math.isfinite(e.threshold) else f"{e.threshold:.3f}"
            rr = raw.get("any_raw" if m == "any" else m, {}).get(g) if raw else None
            lines.append(f"{m:<9} {g:<11} {t:>9} {f'{e.fpr:.1%} ({e.fp}/{e.n_neg})':>14} "
                         f"{f'{e.tpr:.1%} ({e.tp}/{e.n_pos})':>14}"
                         + (f"  {rr[0]:.1%} / {rr[1]:.1%}" if rr else "")
                         + ("  informative" if e.informative else f"  uninformative: {e.reason}"))
    small = sorted({(g, e.n_neg) for by in cal.entries.values() for g, e in by.items() if e.n_neg * cal.fpr < 1})
    lines += [f"note: group {g} has {n} never-seen facts, fewer than 1/FPR = {math.ceil(1 / cal.fpr)}: its "
              "thresholds are the largest never-seen score (measured FPR 0, TPR pessimistic); give more" for g, n in small]
    return "\n".join(lines)
