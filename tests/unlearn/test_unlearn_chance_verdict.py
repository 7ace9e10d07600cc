"""p_chance of a verdict (deepunlearn.unlearn.chance_verdict) on constructed cases whose answer is
known: a model that answers exactly a given fact set (judged with ``judge_known``), calibrations
whose raw false-positive rate per relation is set by construction."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

import deepunlearn
from deepunlearn.cli import main
from deepunlearn.probe.calibration import CalibrationError, calibrate
from deepunlearn.rules.metrics import Evaluator
from deepunlearn.unlearn.chance_verdict import attach_chance, chance_rates
from deepunlearn.unlearn.evaluate import judge_known


def make_calibration(kb, fp_share: dict[str, float], *, n: int = 40, few: dict[str, int] | None = None):
    """A calibration of mode ``exact`` whose raw FPR on relation r is ``fp_share[r]`` (default 0)
    over ``n`` never-seen facts (``few[r]`` of them where given)."""
    rels = sorted({f[1] for f in kb.facts})
    ev, groups, names = [], [], []
    gid = {f[1]: kb.group_of(i) for i, f in enumerate(kb.facts)}
    for r in rels:
        m = (few or {}).get(r, n)
        k = round(fp_share.get(r, 0.0) * m)
        ev += [1.0 + i for i in range(k)] + [-math.inf] * (m - k)
        groups += [gid[r]] * m
        names += [r] * m
    pos_r = [f[1] for f in kb.facts]
    return calibrate({"exact": np.array(ev)}, groups, {"exact": np.full(len(pos_r), 50.0)},
                     [gid[r] for r in pos_r], neg_relations=names, pos_relations=pos_r,
                     meta={"model": "A", "forms": "all"})


@pytest.fixture(scope="module")
def world():
    kb = deepunlearn.generate_family(8, seed=1)
    rules = deepunlearn.load_rules("family")
    known_a = set(range(len(kb.facts)))
    ev = Evaluator(kb, rules=rules, known=sorted(known_a))
    # a target with more than one minimal set and a cone small enough for the brute force below
    t = next(t for t in kb.targets if 1 < len(ev.minimal_sets(t).sets)
             and len(set().union(*ev.minimal_sets(t).sets)) <= 12)
    return kb, rules, known_a, ev, t


def _superficial(world):
    """The verdict of a model answering exactly K_A minus the target: superficial, since the rules
    derive the target back from the rest."""
    kb, rules, known_a, ev, t = world
    v = judge_known(kb, rules, ev, known_a, known_a - {t}, t, original="A", unlearned="B", kb_name="kb",
                    mode="exact", forms=None, budget=None)
    assert v.superficial
    return v


def brute(sets, p) -> float:
    cone = sorted(set().union(*sets))
    return sum(math.prod(p[f] if b else 1 - p[f] for f, b in zip(cone, bits))
               for bits in itertools.product([0, 1], repeat=len(cone))
               if all({f for f, b in zip(cone, bits) if b} & s for s in sets))


def test_rates_of_zero_give_p_chance_zero_and_the_verdict_stands(world):
    kb, rules, known_a, ev, t = world
    v = attach_chance(_superficial(world), ev, kb, chance_rates(make_calibration(kb, {}), "exact"))
    assert v.p_chance == 0.0 and v.p_chance_method == "exact" and v.p_chance_se == 0.0
    assert v.chance["established"] and v.chance["cone"] == len(set().union(*ev.minimal_sets(t).sets))
    line = next(ln for ln in v.text().splitlines() if ln.startswith("  deep:"))
    assert "(p_chance 0 < 0.05)" in line and "not established" not in line


def test_a_calibration_on_other_forms_is_said():
    kb = deepunlearn.generate_family(4, seed=1)
    rates = chance_rates(make_calibration(kb, {}), "exact")  # measured on forms 'all'
    assert rates.forms_note("all") is None
    assert "measured on forms 'all', the verdicts probe forms 'default'" in rates.forms_note(None)


def test_the_target_relation_at_fpr_one_is_not_established(world):
    """A model that lost the target's set but still answers the target, whose relation is always
    guessed: chance explains it (p 1). The same rates and a model that lost only the target but
    answers the rest of its set (never guessed): established (p 0)."""
    kb, rules, known_a, ev, t = world
    rel = kb.facts[t][1]
    rates = chance_rates(make_calibration(kb, {rel: 1.0}), "exact")
    chosen = set(ev.evaluate(t, [t]).set)
    answers_t = judge_known(kb, rules, ev, known_a, known_a - chosen | {t}, t, original="A", unlearned="B",
                            kb_name="kb", mode="exact", forms=None, budget=None)
    assert not answers_t.target_forgotten
    v = attach_chance(answers_t, ev, kb, rates)
    assert v.p_chance == 1.0 and not v.chance["established"]
    if all(kb.facts[f][1] != rel for f in _superficial(world).best_set if f != t):
        assert attach_chance(_superficial(world), ev, kb, rates).p_chance == 0.0
    assert v.chance["rates"][rel]["fpr"] == 1.0 and v.chance["rates"][rel]["source"] == "relation"
    assert "deep: not established (p_chance 1.00 >= 0.05)" in v.text()


def test_p_chance_is_the_probability_over_the_cone(world):
    """p_any: the whole cone answered by chance; p_chance: B's answers outside its set kept, the set
    answered by chance, at least as many of its facts as B answers (brute force over the set)."""
    kb, rules, known_a, ev, t = world
    share = {r: s for r, s in zip(sorted({f[1] for f in kb.facts}), (0.1, 0.25, 0.5, 0.05, 0.2, 0.4, 0.15, 0.3, 0.35))}
    v = attach_chance(_superficial(world), ev, kb, chance_rates(make_calibration(kb, share), "exact"))
    sets = ev.minimal_sets(t).sets
    p = {f: round(share[kb.facts[f][1]] * 40) / 40 for f in set().union(*sets)}
    assert v.chance["p_any"] == pytest.approx(brute(sets, p), abs=1e-12)
    chosen = sorted(v.best_set)
    known_b = known_a - {t}
    k = len(known_b & set(chosen))
    want = 0.0
    for bits in itertools.product([0, 1], repeat=len(chosen)):
        s_ = {f for f, b in zip(chosen, bits) if b}
        answered = (known_b - set(chosen)) | s_
        if len(s_) >= k and all(answered & set(m) for m in sets):
            want += math.prod(p[f] if b else 1 - p[f] for f, b in zip(chosen, bits))
    assert v.p_chance == pytest.approx(want, abs=1e-12)
    assert v.chance["statistic"] == {"set": chosen, "answered": k}
    assert 0 < v.p_chance < 1


def test_exact_unlearning_that_guesses_one_fact_is_not_established_and_kept_facts_are(world):
    """The same target and rates: a model that lost the whole set but guesses one fact of it back
    has a large p_chance; one that lost only the target at most the chance of answering all but
    one of the set's facts."""
    kb, rules, known_a, ev, t = world
    rel = {f[1] for f in kb.facts}
    cal = chance_rates(make_calibration(kb, {r: 0.3 for r in rel}), "exact")
    chosen = sorted(ev.evaluate(t, [t]).set)
    assert len(chosen) >= 3
    guess = next(f for f in chosen if f != t)
    b_exact = known_a - set(chosen) | {guess}
    v1 = judge_known(kb, rules, ev, known_a, b_exact, t, original="A", unlearned="O", kb_name="kb", mode="exact",
                     forms=None, budget=None)
    v2 = _superficial(world)
    if v1.deep:  # the guessed fact alone does not derive the target here: nothing to weigh
        return
    v1 = attach_chance(v1, ev, kb, cal)
    v2 = attach_chance(v2, ev, kb, cal)
    assert v1.p_chance >= 0.05 and "not established" in v1.text()
    n = len(v2.best_set)  # at least n - 1 of n facts answered at rate 0.3 (each such draw derives the target)
    tail = sum(math.comb(n, j) * 0.3 ** j * 0.7 ** (n - j) for j in range(n - 1, n + 1))
    assert v2.p_chance <= tail + 1e-12 and v2.p_chance < v1.p_chance


