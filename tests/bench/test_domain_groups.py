"""Relation groups come from the KB's domain: each relation of ``domain.toml`` names its group, a
point keeps its accuracy per group as one mapping, and the store, the summary and the report's
columns are named after the domain's groups. The family domain keeps ``family`` / ``biography``
(the paper's tables unchanged), a store written before per-group accuracies still reports, and a
domain added to a copy of the package as a folder (``domain.toml`` + ``rules.dl``, nothing else)
gets report columns of its own groups."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deepunlearn.bench.report import write_report
from deepunlearn.bench.store import Point, ResultsStore
from deepunlearn.kg.domain import load_domain
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.io import save_kb
from deepunlearn.rules.generate import generate_domain
from deepunlearn.unlearn.points import Point as UnlearnPoint

#: the family domain's report columns, as the paper's tables have them
FAMILY_HEADLINE = ("| model | method | targets | Recall@Acc≥0.8 | Acc@Recall≥0.8 | AUC | Acc@Superficial | "
                   "superficial rate | Acc@Recall≥0.8 family | Acc@Recall≥0.8 biography |")
FAMILY_CSV = ("model,target,relation,method,param,recall,accuracy,accuracy_family,accuracy_biography,accuracy_rule,"
              "accuracy_other,target_forgotten,exact,n_forgotten,deep,seconds")


def _points(kb):
    """GA on the KB's first three targets, as the loop hands them out: per target t, a point at recall
    0.5 and one at recall 1 whose group i has accuracy 0.6 - 0.1 i + 0.05 t (so Acc@Recall≥0.8 of
    group i, a mean over targets, is 0.65 - 0.1 i)."""
    out = []
    for k, t in enumerate(kb.targets[:3]):
        for param, recall in ((1, 0.5), (2, 1.0)):
            groups = {g: round((0.9 if recall < 1 else 0.6 + 0.05 * k) - 0.1 * i, 6) for i, g in enumerate(kb.groups)}
            p = UnlearnPoint(target=t, method="ga", param=param, recall=recall, accuracy=0.7, accuracy_rule=0.7,
                             accuracy_other=0.7, target_forgotten=True, forgotten=[t], exact=True, accuracy_groups=groups)
            out.append(Point.from_dict({**p.to_dict(), "model": "tiny"}))
    return out


def _sweep(tmp_path, kb, name="sweep"):
    out = tmp_path / name
    out.mkdir()
    kb_path = tmp_path / "kb.json"   # one KB file for the sweeps of a test
    if not kb_path.exists():
        save_kb(kb, kb_path)
    (out / "config.yaml").write_text(yaml.safe_dump({"kb": str(kb_path), "methods": {"ga": [1, 2]},
                                                     "models": [{"name": "tiny"}]}))
    with ResultsStore(out) as st:
        st.bind("fp", {})
        st.add_points(_points(kb))
    return out


def _report(out):
    """report.md (its time stamp left out), summary.json and points.csv of a sweep folder."""
    md = write_report(out).read_text(encoding="utf-8")
    return (re.sub(r"Generated \S+", "Generated", md), (out / "report" / "summary.json").read_text(encoding="utf-8"),
            (out / "report" / "points.csv").read_text(encoding="utf-8"))


def test_an_org_kbs_report_has_orgs_group_columns(tmp_path):
    kb = generate_domain("org", 12, seed=1)
    groups = load_domain("org").groups()
    assert kb.groups == groups == ["reporting", "work", "location"]   # declared by the domain's relations
    out = _sweep(tmp_path, kb)
    md, summary, csv = _report(out)
    head = [line for line in md.splitlines() if line.startswith("| model | method | targets")][0]
    assert head.endswith("| Acc@Recall≥0.8 reporting | Acc@Recall≥0.8 work | Acc@Recall≥0.8 location |")
    assert "family" not in head and "biography" not in head
    s = json.loads(summary)["models"]["tiny"]["ga"]
    assert [s[f"acc_at_recall_0.8_{g}"] for g in groups] == pytest.approx([0.65, 0.55, 0.45])
    assert not any("family" in k or "biography" in k for k in s)
    assert csv.splitlines()[0].split(",")[6:11] == ["accuracy", "accuracy_reporting", "accuracy_work",
                                                    "accuracy_location", "accuracy_rule"]
    with ResultsStore(out, readonly=True) as st:
        (p, *_) = st.points()
    assert list(p.accuracy_groups) == groups and "accuracy_family" not in p.to_dict()
    db = sqlite3.connect(out / "results.sqlite")   # the family domain's columns stay empty
    assert db.execute("SELECT COUNT(*) FROM points WHERE accuracy_family IS NOT NULL "
                      "OR accuracy_biography IS NOT NULL").fetchone() == (0,)
    db.close()


def test_the_family_domain_keeps_the_papers_columns(tmp_path):
    kb = generate_family(8, seed=1)
    assert kb.groups == load_domain("family").groups() == ["family", "biography"]
    out = _sweep(tmp_path, kb)
    md, summary, csv = _report(out)
    assert FAMILY_HEADLINE in md.splitlines()
    assert csv.splitlines()[0] == FAMILY_CSV
    assert "](family_biography.png)" in md
    s = json.loads(summary)["models"]["tiny"]["ga"]
    assert (s["acc_at_recall_0.8_family"], s["acc_at_recall_0.8_biography"]) == pytest.approx((0.65, 0.55))
    db = sqlite3.connect(out / "results.sqlite")   # the table's family / biography columns are filled as before
    assert db.execute("SELECT accuracy_family, accuracy_biography FROM points WHERE param = 2 ORDER BY target "
                      "LIMIT 1").fetchone() == pytest.approx((0.6, 0.5))
    db.close()


def test_a_store_in_the_old_layout_reports_the_same(tmp_path):
    """A store written before per-group accuracies has only the family / biography columns: it loads,
    its points read them as the family domain's groups, and its report is the new layout's."""
    kb = generate_family(8, seed=1)
    new = _sweep(tmp_path, kb, "new")
    old = _sweep(tmp_path, kb, "old")
    db = sqlite3.connect(old / "results.sqlite")
    for rowid, extra in db.execute("SELECT rowid, extra FROM points").fetchall():
        e = json.loads(extra)
        assert e.pop("accuracy_groups")
        db.execute("UPDATE points SET extra = ? WHERE rowid = ?", (json.dumps(e, sort_keys=True), rowid))
    db.commit()
    db.close()
    with ResultsStore(old, readonly=True) as st, ResultsStore(new, readonly=True) as nw:
        assert [p.accuracy_groups for p in st.points()] == [p.accuracy_groups for p in nw.points()]
    assert _report(old) == _report(new)


def test_an_unlearn_point_is_flat_after_its_domains_groups():
    p = UnlearnPoint(target=0, method="ga", param=1, recall=1.0, accuracy=0.5, accuracy_rule=None, accuracy_other=None,
                     target_forgotten=True, forgotten=[0], exact=True,
                     accuracy_groups={"capitals": 0.25, "cities": None, "rule": 1.0})
    d = p.to_dict()
    assert list(d)[3:8] == ["recall", "accuracy", "accuracy_capitals", "accuracy_cities", "accuracy_rule"]
    assert d["accuracy_rule"] is None and d["accuracy_groups"]["rule"] == 1.0   # a group never hides a column
    back = Point.from_dict({**d, "model": "m"})
    assert back.accuracy_groups == {"capitals": 0.25, "cities": None, "rule": 1.0} and set(back.extra) == {"lr", "set"}


#: a domain of three groups of its own, as a folder: domain.toml and rules.dl
SHOP_TOML = """name = "shop"
description = "customers, their purchases and their friends"

