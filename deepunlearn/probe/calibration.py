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
adversarial number is measured against.

Per relation (:mod:`.calibration_relations`, when the facts' relations are given): each
relation with at least 20 never-seen facts gets its own threshold (used in place of its group's
when a verdict names the fact's relation) and its raw rule's FPR, the rate a verdict's
``p_chance`` uses; a relation with fewer falls back to its group, and the file says so. A file is
checked field by field on read (:mod:`.calibration_file`). Everything here is numpy only (no
torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .calibration_base import CalibrationError, check_rate, threshold  # noqa: F401  (re-exported)

FORMAT = "deepunlearn-calibration"
#: default target false-positive rate and minimum true-positive rate of an informative mode
DEFAULT_FPR, DEFAULT_MIN_TPR = 0.05, 0.5


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
    #: ``relations[mode][relation]`` (:mod:`.calibration_relations`; empty in a per-group file)
    relations: dict[str, dict[str, Any]] = field(default_factory=dict)
    min_relation_negatives: int = 20

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

    def _threshold(self, mode: str, group: str, relation: str | None, key: str) -> float:
        r = self.relations.get(mode, {}).get(relation) if relation is not None else None
        if r is not None and r.threshold is not None and r.group == group:
            return getattr(r, key)
        return getattr(self.entry(mode, group), key)

    def known(self, mode: str, evidence: np.ndarray, groups: Sequence[str], *, within_any: bool = False,
              relations: Sequence[str] | None = None) -> np.ndarray:
        """Calibrated verdicts of ``mode`` from per-fact ``evidence`` and each fact's group
        (``within_any``: at the mode's threshold inside the calibrated ``any``); with each fact's
        relation (``relations``), a relation's own threshold replaces its group's where it has one."""
        ev = np.asarray(evidence, dtype=np.float64)
        key = "any_threshold" if within_any else "threshold"
        rel = [None] * len(groups) if relations is None else list(relations)
        thr = np.array([self._threshold(mode, g, r, key) for g, r in zip(groups, rel)], dtype=np.float64)
        return ev > thr if len(ev) else np.zeros(0, dtype=bool)

    def known_any(self, evidence: Mapping[str, np.ndarray], groups: Sequence[str],
                  modes: Sequence[str] | None = None, relations: Sequence[str] | None = None) -> np.ndarray:
        """The calibrated ``any``: per fact, known under any mode informative in its group (of
        ``modes`` when given, else of the evidence's modes)."""
        use = [m for m in evidence if modes is None or m in modes]
        out = np.zeros(len(groups), dtype=bool)
        cal = {m: self.known(m, evidence[m], groups, within_any=True, relations=relations) for m in use}
        for j, g in enumerate(groups):
            ok = set(self.informative(g, use))
            out[j] = any(cal[m][j] for m in ok)
        return out

    def floor(self) -> float | None:
        """The calibrated ``any``'s measured FPR on the never-seen facts, pooled over groups."""
        ent = list(self.entries.get("any", {}).values())
        n = sum(e.n_neg for e in ent)
        return sum(e.fp for e in ent) / n if n else None

    def raw_rate(self, mode: str, relation: str, group: str) -> dict[str, Any]:
        """The raw rule's false positives of ``mode`` (``any``: the raw any) on never-seen facts of
        ``relation``: ``{"fp", "n_neg", "source"}`` (``source`` ``"relation"`` or ``"group"``, with
        the relation's own count when it falls back)."""
        key = "any_raw" if mode in ("any", "any_raw") else mode
        by = self.relations.get(key)
        if not by:
            raise CalibrationError(f"the calibration records no raw false-positive rates per relation for mode "
                                   f"{mode!r} "
                                   "(calibrate again with deepunlearn probe --calibrate)", field="relations")
        e = by.get(relation)
        if e is None:  # a relation the never-seen facts do not hold: its group's rate, pooled
            mine = [x for x in by.values() if x.group == group]
            n = sum(x.own_n_neg for x in mine)
            if not n:
                raise CalibrationError(f"the calibration has no never-seen facts of relation {relation!r} nor of its "
                                       f"group {group!r}", field="relations")
            return {"fp": sum(x.own_raw_fp for x in mine), "n_neg": n, "source": "group", "group": group,
                    "own_n_neg": 0}
        return {"fp": e.raw_fp, "n_neg": e.n_neg, "source": e.source, "group": e.group, "own_n_neg": e.own_n_neg}

    def to_json(self) -> dict:
        out = {"format": FORMAT, "fpr": self.fpr, "min_tpr": self.min_tpr, "floor": _r(self.floor() or math.nan),
               "meta": self.meta,
               "entries": {m: {g: e.to_json() for g, e in by.items()} for m, by in self.entries.items()}}
        if self.relations:
            out["min_relation_negatives"] = self.min_relation_negatives
            out["relations"] = {m: {r: e.to_json() for r, e in by.items()} for m, by in self.relations.items()}
        return out

    @classmethod
    def from_json(cls, obj: Any, *, source: str = "calibration") -> "Calibration":
        """What :meth:`to_json` wrote, alone or under ``"calibration"`` of a ``probe -o`` file;
        anything else is a :class:`CalibrationError` naming ``source`` and the field."""
        if isinstance(obj, dict) and isinstance(obj.get("calibration"), dict):
            obj = obj["calibration"]
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise CalibrationError(f"{source}: not a calibration file (no \"format\": \"{FORMAT}\"; write one with "
                                   "deepunlearn probe --calibrate)", file=source, field="format")
        from .calibration_file import validate
        from .calibration_relations import RelationEntry

        doc = validate(obj, source)
        entries = {m: {g: Entry(threshold=-math.inf if e.threshold is None else e.threshold, n_neg=e.n_neg, fp=e.fp,
                                n_pos=e.n_pos, tp=e.tp, informative=e.informative, reason=e.reason,
                                any_threshold=-math.inf if e.any_threshold is None else e.any_threshold)
                       for g, e in by.items()} for m, by in doc.entries.items()}
        relations = {m: {r: RelationEntry.from_json(e.model_dump()) for r, e in by.items()}
                     for m, by in doc.relations.items()}
        return cls(fpr=doc.fpr, min_tpr=doc.min_tpr, entries=entries, meta=doc.meta, relations=relations,
                   min_relation_negatives=doc.min_relation_negatives)


def load_calibration(path, *, flag: str = "--calibration") -> Calibration:
    """Read a calibration file (or a ``probe -o`` file holding one); errors name ``flag`` and the file."""
    from ..errors import load_json

    return Calibration.from_json(load_json(path, flag=flag, error=CalibrationError), source=str(path))


def calibrate(neg: Mapping[str, np.ndarray], neg_groups: Sequence[str], pos: Mapping[str, np.ndarray],
              pos_groups: Sequence[str], *, fpr: float = DEFAULT_FPR, min_tpr: float = DEFAULT_MIN_TPR,
              meta: Mapping[str, Any] | None = None, neg_relations: Sequence[str] | None = None,
              pos_relations: Sequence[str] | None = None, min_relation_negatives: int | None = None) -> Calibration:
    """Thresholds per mode (the keys of ``neg``) and group from the negatives' evidence, each
    mode's FPR/TPR measured on the negatives and the positives, and the calibrated ``any``'s.
    With each fact's relation (``neg_relations``, ``pos_relations``), also per relation
    (:mod:`.calibration_relations`): its raw FPR and, with at least ``min_relation_negatives``
    (20) never-seen facts, its own thresholds, which the measured FPR/TPR of its group then use."""
    from .calibration_relations import MIN_RELATION_NEGATIVES, relation_entries

    fpr = check_rate(fpr, "fpr")
    if isinstance(min_tpr, bool) or not isinstance(min_tpr, (int, float)) or not 0 <= min_tpr <= 1:
        raise CalibrationError(f"min_tpr must be a number in [0, 1], got {min_tpr!r}", field="min_tpr")
    if (neg_relations is None) != (pos_relations is None):
        raise CalibrationError("give the relations of both the never-seen and the known facts", field="relations")
    min_rel = MIN_RELATION_NEGATIVES if min_relation_negatives is None else int(min_relation_negatives)
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
            entries[m][g] = Entry(threshold=threshold(np.asarray(neg[m])[nm], fpr), n_neg=int(nm.sum()), fp=0,
                                  n_pos=int(pm.sum()), tp=0)
    cal = Calibration(fpr=fpr, min_tpr=min_tpr, entries=entries, meta=dict(meta or {}), min_relation_negatives=min_rel)
    nr = pr = None
    if neg_relations is not None:
        nr, pr = np.asarray(neg_relations, dtype=object), np.asarray(pos_relations, dtype=object)
        cal.relations = relation_entries(neg, neg_groups, nr, pos, pos_groups, pr, fpr=fpr, min_negatives=min_rel)
    for m in neg:
        kn = cal.known(m, neg[m], list(neg_groups), relations=None if nr is None else list(nr))
        kp = cal.known(m, pos[m], list(pos_groups), relations=None if pr is None else list(pr))
        for g in groups:
            e = entries[m][g]
            e.fp, e.tp = int(kn[neg_groups == g].sum()), int(kp[pos_groups == g].sum())
            if not e.n_pos or e.tpr < min_tpr:
                e.informative = False
                e.reason = (f"TPR {e.tp}/{e.n_pos} on the model's own facts is below {min_tpr:.0%} at FPR <= {fpr:.0%}"
                            if e.n_pos else "no known facts of this group to measure a TPR on")
    entries["any"] = {}
    for g in groups:
        nm, pm = neg_groups == g, pos_groups == g
        used = cal.informative(g)
        for m in used:
            entries[m][g].any_threshold = threshold(np.asarray(neg[m])[nm], fpr / len(used))
            for r, e in cal.relations.get(m, {}).items():
                if e.group == g and e.threshold is not None:
                    e.any_threshold = threshold(np.asarray(neg[m])[nr == r], fpr / len(used))
        sub = (lambda rel, mask: None if rel is None else list(rel[mask]))
        n_any = cal.known_any({m: np.asarray(v)[nm] for m, v in neg.items()}, list(neg_groups[nm]),
                              relations=sub(nr, nm))
        p_any = cal.known_any({m: np.asarray(v)[pm] for m, v in pos.items()}, list(pos_groups[pm]),
                              relations=sub(pr, pm))
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


def verdicts(cal, mode: str, ev: dict, groups: list[str],
             relations: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(calibrated, raw) verdicts of ``mode`` (``any``, ``any_raw`` or one mode) from the evidence
    (with each fact's relation: at its relation's threshold where it has one)."""
    raw_modes = list(ev) if mode in ("any", "any_raw") else [mode]
    raw = np.zeros(len(groups), dtype=bool)
    for m in raw_modes:
        raw |= ev[m] > -np.inf
    if mode == "any_raw":
        return raw, raw
    cal_known = (cal.known_any(ev, groups, relations=relations) if mode == "any"
                 else cal.known(mode, ev[mode], groups, relations=relations))
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
