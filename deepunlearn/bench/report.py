"""The report of a sweep: ``report.md``, PNG figures (matplotlib, Agg), ``summary.json`` and
``points.csv`` in one folder.

The figures (the paper's Figures 3-6, a per-relation breakdown and every target's trajectory)
are drawn by :mod:`.plots`; this module writes the rest and puts the folder together.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from .plots import (
    value_of,
    is_missing,
    plot_by_relation,
    plot_curves,
    plot_groups,
    plot_headline,
    plot_superficial,
    plot_trajectories,
)
from ..errors import dumps
from ..unlearn.methods import catalog
from .du_report import du_section
from .bootstrap import format_value, has_interval as has_ci
from .bootstrap import meta as interval_meta
from .forms_intervals import adversarial_intervals, interval_table
from .intervals import has_interval
from .forms_report import forgetting_section
from .jobs import safe_name
from .measures_plots import plot_measures
from .measures_report import canary_comparison, has_measures, measures_table, retrain_inference, stopping_rules
from .measures_section import measures_section, write_measures_csv
from .report_setup import protocol_lines, setup_lines
from .metrics import (
    format_table,
    group_accuracy,
    is_baseline,
    is_deep,
    json_safe,
    mean_curve,
    first_seed,
    per_target,
    point_groups,
    point_seeds,
    summarize,
    summarize_by,
)

# ---------------------------------------------------------------------------------------------
# The report


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _pm(s: Mapping, key: str) -> str:
    v = s.get(key)
    if is_missing(v):
        return "–"
    if has_ci(s, key):  # the headline metrics: 95 % bootstrap interval over targets
        return format_value(s, key, 3, n_targets=s.get("n_targets"))
    e = s.get(f"{key}_std")
    return f"{v:.3f} ± {e:.3f}" if not is_missing(e) else f"{v:.3f}"


def methods_json(summary: Mapping) -> dict[str, Any]:
    """The CLI's ``{"methods": ...}`` part for one model: method -> metrics (strict JSON)."""
    return json_safe({m: dict(s) for m, s in summary.items()})


def build_report(points: Sequence[Any], out_dir: str | Path, *, kb=None, methods: Sequence[str] | None = None,
                 models: Sequence[str] | None = None,
                 config: Mapping[str, Any] | None = None, skipped: Mapping | None = None,
                 threshold: float = 0.8, title: str = "Deep unlearning benchmark",
                 manifest: Mapping[str, Any] | None = None) -> Path:
    """Write ``report.md``, the figures, ``summary.json`` and ``points.csv`` into ``out_dir``;
    returns the path of ``report.md``. ``kb`` names the targets and their relations; the sweep's
    ``manifest`` gives each model's protocol and grids (the Protocol section).

    Everything is written into a temporary sibling folder first and each file then moved into
    ``out_dir`` (``os.replace``, report.md last): a report that fails half-way leaves the previous
    one whole, and no reader ever sees a half-written file."""
    from ..outputs import clean_stale, dir_mode, tmp_sibling

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)  # the temporary folders of reports that were killed half-way
    tmp = tmp_sibling(out, "tmp")
    tmp.mkdir(mode=dir_mode())
    try:
        _build_into(tmp, points, kb=kb, methods=methods, models=models, config=config, skipped=skipped,
                    threshold=threshold, title=title, manifest=manifest)
        out.mkdir(parents=True, exist_ok=True)
        names = sorted(f.name for f in tmp.iterdir())
        for name in sorted(names, key=lambda n: n == "report.md"):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "report.md"


