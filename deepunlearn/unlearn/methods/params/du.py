"""The parameters of the rule-aware methods, du_oracle and du_loop
(:mod:`deepunlearn.unlearn.methods.du` describes them). Torch-free."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...attack_kinds import SPLIT_ON
from .. import catalog
from . import MethodParams, spec_grid

#: base losses a rule-aware method can use (the catalogue's ``base`` methods)
BASES = catalog.bases()


class DUParams(MethodParams):
    grid: list[float] = spec_grid("du_oracle")
    base: Literal[BASES] = Field("npo", description="the base forget loss")  # type: ignore[valid-type]
    choice: Literal["fewest", "mincut"] = Field("fewest", description="which minimal set to forget")
    watch: Literal["primary", "adversarial"] = Field(
        "primary", description="what decides that a watched fact is forgotten: the run's primary probe, or "
        "also the adversarial aggregate (every form, every mode; calibrated when the run has a calibration); "
        "du_loop stops on it, du_oracle records it at each grid point (deep_adversarial)")
    watch_forms: str = Field(
        "train", description="with watch=adversarial: the forms (a forms selection) the method unlearns on; a "
        "fact without any keeps its primary question")


class DULoopParams(DUParams):
    """Step budgets 4 to 128; a probe of the watched facts after every step (``round_steps``) at
    half the base's rate (``lr_scale``); a constant rate after the protocol's warm-up
    (``schedule``; ``--param schedule=linear`` gives the protocol's decay back). Once deep, a
    margin of twice the steps so far (``overshoot``) whose steps look ahead against split-set
    relearning on linked halves (``lookahead``, ``tamper_on``, ``tamper_halves``:
    :mod:`.du_tamper`) and take GA's loss after an NPO base (``margin_base``), then up to 32
    healing steps, 32 more while a sample of K has lost more than 8 % (``heal``, ``heal_more``,
    ``heal_floor``: :mod:`.du_heal`). ``--param overshoot=1 --param lookahead=off`` gives the
    plainer margin, ``overshoot=0 heal=0`` the plain loop.

    Why these defaults, with the cases they were chosen and measured on: docs/unlearning.md
    ("Rule-aware methods") and docs/results.md."""

    grid: list[float] = spec_grid("du_loop")
    schedule: Literal["linear", "constant"] | None = Field(
        "constant", description="lr schedule; du_loop's default is constant (None: the protocol's)")
    round_steps: int = Field(1, ge=1, description="optimiser steps between two probes of the watched facts")
    lr_scale: float = Field(0.5, gt=0, description="the learning rate is the base's by the rule times this; an "
                            "explicit lr is used as given (deepunlearn.unlearn.lr)")
    overshoot: float = Field(
        2.0, ge=0, description="once every target is out of the closure after s steps, go on unlearning the "
        "targets and their last chosen sets for ceil(overshoot * s) more steps (within the budget) before "
        "stopping: a margin past the deep point; 0 stops at the deep point")
    guard: int = Field(
        0, ge=0, description="step guard: probe this many facts of K outside every minimal set after each step "
        "and undo a step that forgets too many of them (0: off; methods/du_guard.py)")
    guard_drop: float = Field(
        0.05, ge=0, le=1, description="with guard: the largest share of what the guard sample knew that one step "
        "may forget; a step that forgets more is undone (weights and AdamW state) and the rate halved")
    guard_min_scale: float = Field(
        0.125, gt=0, le=1, description="with guard: the smallest rate factor; a step that would need a smaller "
        "one is kept as it is (guard_forced)")
    heal: int = Field(
        32, ge=0, description="healing: once every target is deep, at most this many finetuning steps on facts "
        "outside every chosen set win back collateral, probing as they go (0: off; methods/du_heal.py)")
    heal_every: int = Field(8, ge=1, description="with heal: healing steps between two probes")
    heal_more: int = Field(
        32, ge=0, description="with heal: healing steps past heal while the sample knows less than heal_floor of "
        "what it knew before the run (0: stop at heal)")
    heal_floor: float = Field(
        0.92, ge=0, le=1, description="with heal_more: the share of the sample's original knowledge below which "
        "healing goes on past heal")
    heal_batch: int = Field(8, ge=1, description="with heal: facts per healing step")
    heal_sample: int = Field(64, ge=1, description="with heal: facts of the sample whose recovery ends healing")
    heal_tolerance: float = Field(
        0.02, ge=0, le=1, description="with heal: the share of the sample's original knowledge healing may leave "
        "lost")
    tamper: int = Field(
        0, ge=0, description="tamper phase: once deep, past the margin and healed, at most this many meta-unlearning "
        "steps, each at the weights a simulated split relearning attack leaves, until the targets stay deep "
        "under the simulated attack (0: off; methods/du_tamper.py)")
    tamper_steps: int = Field(8, ge=1, description="with tamper: steps of the simulated relearning attack")
    tamper_splits: int = Field(
        4, ge=1, description="with tamper: simulated attacks per check: every half of the chosen set when a "
        "target has at most this many, else this many halves drawn at random")
    tamper_lr_scale: float = Field(
        1.0, gt=0, description="with tamper: the simulated attack's rate is the run's rate times this")
    tamper_every: int = Field(
        1, ge=1, description="with tamper: meta steps on one simulation's gradients before the next probe and check")
    margin_base: Literal[BASES + ("auto",)] | None = Field(  # type: ignore[valid-type]
        "auto", description="the forget loss of the margin's steps: 'auto' takes GA's after an NPO base (it keeps "
        "pushing where NPO's bounded loss has saturated) and the base's own after any other; None: the base")
    lookahead: Literal["off", "margin", "all"] = Field(
        "margin", description="relearning lookahead: the margin's steps ('margin'), or every unlearning step ('all'), "
        "take their gradient at the weights that sign steps of a simulated split attack (tamper_steps x the "
        "attack's rate in all) leave (methods/du_tamper.py Lookahead)")
    lookahead_depth: int = Field(
        1, ge=1, description="with lookahead: sign steps to the looked-ahead weights, each of 1/depth of the way, "
        "the relearning gradient taken again before each")
    tamper_on: Literal[SPLIT_ON] = Field(  # type: ignore[valid-type]
        "split-set", description="the split attack the tamper phase and the lookahead simulate: 'split' (a half of the "
        "chosen set and the targets' other forms) or 'split-set' (the half alone; attacks.relearn_on's kinds)")
    robust: bool = Field(
        False, description="deep with a spare: a target counts as deep only once it would stay out of the closure "
        "if any one forgotten fact of its minimal sets came back (where some minimal set avoids that fact; the loop "
        "forgets that set too), against relearning that brings back one held-out member of the set")
    tamper_halves: Literal["random", "linked"] = Field(
        "linked", description="with tamper or lookahead: the halves of the simulated attacks: 'random' draws, or "
        "'linked' (of 64 draws, those that relearn the most facts from which the rules derive a held-out one)")
    tamper_every_half: bool = Field(
        True, description="with tamper: after a meta step simulate every half again (false: first only the "
        "halves that brought a target back, the others once those hold)")
