"""Oracles (exact unlearning: ``deepunlearn oracle``) and the verdict relative to them
(``deep_oracle``): the oracle never sees its excluded set, is cached, and is refused for models
the tool cannot retrain; ``deep_oracle`` follows by construction on scripted models that answer
exactly a given set of facts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import deepunlearn
from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from deepunlearn.unlearn.finetune import FinetuneConfig
from deepunlearn.unlearn.methods.params import UnlearnError
from deepunlearn.unlearn.oracle import build_oracle, choose_sets
from deepunlearn.unlearn.oracle_verdict import differences, held_facts, margins

#: husband fact of the 5-person family; its smallest minimal set is [1, 3, 5] (two set-mates)
TARGET = 5
RECIPE = FinetuneConfig.tiny(epochs=60, batch_size=4)


@pytest.fixture(scope="module")
def kb():
    return deepunlearn.generate_family(5, seed=1)


@pytest.fixture(scope="module")
def kb_file(kb, tmp_path_factory):
    return save_kb(kb, tmp_path_factory.mktemp("kb") / "kb.json")


@pytest.fixture(scope="module")
def model_a(kb, tmp_path_factory) -> Path:
    """A 64-wide tiny model finetuned on the 5-person family (it knows the target)."""
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import finetune

    d = tmp_path_factory.mktemp("a") / "A"
    build_tiny_model(kb, d, seed=0, hidden=64, layers=1, heads=4)
    finetune(load_model(d, device="cpu"), kb, RECIPE, out_dir=d, progress=False)
    return d


@pytest.fixture(scope="module")
def oracle(model_a, kb, tmp_path_factory):
    """The oracle of the target, trained once into a module cache and written to a folder."""
    root = tmp_path_factory.mktemp("oracle")
    return build_oracle(model_a, kb, [TARGET], cache_dir=root / "cache", out_dir=root / "O", progress=False)


# --------------------------------------------------------------------------------------- the oracle

def test_the_smallest_set_is_chosen_over_the_taught_facts(kb):
    rules = deepunlearn.load_rules("family")
    sets, excluded, exact = choose_sets(kb, rules, range(len(kb.facts)), [TARGET])
    assert sets == {TARGET: [1, 3, 5]} and excluded == [1, 3, 5] and exact
    both, union, _ = choose_sets(kb, rules, range(len(kb.facts)), [TARGET, 2])  # a batch: the union
    assert both[2] == [0, 2] and union == [0, 1, 2, 3, 5]


def test_an_explicit_set_that_leaves_the_target_derivable_names_the_derivation(kb):
    rules = deepunlearn.load_rules("family")
    with pytest.raises(UnlearnError) as e:
        choose_sets(kb, rules, range(len(kb.facts)), [TARGET], [5])
    msg = str(e.value)
    assert msg.startswith(f"--set: the set does not make target [5] ({', '.join(kb.facts[5])}) underivable; it "
                          "survives through ") and ":-" in msg and "\n" not in msg
    with pytest.raises(UnlearnError, match=r"survives through the target itself is kept"):
        choose_sets(kb, rules, range(len(kb.facts)), [TARGET], [1, 3])
    sets, excluded, _ = choose_sets(kb, rules, range(len(kb.facts)), [TARGET], [1, 3, 5, 7])
    assert excluded == [1, 3, 5, 7] and sets == {TARGET: [1, 3, 5, 7]}


def test_the_oracle_never_sees_its_set_and_records_it(oracle, kb, model_a):
    meta = json.loads((oracle.folder / "deepunlearn.json").read_text())
    rec = meta["oracle"]
    assert not oracle.cached and rec["targets"] == [TARGET] and rec["sets"] == {"5": [1, 3, 5]}
    assert rec["excluded"] == [1, 3, 5] and rec["of"] == str(model_a) and rec["choice"] == "smallest"
    assert rec["seed"] == 0 and rec["recipe"]["epochs"] == 60 and "tiny" in rec["base"]
    assert meta["trained"]["excluded"] == [1, 3, 5] and meta["trained"]["facts"] == len(kb.facts) - 3
    cached = json.loads((oracle.cache_folder / "deepunlearn.json").read_text())
    assert "oracle" not in cached and cached["retrain"]["key"] == rec["key"]  # the cache holds the plain model


def test_a_second_call_reuses_the_cache_without_training(oracle, model_a, kb, tmp_path, monkeypatch):
    import deepunlearn.unlearn.finetune as ft

    def no_training(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(ft, "finetune", no_training)
    before = oracle.cache_folder.stat().st_mtime_ns
    again = build_oracle(model_a, kb, [TARGET], cache_dir=oracle.cache_folder.parent, out_dir=tmp_path / "O2",
                         progress=False)
    assert again.cached and again.cache_folder == oracle.cache_folder
    assert oracle.cache_folder.stat().st_mtime_ns == before
    assert (tmp_path / "O2" / "model.safetensors").read_bytes() == (oracle.folder / "model.safetensors").read_bytes()
    entries = sorted(p.name for p in oracle.cache_folder.parent.iterdir())
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another model
        build_oracle(model_a, kb, [TARGET], seed=1, cache_dir=oracle.cache_folder.parent, out_dir=tmp_path / "O3",
                     progress=False)
    # the interrupted run left nothing half-written, neither in the cache nor in -o
    assert not (tmp_path / "O3").exists() and sorted(p.name for p in oracle.cache_folder.parent.iterdir()) == entries


def test_cli_oracle_cached_json_and_text(oracle, model_a, kb_file, tmp_path, capsys):
    args = ["oracle", "--model", str(model_a), "--kb", str(kb_file), "--target", str(TARGET),
            "--cache-dir", str(oracle.cache_folder.parent), "-o", str(tmp_path / "O")]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cached"] and out["sets"] == {"5": [1, 3, 5]} and out["oracle"] == str(tmp_path / "O")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "(cached, " in text and "target [5]" in text and "excluded set of 3 facts [1, 3, 5]" in text
    other = tmp_path / "notes"
    other.mkdir()
    (other / "a.txt").write_text("mine")
    assert main([*args[:-1], str(other)]) == 1  # a folder the tool did not write is not replaced
    assert "refusing to replace it" in capsys.readouterr().err and (other / "a.txt").read_text() == "mine"


def test_refusals_are_one_line_each(kb, kb_file, model_a, tmp_path, capsys):
    from deepunlearn.probe import build_tiny_model

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    raw = build_tiny_model(kb, tmp_path / "raw", hidden=16, layers=1, heads=2)
    cases = {str(gguf): "a GGUF file; it records no training recipe the tool can rerun",
             "someone/some-model": "a hub model: what it knows was learned in pretraining or finetuned elsewhere",
             str(raw): "its deepunlearn.json records no base and training recipe (it was not trained by "
                       "deepunlearn finetune)"}
    for model, why in cases.items():
        assert main(["oracle", "--model", model, "--kb", str(kb_file), "--target", "5", "-o",
                     str(tmp_path / "O")]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err and "p_chance" in err, err
    assert main(["oracle", "--model", str(model_a), "--kb", str(kb_file), "--target", "5", "--set", "5",
                 "-o", str(tmp_path / "O"), "--cache-dir", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--set: the set does not make target [5]" in err and ":-" in err
    other = save_kb(deepunlearn.generate_family(5, seed=2), tmp_path / "other.json")
    assert main(["oracle", "--model", str(model_a), "--kb", str(other), "--target", "5", "-o", str(tmp_path / "O"),
                 "--cache-dir", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a retain model is trained on the model's own KB" in err
    assert not (tmp_path / "O").exists() and not (tmp_path / "c").exists()


# ----------------------------------------------------------------------------- deep_oracle: the parts

def test_differences_and_margins():
    inf = math.inf
    d = differences(np.array([-inf, 1.0, 0.5, -inf]), np.array([0.0, -inf, 0.2, -inf]))
    assert d[0] == -inf and d[1] == inf and d[2] == pytest.approx(0.3) and d[3] == -inf
    neg_o = {"exact": np.full(20, -inf)}
    assert margins({"exact": np.full(20, -inf)}, neg_o)["exact"] == -inf  # B answers no negative
    # B answers 2 of 20 negatives the oracle does not: more than 5 % pass any finite margin
    assert margins({"exact": np.array([0.0, 0.0] + [-inf] * 18)}, neg_o)["exact"] == inf
    both = {"exact": np.linspace(0, 1, 20)}
    assert margins({"exact": np.linspace(0, 1, 20) + 0.5}, both)["exact"] == pytest.approx(0.5)
    # only the negatives B answers can pass: answering none, any difference is beyond the margin
    assert margins({"exact": np.linspace(0, 1, 20) + 0.5}, both, answered=np.zeros(20, bool))["exact"] == -inf
    two = np.zeros(20, bool)
    two[[3, 19]] = True  # k = 1 of 20 may pass: the margin is the smaller of the two answered differences
    assert margins({"exact": np.linspace(0, 1, 20) + 0.5}, both, answered=two)["exact"] == pytest.approx(0.5)


def test_held_facts_need_evidence_beyond_the_oracle():
    inf = math.inf
    excluded = [3, 4, 5]
    ev_b = {"exact": np.array([-0.1, -0.1, -0.1])}
    ev_o = {"exact": np.array([-inf, -0.1, -2.0])}
    held, beyond = held_facts({1, 2, 3, 4, 5}, excluded, ev_b, ev_o, {"exact": 0.5})
    assert held == {1, 2, 3, 5} and [b["id"] for b in beyond] == [3, 5]  # 4: no better than the oracle
    assert beyond[0]["oracle_score"] is None and beyond[0]["difference"] == "inf"
    held, _ = held_facts({1, 2, 3, 4, 5}, excluded, ev_b, ev_o, {"exact": inf})
    assert held == {1, 2}  # an uninformative margin: no excluded fact counts
    held, _ = held_facts({1, 4}, excluded, ev_b, ev_o, {"exact": -inf})
    assert held == {1}  # an answered fact as good as the oracle's is not held, even at a margin of -inf


# ------------------------------------------------------------------------ deep_oracle: scripted models

@pytest.fixture(scope="module")
def judge(model_a, kb, tmp_path_factory):
    from deepunlearn.unlearn.evaluate import Judge

    return Judge(model_a, kb, mode="exact", cache_dir=tmp_path_factory.mktemp("probe-cache"), progress=False)


def scripted(judge, facts: dict[int, float]):
    from scripted_lm import scripted_bundle

    from deepunlearn.probe import load_model

    b = scripted_bundle(load_model(judge.original, device="cpu"), [(judge.kb, facts)])
    b.answer_rule = judge.bundle.answer_rule
    return b


def judged(judge, b_facts: dict[int, float], o_facts: dict[int, float], folder: Path):
    """The verdict of a scripted B relative to a scripted oracle excluding [1, 3, 5]."""
    from deepunlearn.unlearn.oracle_verdict import OracleReference

    folder.mkdir(exist_ok=True)
    (folder / "deepunlearn.json").write_text(json.dumps({"oracle": {"excluded": [1, 3, 5], "removed": [1, 3, 5],
                                                                    "targets": [TARGET]}}))
    judge.oracle = str(folder)
    judge._oracle_ref = OracleReference(judge, folder, bundle=scripted(judge, o_facts))
    return judge.judge_bundle(scripted(judge, b_facts), "B", TARGET)


def test_b_without_the_set_is_deep_relative_to_the_oracle(judge, tmp_path):
    taught = {i: 6.0 for i in judge.known if i not in (1, 3, 5)}
    v = judged(judge, taught, taught, tmp_path / "O")
    assert v.deep and v.deep_oracle and v.oracle["held_excluded"] == [] and not v.oracle["target_held"]


def test_b_keeping_the_set_mates_beyond_the_oracle_is_superficial(judge, tmp_path):
    b = {i: 6.0 for i in judge.known if i != TARGET}  # every fact of A but the target
    o = {i: 6.0 for i in judge.known if i not in (1, 3, 5)}  # the oracle answers none of its set
    v = judged(judge, b, o, tmp_path / "O")
    assert v.superficial and v.deep_oracle is False
    assert sorted(h["id"] for h in v.oracle["held_excluded"]) == [1, 3] and not v.oracle["target_held"]
    assert set(v.oracle["surviving_ids"]) & {1, 3}
    text = v.text()
    assert "deep (relative to exact unlearning): no" in text and "still held beyond the oracle: [1]" in text


def test_set_mates_the_oracle_answers_as_well_are_not_held(judge, tmp_path):
    """The issue's case: exact unlearning still answers the set-mates (inferred, not taught); B
    answering them no better than the oracle is deep relative to it, while the raw verdict is
    superficial."""
    b = {i: 6.0 for i in judge.known if i != TARGET}
    o = {i: 6.0 for i in judge.known if i != TARGET}
    v = judged(judge, b, o, tmp_path / "O")
    assert v.superficial and v.deep_oracle and v.oracle["answered_excluded"] == [1, 3]
    assert "deep (relative to exact unlearning): yes" in v.text()
    stronger = {**b, 1: 12.0, 3: 12.0}  # B answers them far more surely than the oracle
    w = judged(judge, stronger, {**o, 1: 1.0, 3: 1.0}, tmp_path / "O")
    assert w.deep_oracle is False and sorted(h["id"] for h in w.oracle["held_excluded"]) == [1, 3]


def test_the_margin_bounds_the_verdict_not_each_fact(judge, tmp_path):
    """correction family: the 5 % false-positive rate is shared among the excluded facts of the
    target's cone B answers (Bonferroni), so the margin is at least the per-fact one."""
    b = {i: 6.0 for i in judge.known if i != TARGET}
    v = judged(judge, b, {i: 6.0 for i in judge.known if i != TARGET}, tmp_path / "O")
    cone = set().union(*judge.evaluator.minimal_sets(TARGET).sets)
    compared = v.oracle["compared"]
    assert compared == sorted(f for f in (1, 3, 5) if f in cone and f in b) and len(compared) >= 2
    assert v.oracle["correction"] == "family" and v.oracle["fpr_per_fact"] == pytest.approx(0.05 / len(compared))
    ref = judge._oracle_ref
    ref.correction = "fact"
    w = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    assert w.oracle["fpr_per_fact"] == 0.05
    for m, bar in v.oracle["margins"].items():
        assert bar is None or w.oracle["margins"][m] is None or bar >= w.oracle["margins"][m]


