"""The report's "How much remains" section and ``measures.csv``: the tables of
:mod:`.measures_tables` as markdown, with "–" (markdown) or an empty cell (CSV) where a measure was
not taken, never 0."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...unlearn.summary import THRESHOLD
from ..metrics import value_of
from .measures_plots import plot_measures
from .measures_tables import (
    COLUMNS,
    RULES,
    canary_comparison,
    has_measures,
    measures_table,
    retrain_inference,
    stopping_rules,
)
from .tables import md_table


def fmt(x: float | None) -> str:
    """A measure for the report: 3 decimals, scientific below 1e-3 (forget quality reaches 1e-19),
    "–" when not measured (never 0).

    >>> fmt(0.51234), fmt(3.2e-19), fmt(None), fmt(0.0)
    ('0.512', '3.20e-19', '–', '0.000')
    """
    if x is None:
        return "–"
    return f"{x:.3f}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def _cell(row: Mapping[str, Any], c: str) -> str:
    lo, hi = row.get(f"{c}_lo"), row.get(f"{c}_hi")
    s = fmt(row.get(c))
    return s if lo is None or hi is None or lo == hi else f"{s} [{fmt(lo)}, {fmt(hi)}]"


def write_measures_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Every row of :func:`measures_table`; a value not measured is an empty cell, never 0."""
    cols = ["model", "method", "param", "baseline", "n_targets"] + [
        f"{c}{s}" for c in COLUMNS for s in ("", "_lo", "_hi", "_n")]
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else (int(r[c]) if c == "baseline" else r[c]) for c in cols])
    return Path(path)


def _label(method: str) -> str:
    return {"original": "before (original)", "retrain": "retrain (retain model)"}.get(method, method.upper())


_NAMES = {"prob": "prob", "truth_ratio": "truth ratio", "exposure": "exposure", "rouge_l": "ROUGE-L"}


def measures_section(rows: Sequence[Mapping[str, Any]], rules: Mapping, canary: Mapping, retrain: Mapping,
                     figures: Mapping[str, Path], threshold: float = THRESHOLD) -> list[str]:
    """The markdown of the report's "How much remains" section (tables, stopping rules, ID vs
    canary, the retain model's inferred knowledge and the figures)."""
    t = f"{threshold:g}"
    head = ["model", "method", "param", "targets"]

    def lead(r: Mapping[str, Any]) -> list[str]:
        return [r["model"], _label(r["method"]), "–" if r["baseline"] else str(r["param"]), str(r["n_targets"])]

    first = [f"{p}.{k}" for p in ("target", "forget") for k in _NAMES]
    second = [f"retain.{k}" for k in _NAMES] + ["model_utility", "forget_quality", "privleak", "min_k_auc", "genex"]
    md = ["## How much remains", "",
          "Likelihood, membership and reference-model measures at every grid point: means over targets "
          "with 95 % bootstrap intervals over targets (scipy, BCa, 9,999 resamples) in brackets (none: one target, "
          "or every target has the same value); – = not measured "
          "(a field that needs the retain model or the holdout facts, when there is none). The forget set is the "
          "target's minimal set U*; the retain facts are K \\ (U* ∪ {t}). All values: `measures.csv`.", "",
          "### Target and forget set", "",
          *md_table(head + ["recall", "accuracy"] + [f"{p.replace('forget', 'U*')} {_NAMES[k]}" for p, k in
                                                  (c.split(".") for c in first)],
                  [lead(r) + [_cell(r, c) for c in ["recall", "accuracy", *first]] for r in rows]), "",
          "### Retain facts and reference-based measures", "",
          *md_table(head + [f"retain {_NAMES[c.split('.')[1]]}" for c in second[:4]]
                  + ["model utility", "forget quality", "PrivLeak", "Min-K% AUC", "genex"],
                  [lead(r) + [_cell(r, c) for c in second] for r in rows]), ""]

    md += _stopping_lines(rules, t)
    md += _canary_lines(canary)

    for model, r in retrain.items():
        if r["n_recorded"]:
            md.append(f"- **{model}**: the retain model, trained without the target and its minimal set, still "
                      f"answers the target for {r['answers_target']} of {r['n_recorded']} targets and on average "
                      f"{fmt(r['answers_set_mean'])} facts of U*: knowledge it infers from what it kept.")
    if retrain:
        md.append("")

    captions = {
        "truth_ratios": "Truth ratios of the minimal-set facts before unlearning, after (each method's first-forgotten "
                        "point) and under the retain model (TOFU Figure 4).",
        "fq_mu": "Forget quality (log scale) vs model utility along each method's grid, with the model before "
                 "unlearning and the retain model (TOFU's trade-off).",
        "privleak": "PrivLeak at each method's first-forgotten point, 95 % bootstrap intervals over targets "
                    "(0 is right; negative: over-unlearning, positive: under-unlearning).",
        "exposure": "Exposure of the target along the grid, in-distribution vs canary targets (means over targets).",
    }
    for name, p in figures.items():
        kind = next((k for k in captions if name.startswith(k)), None)
        md += [f"![{name}]({Path(p).name})", "", f"*{captions.get(kind, name)}*", ""]
    return md


