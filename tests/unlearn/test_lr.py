"""The learning-rate rule (deepunlearn.unlearn.lr): an explicit rate is the rate a method runs at,
untouched by the rule's factors (paper ratio, from scratch, LoRA) and by a method's own
multiplier (du_loop's lr_scale, the RMU base factor), which scale only the rule's rate."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from deepunlearn.unlearn.lr import choose_lr, runner_lr
from deepunlearn.unlearn.methods import get_method
from deepunlearn.unlearn.methods.du import BASE_LR_FACTOR

TINY = {"origin": "tiny", "training": {"lr": 1e-3}}


def _rate(method, lr=None, meta=TINY, lora=False):
    return choose_lr(method, meta=meta, n_params=10, lr=lr, lora=lora)


def test_an_explicit_rate_is_taken_as_given_by_a_method_without_multiplier():
    for name in ("ga", "npo", "tv", "whp", "rmu"):
        got = _rate(get_method(name)(), lr=3e-4, lora=True)
        assert (got.value, got.source) == (3e-4, "given"), name


@pytest.mark.parametrize("method, params, multiplier", [
    ("du_loop", {}, 0.5),
    ("du_loop", {"lr_scale": 2.0}, 2.0),
    ("du_loop", {"base": "rmu"}, 0.5 * BASE_LR_FACTOR["rmu"]),
    ("du_oracle", {}, 1.0),
    ("du_oracle", {"base": "rmu"}, BASE_LR_FACTOR["rmu"]),
])
def test_a_rule_aware_method_multiplies_the_rules_rate_not_an_explicit_one(method, params, multiplier):
    u = get_method(method)(None, **params)
    assert u.lr_multiplier == multiplier
    given = _rate(u, lr=1e-4)
    assert (given.value, given.source) == (1e-4, "given")
    base = get_method(u.params.base)
    ruled = _rate(u)
    assert ruled.source == "checkpoint"
    assert ruled.value == pytest.approx(base.paper_lr_ratio * 1e-3 * 0.1 * multiplier, rel=1e-12)
    paper = _rate(u, meta={})
    assert paper.value == pytest.approx(base.paper_lr * multiplier, rel=1e-12)


def test_the_rates_without_an_explicit_one_are_the_rules_as_before():
    """du_loop on its NPO base at half NPO's rate, du_oracle on RMU at 16x RMU's: exact values."""
    assert _rate(get_method("du_loop")()).value == 1e-4
    assert _rate(get_method("du_oracle")(None, base="rmu")).value == 0.004
    assert _rate(get_method("npo")()).value == 2e-4
    assert _rate(get_method("du_loop")(), meta={}).value == 2e-5


def _runner(lr):
    return SimpleNamespace(lr=lr, lora=False, bundle=SimpleNamespace(model=torch.nn.Linear(2, 2), meta=TINY))


def test_a_run_takes_the_methods_own_rate_else_the_runs_as_given():
    loop = get_method("du_loop")
    assert runner_lr(_runner(1e-3), loop()) == 1e-3  # --lr / [[models]] lr
    assert runner_lr(_runner(1e-3), loop(None, lr=2e-3)) == 2e-3  # [params] lr wins over the run's
    assert runner_lr(_runner(None), loop()) == 1e-4  # the rule
    assert runner_lr(_runner(1e-3), get_method("ga")()) == 1e-3


def test_a_bad_explicit_rate_is_refused():
    with pytest.raises(ValueError, match="positive"):
        _rate(get_method("ga"), lr=0.0)


def test_every_description_of_an_explicit_rate_says_it_is_used_as_given():
    """The flag, the per-method field, the runner option and du_loop's lr_scale say the same rule."""
    import deepunlearn.unlearn.lr as lr_module
    from deepunlearn.cli import build_parser
    from deepunlearn.unlearn.methods import DULoopParams, MethodParams
    from deepunlearn.unlearn.runner_options import TrainOptions

    sub = next(a for a in build_parser()._actions if a.choices and "unlearn" in a.choices).choices["unlearn"]
    texts = {
        "--lr": next(a.help for a in sub._actions if "--lr" in a.option_strings),
        "Params.lr": MethodParams.model_fields["lr"].description,
        "TrainOptions": TrainOptions.__doc__,
        "lr_scale": DULoopParams.model_fields["lr_scale"].description,
        "lr module": lr_module.__doc__,
    }
    assert [k for k, t in texts.items() if "as given" not in t and "as it is" not in t
            and "explicit rate is the rate" not in t] == []
    assert "lr_scale" in texts["--lr"] and "lr_scale" in texts["lr module"]
    assert [k for k, t in texts.items() if "times the method's own multiplier" in t or "lr too" in t] == []