def _build_into(out: Path, points: Sequence[Any], *, kb, methods, models, config, skipped, threshold, title,
                manifest) -> None:
    t = f"{threshold:g}"
    points = list(points)
    # the relation groups of the sweep's KB (family / biography in the family domain); without
    # the KB, those the points report (family / biography for an older store)
    groups = kb.groups if kb is not None else point_groups(points)
    summary = summarize(points, threshold, groups)  # several run seeds: over seeds x targets
    n_seeds = len(point_seeds(points))
    every_seed, points = points, first_seed(points)  # per-trajectory sections: the first run seed
    if methods is None:
        methods = list(dict.fromkeys(value_of(p, "method") for p in points))
    methods = [m for m in methods if any(m in s for s in summary.values())]
    # batch / sequential rows (``ga@b5``, ``ga@seq``) are labelled apart from the configured methods
    methods += [m for m in dict.fromkeys(m for s in summary.values() for m in s) if "@" in m and m not in methods]
    order = list(dict.fromkeys(list(models or []) + [value_of(p, "model") for p in points]))
    summary = {m: summary[m] for m in order if m in summary}
    rel_of = (lambda i: kb.facts[i][1]) if kb is not None else (lambda i: "?")
    by_rel = summarize_by(points, rel_of, threshold, groups)
    by_rel = {m: by_rel[m] for m in order if m in by_rel}
    relations = list(dict.fromkeys(rel_of(int(value_of(p, "target"))) for p in sorted(points, key=lambda p: value_of(p, "target"))))
    if kb is not None:
        rel_order = list(kb.relations)
        relations.sort(key=lambda r: rel_order.index(r) if r in rel_order else len(rel_order))

    figs = {}
    if points:
        figs["curves"] = plot_curves(points, out / "curves.png", methods, threshold, models=order)
        figs["headline"] = plot_headline(summary, out / "headline.png", methods, threshold)
        figs["superficial"] = plot_superficial(summary, out / "superficial.png", methods)
        fig = "family_biography" if groups == ["family", "biography"] else "groups"
        figs[fig] = plot_groups(summary, out / f"{fig}.png", methods, threshold, groups)
        figs["by_relation"] = plot_by_relation(by_rel, out / "by_relation.png", methods, relations, threshold)
        for model in summary:
            safe = safe_name(model)
            figs[f"trajectories_{model}"] = plot_trajectories(points, out / f"trajectories_{safe}.png", methods, model, threshold)

    # only a sweep whose points carry measures gets these (a sweep without scores
    # writes the same report as before)
    remains: list[str] = []
    extra_summary: dict[str, Any] = {}
    if has_measures(points):
        rows = measures_table(points)
        write_measures_csv(rows, out / "measures.csv")
        rules, canary, retrain = stopping_rules(points, threshold), canary_comparison(points), retrain_inference(points)
        mfigs = plot_measures(points, rows, out, methods, [m for m in order if any(value_of(p, "model") == m for p in points)])
        remains = measures_section(rows, rules, canary, retrain, mfigs, threshold)
        extra_summary = {"stopping_rules": rules, "canary_comparison": canary, "retrain_inference": retrain}

    du_md, du_summary = du_section(points, summary, methods, out, threshold)
    # only a sweep whose points carry recall_adv or an attack's keys gets this section
    fc_md, fc_summary = forgetting_section(points, methods, out)
    adv = adversarial_intervals(every_seed)  # a calibrated aggregate: raw vs calibrated with 95 % intervals
    if adv:
        fc_summary["adversarial_intervals"] = adv
        fc_md += ["### Calibrated against raw, with 95 % intervals", "",
                  "At each run's last grid point (a run: one target under one seed); 95 % percentile bootstrap "
                  "intervals resampling targets with all their seeds, n = runs carrying the value. *superficial − "
                  "floor*: the calibrated superficial rate minus the aggregate's false-positive rate on never-seen "
                  "facts.", "", *interval_table(adv, methods), ""]

    _write_points_csv(every_seed, out / "points.csv", kb, groups)
    (out / "summary.json").write_text(dumps(json_safe({
        "models": summary, "intervals": interval_meta(n_seeds),
        **({"seeds": point_seeds(every_seed), "per_seed_sections": "first seed"} if n_seeds > 1 else {}), "by_relation": by_rel, "curves": mean_curve(points), **extra_summary, **du_summary,
        **fc_summary,
    }), indent=1) + "\n", encoding="utf-8")

    n_base = sum(1 for p in points if is_baseline(p))
    n_points = len(points) - n_base
    n_exact = sum(1 for p in points if value_of(p, "exact") and not is_baseline(p))
    targets = sorted({int(value_of(p, "target")) for p in points})
    md = [f"# {title}", "", f"Generated {_dt.datetime.now().isoformat(timespec='seconds')}."]
    if config:
        md += setup_lines(config, manifest, kb, points)
    md += [f"- **targets**: {len(targets)}; **points**: {n_points}; minimal sets exact for {n_exact} of {n_points} points"
           + (f"; **baseline rows** (before unlearning, retain model): {n_base}" if n_base else "")]
    if n_seeds > 1:
        md.append(f"- **run seeds**: {', '.join(map(str, point_seeds(every_seed)))} ({len(every_seed)} points in all): the "
                  "summary tables are means over seeds × targets with 95 % intervals resampling targets; the figures "
                  f"and per-target sections show seed {point_seeds(points)[0]}")
    if skipped:
        md.append(f"- **skipped** {len(skipped)} job(s) whose target the model did not know before unlearning: "
                  + ", ".join(f"{m}/{me}/{tg}" for (m, tg, me) in list(skipped)[:12]) + (" …" if len(skipped) > 12 else ""))
    if not points:
        md += [""] + nothing_evaluated(skipped)

    md += [""] + protocol_lines(manifest)
    over = ("Means over targets with their 95 % bootstrap interval over targets [low, high] (scipy, percentile, 9,999 "
            "resamples, seed 0; one target: no interval, its n).") if n_seeds <= 1 else (
        f"Means over {n_seeds} seeds × targets with their 95 % bootstrap interval [low, high] resampling targets, each "
        "with all its seeds (percentile, 9,999 resamples, seed 0); n = seeds × targets.")
    md += ["## Headline (paper Table 3 shape)", "", over, "",
           "```", format_table(summary, threshold, methods, show_spread=True), "```", ""]
    header = ["model", "method", "targets", f"Recall@Acc≥{t}", f"Acc@Recall≥{t}", "AUC", "Acc@Superficial",
              "superficial rate", *(f"Acc@Recall≥{t} {g}" for g in groups)]
    rows = []
    for model, per in summary.items():
        for m in methods:
            s = per.get(m)
            if not s:
                continue
            rows.append([model, catalog.title(m), str(s["n_targets"]), _pm(s, f"recall_at_acc_{t}"), _pm(s, f"acc_at_recall_{t}"),
                         _pm(s, "auc"), _pm(s, "acc_at_superficial"), _num3(s.get("superficial_rate"), 2),
                         *(_pm(s, f"acc_at_recall_{t}_{g}") for g in groups)])
    md += ["All metrics are means over targets: Recall@Acc and Acc@Recall with their 95 % bootstrap interval "
           "over targets [low, high], the others ± sample standard deviation.", "", _md_table(header, rows), ""]
    md += du_md
    md += fc_md

    if figs:
        md += ["## Figures", ""]
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
    md += remains

    md += ["## By target relation", ""]
    rows = []
    for model, per in by_rel.items():
        for m in methods:
            for rel in relations:
                s = per.get(m, {}).get(rel)
                if s:
                    rows.append([model, catalog.title(m), rel, str(s["n_targets"]), _pm(s, f"recall_at_acc_{t}"),
                                 _pm(s, f"acc_at_recall_{t}"), _pm(s, "auc")])
    md += [_md_table(["model", "method", "relation", "targets", f"Recall@Acc≥{t}", f"Acc@Recall≥{t}", "AUC"], rows), ""]

    md += ["## Per target", ""]
    pt = per_target(points, threshold, groups)
    rows = []
    for (model, m, tg), s in sorted(pt.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][2],
                                                                 methods.index(kv[0][1]) if kv[0][1] in methods else 99)):
        fact = f"{kb.facts[tg][2]} is {kb.facts[tg][0]}'s {kb.facts[tg][1]}" if kb is not None else ""
        rows.append([model, str(tg), fact, catalog.title(m), _num3(s.get(f"recall_at_acc_{t}")),
                     _num3(s.get(f"acc_at_recall_{t}")), _num3(s.get("auc")), _num3(s.get("acc_at_superficial"))])
    md += [_md_table(["model", "target", "fact", "method", f"Recall@Acc≥{t}", f"Acc@Recall≥{t}", "AUC", "Acc@Superficial"], rows), ""]

    md += ["## Definitions", "",
           "- *Recall*: the largest share of one minimal deep-unlearning set of the target that the model lost; "
           "*accuracy*: the share of the other known facts it kept.",
           "- Every target's curve gets the end points (recall 0, accuracy 1) and (recall 1, accuracy 0) before any best-of, "
           "then metrics are averaged over targets (as the reference does).",
           f"- *Acc@Recall≥{t}*: best accuracy among points with recall ≥ {t}; *Recall@Acc≥{t}*: best recall among points "
           f"with accuracy ≥ {t}.",
           "- *AUC*: area under the upper envelope A(r) = max{accuracy of points with recall ≥ r}, r in [0, 1] "
           "(the mean of Acc@Recall≥r over all thresholds r).",
           "- *Acc@Superficial*: best accuracy among points where the target itself is forgotten (0 if none; the "
           "superficial rate is the share of targets where some point forgot it).",
           "- Raw points: `points.csv` and `results.sqlite` (table `points`); aggregates: `summary.json`.", ""]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")


