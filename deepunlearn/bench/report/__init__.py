"""The report of a sweep: ``report.md``, PNG figures (matplotlib, Agg), ``summary.json``,
``points.csv`` (and ``measures.csv`` when the points carry measures) in one folder.

:func:`build_report` puts the folder together from the sections, in the order they appear in
``report.md``:

* the Setup and Protocol sections (:mod:`.setup_section`);
* the headline tables, the paper's figures, the tables by target relation and per target and the
  definitions (:mod:`.headline`, figures in :mod:`.headline_plots`);
* "Deep unlearning": Success-DU, batch and sequential requests (:mod:`.deep`, tables in
  :mod:`.deep_tables`, figures in :mod:`.deep_plots`);
* "Has it really forgotten?": the adversarial aggregate and the attacks (:mod:`.forms`, figure in
  :mod:`.forms_plots`);
* "Could chance explain it?", when points carry p_chance (:mod:`.chance`);
* "Under soft rules", when points carry deep_p (:mod:`.soft`);
* "Deep against its controls", when points carry deep_oracle or p_chance (:mod:`.controls`);
* "How much remains": likelihood, membership and reference-model measures (:mod:`.measures`,
  tables in :mod:`.measures_tables`, figures in :mod:`.measures_plots`).

``report.html`` beside it is the same sweep as one interactive page (:mod:`.html`, its data
:mod:`.html_data`, the surviving derivations :mod:`.html_graph`).

What the sections share lives in :mod:`.tables` (markdown tables, number cells, method order) and
:mod:`.plots` (colours, panel grids, legends, ticks, titles, saving). :func:`write_report` reads a
stored sweep and calls :func:`build_report` (the ``bench`` and ``evaluate-report`` commands).
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...errors import dumps
from ...unlearn.point_fields import LEGACY_GROUPS, RESERVED_GROUPS, field_of, group_key
from ..bootstrap import meta as interval_meta
from ..intervals import has_interval
from ..metrics import (
    first_seed,
    group_accuracy,
    is_baseline,
    is_deep,
    json_safe,
    mean_curve,
    point_groups,
    point_seeds,
    summarize,
    summarize_by,
    value_of,
)
from ..oracle import ORACLE
from .chance import chance_section
from .controls import controls_section
from .deep import du_section
from .forms import calibrated_section, forgetting_section
from .headline import draw_figures, definition_lines, figure_lines, headline_lines, relation_lines, target_lines
from .measures import remains_section
from .setup_section import protocol_lines, setup_lines
from .soft import soft_section


def build_report(points: Sequence[Any], out_dir: str | Path, *, kb=None, methods: Sequence[str] | None = None,
                 models: Sequence[str] | None = None,
                 config: Mapping[str, Any] | None = None, skipped: Mapping | None = None,
                 threshold: float = 0.8, title: str = "Deep unlearning benchmark",
                 manifest: Mapping[str, Any] | None = None, known: Mapping[str, Sequence[int]] | None = None) -> Path:
    """Write ``report.md``, the figures, ``summary.json`` and ``points.csv`` into ``out_dir``;
    returns the path of ``report.md``. ``kb`` names the targets and their relations; the sweep's
    ``manifest`` gives each model's protocol and grids (the Protocol section); ``known``, each
    model's K, lets ``report.html`` draw the derivations that survive.

    Everything is written into a temporary sibling folder first and each file then moved into
    ``out_dir`` (``os.replace``, report.md last): a report that fails half-way leaves the previous
    one whole, and no reader ever sees a half-written file."""
    from ...outputs import OutputError, clean_stale, dir_mode, tmp_sibling

    out = Path(out_dir)
    if os.path.islink(out) or (os.path.lexists(out) and not out.is_dir()):  # never written through a link
        raise OutputError(f"{out}: is {'a symbolic link' if os.path.islink(out) else 'not a folder'}; refusing to "
                          "write the report there (remove it)", file=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)  # the temporary folders of reports that were killed half-way
    tmp = tmp_sibling(out, "tmp")
    tmp.mkdir(mode=dir_mode())
    try:
        _build_into(tmp, points, kb=kb, methods=methods, models=models, config=config, skipped=skipped,
                    threshold=threshold, title=title, manifest=manifest, known=known)
        out.mkdir(parents=True, exist_ok=True)
        names = sorted(f.name for f in tmp.iterdir())
        for name in sorted(names, key=lambda n: n == "report.md"):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "report.md"


def _build_into(out: Path, points: Sequence[Any], *, kb, methods, models, config, skipped, threshold, title,
                manifest, known=None) -> None:
    points = list(points)
    # the relation groups of the sweep's KB's domain (family / biography in the family domain);
    # without the KB, those the points report (family / biography for an older store)
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

    figs = draw_figures(points, summary, by_rel, out, methods, order, relations, groups, threshold)
    # only a sweep whose points carry measures gets these
    remains, extra_summary = remains_section(points, out, methods, order, threshold)
    du_md, du_summary = du_section(points, summary, methods, out, threshold)
    fc_md, fc_summary = _check_sections(points, every_seed, methods, out)

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
    generated = _dt.datetime.now().isoformat(timespec="seconds")
    md = [f"# {title}", "", f"Generated {generated}."]
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
    md += headline_lines(summary, methods, groups, threshold, n_seeds)
    md += du_md
    md += fc_md
    md += figure_lines(figs, groups, threshold)
    md += remains
    md += relation_lines(by_rel, methods, relations, threshold)
    md += target_lines(points, kb, order, methods, groups, threshold)
    md += definition_lines(threshold)
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    from .html import write_html
    from .html_data import k_modes_of, page_data

    write_html(out / "report.html", page_data(
        every_seed, summary, kb=kb, methods=methods, threshold=threshold, title=title, generated=generated,
        known=known, rules=(config or {}).get("rules"), k_modes=k_modes_of(manifest, config)))


def _check_sections(points, every_seed, methods, out: Path) -> tuple[list[str], dict]:
    """The sections of the checks beyond recall and accuracy, each only where the points carry
    its keys: forgetting under attack, calibrated, chance, soft-rule and control verdicts."""
    # only a sweep whose points carry recall_adv or an attack's keys gets this section
    fc_md, fc_summary = forgetting_section(points, methods, out)
    cal_md, cal_summary = calibrated_section(every_seed, methods)  # a calibrated aggregate: raw vs calibrated
    fc_md, fc_summary = fc_md + cal_md, {**fc_summary, **cal_summary}
    ch_md, ch_summary = chance_section(every_seed, methods)  # verdicts with p_chance (evaluate --calibration)
    fc_md, fc_summary = fc_md + ch_md, {**fc_summary, **ch_summary}
    sf_md, sf_summary = soft_section(every_seed, methods)  # points with deep_p (soft rules)
    fc_md, fc_summary = fc_md + sf_md, {**fc_summary, **sf_summary}
    ct_md, ct_summary = controls_section(every_seed, methods)  # deep_oracle / p_chance per sweep point
    fc_md, fc_summary = fc_md + ct_md, {**fc_summary, **ct_summary}
    return fc_md, fc_summary


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


def _write_points_csv(points: Sequence[Any], path: Path, kb=None, groups: Sequence[str] = LEGACY_GROUPS) -> None:
    """One row per point; after ``accuracy``, one ``accuracy_{group}`` column per relation group of
    the KB's domain (``groups``: ``accuracy_family`` / ``accuracy_biography`` in the family domain),
    then ``accuracy_rule`` / ``accuracy_other``. A sweep with sampled accuracy adds ``accuracy_low`` /
    ``accuracy_high`` last (and soft rules ``deep_p``)."""
    groups = [g for g in groups if g not in RESERVED_GROUPS]  # one named like another column: summary.json only
    bounds = ["accuracy_low", "accuracy_high"] if any(has_interval(p) for p in points) else []
    bounds += ["seed"] if len(point_seeds(points)) > 1 else []  # several run seeds: each row's
    bounds += ["deep_p"] if any(field_of(p, "deep_p") is not None for p in points) else []  # soft rules
    cols = ["model", "target", "relation", "method", "param", "recall", "accuracy", *map(group_key, groups), "accuracy_rule",
            "accuracy_other", "target_forgotten", "exact", "n_forgotten", "deep", "seconds", *bounds]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for p in points:
            d = p if isinstance(p, Mapping) else p.to_dict()
            rel = kb.facts[int(d["target"])][1] if kb is not None else ""
            w.writerow([d["model"], d["target"], rel, d["method"], d["param"], d["recall"], d["accuracy"],
                        *(group_accuracy(d, g) for g in groups), d.get("accuracy_rule"),
                        d.get("accuracy_other"), int(bool(d["target_forgotten"])), int(bool(d.get("exact", True))),
                        len(d.get("forgotten", ())), int(is_deep(d)), d.get("seconds"), *(d.get(b) for b in bounds)])


def write_report(output: str | Path, *, report_dir: str | Path | None = None, threshold: float = 0.8) -> Path:
    """Build the report of the sweep stored in ``output`` (its results store, resolved config
    and KB) into ``report_dir`` (default ``OUTPUT/report``)."""
    from ...kg.io import load_kb
    from ..store import ResultsStore

    out = Path(output)
    cfg = {}
    if (out / "config.yaml").exists():  # read as every YAML config is (aliases bounded, keys once)
        from ...errors import UserError, read_text
        from ...safe_yaml import load_yaml

        cfg = load_yaml(read_text(out / "config.yaml", error=UserError), out / "config.yaml", UserError) or {}
        if not isinstance(cfg, dict):
            raise UserError(f"{out / 'config.yaml'}: expected a mapping (the resolved sweep config)",
                            file=out / "config.yaml")
    kb = load_kb(cfg["kb"]) if cfg.get("kb") and Path(cfg["kb"]).exists() else None
    from .html_data import read_known

    with ResultsStore(out) as store:  # read-write: closing the last connection folds the WAL back
        points = store.points()
        known = read_known(store, points)
        skipped = {k: r for k, (s, r) in store.jobs().items() if s == "skipped"}
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8")) if (out / "manifest.json").exists() else None
    methods = list(cfg.get("methods", {})) or None
    if cfg.get("oracle") is False:  # a sweep's rows of an earlier run with oracle = true (not in its fingerprint)
        points = [p for p in points if value_of(p, "method") != ORACLE]
    elif cfg.get("oracle") and methods is not None and ORACLE not in methods:
        methods.append(ORACLE)
    models = [m["name"] for m in cfg.get("models", [])] or None
    return build_report(points, Path(report_dir) if report_dir else out / "report", kb=kb, methods=methods, models=models,
                        config=cfg, skipped=skipped, threshold=threshold, manifest=manifest, known=known)
