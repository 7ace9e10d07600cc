"""The report's "Has it really forgotten?" section from hand-made rows: the means and
the pooled superficial forgetting rate computed by hand, adversarial.png, the summary.json key,
the store keeping the keys, the bench console lines, and no section for a sweep without them."""

from __future__ import annotations

import json

import pytest

from bench_helpers import FakeExecutor
from deepunlearn.bench import runner
from deepunlearn.bench.report.forms import forgetting_table, has_forgetting_checks
from deepunlearn.bench.report import build_report
from deepunlearn.bench.store import Point, ResultsStore
from deepunlearn.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def pt(t, param, recall, acc, method="ga", model="m", **kw):
    return dict(model=model, method=method, target=t, param=param, recall=recall, accuracy=acc,
                accuracy_family=acc, accuracy_biography=acc,
                target_forgotten=recall > 0, forgotten=[t], exact=True, **kw)


def adv(ra, aa, sup, n):
    return dict(recall_adv=ra, accuracy_adv=aa, superficial=sup, superficial_n=n)


def rows():
    return [
        pt(1, 1, 0.5, 0.9, **adv(0.5, 0.95, 0.0, [0, 2])),
        pt(1, 2, 1.0, 0.8, **adv(0.5, 0.9, 0.5, [1, 2]), recall_relearn={"1": 0.5, "4": 0.0},
           accuracy_relearn={"1": 0.85, "4": 0.9}, recall_quant=0.5, accuracy_quant=0.7),
        pt(2, 1, 0.0, 0.98, **adv(0.0, 1.0, None, [0, 0])),
        pt(2, 2, 0.5, 0.6, **adv(0.25, 0.7, 0.25, [1, 4]), recall_relearn={"1": 0.25, "4": 0.5},
           accuracy_relearn={"1": 0.65, "4": 0.5}, recall_quant=0.0, accuracy_quant=0.6),
        pt(1, 1, 1.0, 0.5, method="npo", **adv(1.0, 0.5, 0.0, [0, 3])),
        pt(1, 0, 1.0, 1.0, method="original"),   # a baseline row never counts
    ]


# by hand: GA's last grid points are (target 1, param 2) and (target 2, param 2)
GA_LAST = {"n_points": 2, "n_targets": 2, "recall": 0.75, "accuracy": 0.7, "n_adv": 2, "recall_adv": 0.375,
           "accuracy_adv": 0.8, "superficial": 2 / 6, "superficial_n": [2, 6], "superficial_mean": 0.375,
           "n_relearn": 2, "recall_relearn": {"1": 0.375, "4": 0.25}, "accuracy_relearn": {"1": 0.75, "4": 0.7},
           "n_quant": 2, "recall_quant": 0.25, "accuracy_quant": 0.65}
GA_ALL = {**GA_LAST, "n_points": 4, "recall": 0.5, "accuracy": 0.82, "n_adv": 4, "recall_adv": 0.3125,
          "accuracy_adv": 0.8875, "superficial": 2 / 8, "superficial_n": [2, 8], "superficial_mean": 0.25}
NPO = {"n_points": 1, "n_targets": 1, "recall": 1.0, "accuracy": 0.5, "n_adv": 1, "recall_adv": 1.0,
       "accuracy_adv": 0.5, "superficial": 0.0, "superficial_n": [0, 3], "superficial_mean": 0.0}


def _close(got, want):
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == (pytest.approx(v) if not isinstance(v, dict) else {n: pytest.approx(x) for n, x in v.items()}), k


def test_table_by_hand():
    table = forgetting_table(rows())
    assert list(table) == ["m"] and list(table["m"]) == ["ga", "npo"]
    _close(table["m"]["ga"]["last"], GA_LAST)
    _close(table["m"]["ga"]["all"], GA_ALL)
    _close(table["m"]["npo"]["last"], NPO)
    _close(table["m"]["npo"]["all"], NPO)


def test_relearn_steps_sort_numerically_and_missing_values_are_skipped():
    pts = [pt(1, 1, 1.0, 0.9, recall_relearn={"10": 0.1, "2": 0.2}),
           pt(2, 1, 1.0, 0.9, recall_relearn={"2": 0.4}, recall_adv=float("nan"))]
    s = forgetting_table(pts)["m"]["ga"]["last"]
    assert list(s["recall_relearn"]) == ["2", "10"] and s["recall_relearn"] == {"2": pytest.approx(0.3), "10": 0.1}
    assert s["recall_adv"] is None and s["n_adv"] == 0 and s["superficial"] is None and "recall_quant" not in s


