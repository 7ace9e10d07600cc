"""``deepunlearn rules ...`` end to end, in subprocesses (the contract of docs/design.md section 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "rules", *args], capture_output=True, text=True,
                       cwd=ROOT, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}: {r.stderr}")
    return r


def run_json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.stdout.count("\n") == 1  # exactly one JSON object
    return json.loads(r.stdout)


def test_closure(edu_json):
    d = run_json("closure", "--kb", str(edu_json))
    assert (d["facts"], d["closure"], d["derived"]) == (400, 562, 162)
    assert d["rules"] == "edu-relat" and d["engine"] == "native"
    assert any("newphe" in w for w in d["warnings"])
    d = run_json("closure", "--kb", str(edu_json), "--rules", "family", "--engine", "pydatalog")
    assert (d["facts"], d["closure"], d["derived"]) == (400, 562, 162) and d["warnings"] == []


def test_sets_exact_all_targets(edu_kb, edu_json, edu_cached):
    d = run_json("sets", "--kb", str(edu_json), "--exact", "--target", "all")
    assert len(d["targets"]) == 55 and d["exact"] and d["total_sets"] == 760
    index = {f: i for i, f in enumerate(edu_kb.facts)}
    total = 0
    for obj, t in zip(d["targets"], edu_kb.targets):
        assert obj["target"] == list(edu_kb.facts[t]) and obj["exact"] is True
        sets = {frozenset(index[tuple(f)] for f in s) for s in obj["sets"]}
        assert set(edu_cached[t]) <= sets
        total += len(sets)
    assert total == 760


def test_sets_seeds_are_valid_and_minimal(edu_kb, edu_json, edu_graph):
    from deepunlearn.rules import is_minimal

    d = run_json("sets", "--kb", str(edu_json), "--seeds", "100", "--target", "all")
    assert not d["exact"]
    index = {f: i for i, f in enumerate(edu_kb.facts)}
    for obj in d["targets"]:
        t = index[tuple(obj["target"])]
        for s in obj["sets"]:
            assert is_minimal(edu_graph, t, {index[tuple(f)] for f in s})


def test_sets_one_target_by_name(edu_kb, edu_json):
    s, r, o = edu_kb.facts[272]
    d = run_json("sets", "--kb", str(edu_json), "--target", f"{s}|{r}|{o}")
    assert d["target"] == [s, r, o] and d["exact"] is True
    assert sorted(sorted(x) for x in d["set_ids"]) == [[75, 272, 347, 379], [231, 272, 319, 379]]
    text = run("sets", "--kb", str(edu_json), "--target", "272").stdout
    assert "2 minimal sets (exact)" in text


def test_recall_release_example(edu_dir, edu_json, tmp_path):
    from deepunlearn.kg.edu_relat import load_release_example

    ex = load_release_example(edu_dir)
    f = tmp_path / "forgotten.json"
    f.write_text(json.dumps(ex.forgotten()))
    d = run_json("recall", "--kb", str(edu_json), "--target", "272", "--forgotten", str(f))
    assert d["recall"] == 0.75 and round(d["accuracy"], 4) == 0.1523 and d["exact"] is True
    assert len(d["set"]) == 4 and all(len(x) == 3 for x in d["set"])
    # facts as [s, r, o] give the same answer; so does MDUS here
    from deepunlearn.kg.io import load_kb

    kb = load_kb(edu_json)
    f.write_text(json.dumps([list(kb.facts[i]) for i in ex.forgotten()]))
    d2 = run_json("recall", "--kb", str(edu_json), "--target", "272", "--forgotten", str(f), "--seeds", "100")
    assert (d2["recall"], d2["accuracy"], d2["exact"]) == (d["recall"], d["accuracy"], False)


def test_recall_with_the_release_sets_and_first_tie(edu_dir, edu_json, tmp_path):
    from deepunlearn.kg.edu_relat import load_release_example
    from deepunlearn.kg.safe_pickle import safe_load

    ex = load_release_example(edu_dir)
    rec, acc_rel, acc_bio, acc = (float(x) for x in safe_load(edu_dir / "example_for_evaluation" / "rec_acc.pt"))
    f = tmp_path / "forgotten.json"
    f.write_text(json.dumps(ex.forgotten()))
    base = ("recall", "--kb", str(edu_json), "--target", "272", "--forgotten", str(f))
    d = run_json(*base, "--sets", "release", "--tie", "first")
    assert d["recall"] == rec == 0.75 and abs(d["accuracy"] - acc) < 1e-12
    assert abs(d["accuracy_family"] - acc_rel) < 1e-12 and abs(d["accuracy_biography"] - acc_bio) < 1e-12
    assert d["set_ids"] == [231, 272, 319, 379] and d["exact"] is False
    assert (d["sets_source"], d["tie"], d["minimal_sets"]) == ("stored", "first", 2)
    # the same folder given by path; the accuracy tie rule picks the other set of recall 0.75
    d = run_json(*base, "--sets", str(edu_dir / "unlearn_minimal_set"))
    assert d["set_ids"] == [75, 272, 347, 379] and d["tie"] == "accuracy" and d["sets_source"] == "stored"
    d = run_json("sets", "--kb", str(edu_json), "--target", "272", "--sets", str(edu_dir))
    assert d["set_ids"] == [[231, 272, 319, 379], [75, 272, 347, 379]] and d["method"] == "stored"
    d = run_json(*base, "--sets", "mdus", "--seeds", "20")
    assert d["sets_source"] == "mdus" and d["recall"] == 0.75


def test_closure_of_the_release_raw_rule_file(edu_dir, edu_json, tmp_path):
    raw, edu = tmp_path / "raw.json", tmp_path / "edu.json"
    d = run_json("closure", "--kb", str(edu_json), "--rules", str(edu_dir / "family_rule_raw.txt"), "-o", str(raw))
    assert (d["facts"], d["closure"], d["derived"]) == (400, 562, 162) and d["rules"] == "family_rule_raw"
    run_json("closure", "--kb", str(edu_json), "--rules", "edu-relat", "-o", str(edu))
    facts = json.loads(raw.read_text())
    assert len(facts) == 562 and sorted(facts) == sorted(json.loads(edu.read_text()))
    assert not any(s == o for s, _, o in facts)


def test_recall_with_known(edu_json, tmp_path):
    known = tmp_path / "known.json"
    known.write_text(json.dumps({"known": [i for i in range(700) if i != 379]}))
    f = tmp_path / "f.json"
    f.write_text(json.dumps([272, 379]))
    d = run_json("recall", "--kb", str(edu_json), "--target", "272", "--forgotten", str(f), "--known", str(known))
    # without 379 in K, its minimal sets shrink and 379 does not count as forgotten
    assert d["forgotten"] == 2 and 379 not in d["set_ids"]


def test_explain_writes_a_png(edu_json, tmp_path):
    fig = tmp_path / "fig.png"
    d = run_json("explain", "--kb", str(edu_json), "--target", "272", "-o", str(fig))
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and fig.stat().st_size > 20_000
    assert d["figure"] == str(fig) and len(d["sets"]) == 2
    assert {x["rule"] for x in d["derivations"]} == {"rule 1", "rule 2", "rule 3"}
    text = run("explain", "--kb", str(edu_json), "--target", "272").stdout
    assert "<= rule 1: husband(X1, X0) :- wife(X0, X1)" in text and "minimal deep-unlearning sets (2, exact" in text


def test_show(edu_json, edu_dir):
    d = run_json("show", "edu-relat", "--kb", str(edu_json))
    assert d["rules"] == 48 and "newphe" in d["relations"] and len(d["warnings"]) == 1
    d = run_json("show", str(edu_dir / "family_rule_raw.txt"))
    assert d["name"] == "family_rule_raw" and d["rules"] == 48
    assert "husband(A, B) :- wife(B, A), male(B), female(A), A != B." in d["datalog"]


@pytest.mark.parametrize("args, message", [
    (["sets", "--target", "9999"], "out of range"),
    (["sets", "--target", "Nobody|child|Noone"], "is not in knowledge base"),
    (["recall", "--target", "all", "--forgotten", "F"], "--target must be one fact"),
    (["sets", "--target", "272", "--rules", "BAD"], "bad.dl:2:"),
    (["sets", "--target", "272", "--rules", "nosuch"], "unknown rule set 'nosuch'"),
    (["recall", "--target", "272", "--forgotten", "NOTJSON"], "not valid JSON"),
    (["recall", "--target", "272", "--forgotten", "WRONG"], "item 1:"),
    (["recall", "--target", "272", "--forgotten", "GOOD", "--sets", "NOPE"], "expected exact, mdus, release or a folder"),
    (["recall", "--target", "272", "--forgotten", "GOOD", "--sets", "exact", "--seeds", "3"], "--sets exact enumerates"),
    (["sets", "--target", "272", "--sets", "EMPTY"], "no unlearn_minimal_set/ folder and no <row>.pt"),
    (["sets", "--target", "272", "--sets", "release", "--kb", "BARE"], "records no release folder"),
    (["closure", "--rules", "RAW"], "raw.txt:1:23: female(A): the reference's filter asks"),
])
def test_user_errors_exit_1_with_a_message(edu_json, tmp_path, args, message):
    bad = tmp_path / "bad.dl"
    bad.write_text("child(A, B) :- father(B, A).\nchild(A, C) :- father(B, A).\n")
    notjson = tmp_path / "f.json"
    notjson.write_text("[1, 2,")
    wrong = tmp_path / "w.json"
    wrong.write_text('[272, ["a", "b"]]')
    good = tmp_path / "good.json"
    good.write_text("[272]")
    raw = tmp_path / "raw.txt"
    raw.write_text('(B, is uncle of, A) + (A, is, "female") > (A, is nephew of, B)\n')
    (tmp_path / "empty").mkdir()
    doc = json.loads(edu_json.read_text())
    doc["metadata"].pop("release_dir")
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    subst = {"BAD": str(bad), "NOTJSON": str(notjson), "WRONG": str(wrong), "F": str(wrong), "RAW": str(raw), "GOOD": str(good),
             "NOPE": str(tmp_path / "nope"), "EMPTY": str(tmp_path / "empty"), "BARE": str(tmp_path / "bare.json")}
    args = [subst.get(a, a) for a in args]
    kb = [] if "--kb" in args else ["--kb", str(edu_json)]
    r = run(*args, *kb, "--json", check=False)
    assert r.returncode == 1 and set(json.loads(r.stdout)) == {"error", "file", "field"}
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len([x for x in r.stderr.splitlines() if not x.startswith("warning:")]) == 1


def test_rules_commands_do_not_import_torch(edu_json, tmp_path):
    code = ("import sys; from deepunlearn.cli import main\n"
            f"for argv in (['rules', 'closure', '--kb', {str(edu_json)!r}, '--json'],\n"
            f"             ['rules', 'sets', '--kb', {str(edu_json)!r}, '--target', '272', '--json'],\n"
            f"             ['rules', 'explain', '--kb', {str(edu_json)!r}, '--target', '272', '-o', {str(tmp_path / 'f.png')!r}]):\n"
            "    assert main(argv) == 0\n"
            "heavy = sorted(m for m in ('torch', 'transformers', 'peft', 'accelerate') if m in sys.modules)\n"
            "print('HEAVY', heavy)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "HEAVY []"
    # and per -X importtime, for the plain command line
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "deepunlearn", "rules", "closure", "--kb",
                        str(edu_json), "--json"], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    # (modules loaded by importlib.import_module are not listed, their imports are)
    assert "deepunlearn.rules.closure" in imported and "torch" not in imported