def _stopping_lines(rules: Mapping, t: str) -> list[str]:
    """The "Stopping rules" subsection: per method, the means at each rule's chosen points."""
    md = ["### Stopping rules", "",
          "Where a practitioner would stop, per method (means over targets at the chosen points): "
          "*first forgotten*, the first grid point where the target is forgotten (the last point when none is); "
          "*MUSE*, the last grid point before the retain model utility falls below the retain model's (before "
          f"unlearning when the first point does); *best of grid*, the best accuracy among points with recall ≥ {t} "
          "(the paper's choice, made with hindsight of every point; summary.json keeps it under the rule key "
          "`oracle`: it is not the `oracle` row, exact unlearning). *fired*: targets where the rule's condition was "
          "met.", ""]
    names = {"first_forgotten": "first forgotten", "muse": "MUSE", "oracle": f"best of grid (Acc@Recall≥{t})"}
    srows = []
    for model, per in rules.items():
        for method, by_rule in per.items():
            for rule in RULES:
                s = by_rule.get(rule)
                srows.append([model, method.upper(), names[rule]] + (
                    ["–"] * 5 if s is None else [str(s["n_targets"]), str(s["n_fired"]), fmt(s["recall"]),
                                                 fmt(s["accuracy"]), fmt(s["target_forgotten"])]))
    md += md_table(["model", "method", "rule", "targets", "fired", "recall", "accuracy", "target forgotten"], srows)
    md += [""]
    return md


def _canary_lines(canary: Mapping) -> list[str]:
    """The "In-distribution vs canary targets" subsection, when the sweep has canary targets."""
    if not any(g.get("canary") for per in canary.values() for g in per.values()):
        return []
    md = ["### In-distribution vs canary targets", "",
          "Canaries are facts whose answers are random 10-character strings (relation `code`, outside every rule; "
          "Baluta et al.'s out-of-distribution data). *steps*: the mean grid value at which the target is first "
          "forgotten; exposure of the target before unlearning, at that point and at the last grid point; "
          "collateral accuracy at that point.", ""]
    crows = [[model, method.upper(), "canary" if grp == "canary" else "in-distribution", str(g["n_targets"]),
              str(g["n_forgotten"]), fmt(g["steps"]), fmt(g["exposure_before"]), fmt(g["exposure_at_forgotten"]),
              fmt(g["exposure_last"]), fmt(g["accuracy_at_forgotten"])]
             for model, per in canary.items() for method, gs in per.items()
             for grp in ("id", "canary") if (g := gs.get(grp))]
    md += md_table(["model", "method", "group", "targets", "forgotten", "steps", "exposure before",
                    "exposure at forgotten", "exposure at last", "collateral accuracy"], crows) + [""]
    return md


def remains_section(points: Sequence[Any], out: Path, methods: Sequence[str], models: Sequence[str],
                    threshold: float = THRESHOLD) -> tuple[list[str], dict[str, Any]]:
    """The "How much remains" section of points that carry measures: writes ``measures.csv`` and
    the figures into ``out`` and returns the markdown and the ``summary.json`` additions
    (``stopping_rules``, ``canary_comparison``, ``retrain_inference``); both empty for points
    without measures."""
    if not has_measures(points):
        return [], {}
    rows = measures_table(points)
    write_measures_csv(rows, out / "measures.csv")
    rules, canary, retrain = stopping_rules(points, threshold), canary_comparison(points), retrain_inference(points)
    figs = plot_measures(points, rows, out, methods, [m for m in models if any(value_of(p, "model") == m for p in points)])
    return (measures_section(rows, rules, canary, retrain, figs, threshold),
            {"stopping_rules": rules, "canary_comparison": canary, "retrain_inference": retrain})
