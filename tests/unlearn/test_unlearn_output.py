"""``unlearn -o POINTS.json`` is readable by ``rules recall`` and gives the same
recall and accuracy; the per-target summary's metrics match their definitions; ``--save-model``
saves the weights of one point."""

from __future__ import annotations

import json
import math
import random

import pytest

from deepunlearn.cli import main


@pytest.fixture(scope="module")
def kb_file(small_kb, tmp_path_factory):
    from deepunlearn.kg.io import save_kb

    return save_kb(small_kb, tmp_path_factory.mktemp("out") / "kb.json")


@pytest.fixture(scope="module")
def target(tiny_model_dir, small_kb) -> int:
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(tiny_model_dir, device="cpu"), small_kb, progress=False).known_ids()
    return next(t for t in small_kb.targets if t in known)


def test_unlearn_o_round_trips_through_rules_recall(tiny_model_dir, kb_file, target, tmp_path, capsys):
    out = tmp_path / "new" / "dir" / "F.json"
    rc = main(["unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "ga",
               "--target", str(target), "--grid", "2,16", "--point", "2", "--cache-dir", str(tmp_path),
               "-o", str(out), "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    printed = json.loads(cap.out)
    saved = json.loads(out.read_text())
    assert printed["output"] == str(out) and {k: v for k, v in printed.items() if k != "output"} == saved
    assert saved["point"] == 2
    chosen = next(p for p in saved["points"] if p["param"] == 2)
    assert saved["forgotten"] == chosen["forgotten"] and len(saved["fact_ids"]) == saved["known"]
    s = saved["summary"]
    assert set(s) >= {"acc_at_recall_0.8", "recall_at_acc_0.8", "auc"} and 0 <= s["auc"] <= 1
    rc = main(["rules", "recall", "--kb", str(kb_file), "--target", str(target), "--known", str(out),
               "--forgotten", str(out), "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert rec["recall"] == pytest.approx(chosen["recall"]) and rec["accuracy"] == pytest.approx(chosen["accuracy"])
    assert rec["target_forgotten"] == chosen["target_forgotten"]
    # without --known, K is the one the file records (README's `rules recall --forgotten F.json`)
    rc = main(["rules", "recall", "--kb", str(kb_file), "--target", str(target), "--forgotten", str(out), "--json"])
    cap = capsys.readouterr()
    assert rc == 0 and json.loads(cap.out) == rec
    assert f"K = the {len(saved['fact_ids'])} facts {out} records as known before unlearning" in cap.err


def test_unlearn_text_output_has_the_summary_line(tiny_model_dir, kb_file, target, tmp_path, capsys):
    rc = main(["unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "tv",
               "--target", str(target), "--grid", "0,10", "--cache-dir", str(tmp_path)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "Acc@Recall>=0.8 " in text.splitlines()[-1] and " AUC " in text.splitlines()[-1]


def test_save_model_saves_the_point_and_probe_loads_it(tiny_model_dir, kb_file, target, small_kb, tmp_path, capsys):
    from deepunlearn.probe import load_model, probe

    dest = tmp_path / "unlearned"
    rc = main(["unlearn", "--model", str(tiny_model_dir), "--kb", str(kb_file), "--method", "ga",
               "--target", str(target), "--grid", "16", "--cache-dir", str(tmp_path),
               "--save-model", str(dest), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["saved_model"] == str(dest)
    b = load_model(dest, device="cpu")
    assert b.meta["unlearned"]["method"] == "ga" and b.meta["unlearned"]["param"] == 16
    known_after = probe(b, small_kb, progress=False).known_ids()
    assert target not in known_after
    forgotten = {small_kb.resolve(f) for f in res["forgotten"]}
    assert forgotten == set(res["fact_ids"]) - set(known_after)


def test_summary_functions_match_their_definitions_by_brute_force():
    """The per-curve metrics (bench aggregates these same functions) against their definitions
    computed naively: end points (0, 1) and (1, 0) added, thresholds with a 1e-9 tolerance, AUC as
    the mean over a fine grid of r of the best accuracy at recall >= r."""
    from deepunlearn.unlearn import summary

    rng = random.Random(11)
    for _ in range(200):
        curve = [(rng.choice([0.0, 0.8, 1.0, 4 / 5, rng.random()]), rng.random()) for _ in range(rng.randint(0, 7))]
        t = rng.choice([0.8, 0.5, 0.95])
        full = curve + [(0.0, 1.0), (1.0, 0.0)]
        assert summary.acc_at_recall(curve, t) == max(a for r, a in full if r >= t - 1e-9)
        assert summary.recall_at_acc(curve, t) == max(r for r, a in full if a >= t - 1e-9)
        grid = [(i + 0.5) / 20000 for i in range(20000)]
        naive_auc = sum(max(a for r, a in full if r >= x) for x in grid) / len(grid)
        assert summary.auc(curve) == pytest.approx(naive_auc, abs=1e-3)