def test_a_relation_with_few_negatives_uses_its_group_and_says_so(world):
    kb, rules, known_a, ev, t = world
    rel, grp = kb.facts[t][1], kb.group_of(t)
    cal = make_calibration(kb, {rel: 1.0}, few={rel: 5})  # 5 never-seen facts, all false positives
    v = attach_chance(_superficial(world), ev, kb, chance_rates(cal, "exact"))
    r = v.chance["rates"][rel]
    n_group = sum(e.own_n_neg for e in cal.relations["exact"].values() if e.group == grp)
    assert (r["source"], r["group"], r["own_n_neg"], r["fp"], r["n_neg"]) == ("group", grp, 5, 5, n_group)
    assert v.chance["fallbacks"] == [rel]


def test_a_deep_verdict_gets_no_p_chance(world):
    kb, rules, known_a, ev, t = world
    gone = set(ev.minimal_sets(t).sets[0])
    v = judge_known(kb, rules, ev, known_a, known_a - gone, t, original="A", unlearned="B", kb_name="kb",
                    mode="exact", forms=None, budget=None)
    v = attach_chance(v, ev, kb, chance_rates(make_calibration(kb, {kb.facts[t][1]: 1.0}), "exact"))
    assert v.deep and v.p_chance is None and v.chance is None


