"""``deepunlearn attack``: relearning and quantisation of an unlearned checkpoint from the command
line, its JSON and text reports, and its one-line errors naming the flag (the attacks themselves:
test_unlearn_attacks.py)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.unlearn.attacks import relearn_sample


@pytest.fixture(scope="module")
def kb_file(five_people_kb, tmp_path_factory):
    from deepunlearn.kg.io import save_kb

    return save_kb(five_people_kb, tmp_path_factory.mktemp("attack-kb") / "kb.json")


@pytest.fixture(scope="module")
def unlearned_dir(five_people_model_dir, five_people_kb, tmp_path_factory):
    """The fixture model after 16 steps of GA on the KB's target, saved as a checkpoint."""
    from deepunlearn.probe import load_model
    from deepunlearn.probe.models import save_bundle
    from deepunlearn.unlearn.loop import TargetRunner

    out = tmp_path_factory.mktemp("attack-unlearned") / "ga"
    bundle = load_model(five_people_model_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, cache_dir=out.parent, progress=False)
    for p in runner.run(five_people_kb.targets[0], "ga", grid=[16]):
        assert p.target_forgotten
        save_bundle(bundle, out, {"unlearned": {"method": "ga", "param": p.param}})
    return out


def files_of(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_attack_json_with_the_original(unlearned_dir, five_people_model_dir, kb_file, five_people_kb, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    target = five_people_kb.targets[0]
    before = files_of(unlearned_dir)
    code = main(["attack", "--model", str(unlearned_dir), "--kb", str(kb_file), "--target", str(target),
                 "--original", str(five_people_model_dir), "--relearn", "1,4", "--relearn-size", "8", "--quantize", "int8",
                 "--cache-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert {"target", "recall", "accuracy", "recall_relearn", "accuracy_relearn", "recall_quant", "accuracy_quant",
            "relearn_pool", "relearn_facts", "relearn_lr", "relearn_lr_from", "seconds"} <= set(obj)
    assert obj["target"] == list(five_people_kb.facts[target]) and obj["k_mode"] == "probed"
    assert obj["target_forgotten"] is True and obj["recall"] > 0
    assert list(obj["recall_relearn"]) == ["1", "4"] and list(obj["accuracy_relearn"]) == ["1", "4"]
    for r in [obj["recall"], obj["accuracy"], obj["recall_quant"], obj["accuracy_quant"],
              *obj["recall_relearn"].values(), *obj["accuracy_relearn"].values()]:
        assert 0.0 <= r <= 1.0
    # the pool is K minus the target and its chosen set; the facts relearned are the seeded draw from it
    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False)
    pool = sorted(runner.known - {target} - set(runner.chosen_set(target)))
    assert obj["known"] == len(runner.known) and obj["relearn_pool"] == len(pool)
    assert obj["relearn_facts"] == [list(five_people_kb.facts[i]) for i in relearn_sample(pool, 8, seed=0)]
    assert obj["relearn_lr"] == pytest.approx(1e-3) and obj["relearn_lr_from"] == "checkpoint"
    assert obj["seconds"] > 0
    assert files_of(unlearned_dir) == before  # nothing written


def test_attack_without_an_attack_reports_the_verdict(unlearned_dir, kb_file, five_people_kb, tmp_path, capsys):
    """No attack flag: the unlearned model's recall, accuracy and deep, with deep checked against
    the independent naive Datalog over the facts the model still knows."""
    import sys
    from pathlib import Path

    from deepunlearn.cli import main
    from deepunlearn.probe import load_model, probe
    from deepunlearn.rules.load import load_rules

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rules"))
    from naive_datalog import naive_closure

    target = five_people_kb.targets[0]
    code = main(["attack", "--model", str(unlearned_dir), "--kb", str(kb_file), "--target", str(target),
                 "--cache-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)
    assert obj["recall_relearn"] == {} and obj["recall_quant"] is None and obj["deep_quant"] is None
    known = probe(load_model(unlearned_dir, device="cpu"), five_people_kb, progress=False).known_ids()
    rules = load_rules(five_people_kb.metadata.get("rules", "family"))
    derivable = five_people_kb.facts[target] in naive_closure([five_people_kb.facts[i] for i in known], rules,
                                                             five_people_kb.entities)
    assert obj["deep"] is (not derivable)
    assert main(["attack", "--model", str(unlearned_dir), "--kb", str(kb_file), "--target", str(target),
                 "--cache-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "deep" in text.splitlines()[1] and text.splitlines()[2].endswith("yes" if obj["deep"] else "no")


def test_attack_text_without_the_original_takes_k_as_the_kb(unlearned_dir, kb_file, five_people_kb, tmp_path,
                                                            capsys):
    from deepunlearn.cli import main

    code = main(["attack", "--model", str(unlearned_dir), "--kb", str(kb_file), "--target", "3",
                 "--relearn", "2", "--relearn-lr", "1e-4", "--cache-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"K: {len(five_people_kb)} of {len(five_people_kb)} facts, k_mode dataset" in out
    assert "relearn 2 steps" in out and "(lr 0.0001 from --relearn-lr, seed 0)" in out


@pytest.mark.parametrize("extra, field, message", [
    (["--model", "MISSING"], "--model", "--model MISSING: no such folder: MISSING"),
    (["--target", "99"], "--target", "--target '99' (KB KB): fact index 99 out of range (KB has 25 facts)"),
    (["--target", "all"], "--target", "--target 'all' (KB KB): "),
    (["--relearn", "4,2"], "--relearn", "--relearn 4,2: the relearning grid must be sorted and distinct"),
    (["--relearn", "1,x"], "--relearn", "--relearn: 'x' is not an integer"),
    (["--relearn", "0,1"], "--relearn", "--relearn 0,1: relearning step counts must be >= 1, got 0"),
    (["--original", "UNTRAINED"], "--target", "target 3 "),
])
def test_attack_errors_are_one_line_naming_the_flag(extra, field, message, unlearned_dir, kb_file, five_people_kb,
                                                    tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.probe import build_tiny_model

    args = {"--model": str(unlearned_dir), "--kb": str(kb_file), "--target": "3", "--relearn": "1"}
    missing = tmp_path / "no-such-model"
    for flag, value in zip(extra[::2], extra[1::2]):
        if value == "UNTRAINED":
            value = str(build_tiny_model(five_people_kb, tmp_path / "untrained", hidden=16, layers=1, heads=2))
        args[flag] = str(missing) if value == "MISSING" else value
    argv = ["attack", *[x for k, v in args.items() if v is not None for x in (k, v)], "--cache-dir", str(tmp_path),
            "--json"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    message = message.replace("MISSING", str(missing)).replace("KB KB", f"KB {kb_file}")
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"deepunlearn attack: error: {message}")
    obj = json.loads(out)
    assert obj["field"] == field and obj["error"].startswith(message)


def test_every_attack_flag_has_help_and_bad_choices_are_usage_errors(capsys):
    import argparse

    from deepunlearn.cli import build_parser, main

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices["attack"]
    assert [a.option_strings for a in p._actions if a.option_strings and not a.help] == []
    with pytest.raises(SystemExit) as e:
        main(["attack", "--model", "m", "--kb", "k", "--target", "0", "--quantize", "int3", "--json"])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert "argument --quantize: invalid choice: 'int3'" in json.loads(out)["error"] and "--quantize" in err
