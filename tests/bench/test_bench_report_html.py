"""``report.html`` in a real browser (headless Chromium over the DevTools pipe, tests/bench/chromium.py):
one self-contained page that loads with no console error, shows the curves (pixels drawn, not a
blank page), sorts and filters its tables on a click, and draws the derivation that survives at a
superficial point; its data equals the store's."""

from __future__ import annotations

import io
import json
import re

import pytest

import deepunlearn
from deepunlearn.bench.config import load_config
from deepunlearn.bench.report import write_report
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import ResultsStore
from deepunlearn.rules.graph import derivable, derivation_graph

from chromium import Browser


class ScriptedExecutor:
    """Points of a made-up method on a real family KB: each grid value forgets the target alone
    (superficial where the rules still derive it) up to the last, which forgets the target's whole
    cone of K (deep); it records K (every fact) as the local executor does."""

    name = "scripted"

    def __init__(self, kb):
        self.kb = kb
        self.graph = derivation_graph(kb, "family")

    def run(self, spec, jobs, sink):
        for job in jobs:
            sink(job, {"event": "known", "ids": list(range(len(self.kb.facts)))})
            cone = [int(f) for f in self.graph.cone(job.target).nodes if self.graph.in_k(int(f))]
            grid = list(job.grid)
            for i, p in enumerate(grid):
                if p in job.skip_params:
                    continue
                gone = cone if i == len(grid) - 1 else [job.target]
                deep = not derivable(self.graph, job.target, removed=gone)
                sink(job, {"event": "point", "point": {
                    "target": job.target, "method": job.method, "param": p, "recall": (i + 1) / len(grid),
                    "accuracy": 1 - 0.1 * i - 0.05 * (job.method == "tv"), "target_forgotten": True,
                    "forgotten": gone, "deep": deep}})
            sink(job, {"event": "done"})


@pytest.fixture(scope="module")
def report(tmp_path_factory, request):
    work = tmp_path_factory.mktemp("html")
    kb = deepunlearn.generate_family(8, seed=1)
    deepunlearn.save_kb(kb, work / "kb.json")
    (work / "model").mkdir()
    (work / "model" / "config.json").write_text('{"model_type": "llama"}')
    (work / "model" / "model.safetensors").write_bytes(b"\0" * 64)
    (work / "sweep.toml").write_text("\n".join([
        'kb = "kb.json"', 'output = "out"', 'k_mode = "probed"', "[[models]]", 'name = "tiny"', 'path = "model"',
        "[methods]", "ga = [1, 2, 4]", "tv = [0.5, 5]", "[targets]", f"refs = {list(kb.targets[:3])}", ""]))
    cfg = load_config(work / "sweep.toml")
    run_sweep(cfg, executor=ScriptedExecutor(kb), progress=False)
    path = write_report(cfg.output_dir)
    return path.parent / "report.html", cfg, kb


def _data(html: str) -> dict:
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1)
    return json.loads(blob.replace("<\\/", "</"))


def test_the_page_is_self_contained_and_holds_the_stores_points(report):
    path, cfg, kb = report
    html = path.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", html)  # no script or style fetched
    data = _data(html)
    with ResultsStore(cfg.output_dir, readonly=True) as store:
        points = store.points()
    cols = data["points"]["columns"]
    rows = {(r[cols.index("target")], r[cols.index("method")], r[cols.index("param")]): r for r in data["points"]["rows"]}
    assert len(rows) == len(points) == 3 * 5
    for p in points:
        r = rows[(p.target, p.method, p.param)]
        assert r[cols.index("recall")] == pytest.approx(p.recall) and r[cols.index("accuracy")] == pytest.approx(p.accuracy)
        assert r[cols.index("deep")] == int(p.extra["deep"])
    superficial = [t for t in data["targets"] if t["derivations"]]
    assert superficial, "no surviving derivation was drawn"
    for t in superficial:  # every drawn tree ends in facts of K not forgotten at that point, and holds the target
        for d in t["derivations"]:
            kinds = {n["kind"] for n in d["graph"]["nodes"]}
            assert "target" in kinds and "rule" in kinds and "known" in kinds
            assert all(n["fact"] != t["id"] for n in d["graph"]["nodes"] if n["kind"] == "known")