def test_a_per_group_calibration_is_refused_in_one_line(world, tmp_path, capsys):
    kb, rules, known_a, ev, t = world
    neg = {"exact": np.full(40, -math.inf)}
    old = calibrate(neg, ["family"] * 20 + ["biography"] * 20, {"exact": np.full(4, 9.0)}, ["family", "biography"] * 2)
    f = tmp_path / "old.json"
    f.write_text(json.dumps(old.to_json()))
    with pytest.raises(CalibrationError, match="no raw false-positive rates per relation"):
        chance_rates(f, "exact")
    kb_file = deepunlearn.save_kb(kb, tmp_path / "kb.json")
    rc = main(["evaluate", "--original", str(tmp_path / "none"), "--unlearned", str(tmp_path / "none"), "--kb",
               str(kb_file), "--target", str(t), "--mode", "exact", "--calibration", str(f)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "--calibration" in err and str(f) in err


def test_evaluate_prints_and_stores_p_chance(world, five_people_kb, five_people_model_dir, tmp_path, capsys):
    """A judged against itself keeps the target: with every relation at FPR 1 the verdict is not
    established; the JSON, the manifest lines and evaluate-report carry p_chance."""
    from deepunlearn.probe import load_model, probe

    kb = five_people_kb
    known = probe(load_model(five_people_model_dir, device="cpu"), kb, progress=False).known_ids()
    t = next(i for i in range(len(kb.facts)) if i in known)
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(make_calibration(kb, {f[1]: 1.0 for f in kb.facts}).to_json()))
    kb_file = deepunlearn.save_kb(kb, tmp_path / "kb.json")
    args = ["evaluate", "--original", str(five_people_model_dir), "--kb", str(kb_file), "--device", "cpu",
            "--cache-dir", str(tmp_path / "cache"), "--calibration", str(cal)]
    assert main([*args, "--unlearned", str(five_people_model_dir), "--target", str(t)]) == 0
    out, err = capsys.readouterr()
    assert "deep: not established (p_chance 1.00 >= 0.05)" in out
    assert "was measured on forms 'all'" in err  # the verdicts probe the default forms
    from deepunlearn.unlearn.evaluate import evaluate

    v = evaluate(five_people_model_dir, five_people_model_dir, kb_file, t, chance_calibration=cal, device="cpu",
                 cache_dir=tmp_path / "cache", progress=False)  # the Python API takes the same file
    assert v.p_chance == 1.0 and not v.chance["established"]
    man = tmp_path / "m.csv"
    man.write_text(f"checkpoint,target\n{five_people_model_dir},{t}\n")
    assert main([*args, "--manifest", str(man), "-o", str(tmp_path / "v.jsonl"), "--json"]) == 0
    capsys.readouterr()
    line = json.loads((tmp_path / "v.jsonl").read_text().splitlines()[0])
    assert line["p_chance"] == 1.0 and line["p_chance_method"] == "exact" and line["chance"]["calibration"] == str(cal)
    from deepunlearn.bench.store import ResultsStore

    assert main(["evaluate-report", str(tmp_path / "v.jsonl"), "-o", str(tmp_path / "res"), "--json"]) == 0
    capsys.readouterr()
    with ResultsStore(tmp_path / "res") as s:
        (p,) = s.points()
    assert p.extra["p_chance"] == 1.0 and p.extra["p_chance_method"] == "exact"
    report = (tmp_path / "res" / "report" / "report.md").read_text()
    assert "### Could chance explain it?" in report
    summary = json.loads((tmp_path / "res" / "report" / "summary.json").read_text())
    assert [(r["not_deep"], r["established"], r["not_established"]) for r in summary["chance"]] == [(1, 0, 1)]


def test_unlearn_reports_the_targets_p_chance(five_people_kb, five_people_model_dir, tmp_path, capsys):
    """unlearn --calibration: the target's p_chance beside its table (rates 0 everywhere: 0)."""
    kb = five_people_kb
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(make_calibration(kb, {}).to_json()))
    kb_file = deepunlearn.save_kb(kb, tmp_path / "kb.json")
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(five_people_model_dir, device="cpu"), kb, progress=False).known_ids()
    t = next(i for i in range(len(kb.facts)) if i in known)
    args = ["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga",
            "--target", str(t), "--grid", "1", "--device", "cpu", "--cache-dir", str(tmp_path / "cache"),
            "--calibration", str(cal)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "p_chance 0: a model answering the target's facts only by chance is judged not deep with probability 0.00" in out
    assert "may be chance" not in out
    assert main([*args[:-2], "--target", f"{t},{t + 1}", "--calibration", str(cal)]) == 1
    assert "--calibration: p_chance is reported per target" in capsys.readouterr().err
