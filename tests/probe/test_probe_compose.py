"""``probe --mode compose``: the dispatch and what it records, on a model whose answer we set.

Two families, each with a mother the rules derive from the father's wife (and a wife from the
child's father and mother): four derived facts, two answered "Ann", two "Eve". The model is a
``model_fn`` that prefers the token "Ann" everywhere, so it "answers" exactly the compose
questions whose answer is Ann (the answer rule: the gold answer in the greedy output)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from deepunlearn.probe import ProbeResult, build_tiny_model, load_model, probe
from deepunlearn.rules.compose import compose_set

from scripted import constant_fn, two_families as two_family_kb


@pytest.fixture(scope="module")
def two_families():
    return two_family_kb()


@pytest.fixture(scope="module")
def bundle(two_families, tmp_path_factory):
    folder = build_tiny_model(two_families, tmp_path_factory.mktemp("compose") / "m", hidden=16, heads=2, layers=1)
    return load_model(folder, device="cpu")


def test_compose_mode_knows_exactly_the_questions_answered(bundle, two_families):
    kb = two_families
    cs = compose_set(kb, "family")
    answers = {kb.facts[i][2] for i in cs.fact_ids()}
    assert answers == {"Ann", "Eve"}  # both outcomes are exercised
    res = probe(bundle, kb, mode="compose", compose=cs.questions, model_fn=constant_fn(bundle, "Ann"), progress=False)
    assert res.mode == "compose" and list(res.fact_ids) == cs.fact_ids()
    assert list(res.known) == [kb.facts[i][2] == "Ann" for i in res.fact_ids]
    assert len(res.compose) == len(cs.questions)
    for rec, q in zip(res.compose, cs.questions):
        assert (rec["fact_id"], rec["question"], rec["rule"], rec["body"]) == (q.fact_id, q.text, q.rule, list(q.body))
        assert rec["known"] == (q.answer == "Ann") and "Ann" in rec["output"]
    assert res.per_form == {"compose": {"compose": [sum(q.answer == "Ann" for q in cs.questions), len(cs.questions)]}}
    back = ProbeResult.from_json(json.dumps(res.to_json()))
    assert back.compose == res.compose and list(back.known) == list(res.known)


def test_compose_mode_needs_its_questions(bundle, two_families):
    with pytest.raises(ValueError, match="compose"):
        probe(bundle, two_families, mode="compose", progress=False)
    with pytest.raises(ValueError, match="compose"):
        probe(bundle, two_families, mode="exact", compose=[], progress=False)


def test_cli_writes_the_known_derived_facts(bundle, two_families, tmp_path, capsys):
    kb_file = save_kb(two_families, tmp_path / "kb.json")
    cfile, out = tmp_path / "compose.json", tmp_path / "known.json"
    assert main(["rules", "compose", "--kb", str(kb_file), "-o", str(cfile), "--json"]) == 0
    written = json.loads(cfile.read_text())
    assert len(written["questions"]) == len(compose_set(two_families, "family").questions)
    capsys.readouterr()
    assert main(["probe", "--model", str(bundle.name), "--kb", str(kb_file), "--mode", "compose",
                 "--compose", str(cfile), "-o", str(out), "--json"]) == 0
    doc = json.loads(out.read_text())
    assert doc["mode"] == "compose" and doc["total"] == len({q["fact_id"] for q in written["questions"]})
    assert set(doc["fact_ids"]) == {r["fact_id"] for r in doc["compose"] if r["known"]}
    assert sum(n for _, n in doc["compose_by_rule"].values()) == doc["compose_questions"] == len(written["questions"])
    capsys.readouterr()
    assert main(["probe", "--model", str(bundle.name), "--kb", str(kb_file), "--mode", "compose"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--compose" in err[0]
    assert main(["probe", "--model", str(bundle.name), "--kb", str(kb_file), "--mode", "compose",
                 "--compose", str(cfile), "--scores"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--mode compose" in err[0]