def _num3(v: Any, digits: int = 3) -> str:
    return "–" if is_missing(v) else f"{v:.{digits}f}"


def nothing_evaluated_text(skipped: Mapping | None) -> str:
    """Why a sweep has no point: ``no target could be evaluated: all N skipped (reasons)``."""
    skipped = dict(skipped or {})
    if not skipped:
        return "no point was evaluated: the sweep has no stored results"
    targets = sorted({tg for (_, tg, _) in skipped})
    reasons = sorted({str(r or "no reason recorded") for r in skipped.values()})
    return f"no target could be evaluated: all {len(targets)} skipped ({'; '.join(reasons)})"


def nothing_evaluated(skipped: Mapping | None) -> list[str]:
    """The report's lines when no point exists: every job skipped, and why."""
    skipped = dict(skipped or {})
    if not skipped:
        return ["**No point was evaluated**: the sweep has no stored results yet.", ""]
    targets = sorted({tg for (_, tg, _) in skipped})
    reasons = sorted({str(r or "no reason recorded") for r in skipped.values()})
    return [f"**No target could be evaluated: all {len(targets)} skipped** ({len(skipped)} job(s); "
            + "; ".join(reasons) + ").", ""]


def _write_points_csv(points: Sequence[Any], path: Path, kb=None, groups: Sequence[str] = ("family", "biography")
                      ) -> None:
    """One row per point; the family domain's ``accuracy_family`` / ``accuracy_biography`` columns
    stay where they were, and a KB with other groups gets one ``accuracy_{group}`` column per group
    after ``accuracy_other``. A sweep with sampled accuracy adds ``accuracy_low`` / ``accuracy_high`` last."""
    more = [g for g in groups if g not in ("family", "biography")]
    bounds = ["accuracy_low", "accuracy_high"] if any(has_interval(p) for p in points) else []
    bounds += ["seed"] if len(point_seeds(points)) > 1 else []  # several run seeds: each row's
    cols = ["model", "target", "relation", "method", "param", "recall", "accuracy", "accuracy_family",
            "accuracy_biography", "accuracy_rule", "accuracy_other", *(f"accuracy_{g}" for g in more),
            "target_forgotten", "exact", "n_forgotten", "deep", "seconds", *bounds]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for p in points:
            d = p if isinstance(p, Mapping) else p.to_dict()
            rel = kb.facts[int(d["target"])][1] if kb is not None else ""
            w.writerow([d["model"], d["target"], rel, d["method"], d["param"], d["recall"], d["accuracy"],
                        group_accuracy(d, "family"), group_accuracy(d, "biography"), d.get("accuracy_rule"),
                        d.get("accuracy_other"), *(group_accuracy(d, g) for g in more), int(bool(d["target_forgotten"])), int(bool(d.get("exact", True))),
                        len(d.get("forgotten", ())), int(is_deep(d)), d.get("seconds"), *(d.get(b) for b in bounds)])


def write_report(output: str | Path, *, report_dir: str | Path | None = None, threshold: float = 0.8) -> Path:
    """Build the report of the sweep stored in ``output`` (its results store, resolved config
    and KB) into ``report_dir`` (default ``OUTPUT/report``)."""
    import yaml

    from ..kg.io import load_kb
    from .store import ResultsStore

    out = Path(output)
    cfg = {}
    if (out / "config.yaml").exists():
        cfg = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8")) or {}
    kb = load_kb(cfg["kb"]) if cfg.get("kb") and Path(cfg["kb"]).exists() else None
    with ResultsStore(out) as store:  # read-write: closing the last connection folds the WAL back
        points = store.points()
        skipped = {k: r for k, (s, r) in store.jobs().items() if s == "skipped"}
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8")) if (out / "manifest.json").exists() else None
    methods = list(cfg.get("methods", {})) or None
    models = [m["name"] for m in cfg.get("models", [])] or None
    return build_report(points, Path(report_dir) if report_dir else out / "report", kb=kb, methods=methods, models=models,
                        config=cfg, skipped=skipped, threshold=threshold, manifest=manifest)
