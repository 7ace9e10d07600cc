"""``deepunlearn evaluate`` / ``deepunlearn.evaluate`` on checkpoints unlearned outside deepunlearn.

The unlearned models are made here with plain torch and transformers (gradient ascent on the
target's question and answer tokens, the answer format read from the original's JSON by hand),
and every figure of a verdict is checked against something computed apart: two plain probes for
the forgotten facts, the naive Datalog of the rules tests for ``deep`` and the surviving
derivation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "rules"))
from naive_datalog import naive_closure  # noqa: E402

from plain_ga import ascend  # noqa: E402


def run_cli(*args: str, cache: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPUNLEARN_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "deepunlearn", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def setup(five_people_kb, five_people_model_dir, tmp_path_factory):
    """The KB file, A, its K, the target (a KB target A knows) and three B's made by plain torch."""
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe

    tmp = tmp_path_factory.mktemp("evaluate")
    kb = five_people_kb
    a = load_model(five_people_model_dir, device="cpu")
    known_a = probe(a, kb, progress=False).known_ids()
    t = next(t for t in list(kb.targets) + list(range(len(kb.facts))) if t in known_a)
    q = kb.probe(t)
    bs = [ascend(five_people_model_dir, tmp / f"ga{s}", q.question, q.answer, s) for s in (1, 3, 10)]
    return {"kb": kb, "kb_file": save_kb(kb, tmp / "kb.json"), "a": five_people_model_dir, "prompt": a.prompt,
            "known_a": known_a, "t": t, "bs": bs, "tmp": tmp}


def _known(path, kb, prompt) -> set[int]:
    from deepunlearn.probe import load_model, probe

    return probe(load_model(path, device="cpu", prompt=prompt), kb, progress=False).known_ids()


def _check_against_truth(v, kb, rules, known_b: set[int]) -> None:
    """``deep`` and the surviving derivation against the naive Datalog."""
    t = v.target_id
    closure_b = naive_closure([kb.facts[i] for i in known_b], rules, kb.entities)
    assert v.deep == (kb.facts[t] not in closure_b)
    assert v.target_forgotten == (t not in known_b)
    assert v.superficial == (v.target_forgotten and not v.deep)
    if v.superficial:
        assert v.surviving and set(v.surviving_ids) <= known_b
        assert kb.facts[t] in naive_closure([kb.facts[i] for i in v.surviving_ids], rules, kb.entities)
        assert v.surviving[-1].id == t  # steps end with the target, each citing its rule's file:line
        assert all(":" in s.where and s.datalog.endswith(".") for s in v.surviving)
    else:
        assert not v.surviving and not v.surviving_ids


def test_evaluate_agrees_with_independent_probes_and_closure(setup):
    import deepunlearn
    from deepunlearn.rules import load_rules

    kb, t = setup["kb"], setup["t"]
    rules = load_rules(kb.metadata.get("rules", "family"))
    verdicts = deepunlearn.evaluate(setup["a"], setup["bs"], setup["kb_file"], t, cache_dir=setup["tmp"] / "cache",
                                    device="cpu", progress=False)
    assert len(verdicts) == 3
    for b, v in zip(setup["bs"], verdicts):
        known_b = _known(b, kb, setup["prompt"])
        assert v.known_original == len(setup["known_a"])
        assert set(v.forgotten) == setup["known_a"] - known_b
        assert v.known_unlearned == len(known_b)
        assert 0.0 <= v.recall <= 1.0 and 0.0 <= v.accuracy <= 1.0
        _check_against_truth(v, kb, rules, known_b)
    assert any(v.target_forgotten for v in verdicts)  # ten steps of ascent do forget it


def test_superficial_forgetting_shows_its_derivation(setup):
    """K_B = K_A minus the target alone: a target some rule derives from the rest is superficial."""
    from deepunlearn.rules import Evaluator, load_rules
    from deepunlearn.unlearn.evaluate import judge_known

    kb, known_a = setup["kb"], setup["known_a"]
    rules = load_rules(kb.metadata.get("rules", "family"))
    ev = Evaluator(kb, rules=rules, known=sorted(known_a))
    derivable = [t for t in sorted(known_a) if kb.facts[t] in
                 naive_closure([kb.facts[i] for i in known_a - {t}], rules, kb.entities)]
    assert derivable, "the five-person KB has facts the rules derive from the others"
    for t in derivable:
        v = judge_known(kb, rules, ev, known_a, known_a - {t}, t, original="A", unlearned="B", kb_name="kb",
                        mode="exact", forms=None, budget=None)
        assert v.superficial and not v.deep and v.forgotten == [t]
        _check_against_truth(v, kb, rules, known_a - {t})
        assert "surviving derivation" in v.text() and "<= rule" in v.text()


