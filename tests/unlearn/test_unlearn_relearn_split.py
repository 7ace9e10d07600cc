"""The relearning attack's pools: ``other`` (a sample of K minus the target and its chosen set) and
``split`` (a seeded half of the chosen set and the target's other forms, the held-out half and the
target re-probed), on the 5-person EDU-RELAT fixture and its model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from deepunlearn.kg.forms import forms_of
from deepunlearn.rules import closure
from deepunlearn.unlearn.attacks import AttackParams, relearn_attack, relearn_sample
from deepunlearn.unlearn.methods import UnlearnError
from deepunlearn.unlearn.relearn_pool import (
    SplitPlan, as_before, other_pool, recovered, split_batch, split_half, split_plan, target_forms,
)


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ----------------------------------------------------------------------------------------- the pools
@pytest.mark.parametrize("n", [1, 2, 3, 7, 12])
@pytest.mark.parametrize("seed", [0, 1, 5])
def test_split_half_is_a_seeded_partition_with_at_least_one_fact(n, seed):
    target = 100
    chosen = list(range(10, 10 + n)) + [target]
    relearned, held = split_half(chosen, target, seed)
    assert set(relearned) | set(held) == set(chosen) - {target}
    assert not set(relearned) & set(held) and target not in relearned + held
    assert len(relearned) == max(1, n // 2) and relearned == sorted(relearned)
    # the draw is numpy's default_rng(seed) over the sorted set, and the same seed gives the same split
    picked = np.random.default_rng(seed).choice(n, size=max(1, n // 2), replace=False)
    assert relearned == sorted(10 + int(j) for j in picked)
    assert split_half(list(reversed(chosen)), target, seed) == (relearned, held)


def test_split_half_of_a_set_that_is_the_target_alone_is_empty():
    assert split_half([4], 4, 0) == ([], [])
    assert split_half([], 4, 0) == ([], [])


def test_other_pool_is_k_minus_the_targets_and_their_sets():
    assert other_pool(range(10), [2, 7], [[2, 3], [7, 8, 1]]) == [0, 4, 5, 6, 9]


def test_recovery_counts_only_held_out_facts_forgotten_before():
    plan = SplitPlan(9, [1, 2], [3, 4, 9])
    assert recovered(plan, before={3}, after={1, 2, 4}) == 0.5  # 4 and 9 were forgotten; 4 came back
    assert recovered(plan, before={3, 4, 9}, after=set()) is None
    assert as_before(plan, before={1, 3}, after={2, 4}) == {1, 4}  # trained facts keep their status


def test_target_forms_never_hold_a_form_with_the_primary_question(five_people_kb):
    kb = five_people_kb
    for t in range(len(kb)):
        primary = kb.probe(t).question
        forms = target_forms(kb, t)
        prompts = [f.prompt for f in forms]
        assert primary not in prompts and len(prompts) == len(set(prompts))
        assert all(f.fact_id == t and f.kind in ("qa", "statement") for f in forms)
        # every other question / statement text of the fact is there
        expect = {f.prompt for f in forms_of(kb, t) if f.kind in ("qa", "statement")} - {primary}
        assert set(prompts) == expect
    # the release's question4 repeats the primary question: it is not trained on
    t = next(i for i in range(len(kb)) if any(f.name == "question4" and f.text == kb.probe(i).question
                                             for f in forms_of(kb, i)))
    assert "question4" not in [f.name for f in target_forms(kb, t)]
    # a probe over more forms leaves those out too
    asked = target_forms(kb, t, "primary,qa1")
    assert "qa1" not in [f.name for f in asked] and len(asked) == len(target_forms(kb, t)) - 1


def test_split_plan_and_batch_on_the_fixture(five_people_runner, five_people_kb):
    r, kb = five_people_runner, five_people_kb
    t = next(t for t in sorted(r.known) if len([f for f in r.chosen_set(t) if f != t]) >= 2)
    chosen = r.chosen_set(t)
    plan = split_plan(kb, chosen, t, seed=3)
    assert plan == split_plan(kb, chosen, t, seed=3)
    assert plan.held_out[-1] == t and t not in plan.relearned
    assert not set(plan.relearned) & set(plan.held_out) and len(plan.relearned) >= 1
    assert set(plan.relearned) | set(plan.held_out) == set(chosen) | {t}
    batch = split_batch(r.bundle, kb, plan)
    assert batch["input_ids"].shape[0] == len(plan.relearned) + len(plan.forms)
    # no row of the batch is the target's primary question, nor a held-out fact's
    rows = [row[m.bool()].tolist() for row, m in zip(batch["input_ids"], batch["attention_mask"])]
    for i in plan.held_out:
        ask = r.encode([i])
        assert ask["input_ids"][0][ask["attention_mask"][0].bool()].tolist() not in rows
    for i in plan.relearned:
        ask = r.encode([i])
        assert ask["input_ids"][0][ask["attention_mask"][0].bool()].tolist() in rows


def test_split_set_plan_is_the_same_half_without_the_targets_forms(five_people_runner, five_people_kb):
    r, kb = five_people_runner, five_people_kb
    t = next(t for t in sorted(r.known) if len([f for f in r.chosen_set(t) if f != t]) >= 2)
    full = split_plan(kb, r.chosen_set(t), t, seed=3)
    half = split_plan(kb, r.chosen_set(t), t, seed=3, on="split-set")
    assert full.forms and not half.forms and (full.on, half.on) == ("split", "split-set")
    assert (half.relearned, half.held_out) == (full.relearned, full.held_out)
    batch = split_batch(r.bundle, kb, half)
    # the batch is the relearned facts' own questions, nothing of the target
    assert batch["input_ids"].shape[0] == len(half.relearned)
    def rows(b):
        return [row[m.bool()].tolist() for row, m in zip(b["input_ids"], b["attention_mask"])]

    assert rows(batch) == rows(split_batch(r.bundle, kb, full))[:len(half.relearned)]
    with pytest.raises(UnlearnError) as e:
        split_plan(kb, r.chosen_set(t), t, on="other")
    assert e.value.field == "attacks.relearn_on"


# ----------------------------------------------------------------------------------- in the runner
def _target(runner) -> int:
    return next(t for t in sorted(runner.known) if len([f for f in runner.chosen_set(t) if f != t]) >= 2)


def test_other_points_are_those_of_the_sample_of_other_facts(five_people_model_dir, five_people_kb, tmp_path):
    """Default, explicit 'other' and a reference built from the parts (K minus the target and its
    chosen set, sampled, relearned at the unlearned point) give bit-identical notes."""
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner

    def runner(**kw):
        return TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                            progress=False, lr=3e-3, **kw)

    plain = runner(attacks={"relearn": [1, 2, 4], "relearn_lr": 1e-3, "relearn_size": 4})
    t = _target(plain)
    default = [p.notes for p in plain.run(t, "ga", grid=[2, 8], seed=0)]
    other = [p.notes for p in runner(attacks={"relearn": [1, 2, 4], "relearn_lr": 1e-3, "relearn_size": 4,
                                               "relearn_on": "other"}).run(t, "ga", grid=[2, 8], seed=0)]
    strip = lambda n: {k: v for k, v in n.items() if k not in ("seconds", "check_seconds")}  # noqa: E731
    assert [strip(n) for n in default] == [strip(n) for n in other]
    assert "relearn_on" not in default[-1] and "held_out" not in default[-1]

    ref = runner()
    pool = sorted(ref.known - {t} - set(ref.chosen_set(t)))
    for p in ref.run(t, "ga", grid=[2, 8], seed=0):
        if p.param != 8:
            continue
        after = relearn_attack(ref.bundle.model, ref.encode, pool, [1, 2, 4], lr=1e-3, size=4, seed=0,
                               known=ref.known_after)
        for n, k in after.items():
            ev = ref.evaluator.evaluate(t, sorted(ref.known - k))
            assert default[-1]["recall_relearn"][str(n)] == float(ev.recall)
            assert default[-1]["accuracy_relearn"][str(n)] == float(ev.accuracy)
    assert relearn_sample(pool, 4, 0) == relearn_sample(other_pool(ref.known, [t], [ref.chosen_set(t)]), 4, 0)


def test_split_points_record_the_pool_and_recovery_on_held_out_facts(five_people_model_dir, five_people_kb,
                                                                     tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner

    bundle = load_model(five_people_model_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False, lr=3e-3,
                          attacks={"relearn": [1, 4, 16], "relearn_lr": 3e-3, "relearn_on": "split"})
    t = _target(runner)
    plan = split_plan(five_people_kb, runner.chosen_set(t), t, seed=runner.seed)
    w0 = _state(bundle.model)
    (p,) = list(runner.run(t, "ga", grid=[8], seed=0))
    assert all(torch.equal(v, bundle.model.state_dict()[k]) for k, v in w0.items())
    n = p.notes
    assert n["relearn_on"] == "split" and n["relearn_facts"] == plan.relearned and n["held_out"] == plan.held_out
    assert n["relearn_forms"] == [f.name for f in plan.forms] and "primary" not in n["relearn_forms"]
    assert set(n["recall_relearn"]) == set(n["recovered_relearn"]) == set(n["target_relearned"]) == {"1", "4", "16"}
    assert json.loads(json.dumps(n)) == n  # storable as it is
    # recovery after 16 steps, checked by hand: replay the attack at the same unlearned point
    replay = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False, lr=3e-3)
    for q in replay.run(t, "ga", grid=[8], seed=0):
        before = replay.known_after()
        assert sorted(replay.known - before) == q.forgotten == p.forgotten
        from deepunlearn.unlearn.attacks import relearn_batch

        after = relearn_batch(replay.bundle.model, lambda: split_batch(replay.bundle, five_people_kb, plan), [1, 4, 16],
                              lr=3e-3, known=replay.known_after)
    for s, k in after.items():
        lost = [f for f in plan.held_out if f not in before]
        expect = sum(f in k for f in lost) / len(lost) if lost else None
        assert n["recovered_relearn"][str(s)] == expect
        assert n["target_relearned"][str(s)] == (t in k)
        kept = (k - set(plan.relearned)) | (before & set(plan.relearned))
        assert n["recall_relearn"][str(s)] == float(runner.evaluator.evaluate(t, sorted(runner.known - kept)).recall)
        back = [f for f in lost if f in k]
        assert sorted(n["returned_relearn"][str(s)]) == sorted(str(f) for f in back)
        for f in back:  # the rules' inference from what it knows plus the relearned half, by pyDatalog
            have = (k | set(plan.relearned)) - {f}
            omega = closure(five_people_kb, "edu-relat", engine="pydatalog", known=sorted(have & runner.known))
            assert n["returned_relearn"][str(s)][str(f)] == (tuple(five_people_kb.facts[f]) in omega)
    assert any(n["returned_relearn"].values())  # a held-out fact came back: the check above checked one


def test_the_rules_derive_the_target_back_from_any_relearned_part_of_a_minimal_set(five_people_runner,
                                                                                   five_people_kb):
    """Every minimal set S of every known target, every non-empty part R of S less the target:
    pyDatalog's closure of (K minus S) plus R holds the target, which is why a model that applies
    the rules answers it again after a split attack."""
    from itertools import combinations

    r = five_people_runner
    checked = 0
    for t in sorted(r.known):
        for S in r.evaluator.minimal_sets(t).sets:
            rest = sorted(set(S) - {t})
            for k in range(1, len(rest) + 1):
                for part in combinations(rest, k):
                    have = sorted((r.known - set(S)) | set(part))
                    assert tuple(five_people_kb.facts[t]) in closure(five_people_kb, "edu-relat", engine="pydatalog",
                                                                     known=have), (t, sorted(S), part)
                    checked += 1
            assert tuple(five_people_kb.facts[t]) not in closure(five_people_kb, "edu-relat", engine="pydatalog",
                                                                 known=sorted(r.known - set(S)))
    assert checked >= 20


def test_split_set_points_train_on_the_half_alone(five_people_model_dir, five_people_kb, tmp_path):
    """The runner's split-set attack is the split attack's batch less the target's forms: replayed
    by hand at the same unlearned point, it gives the same target verdicts."""
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner
    from deepunlearn.unlearn.attacks import relearn_batch

    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False, lr=3e-3,
                          attacks={"relearn": [2, 16], "relearn_lr": 3e-3, "relearn_on": "split-set"})
    t = _target(runner)
    plan = split_plan(five_people_kb, runner.chosen_set(t), t, seed=runner.seed, on="split-set")
    (p,) = list(runner.run(t, "ga", grid=[8], seed=0))
    n = p.notes
    assert n["relearn_on"] == "split-set" and n["relearn_forms"] == [] and n["relearn_facts"] == plan.relearned
    replay = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False, lr=3e-3)
    for _ in replay.run(t, "ga", grid=[8], seed=0):
        after = relearn_batch(replay.bundle.model, lambda: split_batch(replay.bundle, five_people_kb, plan), [2, 16],
                              lr=3e-3, known=replay.known_after)
    assert n["target_relearned"] == {str(s): t in k for s, k in after.items()}


# ------------------------------------------------------------------------------------ the options
def test_relearn_on_is_checked_and_named():
    assert AttackParams().relearn_on == "other"
    with pytest.raises(ValidationError) as e:
        AttackParams(relearn=[1], relearn_on="mine")
    assert e.value.errors()[0]["loc"] == ("relearn_on",)


def test_attack_cli_relearns_on_the_split(five_people_model_dir, five_people_kb, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model
    from deepunlearn.probe.models import save_bundle
    from deepunlearn.unlearn import TargetRunner

    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    bundle = load_model(five_people_model_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False)
    t = _target(runner)
    plan = split_plan(five_people_kb, runner.chosen_set(t), t, seed=2)
    for p in runner.run(t, "ga", grid=[16]):
        save_bundle(bundle, tmp_path / "ga", {"unlearned": {"method": "ga", "param": p.param}})
    args = ["attack", "--model", str(tmp_path / "ga"), "--kb", str(kb_file), "--target", str(t), "--original",
            str(five_people_model_dir), "--relearn", "1,8", "--cache-dir", str(tmp_path), "--seed", "2"]
    assert main(args + ["--relearn-on", "split", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    facts = five_people_kb.facts
    assert obj["relearn_on"] == "split" and obj["relearn_facts"] == [list(facts[i]) for i in plan.relearned]
    assert obj["held_out"] == [list(facts[i]) for i in plan.held_out] and obj["held_out"][-1] == list(facts[t])
    assert obj["relearn_forms"] == [f.name for f in plan.forms]
    assert set(obj["recovered_relearn"]) == set(obj["target_relearned"]) == {"1", "8"}
    assert all(v is None or 0 <= v <= 1 for v in obj["recovered_relearn"].values())
    if obj["target_forgotten"] and obj["target_relearned"]["8"]:
        assert obj["recovered_relearn"]["8"] > 0
    assert main(args + ["--relearn-on", "split"]) == 0
    assert "split: relearned on" in capsys.readouterr().out
    assert main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["relearn_on"] == "other"
    assert main(args + ["--relearn-on", "split-set", "--json"]) == 0
    half = json.loads(capsys.readouterr().out)
    assert half["relearn_on"] == "split-set" and half["relearn_forms"] == []
    assert (half["relearn_facts"], half["held_out"]) == (obj["relearn_facts"], obj["held_out"])
    assert main(args + ["--relearn-on", "split-set"]) == 0
    assert "split-set: relearned on" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(args + ["--relearn-on", "half"])
    assert e.value.code == 2 and "--relearn-on: invalid choice: 'half'" in capsys.readouterr().err


def test_unlearn_cli_attacks_on_the_split_without_the_forms_it_probes(five_people_model_dir, five_people_kb, tmp_path,
                                                                      capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    t = five_people_kb.targets[0]
    assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga", "--grid",
                 "1,8", "--cache-dir", str(tmp_path / "cache"), "--lr", "3e-3", "--target", str(t), "--relearn", "1,4",
                 "--relearn-on", "split", "--probe-forms", "primary,st1", "--json"]) == 0
    first, last = json.loads(capsys.readouterr().out)["points"]
    assert "relearn_on" not in first and last["relearn_on"] == "split"
    assert last["held_out"][-1] == t and set(last["recovered_relearn"]) == {"1", "4"}
    # the forms the probe asks are not trained on: neither the primary question nor st1
    assert last["relearn_forms"] == [f.name for f in target_forms(five_people_kb, t, "primary,st1")]
    assert "st1" not in last["relearn_forms"] and "primary" not in last["relearn_forms"]
