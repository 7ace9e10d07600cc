"""What ``report.html`` shows, as one JSON-ready dict (:func:`page_data`): the summary and the
points as tables, the mean accuracy-vs-recall curves, and per target its trajectories and the
derivations that survive at its superficial points (:mod:`.html_graph`).

A target's derivation is drawn at each (model, method) trajectory's superficial point with the best
accuracy (the point Acc@Superficial takes: the target no longer answered, yet still derivable from
what the model knows). It needs the model's K: recorded in the results store when the sweep loads
the model; a sweep with ``k_mode = "dataset"`` has K = every KB fact. Without either, the target's
view says so instead of drawing.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ..metrics import first_seed, is_baseline, is_deep, mean_curve, metric_columns, value_of

_SPREAD = ("_std", "_sem", "_ci_lo", "_ci_hi", "_ci_n")
#: at most this many derivations are drawn (each grounds the target's cone)
MAX_DERIVATIONS = 400


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def _summary_first(threshold: float) -> list[str]:
    """The summary's columns shown first, in the metrics' order: the number of targets, then the
    metrics of the headline table or with a bootstrap interval (their spreads and intervals left out).

    >>> _summary_first(0.8)
    ['n_targets', 'acc_at_recall_0.8', 'recall_at_acc_0.8', 'auc', 'acc_at_superficial', 'superficial_rate', \
'success_du_0.8', 'success_du_0.9', 'deep_rate']
    """
    return ["n_targets", *(name for name, _, m in metric_columns(threshold, ()) if m.headline is not None or m.interval)]


def summary_table(summary: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[str],
                  threshold: float) -> dict[str, Any]:
    """``{"columns", "rows"}``: one row per (model, method), the summary's numbers."""
    entries = [(m, me, vals) for m, per in summary.items() for me in methods if (vals := per.get(me))]
    keys: list[str] = []
    for _, _, vals in entries:
        keys += [k for k in vals if k not in keys and not k.endswith(_SPREAD) and _num(vals[k]) is not None]
    first = _summary_first(threshold)
    keys = [k for k in first if k in keys] + [k for k in keys if k not in first]
    return {"columns": ["model", "method", *keys],
            "rows": [[m, me, *(_num(vals.get(k)) for k in keys)] for m, me, vals in entries]}


def points_table(points: Sequence[Any], kb) -> dict[str, Any]:
    """``{"columns", "rows"}``: one row per point (every seed)."""
    cols = ["model", "seed", "target", "relation", "method", "param", "recall", "accuracy", "target_forgotten",
            "deep", "n_forgotten"]
    rows = []
    for p in points:
        d = p if isinstance(p, Mapping) else p.to_dict()
        t = int(d["target"])
        rows.append([d["model"], d.get("seed"), t, kb.facts[t][1] if kb is not None else "", d["method"], d["param"],
                     _num(d.get("recall")), _num(d.get("accuracy")), int(bool(d.get("target_forgotten"))),
                     int(is_deep(d)), len(d.get("forgotten", ()))])
    return {"columns": cols, "rows": rows}


