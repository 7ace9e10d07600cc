"""The report's summary sections, around the other sections of ``report.md``: the headline
tables (the paper's Table 3), the figures of the paper (Figures 3-6, a per-relation breakdown and
every target's trajectory, drawn by :mod:`.headline_plots`) with their captions, the tables by
target relation and per target, and the definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ...unlearn.methods import catalog
from ...unlearn.summary import Metric, headline_columns
from ..bootstrap import format_value, has_interval as has_ci
from ..jobs import safe_name
from ..metrics import format_table, per_target
from .headline_plots import (
    plot_by_relation,
    plot_curves,
    plot_groups,
    plot_headline,
    plot_superficial,
    plot_trajectories,
)
from .plots import is_missing
from .tables import md_table, number


def _pm(s: Mapping, key: str, digits: int = 3) -> str:
    v = s.get(key)
    if is_missing(v):
        return "–"
    if has_ci(s, key):  # the headline metrics: 95 % bootstrap interval over targets
        return format_value(s, key, digits, n_targets=s.get("n_targets"))
    e = s.get(f"{key}_std")
    return f"{v:.{digits}f} ± {e:.{digits}f}" if not is_missing(e) else f"{v:.{digits}f}"


def _cell(s: Mapping, key: str, metric: Metric) -> str:
    """A headline cell: with its interval or ± its spread where the metric has one, else the value."""
    digits = 3 if metric.digits is None else metric.digits
    return _pm(s, key, digits) if metric.spread or metric.interval else number(s.get(key), digits)


def draw_figures(points: Sequence[Any], summary: Mapping, by_rel: Mapping, out: Path, methods: Sequence[str],
                 models: Sequence[str], relations: Sequence[str], groups: Sequence[str],
                 threshold: float) -> dict[str, Path]:
    """Draw the paper's figures into ``out`` (none without points): ``{name: path}``."""
    figs = {}
    if points:
        figs["curves"] = plot_curves(points, out / "curves.png", methods, threshold, models=models)
        figs["headline"] = plot_headline(summary, out / "headline.png", methods, threshold)
        figs["superficial"] = plot_superficial(summary, out / "superficial.png", methods)
        fig = "family_biography" if groups == ["family", "biography"] else "groups"
        figs[fig] = plot_groups(summary, out / f"{fig}.png", methods, threshold, groups)
        figs["by_relation"] = plot_by_relation(by_rel, out / "by_relation.png", methods, relations, threshold)
        for model in summary:
            safe = safe_name(model)
            figs[f"trajectories_{model}"] = plot_trajectories(points, out / f"trajectories_{safe}.png", methods, model,
                                                              threshold)
    return figs


def headline_lines(summary: Mapping, methods: Sequence[str], groups: Sequence[str], threshold: float,
                   n_seeds: int) -> list[str]:
    """The "Headline" section: the console table and the markdown table of every metric with a
    headline place (:func:`~deepunlearn.unlearn.summary.headline_columns`), per relation group of
    ``groups`` where the metric is per group."""
    over = ("Means over targets with their 95 % bootstrap interval over targets [low, high] (scipy, percentile, 9,999 "
            "resamples, seed 0; one target: no interval, its n).") if n_seeds <= 1 else (
        f"Means over {n_seeds} seeds × targets with their 95 % bootstrap interval [low, high] resampling targets, each "
        "with all its seeds (percentile, 9,999 resamples, seed 0); n = seeds × targets.")
    md = ["## Headline (paper Table 3 shape)", "", over, "",
          "```", format_table(summary, threshold, methods, show_spread=True), "```", ""]
    columns = headline_columns(threshold, groups)  # the metrics' specs: a headline place, a title, digits
    header = ["model", "method", "targets", *(heading for _, heading, _ in columns)]
    rows = []
    for model, per in summary.items():
        for m in methods:
            s = per.get(m)
            if not s:
                continue
            rows.append([model, catalog.title(m), str(s["n_targets"]), *(_cell(s, name, metric) for name, _, metric in columns)])
    return md + ["All metrics are means over targets: Recall@Acc and Acc@Recall with their 95 % bootstrap interval "
                 "over targets [low, high], the others ± sample standard deviation.", "", *md_table(header, rows), ""]


