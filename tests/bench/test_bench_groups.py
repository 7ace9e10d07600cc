"""The bench reports accuracy per relation group of the sweep's KB: the store
keeps each point's groups (in the KB's order), the summary and the report have one column per
group, and a store written before groups still reports family / biography as before."""

from __future__ import annotations

import json
import sqlite3

import pytest
import yaml
from test_bench_measures import OLD_SCHEMA as PRE13_SCHEMA

from deepunlearn.bench.metrics import summarize
from deepunlearn.bench.report import write_report
from deepunlearn.bench.store import Point, ResultsStore
from deepunlearn.kg.io import save_kb
from tests.rules.test_rules_groups import org_kb

GROUPS = ["reporting", "location", "profile"]


def org_points():
    """Two targets of GA, two grid points each; accuracies per group chosen by hand.

    target 4: (recall .5; reporting .9, location .8, profile .7), (recall .9; .6, .5, 1.0)
    target 3: (recall 1.0; .2, .4, .3), (recall .3; 1.0, 1.0, 1.0)"""
    rows = [(4, 1, 0.5, (0.9, 0.8, 0.7)), (4, 2, 0.9, (0.6, 0.5, 1.0)),
            (3, 1, 1.0, (0.2, 0.4, 0.3)), (3, 2, 0.3, (1.0, 1.0, 1.0))]
    return [dict(model="tiny", target=t, method="ga", param=p, recall=r, accuracy=sum(g) / 3, accuracy_family=None,
                 accuracy_biography=None, accuracy_rule=1.0, accuracy_other=1.0, target_forgotten=True,
                 forgotten=[t], exact=True, accuracy_groups=dict(zip(GROUPS, g))) for t, p, r, g in rows]


def test_summary_has_acc_at_recall_per_group_by_hand():
    s = summarize([Point.from_dict(d) for d in org_points()])["tiny"]["ga"]
    # Acc@Recall>=0.8 per target: target 4 takes its recall-.9 point, target 3 its recall-1 point
    assert s["acc_at_recall_0.8_reporting"] == pytest.approx((0.6 + 0.2) / 2)
    assert s["acc_at_recall_0.8_location"] == pytest.approx((0.5 + 0.4) / 2)
    assert s["acc_at_recall_0.8_profile"] == pytest.approx((1.0 + 0.3) / 2)
    assert "acc_at_recall_0.8_family" not in s


def test_the_store_keeps_the_groups_in_the_kbs_order(tmp_path):
    with ResultsStore(tmp_path) as st:
        st.bind("fp", {})
        st.add_points([Point.from_dict(d) for d in org_points()])
        got = st.points()
    assert [list(p.accuracy_groups) for p in got] == [GROUPS] * 4   # not sorted: the KB's order
    (p,) = [p for p in got if (p.target, p.param) == (4, 2)]
    assert p.accuracy_groups == {"reporting": 0.6, "location": 0.5, "profile": 1.0} and "accuracy_groups" not in p.extra
    assert p.to_dict()["accuracy_groups"] == p.accuracy_groups


def _sweep_folder(tmp_path, kb, write):
    """A sweep output folder: config.yaml naming the KB, and a store that ``write`` fills."""
    out = tmp_path / "sweep"
    out.mkdir()
    kb_path = save_kb(kb, tmp_path / "kb.json")
    (out / "config.yaml").write_text(yaml.safe_dump({"kb": str(kb_path), "methods": {"ga": [1, 2]},
                                                     "models": [{"name": "tiny"}]}))
    write(out)
    return out


def test_the_report_of_an_org_sweep_has_a_column_and_a_panel_per_group(tmp_path):
    def write(out):
        with ResultsStore(out) as st:
            st.bind("fp", {})
            st.add_points([Point.from_dict(d) for d in org_points()])

    out = _sweep_folder(tmp_path, org_kb(), write)
    text = write_report(out).read_text()
    assert "| Acc@Recall≥0.8 reporting | Acc@Recall≥0.8 location | Acc@Recall≥0.8 profile |" in text
    assert "0.400 ± 0.283 | 0.450 ± 0.071 | 0.650 ± 0.495 |" in text
    assert "Acc@Recall≥0.8 family" not in text and "](groups.png)" in text
    assert (out / "report" / "groups.png").exists() and not (out / "report" / "family_biography.png").exists()
    s = json.loads((out / "report" / "summary.json").read_text())["models"]["tiny"]["ga"]
    assert s["acc_at_recall_0.8_location"] == pytest.approx(0.45)
    head, *rows = (out / "report" / "points.csv").read_text().splitlines()
    assert head.split(",")[7:12] == ["accuracy_reporting", "accuracy_location", "accuracy_profile", "accuracy_rule",
                                     "accuracy_other"]


#: the points table of a store written before group accuracies and measures: no groups, family / biography columns
OLD_SCHEMA = PRE13_SCHEMA.split("INSERT INTO", 1)[0] + """
INSERT INTO points VALUES ('tiny', 0, 'ga', 1.0, 0.9, 0.5, 0.4, 0.7, 1, 1, 1, '[0]', 1, '{}', 0.0);
INSERT INTO points VALUES ('tiny', 0, 'ga', 2.0, 0.3, 0.9, 0.8, 1.0, 1, 1, 1, '[0]', 1, '{}', 0.0);
"""


def test_an_old_store_still_loads_and_reports_family_and_biography(tmp_path):
    from tests.rules.test_rules_metrics import tiny_kb

    def write(out):
        db = sqlite3.connect(out / "results.sqlite")
        db.executescript(OLD_SCHEMA)
        db.close()

    out = _sweep_folder(tmp_path, tiny_kb(), write)
    with ResultsStore(out, readonly=True) as st:
        pts = st.points()
    # the old columns read as the family domain's two groups
    assert [p.accuracy_groups for p in pts] == [{"family": 0.4, "biography": 0.7}, {"family": 0.8, "biography": 1.0}]
    s = summarize(pts)["tiny"]["ga"]
    assert (s["acc_at_recall_0.8_family"], s["acc_at_recall_0.8_biography"]) == (0.4, 0.7)
    text = write_report(out).read_text()
    assert "| Acc@Recall≥0.8 family | Acc@Recall≥0.8 biography |" in text and "| 0.400 | 0.700 |" in text
    assert "](family_biography.png)" in text