[entities.customer]
count = 10
names = "person"

[entities.product]
values = ["tea", "coffee", "bread", "cheese", "apples"]

[relations.buys]
subject = "customer"
object = "product"
group = "orders"
shape = "some"
branching = 2
questions = ["What does {o1} buy?"]

[relations.likes]
subject = "customer"
object = "product"
group = "taste"
questions = ["What does {o1} like?"]

[relations.friend]
subject = "customer"
object = "customer"
group = "social"
shape = "pairs"
questions = ["Who is {o1}'s friend?"]
"""
SHOP_RULES = "% rule set: shop\nlikes(X, P) :- buys(X, P).\nfriend(Y, X) :- friend(X, Y).\n"

SHOP_REPORT = """
import json, sys
from pathlib import Path
from deepunlearn.bench.report import build_report
from deepunlearn.bench.store import Point
from deepunlearn.rules.generate import generate_domain
from deepunlearn.unlearn.points import Point as UnlearnPoint
""" + inspect.getsource(_points) + """
kb = generate_domain("shop", 8, seed=1)
md = build_report(_points(kb), Path(sys.argv[1]), kb=kb, methods=["ga"]).read_text(encoding="utf-8")
print(json.dumps({"groups": kb.groups, "headline": [l for l in md.splitlines() if l.startswith("| model | method | t")][0],
                  "csv": (Path(sys.argv[1]) / "points.csv").read_text(encoding="utf-8").splitlines()[0]}))
"""


def test_a_domain_folder_added_to_the_package_reports_its_own_groups(tmp_path):
    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "deepunlearn", tmp_path / "deepunlearn", ignore=shutil.ignore_patterns("__pycache__"))
    folder = tmp_path / "deepunlearn" / "kg" / "domains" / "shop"
    folder.mkdir()
    (folder / "domain.toml").write_text(SHOP_TOML, encoding="utf-8")
    (folder / "rules.dl").write_text(SHOP_RULES, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", SHOP_REPORT, str(tmp_path / "report")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["groups"] == ["orders", "taste", "social"]
    assert got["headline"].endswith("| Acc@Recall≥0.8 orders | Acc@Recall≥0.8 taste | Acc@Recall≥0.8 social |")
    assert got["csv"].split(",")[6:10] == ["accuracy", "accuracy_orders", "accuracy_taste", "accuracy_social"]
