"""Has it really forgotten? Forms in finetuning and unlearning, the adversarial aggregate and the
attacks at grid points, on a 5-person EDU-RELAT KB with a one-layer model trained on four forms
per fact: recall_adv <= recall at every point, the superficial rate counts what it says, the
attacks run where asked and leave the weights bit for bit as they were."""

from __future__ import annotations

import json

import pytest
import torch

from deepunlearn.kg.forms import select_forms
from deepunlearn.unlearn import TargetRunner

TRAIN = "primary,st1,yes1,no1"


@pytest.fixture(scope="module")
def model_dir(five_people_kb, tmp_path_factory):
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = tmp_path_factory.mktemp("checks") / "model"
    build_tiny_model(five_people_kb, d, seed=0, hidden=64, layers=1, heads=4)
    res = finetune(load_model(d, device="cpu"), five_people_kb, FinetuneConfig.tiny(epochs=60, batch_size=8),
                   out_dir=d, progress=False, forms=TRAIN)
    assert res.share >= 0.9, res
    return d


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_finetuning_on_forms_trains_one_example_per_selected_form(model_dir, five_people_kb):
    meta = json.loads((model_dir / "deepunlearn.json").read_text())
    sel = select_forms(five_people_kb, TRAIN)
    assert meta["forms"] == TRAIN
    assert meta["trained"]["examples_per_epoch"] == sum(len(v) for v in sel.forms.values())
    assert meta["trained"]["examples_per_epoch"] > 3 * len(five_people_kb)


def test_unlearn_forms_give_one_forget_row_per_form(model_dir, five_people_kb, tmp_path):
    from deepunlearn.probe import load_model

    runner = TargetRunner(load_model(model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path, progress=False,
                          unlearn_forms="primary,st1")
    t = sorted(runner.known)[0]
    u = runner.unlearner("ga", grid=[1])
    assert runner.session(u, t).batch["input_ids"].shape[0] == 2
    plain = TargetRunner(runner.bundle, five_people_kb, cache_dir=tmp_path, progress=False)
    assert plain.session(u, t).batch["input_ids"].shape[0] == 1


def test_adversarial_recall_never_exceeds_recall_and_attacks_restore_the_weights(model_dir, five_people_kb,
                                                                                 tmp_path):
    from deepunlearn.probe import load_model

    bundle = load_model(model_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False, lr=3e-3, adversarial=True,
                          attacks={"relearn": [1, 2], "quantize": "int8", "relearn_lr": 1e-3})
    # the aggregate holds the primary probe: on the trained model it knows every fact of K
    assert runner.checks.adversarial_known(sorted(runner.known)) == set(runner.known)
    t = next(t for t in sorted(runner.known) if len(runner.chosen_set(t)) > 1)
    before = _state(bundle.model)
    points = list(runner.run(t, "ga", grid=[1, 4, 16], seed=0))
    assert any(p.forgotten for p in points)
    for p in points:
        n_sup, n_forgot = p.notes["superficial_n"]
        assert n_forgot == len(p.forgotten) and 0 <= n_sup <= n_forgot
        assert p.notes["superficial"] == (n_sup / n_forgot if n_forgot else None)
        assert p.notes["recall_adv"] <= p.recall + 1e-12
        assert p.notes["accuracy_adv"] >= p.accuracy - 1e-12
    *early, last = points
    assert all("recall_relearn" not in p.notes and "recall_quant" not in p.notes for p in early)
    assert set(last.notes["recall_relearn"]) == {"1", "2"} and 0 <= last.notes["recall_quant"] <= 1
    assert last.notes["relearn_lr"] == 1e-3
    after = _state(bundle.model)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_attack_options_are_checked_before_any_work(model_dir, five_people_kb, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.methods import UnlearnError

    with pytest.raises(UnlearnError, match="attacks.quantize"):
        TargetRunner(load_model(model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path, progress=False,
                     attacks={"quantize": "int3"})


def test_adversarial_modes_always_hold_the_primary_mode(model_dir, five_people_kb, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.methods import UnlearnError

    bundle = load_model(model_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False, adversarial=True,
                          adversarial_modes=["yesno"])
    assert runner.checks.modes == ("exact", "yesno")  # the primary probe (exact) joins in, in run order
    assert TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False, adversarial=True,
                        probe_mode="generate", adversarial_modes=["rank"]).checks.modes == ("rank", "generate")
    with pytest.raises(UnlearnError, match="adversarial_modes"):
        TargetRunner(bundle, five_people_kb, cache_dir=tmp_path, progress=False, adversarial=True,
                     adversarial_modes=["loud"])


def test_npo_based_du_loop_unlearns_several_forms_per_fact(model_dir, five_people_kb, tmp_path):
    """NPO keeps one reference per (fact, form) row, so du_loop can change its forget set mid-run
    when every fact has several rows (a bug: the references were kept per fact)."""
    from deepunlearn.probe import load_model

    runner = TargetRunner(load_model(model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path, progress=False,
                          unlearn_forms="primary,st1", lr=3e-3)
    t = next(t for t in sorted(runner.known) if len(runner.chosen_set(t)) > 1)
    session = runner.session(runner.unlearner("npo", grid=[1]), t, forget=runner.chosen_set(t))
    assert session.rows() == [(i, name) for i in runner.chosen_set(t) for name in ("primary", "st1")]
    points = list(runner.run(t, "du_loop", grid=[4, 16], seed=0))
    assert [p.param for p in points] == [4, 16]
    assert all(p.notes["sets_tried"] for p in points)


def test_unlearn_cli_runs_the_checks_and_names_bad_flags(model_dir, five_people_kb, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb_file = tmp_path / "kb.json"
    save_kb(five_people_kb, kb_file)
    base = ["unlearn", "--model", str(model_dir), "--kb", str(kb_file), "--method", "ga", "--grid", "1,8",
            "--cache-dir", str(tmp_path / "cache"), "--lr", "3e-3"]
    target = next(str(t) for t in five_people_kb.targets)
    assert main(base + ["--target", target, "--adversarial", "--relearn", "1,2", "--quantize", "int8",
                        "--probe-forms", "primary,st1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first, last = out["points"]
    assert first["recall_adv"] <= first["recall"] and last["recall_adv"] <= last["recall"]
    assert "recall_relearn" not in first and set(last["recall_relearn"]) == {"1", "2"}
    assert 0 <= last["recall_quant"] <= 1
    for flags, field, msg in ((["--relearn", "2,1"], "--relearn", "sorted"),
                              (["--probe-forms", "qa9"], "--probe-forms", "not a form"),
                              (["--adversarial-modes", "exact"], "--adversarial-modes", "give --adversarial")):
        assert main(base + ["--target", target, *flags, "--json"]) == 1
        captured = capsys.readouterr()
        err = json.loads(captured.out)
        assert err["field"] == field and msg in err["error"], err
        assert len(captured.err.strip().splitlines()) == 1