def target_views(points: Sequence[Any], kb, known: Mapping[str, Sequence[int]], rules: str | None,
                 k_modes: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per target (first run seed): its fact, its trajectories and its surviving derivations."""
    points = [p for p in first_seed(points) if not is_baseline(p)]
    graphs: dict[str, Any] = {}
    drawn = 0
    out = []
    for t in sorted({int(value_of(p, "target")) for p in points}):
        mine = sorted((p for p in points if int(value_of(p, "target")) == t),
                      key=lambda p: (value_of(p, "model"), value_of(p, "method"), value_of(p, "param")))
        traj: dict[str, list] = {}
        for p in mine:
            d = p if isinstance(p, Mapping) else p.to_dict()
            traj.setdefault(f"{d['model']} {d['method']}", []).append(
                [d["param"], _num(d["recall"]), _num(d["accuracy"]), int(is_deep(d)), int(bool(d["target_forgotten"]))])
        view: dict[str, Any] = {"id": t, "fact": _fact(kb, t), "relation": kb.facts[t][1] if kb is not None else "",
                                "trajectories": traj, "derivations": [], "notes": []}
        for key, best in _superficial(mine).items():
            model = key[0]
            if drawn >= MAX_DERIVATIONS:
                view["notes"].append(f"{model} {key[1]}: not drawn (the report draws at most {MAX_DERIVATIONS})")
                continue
            graph = _graph(graphs, model, kb, known, rules, k_modes)
            if isinstance(graph, str):
                view["notes"].append(f"{model} {key[1]}: {graph}")
                continue
            from .html_graph import surviving_tree

            d = best if isinstance(best, Mapping) else best.to_dict()
            tree = surviving_tree(graph, t, d.get("forgotten", ()))
            drawn += 1
            if tree is not None:
                view["derivations"].append({"label": f"{model} {key[1]} at grid value {d['param']} (accuracy "
                                                     f"{d['accuracy']:.3f})", "graph": tree})
        out.append(view)
    return out


def _superficial(points: Sequence[Any]) -> dict[tuple[str, str], Any]:
    """Per (model, method), the superficial point with the best accuracy (the lowest grid value on ties)."""
    best: dict[tuple[str, str], Any] = {}
    for p in points:
        if not value_of(p, "target_forgotten") or is_deep(p if isinstance(p, Mapping) else p.to_dict()):
            continue
        key = (value_of(p, "model"), value_of(p, "method"))
        if key not in best or (value_of(p, "accuracy") or 0) > (value_of(best[key], "accuracy") or 0):
            best[key] = p
    return best


def _graph(cache: dict[str, Any], model: str, kb, known, rules, k_modes) -> Any:
    """The derivation graph of the model's K, or a line saying why there is none."""
    if model in cache:
        return cache[model]
    if kb is None:
        cache[model] = "no drawing: the sweep's KB file is not found"
        return cache[model]
    ids = known.get(model)
    if ids is None and k_modes.get(model) == "dataset":
        ids = list(range(len(kb.facts)))  # K is the whole KB
    if ids is None:
        cache[model] = "no drawing: the model's K was not recorded (run the sweep again to record it)"
        return cache[model]
    from ...rules.errors import RulesError
    from ...rules.graph import derivation_graph

    try:
        cache[model] = derivation_graph(kb, rules or "family", known=sorted(ids))
    except RulesError as e:
        cache[model] = f"no drawing: {e}"
    return cache[model]


def _fact(kb, t: int) -> str:
    if kb is None:
        return f"fact {t}"
    s, r, o = kb.facts[t]
    return f"({s}, {r}, {o})"


def page_data(points: Sequence[Any], summary: Mapping, *, kb, methods: Sequence[str], threshold: float,
              title: str, generated: str, known: Mapping[str, Sequence[int]] | None = None,
              rules: str | None = None, k_modes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything ``report.html`` shows (JSON-ready)."""
    curves = mean_curve(first_seed(points)) if points else {}
    return {
        "title": title, "generated": generated, "threshold": threshold, "methods": list(methods),
        "models": list(summary), "summary": summary_table(summary, methods, threshold),
        "points": points_table(points, kb), "curves": curves,
        "targets": target_views(points, kb, known or {}, rules, k_modes or {}) if points else [],
    }


def k_modes_of(manifest: Mapping[str, Any] | None, config: Mapping[str, Any] | None) -> dict[str, str]:
    """Each model's ``k_mode`` (its resolved protocol in the manifest, else the config's override)."""
    out = {}
    for name, m in ((manifest or {}).get("models") or {}).items():
        mode = (m.get("protocol") or {}).get("k_mode") if isinstance(m, Mapping) else None
        if mode:
            out[name] = mode
    for m in (config or {}).get("models") or []:
        if isinstance(m, Mapping) and m.get("name") not in out and (config or {}).get("k_mode"):
            out[m["name"]] = config["k_mode"]
    return out


def read_known(store, points: Sequence[Any]) -> dict[str, list[int]]:
    """Each model's K of the first run seed, as the sweep recorded it in the store's meta."""
    import json

    from ..store import known_key

    out = {}
    pts = first_seed(points) if points else []
    for model, seed in {(value_of(p, "model"), p.seed) for p in pts}:
        text = store.meta(known_key(model, seed))
        if text:
            try:
                out[model] = [int(i) for i in json.loads(text)]
            except (ValueError, TypeError):
                continue
    return out
