"""Calibration per relation: each relation's raw false-positive rate and, where the data allow,
its own threshold (:mod:`deepunlearn.probe.calibration` sets them per relation group).

Relations of one group guess differently (a ``father`` question with a surname shared by the
child is answered without the fact; a ``sister`` question is not), so a group's rate hides the
relations that guess most. Per mode and relation, a calibration records:

- the **raw rule's** false positives on the never-seen facts: ``raw_fp`` of ``n_neg`` (the rate
  the chance figure ``p_chance`` of a verdict uses), and the raw true positives on the model's
  own facts (``raw_tp`` of ``n_pos``); the mode ``any_raw`` is the OR of the modes' raw rules;
- a **threshold of its own** (the rule of the module :mod:`deepunlearn.probe.calibration`, on
  the relation's negatives alone) with the FPR and TPR measured at it.

A relation with fewer than ``MIN_RELATION_NEGATIVES`` (20) never-seen facts gets its group's
rates and threshold instead: ``source`` is then ``"group"``, ``own_n_neg`` keeps its own count
and ``note`` says so. Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

#: the fewest never-seen facts of a relation for rates and a threshold of its own
MIN_RELATION_NEGATIVES = 20


@dataclass
class RelationEntry:
    """One mode in one relation (module docstring). ``threshold`` / ``any_threshold``: the
    relation's own (``None`` when it falls back to its group, or for ``any_raw``)."""

    group: str
    source: str
    n_neg: int
    raw_fp: int
    own_n_neg: int
    own_raw_fp: int
    n_pos: int
    raw_tp: int
    threshold: float | None = None
    fp: int | None = None
    tp: int | None = None
    any_threshold: float | None = None
    note: str | None = None

    @property
    def raw_fpr(self) -> float:
        return self.raw_fp / self.n_neg if self.n_neg else math.nan

    def to_json(self) -> dict:
        def num(x):
            return None if x is None or not math.isfinite(x) else x

        return {"group": self.group, "source": self.source, "n_neg": self.n_neg, "raw_fp": self.raw_fp,
                "raw_fpr": None if not self.n_neg else round(self.raw_fpr, 6), "own_n_neg": self.own_n_neg,
                "own_raw_fp": self.own_raw_fp, "n_pos": self.n_pos, "raw_tp": self.raw_tp,
                "threshold": num(self.threshold), "threshold_set": self.threshold is not None, "fp": self.fp,
                "tp": self.tp, "any_threshold": num(self.any_threshold), "note": self.note}

    @classmethod
    def from_json(cls, d: Mapping) -> "RelationEntry":
        """From a validated entry (``threshold_set`` tells ``null`` = -inf from ``null`` = none)."""
        def thr(key):
            if not d.get("threshold_set") and key == "threshold":
                return None
            v = d.get(key)
            return -math.inf if v is None else float(v)

        return cls(group=d["group"], source=d["source"], n_neg=d["n_neg"], raw_fp=d["raw_fp"],
                   own_n_neg=d["own_n_neg"], own_raw_fp=d["own_raw_fp"], n_pos=d["n_pos"], raw_tp=d["raw_tp"],
                   threshold=thr("threshold"),
                   fp=d.get("fp"), tp=d.get("tp"),
                   any_threshold=thr("any_threshold") if d.get("threshold_set") else None, note=d.get("note"))


