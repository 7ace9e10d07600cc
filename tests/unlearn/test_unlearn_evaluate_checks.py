"""``deepunlearn evaluate`` with the checks of a sweep: ``--adversarial``, ``--relearn``,
``--quantize``, ``--scores``, on an unlearned model B made here with plain torch (a few steps of
gradient ascent on the target, A's answer format copied beside it by hand).

The outside truths: ``deepunlearn attack`` on the same B (the same known sets after every
relearning step and after quantisation), the adversarial probe run directly with
:func:`deepunlearn.probe.probe`, the measures recomputed from :func:`score_facts` and scipy's KS
test, and B's weights hashed before and after.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from plain_ga import ascend

#: the attack result's fields both commands must agree on, fact for fact
SAME = ("recall", "accuracy", "target_forgotten", "deep", "known", "chosen_set", "relearn_pool", "relearn_facts",
        "relearn_lr", "relearn_lr_from", "recall_relearn", "accuracy_relearn", "target_relearned",
        "forgotten_relearn", "deep_relearn", "recall_quant", "accuracy_quant", "target_quant", "forgotten_quant",
        "deep_quant", "seed")


@pytest.fixture(scope="module")
def setup(five_people_kb, five_people_model_dir, tmp_path_factory):
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe

    tmp = tmp_path_factory.mktemp("evaluate-checks")
    kb = five_people_kb
    a = load_model(five_people_model_dir, device="cpu")
    known_a = probe(a, kb, progress=False).known_ids()
    t = next(t for t in list(kb.targets) + list(range(len(kb.facts))) if t in known_a)
    q = kb.probe(t)
    b = ascend(five_people_model_dir, tmp / "ga", q.question, q.answer, 1, copy_meta=True)  # one step: a shallow B
    assert t not in probe(load_model(b, device="cpu"), kb, progress=False).known_ids(), "B forgot the target"
    return {"kb": kb, "kb_file": save_kb(kb, tmp / "kb.json"), "a": five_people_model_dir, "known_a": known_a,
            "t": t, "b": b, "tmp": tmp}


def _main(argv, capsys):
    from deepunlearn.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _common(setup) -> list[str]:
    return ["--kb", str(setup["kb_file"]), "--target", str(setup["t"]), "--device", "cpu",
            "--cache-dir", str(setup["tmp"] / "cache")]


def test_relearn_and_int8_equal_the_attack_command_fact_for_fact(setup, capsys):
    base = _common(setup)
    code, out, err = _main(["evaluate", "--original", str(setup["a"]), "--unlearned", str(setup["b"]), *base,
                            "--relearn", "1,2,4", "--quantize", "int8", "--relearn-lr", "0.01", "--json"], capsys)
    assert code == 0, err
    v = json.loads(out)
    code, out, err = _main(["attack", "--model", str(setup["b"]), "--original", str(setup["a"]), *base,
                            "--relearn", "1,2,4", "--quantize", "int8", "--relearn-lr", "0.01", "--json"], capsys)
    assert code == 0, err
    at = json.loads(out)
    ev = v["attacks"]
    assert {k: ev[k] for k in SAME} == {k: at[k] for k in SAME}
    assert list(ev["forgotten_relearn"]) == ["1", "2", "4"] and ev["quantize"] == "int8"
    # the verdict and the attack agree on B itself, and B forgot the target superficially or deeply
    assert v["recall"] == at["recall"] and v["accuracy"] == at["accuracy"] and v["deep"] == at["deep"]
    assert v["target_forgotten"] and ev["target_forgotten"] and v["superficial"]
    # one step of relearning on other facts brings this shallow B's target back, as the attack reports it
    assert ev["target_relearned"]["1"] and at["target_relearned"]["1"]
    known_k = setup["known_a"]
    for n, lost in ev["forgotten_relearn"].items():
        assert set(lost) <= known_k and (setup["t"] in lost) != ev["target_relearned"][n]


def _digest(model) -> str:
    h = hashlib.sha256()
    for name, w in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(w.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def test_b_is_loaded_once_and_its_weights_are_restored_bit_exactly(setup):
    from deepunlearn.unlearn.evaluate import Judge
    from deepunlearn.unlearn.evaluate_checks import EvalChecks

    judge = Judge(setup["a"], setup["kb"], device="cpu", cache_dir=setup["tmp"] / "cache", progress=False)
    bundle = judge.load(setup["b"])
    before = _digest(bundle.model)
    flags = {n: p.requires_grad for n, p in bundle.model.named_parameters()}
    checks = EvalChecks.build(adversarial=True, relearn=[1, 2], relearn_lr=0.01, quantize="int8", scores=True)
    v = judge.judge_bundle(bundle, str(setup["b"]), setup["t"], checks=checks)
    assert v.attacks["recall_relearn"] and v.attacks["recall_quant"] is not None and v.adversarial and v.scores
    assert _digest(bundle.model) == before
    assert {n: p.requires_grad for n, p in bundle.model.named_parameters()} == flags
    assert not bundle.model.training and all(p.grad is None for p in bundle.model.parameters())
    # the same model judged again gives the same verdict: nothing of the attacks stayed behind
    again = judge.judge_bundle(bundle, str(setup["b"]), setup["t"], checks=checks)
    assert again.model_dump() == v.model_dump()


def test_adversarial_equals_the_adversarial_probe_run_directly(setup):
    import deepunlearn
    from deepunlearn.probe import load_model, probe
    from deepunlearn.probe.forms_probe import ANY_MODES
    from deepunlearn.rules import Evaluator

    kb, t = setup["kb"], setup["t"]
    v = deepunlearn.evaluate(setup["a"], setup["b"], setup["kb_file"], t, adversarial=True, device="cpu",
                             cache_dir=setup["tmp"] / "cache", progress=False)
    forgotten = sorted(setup["known_a"] - probe(load_model(setup["b"], device="cpu"), kb, progress=False).known_ids())
    assert v.forgotten == forgotten and forgotten
    b = load_model(setup["b"], device="cpu")
    still = probe(b, kb, forgotten, mode="any", forms="all", any_modes=list(ANY_MODES), progress=False).known_ids()
    ev = Evaluator(kb, known=sorted(setup["known_a"])).evaluate(t, sorted(set(forgotten) - set(still)))
    a = v.adversarial
    assert a["modes"] == list(ANY_MODES)
    assert a["superficial_n"] == [len(still), len(forgotten)]
    assert a["superficial"] == pytest.approx(len(still) / len(forgotten))
    assert a["recall_adv"] == pytest.approx(ev.recall) and a["accuracy_adv"] == pytest.approx(ev.accuracy)
    assert a["recall_adv"] <= v.recall
    assert "adversarial (any form" in v.text()


def test_scores_against_score_facts_and_scipy(setup):
    import numpy as np
    from scipy.stats import ks_2samp

    import deepunlearn
    from deepunlearn.probe import load_model
    from deepunlearn.probe.scores import score_facts

    kb, t = setup["kb"], setup["t"]
    # A itself as the "retain model": the reference-based measures compare B's truth ratios with A's
    v = deepunlearn.evaluate(setup["a"], setup["b"], setup["kb_file"], t, scores=True, retain=setup["a"],
                             device="cpu", cache_dir=setup["tmp"] / "cache", progress=False)
    s = v.scores
    known = sorted(setup["known_a"])
    sb = score_facts(load_model(setup["b"], device="cpu"), kb, known, progress=False)
    sa = score_facts(load_model(setup["a"], device="cpu"), kb, known, progress=False)
    pos = {int(f): i for i, f in enumerate(sb.fact_ids)}
    assert s["target"]["prob"] == pytest.approx(float(sb.prob[pos[t]]))
    F = s["reference_set"]
    assert t in F and set(F) <= set(known)
    tr_b, tr_a = sb.truth_ratio[[pos[i] for i in F]], sa.truth_ratio[[pos[i] for i in F]]
    assert s["forget_truth_ratios"] == pytest.approx([float(x) for x in tr_b])
    ok_b, ok_a = tr_b[np.isfinite(tr_b)], tr_a[np.isfinite(tr_a)]
    assert s["forget_quality"] == pytest.approx(float(ks_2samp(ok_b, ok_a).pvalue))
    assert s["retain_model"] == str(setup["a"]) and "model utility" in v.text()


@pytest.mark.parametrize("extra, flag, text", [
    (["--relearn", "0"], "--relearn", "--relearn 0: relearning step counts must be >= 1, got 0"),
    (["--relearn", "2,1"], "--relearn", "--relearn 2,1: the relearning grid must be sorted and distinct"),
    (["--quantize", "int3"], "--quantize", "--quantize int3: expected one of int8, int4, nf4"),
    (["--retain", "R"], "--retain", "--retain: the retain model is the reference of the scores"),
    (["--adversarial-modes", "exact"], "--adversarial-modes", "--adversarial-modes: give --adversarial too"),
])
def test_bad_check_flags_are_one_line_exit_1(extra, flag, text, setup, capsys):
    code, out, err = _main(["evaluate", "--original", str(setup["a"]), "--unlearned", str(setup["b"]),
                            *_common(setup), *extra, "--json"], capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"deepunlearn evaluate: error: {text}")
    assert json.loads(out)["field"] == flag


def test_python_api_refuses_bad_checks(setup):
    import deepunlearn
    from deepunlearn.unlearn.evaluate_models import EvaluateError

    for kw, field in (({"relearn": [0]}, "relearn"), ({"quantize": "int3"}, "quantize"),
                      ({"retain": "R"}, "retain"), ({"relearn": [1], "seed": -1}, "seed"),
                      ({"adversarial": True, "adversarial_modes": ["nope"]}, "adversarial_modes"),
                      ({"adversarial_modes": ["exact"]}, "adversarial_modes")):
        with pytest.raises(EvaluateError) as e:
            deepunlearn.evaluate(setup["a"], setup["b"], setup["kb_file"], setup["t"], device="cpu", **kw)
        assert e.value.field == field and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["ckpts/t7", "org/name"])
def test_unlearned_missing_path_that_looks_like_a_hub_name(name, setup, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(setup["tmp"])
    code, out, err = _main(["evaluate", "--original", str(setup["a"]), "--unlearned", name, *_common(setup)],
                           capsys)
    assert code == 1 and out == ""
    assert err.strip() == (f"deepunlearn evaluate: error: --unlearned {name}: no such checkpoint folder or file "
                           "(and not reachable as a hub name)")


def test_manifest_applies_the_checks_per_row_and_names_a_missing_row(setup, capsys, monkeypatch):
    from deepunlearn.bench.store import ResultsStore

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tmp = setup["tmp"]
    manifest = tmp / "runs.csv"
    manifest.write_text("checkpoint,target,method,param\n"
                        f"{setup['b']},{setup['t']},ga,4\n"
                        "# a comment line\n"
                        "ckpts/t7,,ga,5\n")
    out = tmp / "checked.jsonl"
    argv = ["evaluate", "--original", str(setup["a"]), "--manifest", str(manifest), *_common(setup),
            "-o", str(out), "--adversarial", "--relearn", "1,2", "--relearn-lr", "0.01", "--quantize", "int8"]
    code, stdout, err = _main(argv, capsys)
    assert code == 1
    errors = [ln.split("\r")[-1] for ln in err.splitlines() if "error:" in ln]  # past the progress bar's \r
    assert errors == [f"deepunlearn evaluate: error: --manifest {manifest}: row 2 (line 4): checkpoint ckpts/t7: "
                      "no such checkpoint folder or file (and not reachable as a hub name)"]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [("error" in x) for x in lines] == [False, True]
    good = lines[0]
    assert good["attacks"]["quantize"] == "int8" and good["row"]["checkpoint"] == str(setup["b"])
    assert list(good["attacks"]["recall_relearn"]) == ["1", "2"] and good["adversarial"]["recall_adv"] is not None
    assert "adversarial recall" in stdout and "relearn recall" in stdout

    # the store and the sweep report carry the checks under a sweep's keys
    code, _, err = _main(["evaluate-report", str(out), "-o", str(tmp / "rep"), "--json"], capsys)
    assert code == 0, err
    with ResultsStore(tmp / "rep", readonly=True) as store:
        (p,) = store.points()
    assert p.extra["recall_adv"] == good["adversarial"]["recall_adv"]
    assert p.extra["recall_relearn"] == good["attacks"]["recall_relearn"]
    assert p.extra["recall_quant"] == good["attacks"]["recall_quant"]
    report = (tmp / "rep" / "report" / "report.md").read_text()
    assert "## Has it really forgotten?" in report and "relearn@1" in report and "relearn@2" in report


def test_manifest_rows_know_their_lines(tmp_path):
    from deepunlearn.unlearn.evaluate_manifest import read_manifest, where

    toml = tmp_path / "m.toml"
    toml.write_text('# runs\n[[row]]\ncheckpoint = "a"\ntarget = 3\n\n[[row]]\ncheckpoint = "b"\n')
    csv = tmp_path / "m.csv"
    csv.write_text('checkpoint,target\n# skipped\n\n"a",3\n"b\nc",4\n')  # a quoted cell may span lines
    assert [r["line"] for r in read_manifest(toml)] == [2, 6]
    rows = read_manifest(csv)
    assert [(r["checkpoint"], r["line"]) for r in rows] == [("a", 4), ("b\nc", 6)]
    assert where(csv, 0, rows[0]) == f"--manifest {csv}: row 1 (line 4)"


def test_evaluate_with_option_groups_equals_the_keyword_spelling(setup):
    """TargetRunner's groups (probing, checks, measures) give evaluate() the verdict its keywords give."""
    import deepunlearn
    from deepunlearn.unlearn.runner_options import CheckOptions, ProbeOptions

    common = dict(device="cpu", progress=False)
    args = (setup["a"], setup["b"], setup["kb_file"], setup["t"])
    by_keyword = deepunlearn.evaluate(*args, mode="rank", adversarial=True, adversarial_modes=["exact", "rank"],
                                      relearn=[1], relearn_size=4, cache_dir=setup["tmp"] / "cache-kw", **common)
    by_group = deepunlearn.evaluate(*args, probing=ProbeOptions(mode="rank", cache_dir=setup["tmp"] / "cache-g"),
                                    checks=CheckOptions(adversarial=True, modes=["exact", "rank"],
                                                        attacks={"relearn": [1], "relearn_size": 4}), **common)
    assert by_group.model_dump() == by_keyword.model_dump()
    assert by_group.adversarial["modes"] == ["exact", "rank"] and by_group.attacks["recall_relearn"]


def test_evaluate_refuses_a_group_option_it_cannot_take_or_one_given_twice(setup):
    import deepunlearn
    from deepunlearn.unlearn.runner_options import MeasureOptions, ProbeOptions

    args = (setup["a"], setup["b"], setup["kb_file"], setup["t"])
    with pytest.raises(TypeError, match=r"probing.k_mode is not an option of evaluate\(\)"):
        deepunlearn.evaluate(*args, probing=ProbeOptions(k_mode="dataset"), progress=False)
    with pytest.raises(TypeError, match=r"measures.reference is not an option"):
        deepunlearn.evaluate(*args, measures=MeasureOptions(reference="retrain"), progress=False)
    with pytest.raises(TypeError, match="mode is given twice"):
        deepunlearn.evaluate(*args, mode="exact", probing=ProbeOptions(mode="rank"), progress=False)
