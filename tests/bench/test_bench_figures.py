"""Every figure a report draws is readable at 100 % zoom: on fixture sweeps that exercise each
figure (two models of the paper's four methods, every catalogue method with batch and sequential
requests, measures, forgetting checks, three relation groups), each figure is checked as it is
saved, with matplotlib's renderer: legends and labels inside the image, no two labels on top of
each other, a sensible size (:mod:`tests.bench.figure_layout`), and no warning while drawing."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

from deepunlearn.bench.config import PAPER_GRIDS
from deepunlearn.bench.report import build_report
from deepunlearn.unlearn.methods import catalog
from tests.bench.figure_layout import MAX_PIXELS, labels_of, layout_problems

# ---------------------------------------------------------------------------------------------
# fixture sweeps


def _points(methods, models=("tiny",), targets=range(6), seed=0, **extra_of):
    """Per model, method and target a trajectory over the method's grid: recall rising, accuracy
    falling, with noise; ``extra_of(model, method, target, j, x)`` adds keys to a point."""
    rng = random.Random(seed)
    pts = []
    for mi, model in enumerate(models):
        for k, method in enumerate(methods):
            grid = catalog.get_spec(method).grid
            for t in targets:
                for j, g in enumerate(grid):
                    x = (j + 1) / len(grid)
                    r = min(1.0, max(0.0, x * (1 - 0.05 * k) + rng.gauss(0, 0.1)))
                    a = min(1.0, max(0.0, 1 - x * (0.5 + 0.04 * k) + 0.05 * mi + rng.gauss(0, 0.05)))
                    p = dict(model=model, target=t, method=method, param=g, recall=r, accuracy=a,
                             accuracy_family=a * 0.9, accuracy_biography=min(1.0, a * 1.1), target_forgotten=r > 0.4,
                             forgotten=[t] if r > 0.4 else [], exact=True, deep=r > 0.7, seconds=1.0 + k)
                    for f in extra_of.values():
                        p.update(f(model, method, t, j, x))
                    pts.append(p)
    return pts


def _measures(model, method, t, j, x, rng=random.Random(1)):
    part = lambda prob: {"prob": prob, "truth_ratio": 0.5, "exposure": 8 * (1 - x), "rouge_l": 0.5,  # noqa: E731
                         "mc_prob": 0.3}
    return {"measures": {"target": part(1 - x), "forget": part(0.9 - 0.6 * x), "retain": part(0.9 - 0.2 * x),
                         "forget_quality": 10.0 ** (-8 * (1 - x)), "model_utility": 0.8 - 0.3 * x,
                         "privleak": 0.4 - 0.5 * x, "min_k_auc": None, "genex": 3 - 2 * x, "canary": t == 5,
                         "forget_truth_ratios": [rng.uniform(0.1 + x, 1 + x) for _ in range(5)]}}


def _baselines(models, targets):
    """The ``original`` and ``retrain`` rows of every target, with measures."""
    rows = []
    for model in models:
        for t in targets:
            for method, recall, m in (("original", 0.0, (0.9, 0.8, None, None)), ("retrain", 0.7, (0.1, 0.7, 1.0, 0.0))):
                meas = _measures(model, method, t, 0, 0.0)["measures"]
                meas.update(model_utility=m[1], forget_quality=m[2], privleak=m[3])
                meas["target"] = {**meas["target"], "prob": m[0], "exposure": 10.0 + t}
                rows.append(dict(model=model, target=t, method=method, param=0, recall=recall, accuracy=1.0,
                                 accuracy_family=1.0, accuracy_biography=1.0, target_forgotten=False, forgotten=[],
                                 exact=True, measures=meas))
    return rows


def _checks(model, method, t, j, x):
    return {"recall_adv": min(1.0, x + 0.1), "accuracy_adv": 1 - x / 2, "superficial": x / 3,
            "superficial_n": [j, 6], "recall_relearn": {"1": x / 2, "4": x / 4, "16": x / 8},
            "accuracy_relearn": {"1": 0.8, "4": 0.85, "16": 0.9}, "recall_quant": x * 0.9, "accuracy_quant": 0.7}


def _requests(model="tiny"):
    """Batch rows of GA at batch sizes 2 and 4 and a sequential run of five requests."""
    pts = []
    for size in (2, 4):
        for t in range(8):
            for param in (1, 2):
                pts.append(dict(model=model, target=t, method=f"ga@b{size}", param=param, recall=param / 2,
                                accuracy=0.95 - 0.05 * size, accuracy_family=0.9, accuracy_biography=0.9,
                                target_forgotten=True, forgotten=[t], exact=True, deep=param == 2, base_method="ga",
                                batch_size=size, batch=t // size, batch_targets=list(range(t // size * size,
                                                                                           (t // size + 1) * size))))
    for req in range(5):
        earlier = [dict(target=u, recall=1.0 - 0.1 * (req - u), deep=req - u < 2) for u in range(req + 1)]
        pts.append(dict(model=model, target=req, method="ga@seq", param=2, recall=1.0, accuracy=0.9 - 0.05 * req,
                        accuracy_family=0.9, accuracy_biography=0.9, target_forgotten=True, forgotten=[req], exact=True,
                        deep=True, request=req, base_method="ga", earlier=earlier, accuracy_after=0.9 - 0.05 * req))
    return pts


def _org_points():
    """Two targets of GA over two grid points, with accuracies in three relation groups."""
    groups = ["reporting", "location", "profile"]
    rows = [(4, 1, 0.5, (0.9, 0.8, 0.7)), (4, 2, 0.9, (0.6, 0.5, 1.0)),
            (3, 1, 1.0, (0.2, 0.4, 0.3)), (3, 2, 0.3, (1.0, 1.0, 1.0))]
    return [dict(model="tiny", target=t, method="ga", param=p, recall=r, accuracy=sum(g) / 3, accuracy_family=None,
                 accuracy_biography=None, accuracy_rule=1.0, accuracy_other=1.0, target_forgotten=True,
                 forgotten=[t], exact=True, accuracy_groups=dict(zip(groups, g))) for t, p, r, g in rows]


def sweep_paper(out, kb):
    models = ("tiny", "Llama-2-7b-chat-hf-finetuned-on-edu-relat")   # a long name: titles wrap
    pts = _points(list(PAPER_GRIDS), models, targets=kb.targets[:12])
    cfg = {"kb": "kb.json", "rules": "family", "k_mode": "probed", "probe_mode": "exact",
           "models": [{"name": m} for m in models], "methods": {k: list(v) for k, v in PAPER_GRIDS.items()}}
    return build_report(pts, out, kb=kb, methods=list(PAPER_GRIDS), models=list(models), config=cfg)


def sweep_catalogue(out, kb):
    methods = catalog.names()
    pts = _points(methods, targets=kb.targets[:6]) + _requests()
    return build_report(pts, out, kb=kb, methods=methods, models=["tiny"])


def sweep_measures(out, kb):
    methods = catalog.names()
    pts = _points(methods, targets=range(6), measures=_measures) + _baselines(["tiny"], range(6))
    return build_report(pts, out, methods=methods)


def sweep_checks(out, kb):
    pts = _points(["ga", "npo", "tv", "whp", "rmu", "simnpo", "idk"], models=("tiny", "llama-2-7b"), checks=_checks)
    return build_report(pts, out, methods=["ga", "npo", "tv", "whp", "rmu", "simnpo", "idk"])


def sweep_groups(out, kb):
    return build_report(_org_points(), out, methods=["ga"])


#: name -> (builder, the figures its report must draw)
SWEEPS = {
    "paper": (sweep_paper, {"curves", "headline", "superficial", "family_biography", "by_relation",
                            "trajectories_tiny", "trajectories_Llama-2-7b-chat-hf-finetuned-on-edu-relat",
                            "success_du"}),
    "catalogue": (sweep_catalogue, {"curves", "headline", "superficial", "family_biography", "by_relation",
                                    "trajectories_tiny", "success_du", "batch", "sequential"}),
    "measures": (sweep_measures, {"curves", "headline", "superficial", "family_biography", "by_relation",
                                  "trajectories_tiny", "success_du", "truth_ratios_tiny", "fq_mu_tiny",
                                  "privleak_tiny", "exposure_tiny"}),
    "checks": (sweep_checks, {"curves", "headline", "superficial", "family_biography", "by_relation",
                              "trajectories_tiny", "trajectories_llama-2-7b", "success_du", "adversarial"}),
    "groups": (sweep_groups, {"curves", "headline", "superficial", "groups", "by_relation", "trajectories_tiny",
                              "success_du"}),
}


def render(name, out, kb, check=None, caught=None):
    """Build sweep ``name``'s report into ``out`` with every figure passed to ``check(fig)`` as it
    is saved; every warning is raised as an error, or appended to the list ``caught`` when one is
    given. Returns {figure name: what ``check`` found}."""
    from matplotlib.figure import Figure

    builder, _ = SWEEPS[name]
    save = Figure.savefig
    seen: dict[str, list[str]] = {}

    def checked(fig, fname, *args, **kwargs):
        seen[Path(str(fname)).stem] = check(fig) if check else []
        return save(fig, fname, *args, **kwargs)

    Figure.savefig = checked
    try:
        with warnings.catch_warnings(record=caught is not None) as got:
            warnings.simplefilter("always" if caught is not None else "error")
            builder(Path(out), kb)
        if caught is not None:
            caught += [f"{w.category.__name__}: {w.message} ({Path(w.filename).name}:{w.lineno})" for w in got]
    finally:
        Figure.savefig = save
    return seen


# ---------------------------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("name", list(SWEEPS))
def test_every_report_figure_is_readable(name, tmp_path, edu_kb):
    seen = render(name, tmp_path / "rep", edu_kb, check=layout_problems)
    assert set(seen) == SWEEPS[name][1]
    assert {p.stem for p in (tmp_path / "rep").glob("*.png")} == set(seen)      # every image was checked
    bad = {fig: problems for fig, problems in seen.items() if problems}
    assert not bad, "\n".join(f"{fig}.png: {p}" for fig, problems in bad.items() for p in problems)


def _figure(draw):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(4, 3), dpi=100)
    draw(fig)
    return fig


def test_the_checks_catch_a_legend_outside_overlapping_labels_and_an_oversized_image():
    """The checker itself, on figures drawn wrong on purpose (and a right one)."""
    import matplotlib.pyplot as plt

    def fine(fig):
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.legend(loc="upper left")
        fig.tight_layout()

    def legend_outside(fig):
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="a line")
        ax.legend(loc="upper left", bbox_to_anchor=(1.05, 1.0))

    def crowded_ticks(fig):
        ax = fig.add_subplot()
        ax.bar(range(12), range(12))
        ax.set_xticks(range(12))
        ax.set_xticklabels([f"method number {i}" for i in range(12)])

    def title_on_legend(fig):
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_title("a title")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 0.97))

    for draw, expected in ((fine, None), (legend_outside, "legend reaches outside the image"),
                           (crowded_ticks, "x tick 'method number 0' overlaps axes 0 x tick 'method number 1'"),
                           (title_on_legend, "title 'a title' overlaps axes 0 legend")):
        fig = _figure(draw)
        problems = layout_problems(fig)
        plt.close(fig)
        if expected is None:
            assert problems == [], problems
        else:
            assert any(expected in p for p in problems), (expected, problems)
    big = _figure(lambda fig: fig.set_size_inches(MAX_PIXELS / 100 + 1, 3))
    assert any("more than" in p for p in layout_problems(big))
    assert [n for n, _ in labels_of(big)] == []
    plt.close(big)