def test_the_page_loads_clean_draws_curves_and_its_tables_sort_and_filter(report, tmp_path):
    path, cfg, kb = report
    with Browser() as b:
        b.open(path)
        assert b.js("document.body.dataset.ready") == "1"
        assert b.errors() == []
        assert all(u.startswith(("file:", "data:", "blob:")) for u in b.requests()), b.requests()  # no network
        # the curves: one plotly figure per model, a trace per method, hover showing the grid value
        assert b.js("document.querySelectorAll('#curves .js-plotly-plot').length") == 1
        assert b.js("document.querySelectorAll('#curves .scatterlayer .trace').length") == 2
        assert b.js("document.getElementById('curves').querySelector('.js-plotly-plot').data[0].customdata[0][0]") == 1
        # the surviving derivation of the first superficial target is drawn, and another's when it is chosen
        drawn = "document.querySelectorAll('#derivation .scatterlayer .trace .point').length"
        assert b.js("document.getElementById('derivation').data.length") >= 3 and b.js(drawn) >= 3
        b.js("const s = document.getElementById('target-select'); s.value = s.options.length - 1;"
             "s.dispatchEvent(new Event('change'))")
        assert b.js("document.getElementById('target-curve').layout.title.text") == f"target {kb.targets[2]}"
        assert b.js(drawn) >= 3
        png = b.screenshot()
        # sort the points by recall, descending after a second click
        col = "Array.from(document.querySelectorAll('#points-table thead th')).map(h => h.dataset.col).indexOf('recall')"
        values = f"Array.from(document.querySelectorAll('#points-table tbody tr')).map(r => +r.cells[{col}].textContent)"
        b.js("document.querySelector('#points-table th[data-col=recall]').click()")
        up = b.js(values)
        assert up == sorted(up) and len(set(up)) > 1
        b.js("document.querySelector('#points-table th[data-col=recall]').click()")
        assert b.js(values) == sorted(up, reverse=True)
        assert b.js("document.querySelector('#points-table th[data-col=recall]').getAttribute('aria-sort')") == "descending"
        # filter: only tv rows stay visible
        b.js("const f = document.getElementById('points-filter'); f.value = 'tv'; f.dispatchEvent(new Event('input'))")
        visible = b.js("Array.from(document.querySelectorAll('#points-table tbody tr')).filter(r => !r.hidden)"
                       ".map(r => r.textContent)")
        assert len(visible) == 3 * 2 and all("tv" in v for v in visible)
        assert b.errors() == []
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    (tmp_path / "report.png").write_bytes(png)
    colours = img.getcolors(maxcolors=1 << 20)
    assert img.width >= 1000 and colours is not None and len(colours) > 50  # drawn, not a blank page
    # the curves' own colours (plotly's first two: the methods) are on the page
    assert any(abs(r - 31) + abs(g - 119) + abs(b_ - 180) < 30 for _, (r, g, b_) in colours)
    assert any(abs(r - 255) + abs(g - 127) + abs(b_ - 14) < 30 for _, (r, g, b_) in colours)


def test_the_drawn_derivation_exists_exactly_when_the_rules_still_derive_the_target():
    import random

    from deepunlearn.bench.report.html_graph import surviving_tree

    kb = deepunlearn.generate_family(8, seed=1)
    graph = derivation_graph(kb, "family")
    rng = random.Random(0)
    drawn = 0
    for t in range(len(kb.facts)):
        cone = [int(f) for f in graph.cone(t).nodes if graph.in_k(int(f)) and int(f) != t]
        for removed in ([t], [t, *rng.sample(cone, len(cone) // 2)], [t, *cone]):
            tree = surviving_tree(graph, t, removed)
            assert (tree is None) == (not derivable(graph, t, removed=removed)), (t, removed)
            if tree is None:
                continue
            drawn += 1
            nodes = tree["nodes"]
            assert nodes[0]["kind"] == "target" and nodes[0]["fact"] == t
            leaves = [n for n in nodes if n["kind"] == "known"]
            assert leaves and all(n["fact"] not in removed and graph.in_k(n["fact"]) for n in leaves)
            for a, b in tree["edges"]:  # fact -> rule -> fact, downwards
                assert (nodes[a]["kind"] == "rule") != (nodes[b]["kind"] == "rule")
                assert nodes[a]["y"] < nodes[b]["y"]
    assert drawn > 10