def test_cli_one_b_json_and_text(setup):
    kb, t = setup["kb"], setup["t"]
    s, r, o = kb.facts[t]
    common = ["evaluate", "--original", str(setup["a"]), "--kb", str(setup["kb_file"]), "--target", f"{s}|{r}|{o}",
              "--device", "cpu"]
    res = run_cli(*common, "--unlearned", str(setup["bs"][2]), "--json", "-o", str(setup["tmp"] / "v.json"),
                  cache=setup["tmp"] / "cache")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert out["target_id"] == t and {"deep", "superficial", "target_forgotten", "forgotten", "recall",
                                      "accuracy", "accuracy_groups", "surviving"} <= set(out)
    assert json.loads((setup["tmp"] / "v.json").read_text()) == out
    res = run_cli(*common, "--unlearned", *map(str, setup["bs"][:2]), cache=setup["tmp"] / "cache")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("deep: ") == 2 and "recall" in res.stdout


def _other_vocab(a_dir: Path, out: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a_dir)
    model = AutoModelForCausalLM.from_pretrained(a_dir)
    tok.add_tokens(["<brand-new-token>"])
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_cli_refuses_another_vocabulary_in_one_line(setup):
    other = _other_vocab(setup["a"], setup["tmp"] / "other-vocab")
    res = run_cli("evaluate", "--original", str(setup["a"]), "--unlearned", str(other), "--kb", str(setup["kb_file"]),
                  "--target", str(setup["t"]), "--device", "cpu", cache=setup["tmp"] / "cache")
    assert res.returncode == 1
    err = [ln for ln in res.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and str(other) in err[0] and str(setup["a"]) in err[0] and "tokenizer" in err[0]


def test_peft_adapter_on_a_and_on_another_base(setup):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from deepunlearn.unlearn.evaluate import Judge
    from deepunlearn.unlearn.evaluate_models import EvaluateError

    base = AutoModelForCausalLM.from_pretrained(setup["a"])
    base.config.name_or_path = str(setup["a"])
    peft = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for n, w in peft.named_parameters():
            if "lora_B" in n:
                w.normal_(0, 0.5)  # a trained adapter changes the model; a fresh one is all zeros
    adapter = setup["tmp"] / "adapter"
    peft.save_pretrained(adapter)
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(setup["a"])
    judge = Judge(setup["a"], setup["kb"], device="cpu", cache_dir=setup["tmp"] / "cache", progress=False)
    v = judge.verdict(adapter, setup["t"])
    kb = setup["kb"]
    assert set(v.forgotten) <= setup["known_a"] and v.known_original == len(setup["known_a"])

    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "someone/another-model"
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    with pytest.raises(EvaluateError, match="another-model.*--original"):
        judge.verdict(adapter, setup["t"])
    assert kb.facts[v.target_id] == tuple(v.target)


def test_manifest_rows_missing_checkpoint_and_resume(setup):
    tmp = setup["tmp"]
    manifest = tmp / "runs.csv"
    rows = [f"{b},{setup['t']},ga,{s}" for b, s in zip(setup["bs"], (1, 3, 10))]
    manifest.write_text("checkpoint,target,method,param\n" + "\n".join(rows[:2] + ["missing/ckpt,,ga,99"] + rows[2:])
                        + "\n")
    out = tmp / "verdicts.jsonl"
    args = ["evaluate", "--original", str(setup["a"]), "--kb", str(setup["kb_file"]), "--manifest", str(manifest),
            "--target", str(setup["t"]), "-o", str(out), "--device", "cpu"]
    res = run_cli(*args, cache=tmp / "cache")
    assert res.returncode == 1
    err = [ln for ln in res.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "row 3" in err[0] and "missing/ckpt" in err[0]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4 and sum("error" in x for x in lines) == 1
    good = [x for x in lines if "error" not in x]
    assert [x["param"] for x in good] == [1.0, 3.0, 10.0] and all(x["method"] == "ga" for x in good)
    assert all(x["target_id"] == setup["t"] and "deep" in x for x in good)

    res = run_cli(*args, "--json", cache=tmp / "cache")  # rerun: judged rows skipped, the failed one retried
    assert res.returncode == 1
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["skipped"] == 3 and summary["judged"] == 0 and summary["failed"] == [3]
    assert len(out.read_text().splitlines()) == 5

    # the verdicts as a results store and a sweep report
    from deepunlearn.bench.store import ResultsStore
    from deepunlearn.cli import main

    assert main(["evaluate-report", str(out), "-o", str(tmp / "rep"), "--json"]) == 0
    with ResultsStore(tmp / "rep", readonly=True) as store:
        points = store.points()
    assert sorted(p.param for p in points) == [1, 3, 10] and {p.method for p in points} == {"ga"}
    assert all(p.extra["deep"] == x["deep"] for p, x in zip(sorted(points, key=lambda p: p.param), good))
    assert (tmp / "rep" / "report" / "report.md").is_file()


def test_manifest_toml_rows(setup, tmp_path):
    from deepunlearn.unlearn.evaluate_manifest import ManifestError, read_manifest

    m = tmp_path / "m.toml"
    m.write_text('[[row]]\ncheckpoint = "a"\ntarget = 3\nmethod = "npo"\nparam = 0.5\n'
                 '[[row]]\ncheckpoint = "b"\ntarget = "X|r|Y"\n')
    rows = read_manifest(m)
    assert [(r["checkpoint"], r["target"], r["method"], r["param"]) for r in rows] == \
        [("a", 3, "npo", 0.5), ("b", "X|r|Y", None, None)]
    m.write_text('[[row]]\ncheckpoint = "a"\nsteps = 3\n')
    with pytest.raises(ManifestError, match="unknown field 'steps'"):
        read_manifest(m)


def test_rules_recall_refuses_a_probe_file_as_forgotten(setup):
    tmp, kb = setup["tmp"], setup["kb"]
    b = setup["bs"][0]
    fmt = setup["prompt"]
    spec = fmt.question_start + "{question}" + fmt.question_end + "|" + fmt.answer_tag
    for model, name in ((setup["a"], "KA.json"), (b, "KB.json")):
        res = run_cli("probe", "--model", str(model), "--kb", str(setup["kb_file"]), "-o", str(tmp / name),
                      "--answer-format", spec, "--device", "cpu", cache=tmp / "cache")
        assert res.returncode == 0, res.stderr
    base = ["rules", "recall", "--kb", str(setup["kb_file"]), "--target", str(setup["t"]), "--known", str(tmp / "KA.json")]
    res = run_cli(*base, "--forgotten", str(tmp / "KB.json"), cache=tmp / "cache")
    assert res.returncode == 1 and res.stdout == ""
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and str(tmp / "KB.json") in err[0] and "probe -o" in err[0] and "--known-after" in err[0]

    res = run_cli(*base, "--known-after", str(tmp / "KB.json"), "--json", cache=tmp / "cache")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    from deepunlearn.unlearn.evaluate import evaluate

    v = evaluate(setup["a"], b, setup["kb_file"], setup["t"], cache_dir=tmp / "cache", device="cpu", progress=False)
    assert out["forgotten"] == len(v.forgotten) and out["recall"] == v.recall and out["accuracy"] == v.accuracy
    assert out["deep"] == v.deep and out["superficial"] == v.superficial
    res = run_cli(*base, "--known-after", str(tmp / "KB.json"), cache=tmp / "cache")
    assert "deep: " in res.stdout


def test_import_deepunlearn_stays_torch_free():
    code = "import sys, deepunlearn; assert 'torch' not in sys.modules; print(deepunlearn.evaluate.__name__)"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "evaluate", res.stderr


def test_a_target_the_original_does_not_know_is_refused(setup):
    from deepunlearn.unlearn.evaluate import Judge
    from deepunlearn.unlearn.evaluate_models import EvaluateError

    unknown = [t for t in range(len(setup["kb"].facts)) if t not in setup["known_a"]]
    if not unknown:
        pytest.skip("the fixture model knows every fact")
    judge = Judge(setup["a"], setup["kb"], device="cpu", cache_dir=setup["tmp"] / "cache", progress=False)
    with pytest.raises(EvaluateError, match="does not know it"):
        judge.verdict(setup["bs"][0], unknown[0])


@pytest.mark.parametrize("cmd", ["evaluate", "evaluate-report"])
def test_every_option_says_what_it_does(cmd):
    import argparse

    from deepunlearn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(a.help for a in sub.choices[cmd]._actions)