def figure_lines(figs: Mapping[str, Path], groups: Sequence[str], threshold: float) -> list[str]:
    """The "Figures" section: each figure of :func:`draw_figures` with its caption (none: no section)."""
    if not figs:
        return []
    t = f"{threshold:g}"
    md = ["## Figures", ""]
    captions = {
        "curves": "Accuracy vs recall, one point per hyper-parameter value averaged over targets (paper Figure 4). "
                  "The shaded corner is the goal: recall and accuracy both ≥ 0.8.",
        "headline": f"Acc@Recall≥{t} and Recall@Acc≥{t}, error bars = std over targets (paper Figure 3).",
        "superficial": "Best accuracy once the target itself is forgotten (paper Figure 5).",
        "family_biography": f"Acc@Recall≥{t} on family facts vs biography facts (paper Figure 6).",
        "groups": f"Acc@Recall≥{t} on the facts of each relation group: " + ", ".join(groups)
                  + " (paper Figure 6).",
        "by_relation": "The headline metrics by the relation of the target fact.",
    }
    for name, p in figs.items():
        cap = captions.get(name, "Each target's own trajectory for " + name.removeprefix("trajectories_") + ".")
        md += [f"![{name}]({Path(p).name})", "", f"*{cap}*", ""]
    return md


def relation_lines(by_rel: Mapping, methods: Sequence[str], relations: Sequence[str], threshold: float) -> list[str]:
    """The "By target relation" section."""
    t = f"{threshold:g}"
    rows = []
    for model, per in by_rel.items():
        for m in methods:
            for rel in relations:
                s = per.get(m, {}).get(rel)
                if s:
                    rows.append([model, catalog.title(m), rel, str(s["n_targets"]), _pm(s, f"recall_at_acc_{t}"),
                                 _pm(s, f"acc_at_recall_{t}"), _pm(s, "auc")])
    return ["## By target relation", "",
            *md_table(["model", "method", "relation", "targets", f"Recall@Acc≥{t}", f"Acc@Recall≥{t}", "AUC"], rows),
            ""]


def target_lines(points: Sequence[Any], kb: Any, models: Sequence[str], methods: Sequence[str],
                 groups: Sequence[str], threshold: float) -> list[str]:
    """The "Per target" section: each target's metrics, models in ``models``' order."""
    t = f"{threshold:g}"
    pt = per_target(points, threshold, groups)
    rows = []
    for (model, m, tg), s in sorted(pt.items(), key=lambda kv: (models.index(kv[0][0]), kv[0][2],
                                                                 methods.index(kv[0][1]) if kv[0][1] in methods else 99)):
        fact = f"{kb.facts[tg][2]} is {kb.facts[tg][0]}'s {kb.facts[tg][1]}" if kb is not None else ""
        rows.append([model, str(tg), fact, catalog.title(m), number(s.get(f"recall_at_acc_{t}"), 3),
                     number(s.get(f"acc_at_recall_{t}"), 3), number(s.get("auc"), 3),
                     number(s.get("acc_at_superficial"), 3)])
    return ["## Per target", "",
            *md_table(["model", "target", "fact", "method", f"Recall@Acc≥{t}", f"Acc@Recall≥{t}", "AUC",
                       "Acc@Superficial"], rows), ""]


def definition_lines(threshold: float) -> list[str]:
    """The "Definitions" section: what each metric means."""
    t = f"{threshold:g}"
    return ["## Definitions", "",
            "- *Recall*: the largest share of one minimal deep-unlearning set of the target that the model lost; "
            "*accuracy*: the share of the other known facts it kept.",
            "- Every target's curve gets the end points (recall 0, accuracy 1) and (recall 1, accuracy 0) before any "
            "best-of, then metrics are averaged over targets (as the reference does).",
            f"- *Acc@Recall≥{t}*: best accuracy among points with recall ≥ {t}; *Recall@Acc≥{t}*: best recall among "
            f"points with accuracy ≥ {t}.",
            "- *AUC*: area under the upper envelope A(r) = max{accuracy of points with recall ≥ r}, r in [0, 1] "
            "(the mean of Acc@Recall≥r over all thresholds r).",
            "- *Acc@Superficial*: best accuracy among points where the target itself is forgotten (0 if none; the "
            "superficial rate is the share of targets where some point forgot it).",
            "- Raw points: `points.csv` and `results.sqlite` (table `points`); aggregates: `summary.json`.", ""]
