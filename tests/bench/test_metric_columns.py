"""The headline and Success-DU tables read their columns from the metric specs
(``deepunlearn.unlearn.summary.METRICS``): a metric registered with :func:`register_metric` appears
in them, in the report, with no table code edited; an incomplete spec is refused naming it."""

from __future__ import annotations

import json
import re

import pytest

from deepunlearn.bench import metrics as bm
from deepunlearn.bench.report import build_report
from deepunlearn.bench.report.headline import headline_lines
from deepunlearn.unlearn import summary as us

#: the headline table's header of a family-domain sweep (the paper's Table 3 shape)
FAMILY_HEADER = ("| model | method | targets | Recall@Acc≥0.8 | Acc@Recall≥0.8 | AUC | Acc@Superficial | "
                 "superficial rate | Acc@Recall≥0.8 family | Acc@Recall≥0.8 biography |")
FAMILY_DU_HEADER = ("| model | method | Acc@R≥0.8 | R@A≥0.8 | AUC | Success-DU@0.8 | Success-DU@0.9 | deep rate | "
                    "s/target | targets |")


def _points():
    """GA on three targets, two grid points each; target t's best recall is (t + 1) / 4."""
    out = []
    for t in range(3):
        for param, r, a in ((1, 0.2, 0.95), (2, (t + 1) / 4, 0.5 + 0.1 * t)):
            out.append(dict(model="m", method="ga", target=t, param=param, recall=r, accuracy=a,
                            accuracy_groups={"family": a, "biography": 1.0}, target_forgotten=r > 0.3,
                            forgotten=[t], exact=True, deep=r >= 0.75, seconds=2.0 * (t + 1)))
    return out


@pytest.fixture
def registry(monkeypatch):
    """The metric table as it is; put back after the test."""
    monkeypatch.setattr(us, "METRICS", us.METRICS)
    return us


def _headline_table(lines):
    return [l for l in lines if l.startswith("| model | method | targets")][0]


def test_the_family_tables_keep_their_columns():
    s = bm.summarize(_points())
    lines = headline_lines(s, ["ga"], ["family", "biography"], 0.8, 1)
    assert _headline_table(lines) == FAMILY_HEADER
    row = [l for l in lines if l.startswith("| m | GA |")][0].split(" | ")
    assert row[2] == "3" and row[7] == "0.67"           # superficial rate: 2 of 3 targets, 2 decimals
    assert row[5].startswith("0.") and "±" in row[5]    # AUC: mean ± std, 3 decimals
    assert bm.format_du_table(s).splitlines()[0] == FAMILY_DU_HEADER
    assert bm.format_du_table(s).splitlines()[2].split(" | ")[-2] == "4.0"   # s/target: one decimal


def test_a_domains_groups_are_the_group_columns():
    s = bm.summarize(_points(), groups=["reporting", "location"])
    header = _headline_table(headline_lines(s, ["ga"], ["reporting", "location"], 0.8, 1))
    assert header.endswith("| Acc@Recall≥0.8 reporting | Acc@Recall≥0.8 location |") and "family" not in header


def test_a_registered_metric_reaches_the_headline_and_success_du_tables_of_the_report(registry, tmp_path):
    best = us.register_metric(us.Metric(
        "best_recall", "best recall", lambda pts, c, t, _: max(float(us.value_of(p, "recall")) for p in pts),
        du_table=True, title="Best recall", headline=2.5, digits=2))
    assert us.METRICS[-1] is best
    path = build_report(_points(), tmp_path / "rep", methods=["ga"])
    text = path.read_text(encoding="utf-8")
    head = _headline_table(text.splitlines()).split(" | ")
    assert head[4:7] == ["Acc@Recall≥0.8", "Best recall", "AUC"]    # between places 2 and 3
    row = [l for l in text.splitlines() if l.startswith("| m | GA | 3 |")][0].split(" | ")
    assert row[5] == "0.50 ± 0.25"   # mean of 0.25, 0.5, 0.75 with its sample std, 2 decimals
    du_head = [l for l in text.splitlines() if l.startswith("| model | method | Acc@R")][0].split(" | ")
    du_row = [l for l in text.splitlines() if l.startswith("| m | ga |")][0].split(" | ")
    assert du_head[-2] == "best recall" and du_row[-2] == "0.50"
    assert '"best_recall": 0.5' in (tmp_path / "rep" / "summary.json").read_text(encoding="utf-8")
    html = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    cols = json.loads(re.search(r'"columns": *(\[[^\]]*"best_recall"[^\]]*\])', html).group(1))
    assert cols[:6] == ["model", "method", "n_targets", "acc_at_recall_0.8", "recall_at_acc_0.8", "auc"]
    # a headline metric is among the first columns, in the table's order: after the built-in ones
    assert cols.index("best_recall") == cols.index("deep_rate") + 1 < cols.index("acc_at_recall_0.8_family")


def test_a_metric_without_a_headline_place_stays_out_of_the_headline(registry):
    us.register_metric(us.Metric("worst_recall", "worst", lambda pts, c, t, _: 0.0))
    s = bm.summarize(_points())
    assert _headline_table(headline_lines(s, ["ga"], ["family", "biography"], 0.8, 1)) == FAMILY_HEADER
    assert s["m"]["ga"]["worst_recall"] == 0.0


@pytest.mark.parametrize("kwargs, problem", [
    (dict(key="", label="x", fn=len), "its key is empty"),
    (dict(key="x", label=" ", fn=len), "its label is empty"),
    (dict(key="x", label="x", fn=3), "fn is not callable"),
    (dict(key="x", label="x", fn=len, each="target"), "each must be"),
    (dict(key="x", label="x", fn=len, each="group"), "a per-group key needs {g}"),
    (dict(key="x_{a}", label="x", fn=len, each="success", headline="first"), "headline must be a number"),
    (dict(key="x", label="x", fn=len, digits=-1), "digits must be a count"),
    (dict(key="auc", label="x", fn=len), "its key is taken"),
    (dict(key="x_{n}", label="x", fn=len), "its key, label or title has a field other than"),
])
def test_an_incomplete_metric_is_refused_naming_it(registry, kwargs, problem):
    n = len(us.METRICS)
    with pytest.raises(ValueError, match=r"^metric '[^']*': " + problem.replace("{", r"\{").replace("}", r"\}")):
        us.register_metric(us.Metric(**kwargs))
    assert len(us.METRICS) == n