def test_b_answering_the_target_is_not_deep(judge, tmp_path):
    all_a = {i: 6.0 for i in judge.known}
    v = judged(judge, all_a, {i: 6.0 for i in judge.known if i not in (1, 3, 5)}, tmp_path / "O")
    assert not v.target_forgotten and v.deep_oracle is False and v.oracle["target_held"]


# ----------------------------------------------------------------------------- evaluate --oracle (CLI)

def test_evaluate_oracle_against_itself_and_a_second_seed(oracle, model_a, kb_file, tmp_path, capsys):
    base = ["evaluate", "--original", str(model_a), "--kb", str(kb_file), "--target", str(TARGET),
            "--cache-dir", str(tmp_path / "pc")]
    assert main([*base, "--unlearned", str(oracle.folder), "--oracle", str(oracle.folder), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["deep_oracle"] is True and v["oracle"]["held_excluded"] == []  # judged against itself: trivially deep
    assert v["oracle"]["excluded"] == [1, 3, 5] and v["oracle"]["n_negatives"] > 0
    second = build_oracle(model_a, deepunlearn.load_kb(kb_file), [TARGET], seed=1,
                          cache_dir=oracle.cache_folder.parent, out_dir=tmp_path / "O1", progress=False)
    assert second.record["seed"] == 1
    assert main([*base, "--unlearned", str(second.folder), "--oracle", str(oracle.folder), "--json"]) == 0
    w = json.loads(capsys.readouterr().out)
    assert isinstance(w["deep_oracle"], bool) and w["oracle"]["seed"] == 0 and w["unlearned"] == str(second.folder)
    held = {h["id"] for h in w["oracle"]["held_excluded"]}
    assert held <= {1, 3, 5}
    assert w["deep_oracle"] == (not w["oracle"]["surviving_ids"] and not w["oracle"]["target_held"])
    if not held:  # what it holds was all taught to the reference too, and that derives no target
        assert w["deep_oracle"]


def test_evaluate_oracle_flag_errors(model_a, kb_file, tmp_path, capsys):
    base = ["evaluate", "--original", str(model_a), "--unlearned", str(model_a), "--kb", str(kb_file),
            "--target", str(TARGET)]
    assert main([*base, "--negatives", str(kb_file)]) == 1
    assert capsys.readouterr().err.endswith("--negatives: calibrates the margin of --oracle; give --oracle DIR too\n")
    assert main([*base, "--oracle", str(tmp_path / "none")]) == 1
    assert "--oracle " + str(tmp_path / "none") + ": no such folder" in capsys.readouterr().err
    assert main([*base, "--oracle", str(model_a)]) == 1  # a model, not an oracle
    assert "not an oracle folder" in capsys.readouterr().err


def test_cli_explicit_set_from_ids_references_or_a_file(oracle, model_a, kb, kb_file, tmp_path, capsys):
    """The smallest set given by hand is the same model: served from the cache, recorded as given."""
    ref = "|".join(kb.facts[3])
    as_file = tmp_path / "set.json"
    as_file.write_text(json.dumps([1, list(kb.facts[3]), 5]))
    for given in (f"1,{ref},5", str(as_file)):
        assert main(["oracle", "--model", str(model_a), "--kb", str(kb_file), "--target", str(TARGET), "--set", given,
                     "--cache-dir", str(oracle.cache_folder.parent), "-o", str(tmp_path / "O"), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["cached"] and out["excluded"] == [1, 3, 5]
        assert json.loads((tmp_path / "O" / "deepunlearn.json").read_text())["oracle"]["choice"] == "given"
    assert main(["oracle", "--model", str(model_a), "--kb", str(kb_file), "--target", str(TARGET), "--set", "1,Nobody",
                 "-o", str(tmp_path / "O2")]) == 1
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "O2").exists()


def test_default_negatives_are_a_holdout_of_at_least_200_facts(kb, monkeypatch):
    import deepunlearn.kg.holdout as holdout
    from deepunlearn.kg.kb import KBError
    from deepunlearn.unlearn.oracle_verdict import default_negatives

    rules = deepunlearn.load_rules("family")
    neg, what = default_negatives(kb, rules)
    assert len(neg.facts) >= 200 and what.startswith("holdout of ") and not set(neg.entities) & set(kb.entities)

    def no_holdout(*a, **k):
        raise KBError("no holdout for this KB")

    monkeypatch.setattr(holdout, "make_holdout", no_holdout)
    neg, what = default_negatives(kb, rules)
    assert what == "never-true facts of the KB (seed 0)" and not set(neg.facts) & set(kb.facts)


# ------------------------------------------------------------ several oracles of one set: one reference

def _oracle_folder(folder: Path, excluded=(1, 3, 5), seed=0) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "deepunlearn.json").write_text(json.dumps({"oracle": {
        "excluded": list(excluded), "removed": list(excluded), "targets": [TARGET], "seed": seed}}))
    return folder


def test_several_oracles_compare_b_against_the_strongest(judge, tmp_path):
    """Exact unlearning of one seed infers set-mate 1 back weakly, of another strongly. Against the
    first alone, a B that answers it as surely as the second oracle holds it beyond exact unlearning
    (not deep); against both, it does not (deep): B beats no exact-unlearning run on that fact."""
    from deepunlearn.unlearn.oracle_verdict import OracleReference

    taught = {i: 6.0 for i in judge.known if i not in (1, 3, 5)}
    b = {**taught, 1: 6.0, 3: 6.0}  # B answers set-mates 1 and 3
    weak = {**taught, 1: 0.5, 3: 6.0}  # seed 0 infers 1 weakly, answers 3
    strong = {**taught, 1: 6.0, 3: 0.5}  # seed 1 infers 1 strongly, 3 weakly
    f0, f1 = _oracle_folder(tmp_path / "O0"), _oracle_folder(tmp_path / "O1", seed=1)
    judge.oracle = [str(f0)]
    judge._oracle_ref = OracleReference(judge, [f0], bundle=scripted(judge, weak))
    one = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    assert one.superficial and one.deep_oracle is False and [h["id"] for h in one.oracle["held_excluded"]] == [1]
    judge.oracle = [str(f0), str(f1)]
    judge._oracle_ref = OracleReference(judge, [f0, f1], bundle=[scripted(judge, weak), scripted(judge, strong)])
    both = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    assert both.deep_oracle is True and both.oracle["held_excluded"] == []
    assert both.oracle["folders"] == [str(f0), str(f1)] and both.oracle["seeds"] == [0, 1]
    assert "the strongest of 2 oracles" in both.text()
    assert both.oracle["seed_spread"]["exact"] > 0  # the two seeds disagree on the set-mates
    keeps_all = {i: 12.0 for i in judge.known if i != TARGET}  # far beyond both on every set-mate
    weak_a, weak_b = {**taught, 1: 0.5, 3: 0.5}, {**taught, 1: 0.4, 3: 0.6}  # both infer the set-mates weakly, alike
    judge._oracle_ref = OracleReference(judge, [f0, f1], bundle=[scripted(judge, weak_a), scripted(judge, weak_b)])
    kept = judge.judge_bundle(scripted(judge, keeps_all), "B", TARGET)
    assert kept.deep_oracle is False and sorted(h["id"] for h in kept.oracle["held_excluded"]) == [1, 3]
    assert 0 < kept.oracle["seed_spread"]["exact"] < kept.oracle["held_excluded"][0]["difference"]


def test_the_margin_is_at_least_the_oracles_own_disagreement(judge, tmp_path):
    """With several oracles, B must beat the strongest on a fact by more than the oracles differ
    among themselves on that fact; spread=False keeps the negatives' margin alone."""
    from deepunlearn.unlearn.oracle_verdict import OracleReference

    taught = {i: 6.0 for i in judge.known if i not in (1, 3, 5)}
    o0, o1 = {**taught, 1: 0.5, 3: 0.5}, {**taught, 1: 2.0, 3: 0.5}  # they differ on set-mate 1
    b = {**taught, 1: 2.5, 3: 0.5}  # a little beyond the stronger on 1, within their spread
    f0, f1 = _oracle_folder(tmp_path / "O0"), _oracle_folder(tmp_path / "O1", seed=1)
    judge.oracle = [str(f0), str(f1)]
    judge._oracle_ref = ref = OracleReference(judge, [f0, f1], bundle=[scripted(judge, o0), scripted(judge, o1)])
    with_spread = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    ref.spread = False
    without = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    assert 1 in judge.known and 1 in with_spread.oracle["compared"]  # set-mate 1 is answered by B: compared
    assert with_spread.oracle["seed_spread"]["exact"] > 0 and without.oracle["seed_spread"]["exact"] == 0
    assert with_spread.oracle["margins"] == without.oracle["margins"]  # the negatives' margin is the same
    assert with_spread.oracle["held_excluded"] == [] and with_spread.deep_oracle is True
    assert [h["id"] for h in without.oracle["held_excluded"]] == [1]


def test_oracles_of_different_sets_are_refused_in_one_line(model_a, kb_file, tmp_path, capsys):
    f0 = _oracle_folder(tmp_path / "O0")
    f1 = _oracle_folder(tmp_path / "O1", excluded=(1, 3, 5, 7), seed=1)
    assert main(["evaluate", "--original", str(model_a), "--unlearned", str(model_a), "--kb", str(kb_file),
                 "--target", str(TARGET), "--cache-dir", str(tmp_path / "pc"), "--oracle", str(f0),
                 "--oracle", str(f1)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--oracle {f1}: leaves out 4 facts, --oracle {f0} 3" in err


def test_a_pooled_bar_is_the_references_seed_noise_over_all_its_excluded_facts(judge, tmp_path):
    """Two oracles agree on set-mate 1 and disagree widely on set-mate 3. B beats both on 1 by less
    than one oracle beats the other on 3: per fact (spread) B holds 1, against the pooled seed noise
    it does not. A B keeping every set-mate far beyond both is superficial under both readings."""
    from deepunlearn.unlearn.oracle_verdict import OracleReference

    taught = {i: 6.0 for i in judge.known if i not in (1, 3, 5)}
    o0, o1 = {**taught, 1: 0.5, 3: 0.5}, {**taught, 1: 0.5, 3: 3.0}
    f0, f1 = _oracle_folder(tmp_path / "O0"), _oracle_folder(tmp_path / "O1", seed=1)
    judge.oracle = [str(f0), str(f1)]
    judge._oracle_ref = ref = OracleReference(judge, [f0, f1], bundle=[scripted(judge, o0), scripted(judge, o1)])
    b = {**taught, 1: 2.0, 3: 0.5}
    per_fact = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    ref.spread = "pooled"
    pooled = judge.judge_bundle(scripted(judge, b), "B", TARGET)
    assert [h["id"] for h in per_fact.oracle["held_excluded"]] == [1]
    assert pooled.oracle["held_excluded"] == [] and pooled.deep_oracle is True
    low = per_fact.oracle["margins"]["exact"]  # the negatives' margin (-inf: none of them answered)
    assert pooled.oracle["margins"]["exact"] > (-1e9 if low is None else low) and pooled.oracle["margins"]["exact"] > 0
    keeps_all = {i: 12.0 for i in judge.known if i != TARGET}
    kept = judge.judge_bundle(scripted(judge, keeps_all), "B", TARGET)
    # 1 is held beyond the noise; 3 is not (B beats the stronger oracle there by less than the two differ)
    assert kept.deep_oracle is False and [h["id"] for h in kept.oracle["held_excluded"]] == [1]


def test_the_oracle_noise_is_checked_where_the_reference_is_made(judge, tmp_path):
    from deepunlearn.unlearn.evaluate_models import EvaluateError
    from deepunlearn.unlearn.oracle_verdict import judge_oracle

    judge.oracle, judge.oracle_noise = [str(_oracle_folder(tmp_path / "O0"))], "loud"
    judge.__dict__.pop("_oracle_ref", None)
    try:
        with pytest.raises(EvaluateError, match="oracle noise must be one of fact, pooled, got 'loud'"):
            judge_oracle(judge, judge.bundle, set(judge.known), TARGET)
    finally:
        judge.oracle_noise = "fact"
