"""What the forgetting checks (:mod:`~deepunlearn.unlearn.checks`) are asked to do, and what they
read of the model they check.

:class:`CheckSpec` is the configuration: the adversarial aggregate on or off, its modes and
calibration, the attacks. It is checked when a runner is made, before any work, from the
options alone (the primary probe mode decides which modes join the aggregate).

:class:`CheckModel` is the model being checked, as the checks see it: the bundle and its KB, the
rules' evaluator, K, the run's seed and forms, and three questions (encode facts for training,
the chosen minimal set of a target, the facts of K answered now).
:meth:`~deepunlearn.unlearn.loop.TargetRunner.check_model` builds it at the moment the checks
run; ``evaluate`` builds one for the adversarial aggregate alone (bundle, KB, evaluator, probe
batch), and tests build one from scripted parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .methods import UnlearnError


def _attack_params(attacks: Any):
    if attacks is None:
        return None
    from .attacks import AttackParams

    if isinstance(attacks, AttackParams):
        return attacks if attacks.enabled() else None
    if not isinstance(attacks, dict):
        raise UnlearnError(f"attacks: expected AttackParams or a dict of its fields, got {type(attacks).__name__}",
                           field="attacks")
    from pydantic import ValidationError

    try:
        params = AttackParams(**attacks)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UnlearnError(f"attacks.{where}: {err['msg']}", field=f"attacks.{where}") from None
    return params if params.enabled() else None


def _calibration(calibration: Any):
    if calibration is None:
        return None
    from ..probe.calibration import Calibration, load_calibration

    if isinstance(calibration, Calibration):
        return calibration
    if isinstance(calibration, dict):
        return Calibration.from_json(calibration, source="adversarial_calibration")
    return load_calibration(calibration, flag="adversarial_calibration")


@dataclass(frozen=True)
class CheckSpec:
    """The checks asked for: ``adversarial`` (the aggregate of ``modes``, calibrated by
    ``calibration`` when given) and ``attacks`` (an enabled
    :class:`~deepunlearn.unlearn.attacks.AttackParams`, else ``None``). :meth:`build` checks them."""

    adversarial: bool = False
    attacks: Any = None
    #: the modes of the adversarial aggregate, in run order (the primary probe's included)
    modes: tuple[str, ...] = ()
    calibration: Any = None

    @classmethod
    def build(cls, primary: str | None, *, adversarial: bool = False, attacks: Any = None,
              modes: Sequence[str] | None = None, calibration: Any = None) -> "CheckSpec":
        """The spec of the options, for a primary probe of mode ``primary``: ``attacks`` as
        :class:`~deepunlearn.unlearn.attacks.AttackParams` or a dict of its fields, ``modes`` the
        aggregate's (the primary mode joins them), ``calibration`` a Calibration, its JSON or a
        file. A bad value is one :class:`UnlearnError` naming its option."""
        from ..probe.forms_probe import check_any_modes
        from ..probe.modes import any_modes, mode_names, probe_mode

        attacks = _attack_params(attacks)
        try:
            modes = check_any_modes(modes)
        except ValueError as e:
            raise UnlearnError(f"adversarial_modes: {e}", field="adversarial_modes") from None
        members = any_modes()
        aggregate = primary in mode_names() and probe_mode(primary).aggregate
        wanted = set(modes) | ({primary} if primary in members else set(members) if aggregate else set())
        calibration = _calibration(calibration)
        if calibration is not None and not adversarial:
            raise UnlearnError("adversarial_calibration: calibrates the adversarial aggregate: set adversarial too",
                               field="adversarial_calibration")
        return cls(bool(adversarial), attacks, tuple(m for m in members if m in wanted), calibration)

    @property
    def active(self) -> bool:
        return self.adversarial or self.attacks is not None


@dataclass(frozen=True)
class CheckModel:
    """What the checks read of the model they check. The adversarial aggregate uses ``bundle``,
    ``kb``, ``evaluator`` and ``batch_size``; the attacks also K (``known``), the run's ``seed``,
    its probe and unlearning ``forms``, and ``encode(ids)`` (the facts as a training batch),
    ``chosen_set(target)`` (its minimal set to forget) and ``known_after(model_fn)`` (the facts
    of K answered now)."""

    bundle: Any
    kb: Any
    evaluator: Any
    batch_size: Any = None
    known: frozenset[int] = frozenset()
    seed: int | None = 0
    forms: str | None = None
    unlearn_forms: str | None = None
    encode: Callable[[Sequence[int]], dict] | None = None
    chosen_set: Callable[..., list[int]] | None = None
    known_after: Callable[..., set[int]] | None = None
