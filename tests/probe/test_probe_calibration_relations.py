"""Calibration per relation (deepunlearn.probe.calibration_relations) on constructed evidence
whose false-positive rate per relation is known, and the calibration file's checks on read."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deepunlearn.cli import main
from deepunlearn.probe.calibration import Calibration, CalibrationError, calibrate, load_calibration
from deepunlearn.probe.calibration_relations import fallback_line, fallbacks

NEG = -math.inf


def _evidence(n: int, fp: int, start: float = 1.0) -> np.ndarray:
    """``n`` never-seen facts of which the raw rule passes exactly ``fp`` (scores start, start+1, ...)."""
    return np.array([start + i for i in range(fp)] + [NEG] * (n - fp))


def _case():
    """father: 40 negatives, 10 raw false positives; sister: 30, none; uncle: 7 (under 20), 7;
    job (biography): 25, 5. Positives: 10 per relation, all passing the raw rule, scored high."""
    rel = {"father": ("family", 40, 10), "sister": ("family", 30, 0), "uncle": ("family", 7, 7),
           "job": ("biography", 25, 5)}
    ev, groups, rels = [], [], []
    for r, (g, n, fp) in rel.items():
        ev.append(_evidence(n, fp))
        groups += [g] * n
        rels += [r] * n
    neg = {"exact": np.concatenate(ev)}
    pos = {"exact": np.full(40, 100.0)}
    pg = ["family"] * 30 + ["biography"] * 10
    pr = ["father"] * 10 + ["sister"] * 10 + ["uncle"] * 10 + ["job"] * 10
    return neg, groups, rels, pos, pg, pr


def test_raw_fpr_per_relation_and_fallback_to_the_group():
    neg, ng, nr, pos, pg, pr = _case()
    cal = calibrate(neg, ng, pos, pg, fpr=0.05, neg_relations=nr, pos_relations=pr)
    ex = cal.relations["exact"]
    assert (ex["father"].raw_fp, ex["father"].n_neg, ex["father"].source) == (10, 40, "relation")
    assert (ex["sister"].raw_fp, ex["sister"].n_neg) == (0, 30)
    assert (ex["job"].raw_fp, ex["job"].n_neg) == (5, 25)
    # uncle has 7 negatives: its group's pooled rate, (10 + 0 + 7) of 77, and it says so
    u = ex["uncle"]
    assert (u.source, u.raw_fp, u.n_neg, u.own_n_neg, u.own_raw_fp) == ("group", 17, 77, 7, 7)
    assert "fewer than 20" in u.note and u.threshold is None
    assert cal.raw_rate("exact", "uncle", "family") == {"fp": 17, "n_neg": 77, "source": "group", "group": "family",
                                                        "own_n_neg": 7}
    assert cal.raw_rate("any", "father", "family")["fp"] == 10  # the raw any: the OR of the modes (one here)
    assert fallbacks(cal.relations) == {"uncle": ("family", 7)}
    line = fallback_line(cal.relations)
    assert line == ("note: relation uncle (7 never-seen facts, group family) has fewer than 20 never-seen facts: "
                    "calibrated with the rates and thresholds of the group")
    # a relation the negatives do not hold at all takes its group's pooled rate
    assert cal.raw_rate("exact", "mother", "family") == {"fp": 17, "n_neg": 77, "source": "group",
                                                         "group": "family", "own_n_neg": 0}


def test_thresholds_per_relation_keep_each_relation_under_the_fpr():
    neg, ng, nr, pos, pg, pr = _case()
    cal = calibrate(neg, ng, pos, pg, fpr=0.05, neg_relations=nr, pos_relations=pr)
    father = cal.relations["exact"]["father"]
    # 40 negatives at 5 %: k = 2 may pass, the threshold is the 3rd largest score (8.0 of 1..10)
    assert father.threshold == 8.0 and father.fp == 2 and father.tp == 10
    assert cal.relations["exact"]["sister"].threshold == -math.inf  # the raw rule passes none
    # the group's threshold (77 negatives, k = 3: the 4th largest of family's) is another one
    group_t = cal.entry("exact", "family").threshold
    assert group_t != father.threshold
    ev = np.array([8.5, 8.5])
    by_rel = cal.known("exact", ev, ["family", "family"], relations=["father", "uncle"])
    by_grp = cal.known("exact", ev, ["family", "family"])
    assert by_rel[0] == (8.5 > 8.0) and by_rel[1] == by_grp[1] == (8.5 > group_t)
    # each relation with its own threshold passes at most 5 % of its negatives
    for r, e in cal.relations["exact"].items():
        if e.source == "relation":
            assert e.fp <= 0.05 * e.n_neg


def test_relations_round_trip_and_old_files_still_read(tmp_path):
    neg, ng, nr, pos, pg, pr = _case()
    cal = calibrate(neg, ng, pos, pg, fpr=0.05, neg_relations=nr, pos_relations=pr)
    doc = json.loads(json.dumps(cal.to_json()))
    assert doc["relations"]["exact"]["uncle"]["source"] == "group" and "fewer than 20" in doc["relations"]["exact"][
        "uncle"]["note"]
    back = Calibration.from_json(doc)
    assert back.to_json() == cal.to_json()
    old = calibrate(neg, ng, pos, pg, fpr=0.05)  # per group only, as files were written before
    assert "relations" not in old.to_json()
    f = tmp_path / "old.json"
    f.write_text(json.dumps(old.to_json()))
    back = load_calibration(f)
    assert back.relations == {} and back.entry("exact", "family").threshold == old.entry("exact", "family").threshold
    with pytest.raises(CalibrationError, match="no raw false-positive rates per relation"):
        back.raw_rate("exact", "father", "family")


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(min_tpr="abc"), "min_tpr"),
    (lambda d: d.update(min_tpr=[1]), "min_tpr"),
    (lambda d: d.update(fpr=True), "fpr"),
    (lambda d: d["entries"].update(guess=d["entries"]["exact"]), "entries.guess"),
    (lambda d: d["entries"]["exact"]["family"].update(n_neg="3"), "entries.exact.family.n_neg"),
    (lambda d: d["entries"]["exact"]["family"].update(fp=10 ** 6), "entries.exact.family"),
    (lambda d: d["relations"]["exact"]["father"].update(raw_fp=-1), "relations.exact.father.raw_fp"),
    (lambda d: d["relations"]["exact"]["father"].update(group="geo"), "relations.exact.father.group"),
    (lambda d: d["entries"].update(exact={}), "entries.exact"),
    (lambda d: d["relations"].update(nope={}), "relations.nope"),
])
def test_a_bad_calibration_file_is_one_line_naming_file_and_field(tmp_path, edit, field):
    neg, ng, nr, pos, pg, pr = _case()
    doc = calibrate(neg, ng, pos, pg, fpr=0.05, neg_relations=nr, pos_relations=pr).to_json()
    edit(doc)
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError) as e:
        load_calibration(f)
    assert e.value.field == field and str(f) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("bad", [{"min_tpr": "abc"}, {"min_tpr": [1]}, {"entries": {"guess": {}}}])
def test_probe_with_a_bad_calibration_exits_1(tmp_path, capsys, bad):
    import deepunlearn

    kb = deepunlearn.save_kb(deepunlearn.generate_family(4, seed=1), tmp_path / "kb.json")
    doc = {"format": "deepunlearn-calibration", "fpr": 0.05, "min_tpr": 0.5,
           "entries": {"exact": {"family": {"threshold": None, "n_neg": 3, "fp": 0, "n_pos": 3, "tp": 3,
                                            "informative": True}}}}
    doc.update(bad)
    f = tmp_path / "f.json"
    f.write_text(json.dumps(doc))
    rc = main(["probe", "--model", str(tmp_path / "none"), "--kb", str(kb), "--mode", "any", "--calibration", str(f)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and str(f) in err and "field " in err
