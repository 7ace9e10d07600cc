"""The unlearn layer's input checks: grid and parameter values are checked before a
model is loaded (NaN, infinities, negative alpha, non-integer steps), with errors naming the flag
and the bad value; ``parse_grid`` never raises anything but a user error (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepunlearn.cli import main
from deepunlearn.errors import UserError
from deepunlearn.unlearn.methods import METHODS, NPO, GradientAscent, TaskVector, UnlearnError, WhoIsHarryPotter
from deepunlearn.unlearn.cli.unlearn import parse_grid


@pytest.mark.parametrize("cls,grid,msg", [
    (GradientAscent, [float("inf")], "finite"),
    (NPO, [float("nan")], "finite"),
    (GradientAscent, [0], "positive integers"),
    (NPO, [-2], "positive integers"),
    (TaskVector, [float("nan")], "finite"),
    (TaskVector, [-1.0], "alpha values must be >= 0"),
    (WhoIsHarryPotter, [10, -0.5], "alpha values must be >= 0"),
    (WhoIsHarryPotter, [float("inf")], "finite"),
])
def test_bad_grids_are_unlearn_errors(cls, grid, msg):
    with pytest.raises(UnlearnError, match=msg) as e:
        cls(grid=grid)
    assert e.value.field == "grid"


def test_bad_params_are_unlearn_errors_not_pydantic_errors():
    with pytest.raises(UnlearnError, match=r"npo: beta: .*greater than 0 \(got -1\)"):
        NPO(beta=-1)
    with pytest.raises(UnlearnError, match="lr: .*finite number"):
        GradientAscent(lr=float("inf"))
    assert TaskVector(grid=[0.0, 1.0]).params.grid == [0.0, 1.0]  # alpha 0: the unchanged model, allowed


def test_parse_grid_refuses_non_finite_values_naming_the_flag():
    assert parse_grid("1, 2,4e1") == [1.0, 2.0, 40.0]
    for text, bad in (("1,inf", "'inf'"), ("nan", "'nan'"), ("1e999", "'1e999'")):
        with pytest.raises(UserError, match=f"--grid: {bad} is not a finite number") as e:
            parse_grid(text)
        assert e.value.field == "--grid"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_parse_grid_gives_a_grid_or_a_user_error(text):
    try:
        grid = parse_grid(text)
    except UserError:
        return
    assert grid and all(isinstance(v, float) and v == v and abs(v) != float("inf") for v in grid)


@pytest.fixture
def kb_file(small_kb, tmp_path):
    from deepunlearn.kg.io import save_kb

    return save_kb(small_kb, tmp_path / "kb.json")


@pytest.fixture
def no_model_load(monkeypatch):
    """Any attempt to load a model fails the test: the checks must come first."""
    import deepunlearn.probe.cli.probe as pcli

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(pcli, "load_for_cli", boom)


@pytest.mark.parametrize("extra,line", [
    (["--method", "sgd_magic"], "deepunlearn unlearn: error: --method: unknown unlearning method 'sgd_magic'; "
                                f"expected one of {', '.join(sorted(METHODS))}"),
    (["--method", "ga", "--point", "3", "-o", "x.json", "--grid", "1,2"],
     "deepunlearn unlearn: error: --point 3: not a value of the grid (1, 2)"),
    (["--method", "whp", "--save-model", "m"],
     "deepunlearn unlearn: error: --save-model: WHP changes the output distribution, not the weights; "
     "use ga, npo, tv or another method that changes the weights, without --lora"),
])
def test_unlearn_refuses_bad_values_before_loading(kb_file, no_model_load, capsys, extra, line):
    rc = main(["unlearn", "--model", "nowhere", "--kb", str(kb_file), "--target", "0", *extra, "--json"])
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.err.strip() == line
    err = json.loads(cap.out)
    assert set(err) == {"error", "file", "field"} and err["field"] in ("--method", "--point", "--save-model")


@pytest.mark.parametrize("extra,line", [
    (["--method", "ga", "--grid", "0"],
     "deepunlearn unlearn: error: --grid 0: ga: grid values are step counts (positive integers), got [0]"),
    (["--method", "tv", "--grid=-1,1"],
     "deepunlearn unlearn: error: --grid -1,1: tv: alpha values must be >= 0 (a negative alpha reinforces the "
     "target instead of unlearning it), got [-1]"),
    (["--method", "whp", "--grid", "-5"],
     "deepunlearn unlearn: error: --grid -5: whp: alpha values must be >= 0 (a negative alpha reinforces the "
     "target instead of unlearning it), got [-5]"),
    (["--method", "ga", "--grid", "inf"], "deepunlearn unlearn: error: --grid: 'inf' is not a finite number"),
    (["--method", "tv", "--grid", "nan"], "deepunlearn unlearn: error: --grid: 'nan' is not a finite number"),
    (["--method", "ga", "--grid", "1,2.5"],
     "deepunlearn unlearn: error: --grid 1,2.5: ga: grid values are step counts (positive integers), got [2.5]"),
])
def test_a_bad_grid_is_a_usage_error_before_loading(kb_file, no_model_load, capsys, extra, line):
    """A flag's value argparse cannot check alone (docs/safety.md: exit code 2, as --epochs 0)."""
    with pytest.raises(SystemExit) as e:
        main(["unlearn", "--model", "nowhere", "--kb", str(kb_file), "--target", "0", *extra, "--json"])
    cap = capsys.readouterr()
    assert e.value.code == 2
    assert cap.err.strip().splitlines()[-1] == line
    err = json.loads(cap.out)
    assert set(err) == {"error", "file", "field"} and err["field"] == "--grid"


@pytest.mark.parametrize("flag,value", [("--lr", "nan"), ("--lr", "inf"), ("--lr", "0"), ("--lr", "-1"),
                                        ("--batch-size", "0"), ("--seeds", "0"), ("--seed", "-1"),
                                        ("--threads", "0")])
def test_unlearn_usage_errors_name_the_flag(kb_file, no_model_load, capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        main(["unlearn", "--model", "nowhere", "--kb", str(kb_file), "--target", "0", "--method", "ga",
              flag, value])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("deepunlearn unlearn: error: argument") and flag in err and repr(value) in err


def test_unlearn_target_errors_name_the_flag_and_kb_file(kb_file, no_model_load, capsys):
    rc = main(["unlearn", "--model", "nowhere", "--kb", str(kb_file), "--target", "999999", "--method", "ga"])
    assert rc == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"deepunlearn unlearn: error: --target '999999' (KB {kb_file}):")
