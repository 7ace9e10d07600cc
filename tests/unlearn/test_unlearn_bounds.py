"""Numbers that would run for days on the unlearn side, and cache folders that are files:
``unlearn --grid 1000000000000`` (exit 2, a flag's value), ``attack --relearn 1000000000`` and
``--cache-dir FILE`` (exit 1) are one line naming the flag before any model loads; ``DEEPUNLEARN_ALLOW_LARGE=1`` lifts
the step bound."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main
from deepunlearn.limits import ALLOW_LARGE_ENV, MAX_STEPS
from deepunlearn.unlearn.attacks import AttackParams, check_steps
from deepunlearn.unlearn.methods import GradientAscent, UnlearnError

BOUND = (f"is more than the bound of 100,000 steps (it would run for days or exhaust memory); "
         f"set {ALLOW_LARGE_ENV}=1 to lift it")


@pytest.fixture
def kb_file(tmp_path):
    from deepunlearn.kg.io import save_kb
    from deepunlearn.kg.kb import KnowledgeBase

    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "child", "Bob"), ("Bob", "parent", "Ann")], name="mini")
    return save_kb(kb, tmp_path / "kb.json")


@pytest.fixture
def no_model_load(monkeypatch):
    """Any attempt to load a model fails the test: the checks must come first."""
    import deepunlearn.probe.cli.probe as pcli

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(pcli, "load_for_cli", boom)
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)


def _line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("method", ["ga", "npo"])
def test_unlearn_grid_past_the_step_bound_is_refused(kb_file, no_model_load, capsys, method):
    with pytest.raises(SystemExit) as e:  # a flag's value: bad usage, exit code 2
        main(["unlearn", "--model", "nowhere", "--kb", str(kb_file), "--target", "0", "--method", method,
              "--grid", "1,1000000000000"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"deepunlearn unlearn: error: --grid 1,1000000000000: {method}: grid value: 1,000,000,000,000 steps {BOUND}")


def test_attack_relearn_past_the_step_bound_is_refused(kb_file, no_model_load, capsys):
    rc = main(["attack", "--model", "nowhere", "--kb", str(kb_file), "--target", "0", "--relearn", "1,1000000000",
               "--json"])
    assert rc == 1
    cap = capsys.readouterr()
    line = f"--relearn 1,1000000000: relearning step count: 1,000,000,000 steps {BOUND}"
    assert cap.err == f"deepunlearn attack: error: {line}\n"
    assert json.loads(cap.out) == {"error": line, "file": None, "field": "--relearn"}


def test_the_step_bound_applies_to_the_library_and_is_lifted_by_the_environment(monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)
    with pytest.raises(UnlearnError, match="bound of 100,000 steps"):
        GradientAscent().check_grid([1, MAX_STEPS + 1])
    with pytest.raises(UnlearnError, match="bound of 100,000 steps"):
        check_steps([1, 10**9])
    with pytest.raises(ValueError, match="bound of 100,000 steps"):
        AttackParams(relearn=[10**9])
    assert GradientAscent().check_grid([MAX_STEPS]) == [MAX_STEPS]
    monkeypatch.setenv(ALLOW_LARGE_ENV, "1")
    assert GradientAscent().check_grid([1, 10**12]) == [1, 10**12]
    assert AttackParams(relearn=[10**9]).relearn == [10**9]


@pytest.mark.parametrize("command", ["attack", "unlearn"])
def test_cache_dir_that_is_a_file_is_one_line_naming_the_flag(kb_file, no_model_load, capsys, tmp_path, command):
    f = tmp_path / "small.json"
    f.write_text("{}")
    extra = ["--relearn", "1"] if command == "attack" else ["--method", "ga", "--grid", "1"]
    rc = main([command, "--model", "nowhere", "--kb", str(kb_file), "--target", "0", *extra, "--cache-dir", str(f)])
    assert rc == 1
    assert _line(capsys) == f"deepunlearn {command}: error: --cache-dir {f}: is a file, expected a folder"
