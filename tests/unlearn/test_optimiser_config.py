"""A run's optimiser settings (deepunlearn.unlearn.lr.OptimiserConfig) apart from its state (Session):
the runner builds the config once per run, by the learning-rate rule and the protocol; the session
reads it and keeps its old attribute names working."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from deepunlearn.unlearn.lr import OptimiserConfig, choose_lr
from deepunlearn.unlearn.methods import Session


def test_the_runners_optimiser_config_is_the_rule_and_the_protocol(five_people_runner):
    r = five_people_runner
    ga, npo = r.unlearner("ga", grid=[1]), r.unlearner("npo", grid=[1], params=None)
    n = sum(p.numel() for p in r.bundle.model.parameters())
    cfg = r.optimiser(npo)
    assert cfg.lr == choose_lr(npo, meta=r.bundle.meta, n_params=n).value  # the rule's rate (no explicit one)
    pr = r.protocol
    assert (cfg.schedule, cfg.warmup_steps, cfg.weight_decay, cfg.reinforce_steps) == (
        pr.schedule, pr.warmup_steps, pr.weight_decay, pr.reinforce_steps)
    own = r.unlearner("ga", grid=[1], params=type(ga.params)(lr=3e-3, schedule="constant"))
    assert (r.optimiser(own).lr, r.optimiser(own).schedule) == (3e-3, "constant")  # the method's own settings win
    session = r.session(npo, sorted(r.known)[0])
    assert session.optimiser == cfg and session.lr == cfg.lr and session.snapshot is r.snapshot
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0


def test_a_session_takes_its_settings_by_name_or_as_a_config_and_setting_one_copies_the_config():
    model = torch.nn.Linear(2, 2)
    by_name = Session(model, {}, 1e-3, schedule="constant", warmup_steps=2)
    by_config = Session(model, {}, optimiser=OptimiserConfig(lr=1e-3, schedule="constant", warmup_steps=2))
    assert by_name.optimiser == by_config.optimiser
    first = by_name.optimiser
    by_name.lr = 5e-4
    assert by_name.optimiser == dataclasses.replace(first, lr=5e-4) and first.lr == 1e-3  # the old config is unchanged
    assert Session(model, {}, 2e-3, optimiser=first).optimiser == dataclasses.replace(first, lr=2e-3)
    with pytest.raises(TypeError, match="unknown argument 'momentum'"):
        Session(model, {}, 1e-3, momentum=0.9)
    with pytest.raises(TypeError, match="give lr or optimiser"):
        Session(model, {})