def test_report_section_figure_and_summary(tmp_path):
    path = build_report(rows(), tmp_path / "rep", methods=["ga", "npo"])
    out = tmp_path / "rep"
    data = (out / "adversarial.png").read_bytes()
    assert data[:8] == PNG and len(data) > 5000
    summary = json.loads((out / "summary.json").read_text())
    fc = summary["forgetting_checks"]
    _close(fc["m"]["ga"]["last"], GA_LAST)
    _close(fc["m"]["ga"]["all"], GA_ALL)
    assert "original" not in fc["m"] and "original" not in summary["models"]["m"]
    text = path.read_text()
    assert "## Has it really forgotten?" in text and "![adversarial](adversarial.png)" in text
    header = ("| model | method | targets | points | recall | recall_adv | accuracy | accuracy_adv | superficial (pooled) "
              "| superficial (mean) | relearn@1 | relearn@4 | quantised |")
    assert text.count(header) == 2
    last, every = text.split("### Over every grid point")
    assert "| m | GA | 2 | 2 | 0.75 | 0.38 | 0.70 | 0.80 | 0.33 (2/6) | 0.38 | 0.38 | 0.25 | 0.25 |" in last
    assert "| m | NPO | 1 | 1 | 1.00 | 1.00 | 0.50 | 0.50 | 0.00 (0/3) | 0.00 | – | – | – |" in last
    assert "| m | GA | 2 | 4 | 0.50 | 0.31 | 0.82 | 0.89 | 0.25 (2/8) | 0.25 | 0.38 | 0.25 | 0.25 |" in every


def test_no_section_without_the_keys(tmp_path):
    pts = [{k: v for k, v in p.items() if k not in ("recall_adv", "accuracy_adv", "superficial", "superficial_n",
                                                     "recall_relearn", "accuracy_relearn", "recall_quant",
                                                     "accuracy_quant")} for p in rows()]
    assert not has_forgetting_checks(pts)
    text = build_report(pts, tmp_path / "rep", methods=["ga", "npo"]).read_text()
    assert "Has it really forgotten" not in text and not (tmp_path / "rep" / "adversarial.png").exists()
    assert set(json.loads((tmp_path / "rep" / "summary.json").read_text())) == {"models", "intervals", "by_relation", "curves"}


def test_the_store_keeps_the_keys(tmp_path):
    with ResultsStore(tmp_path) as store:
        store.bind("fp", {})
        for d in rows():
            store.add_point(Point.from_dict(d))
        back = store.points()
    assert has_forgetting_checks(back)
    table = forgetting_table(back)
    _close(table["m"]["ga"]["last"], GA_LAST)
    _close(table["m"]["ga"]["all"], GA_ALL)


class AdversarialExecutor(FakeExecutor):
    """FakeExecutor whose points carry the adversarial aggregate, and the attacks at the last point."""

    def run(self, spec, jobs, sink) -> None:
        def add(job, ev):
            if ev.get("event") == "point":
                p = ev["point"]
                p.update(adv(p["recall"] / 2, p["accuracy"], 0.5, [1, 2]))
                if p["param"] == max(job.grid):
                    p.update(recall_relearn={"1": 0.25}, accuracy_relearn={"1": 0.9}, recall_quant=0.0,
                             accuracy_quant=0.8)
            sink(job, ev)
        super().run(spec, jobs, add)


def test_bench_console_prints_recall_vs_recall_adv(sweep_files, monkeypatch, capsys):
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: AdversarialExecutor())
    path = sweep_files(extra="adversarial = true\n[attacks]\nrelearn = [1]\nquantize = \"int8\"\n")
    assert main(["bench", "--config", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    # FakeExecutor: recall = param / 4, so GA's last point (param 2) has recall 0.5; TV's (param 5) 1.0
    assert "Has it really forgotten? (mean recall at each target's last grid point)" in out
    assert ("tiny GA: recall 0.50  recall_adv 0.25  superficial 0.50 (2/4)  relearn@1 0.25  quantised 0.00"
            in out.splitlines())
    assert "tiny TV: recall 1.00  recall_adv 0.50  superficial 0.50 (2/4)  relearn@1 0.25  quantised 0.00" in out
    assert main(["bench", "--config", str(path), "--quiet", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["forgetting_checks"]["tiny"]["ga"]["last"]["recall_adv"] == 0.25


def test_bench_json_has_no_checks_without_the_keys(sweep_files, monkeypatch, capsys):
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(sweep_files()), "--quiet", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "forgetting_checks" not in json.loads(out) and "Has it really forgotten" not in err


def test_setup_names_the_options_and_the_probe_mode(tmp_path):
    config = {"kb": "kb.json", "models": [{"name": "m"}], "methods": {"ga": [1, 2]}, "forms": "test",
              "unlearn_forms": "unlearn", "adversarial": True,
              "attacks": {"relearn": [1, 4], "relearn_size": 8, "relearn_lr": 1e-4, "quantize": "int8", "at": "all"}}
    manifest = {"models": {"m": {"protocol": {"name": "default", "probe_mode": "exact", "k_mode": "probed"},
                                 "probe_mode": "yesno", "protocol_differs": {}}}}
    text = build_report(rows(), tmp_path / "rep", methods=["ga", "npo"], config=config, manifest=manifest).read_text()
    assert "; **K**: probed (probe mode `yesno`)" in text
    assert ("- **has it really forgotten?**: probe forms `test`; unlearning forms `unlearn`; adversarial aggregate on; "
            "attacks: relearn after 1, 4 steps on 8 facts, lr 0.0001, int8 quantisation, at every grid point") in text
    plain = {k: v for k, v in config.items() if k in ("kb", "models", "methods")}
    manifest["models"]["m"].pop("probe_mode")
    text = build_report(rows(), tmp_path / "rep2", methods=["ga"], config=plain, manifest=manifest).read_text()
    assert "has it really forgotten?**" not in text and "(probe mode `exact`)" in text