def relation_entries(neg: Mapping[str, np.ndarray], neg_groups: Sequence[str], neg_relations: Sequence[str],
                     pos: Mapping[str, np.ndarray], pos_groups: Sequence[str], pos_relations: Sequence[str], *,
                     fpr: float, min_negatives: int = MIN_RELATION_NEGATIVES) -> dict[str, dict[str, RelationEntry]]:
    """``{mode: {relation: entry}}`` for every mode of ``neg`` and ``any_raw`` (module docstring)."""
    from .calibration_base import threshold

    ng, nr = np.asarray(neg_groups, dtype=object), np.asarray(neg_relations, dtype=object)
    pg, pr = np.asarray(pos_groups, dtype=object), np.asarray(pos_relations, dtype=object)
    group_of = {**dict(zip(pr, pg)), **dict(zip(nr, ng))}
    modes = list(neg)
    out: dict[str, dict[str, RelationEntry]] = {}
    for m in modes + ["any_raw"]:
        use = modes if m == "any_raw" else [m]
        raw_n = np.zeros(len(nr), dtype=bool)
        raw_p = np.zeros(len(pr), dtype=bool)
        for mm in use:
            raw_n |= np.asarray(neg[mm]) > -math.inf
            raw_p |= np.asarray(pos[mm]) > -math.inf
        out[m] = {}
        for r in sorted(group_of):
            g = group_of[r]
            own, pm = nr == r, pr == r
            e = RelationEntry(group=g, source="relation", n_neg=int(own.sum()), raw_fp=int(raw_n[own].sum()),
                              own_n_neg=int(own.sum()), own_raw_fp=int(raw_n[own].sum()), n_pos=int(pm.sum()),
                              raw_tp=int(raw_p[pm].sum()))
            if e.own_n_neg < min_negatives:
                gm = ng == g
                e.source, e.n_neg, e.raw_fp = "group", int(gm.sum()), int(raw_n[gm].sum())
                e.note = (f"{e.own_n_neg} never-seen facts, fewer than {min_negatives}: the rates and threshold of "
                          f"group {g}")
            elif m != "any_raw":
                ev_n, ev_p = np.asarray(neg[m])[own], np.asarray(pos[m])[pm]
                e.threshold = threshold(ev_n, fpr)
                e.fp, e.tp = int((ev_n > e.threshold).sum()), int((ev_p > e.threshold).sum())
                e.any_threshold = -math.inf
            out[m][r] = e
    return out


def fallbacks(relations: Mapping[str, Mapping[str, RelationEntry]]) -> dict[str, tuple[str, int]]:
    """``{relation: (group, its never-seen facts)}`` of the relations that fall back to their group."""
    return {r: (e.group, e.own_n_neg) for by in relations.values() for r, e in by.items() if e.source == "group"}


def fallback_line(relations: Mapping[str, Mapping[str, RelationEntry]],
                  min_negatives: int = MIN_RELATION_NEGATIVES) -> str | None:
    """One line naming the relations that fall back to their group (``None`` when none does)."""
    fb = fallbacks(relations)
    if not fb:
        return None
    return (f"note: relation{'s' if len(fb) > 1 else ''} " + ", ".join(f"{r} ({n} never-seen facts, group {g})"
                                                                     for r, (g, n) in sorted(fb.items()))
            + f" {'have' if len(fb) > 1 else 'has'} fewer than {min_negatives} never-seen facts: "
            "calibrated with the rates and thresholds of the group")


def relation_table(relations: Mapping[str, Mapping[str, RelationEntry]]) -> str:
    """Per mode and relation: the raw FPR (and where it comes from) and the relation's threshold."""
    lines = [f"{'mode':<9} {'relation':<14} {'raw FPR':>16} {'raw TPR':>16} {'threshold':>9}  source"]
    for m, by in relations.items():
        for r, e in by.items():
            t = "-" if e.threshold is None or not math.isfinite(e.threshold) else f"{e.threshold:.3f}"
            tpr = f"{e.raw_tp / e.n_pos:.1%} ({e.raw_tp}/{e.n_pos})" if e.n_pos else "-"
            lines.append(f"{m:<9} {r:<14} {f'{e.raw_fpr:.1%} ({e.raw_fp}/{e.n_neg})':>16} {tpr:>16} {t:>9}  "
                         + ("relation" if e.source == "relation" else f"group {e.group} (own: {e.own_n_neg})"))
    return "\n".join(lines)
