"""The sweep options of "has it really forgotten?": probe forms, the probe modes
beyond the protocol's two, the adversarial aggregate and the attacks after unlearning.

In a sweep configuration (top level)::

    probe_mode = "exact"          # exact | generate (the protocol's) | yesno | rank | any
    forms = "test"                # the primary probe's forms (a kg.forms selection); None: today's probe
    unlearn_forms = "unlearn"     # the forms the methods unlearn on; None: the primary form
    adversarial = true            # every point also records recall_adv / accuracy_adv / superficial

    [attacks]                     # after unlearning: relearn N steps, int8 / int4 / nf4 quantisation
    relearn = [1, 2, 4, 8]
    relearn_size = 16
    relearn_on = "other"          # "split": half the target's chosen set and its other forms; "split-set": the half
    quantize = "int8"
    at = "last"                   # attack the last grid point of each trajectory, or "all"

A sweep that sets none of them runs, fingerprints and builds its ``TargetRunner`` exactly as
before (:func:`runner_probe_options` and :func:`probe_results_key` give ``{}``).

:class:`AttackOptions` mirrors ``deepunlearn.unlearn.attacks.AttackParams`` field by field, so
that loading a configuration never imports torch; the runner gets the plain dict
(``TargetRunner(attacks=dict(...))`` accepts one). A selection of forms is checked against the KB
once the KB is loaded (:func:`check_forms`, called by ``run_sweep`` before anything is written).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator, model_validator

from ..probe.modes import PROTOCOL_MODES
from ..unlearn.attack_kinds import AttackAt, QuantKind, RelearnOn, relearn_on_help
from .modelspec import StrictModel

FORMS_HELP = ("the primary probe's forms: a selection of deepunlearn.kg.forms ('default', 'all', a split "
              "train/test/unlearn or form names, comma-separated); None: the primary form, today's probe")
UNLEARN_FORMS_HELP = "the forms the methods unlearn on (a selection as for forms); None: the primary form"
ADVERSARIAL_HELP = ("every point also records recall_adv, accuracy_adv (known under any mode on any form) and "
                    "the superficial forgetting rate; recall_adv <= recall")
ATTACKS_HELP = ("attacks after unlearning ([attacks]: relearn, relearn_size, relearn_lr, relearn_on, quantize, at); "
                "None: none")


def _no_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {str(v).lower()}")
    return v


class AttackOptions(StrictModel):
    """The ``[attacks]`` table: the fields of ``unlearn.attacks.AttackParams``, checked here."""

    relearn: list[int] = Field(default_factory=list, description="relearning grid: finetuning steps N after "
                               "which the model is re-probed (sorted, distinct, each >= 1); [] = no relearning")
    relearn_size: int = Field(default=16, ge=1, description="facts sampled from the relearning pool (K minus the "
                              "target and its chosen minimal set)")
    relearn_lr: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                     description="relearning lr; None: the run's unlearning lr")
    relearn_on: RelearnOn = Field(default="other", description="what relearning trains on: " + relearn_on_help())
    quantize: QuantKind | None = Field(
        default=None, description="int8: torch dynamic quantisation of the Linear layers (CPU); int4 / nf4: 4-bit "
        "round-to-nearest, group-wise absmax (any device); None: no quantisation attack")
    at: AttackAt = Field(default="last", description="attack each trajectory's last grid point only, "
                                       "or every point")

    @field_validator("relearn", mode="before")
    @classmethod
    def _relearn_items(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, bool) or (isinstance(x, float) and not x.is_integer()):
                    raise ValueError(f"steps must be whole numbers >= 1, got {x!r}")
        return v

    @field_validator("relearn")
    @classmethod
    def _relearn(cls, v: list[int]) -> list[int]:
        bad = [x for x in v if x < 1]
        if bad:
            raise ValueError(f"steps must be >= 1, got {bad[0]}")
        if v != sorted(set(v)):
            raise ValueError(f"steps must be sorted and distinct, e.g. {sorted(set(v))}, got {v}")
        return v

    @field_validator("relearn_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return _no_bool(v)

    @field_validator("relearn_lr", mode="before")
    @classmethod
    def _lr(cls, v: Any) -> Any:
        _no_bool(v)
        if v is not None and isinstance(v, (int, float)) and not (math.isfinite(v) and v > 0):
            raise ValueError(f"expected a finite number > 0, got {v}")
        return v

    @model_validator(mode="after")
    def _something(self) -> "AttackOptions":
        if not self.relearn and self.quantize is None:
            raise ValueError("no attack asked for: give relearn = [1, 2, 4, 8] and/or "
                             "quantize = 'int8' (or leave [attacks] out)")
        return self


def runner_probe_options(cfg: Any) -> dict[str, Any]:
    """``TargetRunner`` keyword arguments of these options, only those that are set (a sweep
    without them builds its runner exactly as before)."""
    out: dict[str, Any] = {}
    if cfg.forms is not None:
        out["forms"] = cfg.forms
    if cfg.unlearn_forms is not None:
        out["unlearn_forms"] = cfg.unlearn_forms
    if cfg.adversarial:
        out["adversarial"] = True
    if cfg.adversarial_modes is not None:
        out["adversarial_modes"] = list(cfg.adversarial_modes)
    if getattr(cfg, "adversarial_calibration", None) is not None:
        from ..probe.calibration import load_calibration

        from .config_run import is_per_seed, per_seed, run_seeds

        # the thresholds themselves travel with the work (and key the results): a changed file re-runs
        path = cfg.adversarial_calibration
        if is_per_seed(path):  # one calibration per run seed's model (config_run)
            out["adversarial_calibration_by_seed"] = {str(s): load_calibration(
                per_seed(path, s), flag="adversarial_calibration").to_json() for s in run_seeds(cfg)}
        else:
            out["adversarial_calibration"] = load_calibration(path, flag="adversarial_calibration").to_json()
    if cfg.attacks is not None:
        # relearn_on = "other" is left out, so a sweep without it keeps its results key
        out["attacks"] = cfg.attacks.model_dump(exclude={"relearn_on"} if cfg.attacks.relearn_on == "other" else None)
    return out


def probe_results_key(cfg: Any) -> dict[str, Any]:
    """The part of the results key these options decide (``{}`` when none is set, so the
    fingerprint of an older sweep is unchanged); a probe mode the protocol cannot hold is here
    too (one it can is in each model's protocol already)."""
    key = runner_probe_options(cfg)
    if key.pop("adversarial_calibration_by_seed", None) is not None:
        # one file per run seed: keyed by its path pattern, so adding a seed extends the same sweep
        # (the manifest records each seed's file digest; a file changed in place is not detected)
        key["adversarial_calibration"] = cfg.adversarial_calibration
    if cfg.probe_mode is not None and cfg.probe_mode not in PROTOCOL_MODES:
        key["probe_mode"] = cfg.probe_mode
    return {"probe": key} if key else {}


def check_forms(cfg: Any, kb: Any) -> None:
    """Every forms selection of ``cfg`` names forms, splits or ``default``/``all`` of ``kb``;
    otherwise ``cfg.error`` naming the field (``field forms: 'x' is not a form of this KB ...``)."""
    from ..kg.forms import FormError, parse_selection

    for name in ("forms", "unlearn_forms"):
        spec = getattr(cfg, name)
        if spec is None:
            continue
        try:
            parse_selection(kb, spec, flag=name)
        except FormError as e:
            raise cfg.error(name, str(e).removeprefix(f"{name}: ")) from None


def check_attacks(cfg: Any) -> None:
    """What the schema cannot check about ``[attacks]``: int8 dynamic quantisation runs on CPU
    only, and batch / sequential requests are not attacked (single-target trajectories are)."""
    a = cfg.attacks
    if a is None:
        return
    if a.quantize == "int8":
        for i, m in enumerate(cfg.models):
            if m.device and str(m.device).startswith("cuda"):
                raise cfg.error("attacks.quantize", f"int8 dynamic quantisation runs on CPU, but models.{i} "
                                f"({m.name}) is on {m.device}: use quantize = 'int4' or 'nf4' on a GPU")
    if cfg.targets.batch or cfg.targets.sequential:
        raise cfg.error("attacks", "attacks run on single-target trajectories; batch and sequential requests are "
                        "not attacked: leave [attacks] out or run single targets")
