""":func:`~deepunlearn.unlearn.evaluate.evaluate`'s options given as the groups ``TargetRunner``
takes (:mod:`.runner_options`): ``probing`` (:class:`ProbeOptions`: ``mode``, ``forms``,
``cache_dir``, ``batch_size``), ``checks`` (:class:`CheckOptions`: ``adversarial``, ``modes``,
``calibration`` and ``attacks``, whose ``relearn``, ``relearn_size``, ``relearn_lr`` and
``quantize`` are evaluate's attack keywords) and ``measures`` (:class:`MeasureOptions`:
``scores``). A group's field left at its default says nothing; one evaluate cannot take is a
TypeError, as is an option given both in a group and by its keyword.

>>> keywords(ProbeOptions(mode="rank"), CheckOptions(adversarial=True, attacks={"relearn": [2]}), None)
{'mode': 'rank', 'adversarial': True, 'relearn': [2]}
>>> keywords(ProbeOptions(k_mode="dataset"), None, None)
Traceback (most recent call last):
...
TypeError: evaluate(): probing.k_mode is not an option of evaluate() (K is the facts A answers)
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from .runner_options import CheckOptions, MeasureOptions, ProbeOptions

#: (group, field) -> evaluate()'s keyword
KEYWORDS: dict[tuple[str, str], str] = {
    ("probing", "mode"): "mode", ("probing", "forms"): "forms", ("probing", "cache_dir"): "cache_dir",
    ("probing", "batch_size"): "batch_size", ("checks", "adversarial"): "adversarial",
    ("checks", "modes"): "adversarial_modes", ("checks", "calibration"): "adversarial_calibration",
    ("measures", "scores"): "scores",
}
#: the attack settings evaluate() takes by keyword (the others of ``AttackParams`` keep their defaults)
ATTACK_KEYWORDS = ("relearn", "relearn_size", "relearn_lr", "quantize")
_WHY = {("probing", "k_mode"): " (K is the facts A answers)"}


def keywords(probing: ProbeOptions | None, checks: CheckOptions | None, measures: MeasureOptions | None) -> dict:
    """evaluate()'s keywords of the groups' fields that are set (not at their group's default)."""
    out: dict[str, Any] = {}
    for name, group in (("probing", probing), ("checks", checks), ("measures", measures)):
        if group is None:
            continue
        default = type(group)()
        for f in fields(group):
            value = getattr(group, f.name)
            if value == getattr(default, f.name):
                continue
            if (name, f.name) == ("checks", "attacks"):
                out.update(_attack_keywords(value))
            elif (name, f.name) in KEYWORDS:
                out[KEYWORDS[name, f.name]] = value
            else:
                raise TypeError(f"evaluate(): {name}.{f.name} is not an option of evaluate(){_WHY.get((name, f.name), '')}")
    return out


def _attack_keywords(attacks: Any) -> dict:
    from .attacks import AttackParams

    given = attacks.model_dump() if isinstance(attacks, AttackParams) else dict(attacks)
    default = AttackParams().model_dump()
    other = sorted(k for k, v in given.items() if k not in ATTACK_KEYWORDS and v != default.get(k, v))
    if other:
        raise TypeError(f"evaluate(): checks.attacks.{other[0]} is not an option of evaluate()")
    return {k: given[k] for k in ATTACK_KEYWORDS if k in given and given[k] != default[k]}


#: evaluate()'s own keywords that a group may also give (besides those of ``**kw``)
OWN = ("rules", "mode", "forms", "adversarial", "adversarial_modes", "adversarial_calibration", "relearn",
       "relearn_size", "relearn_lr", "quantize", "seed", "scores", "retain")


def by_keywords(evaluate, called: dict) -> dict:
    """evaluate()'s keyword arguments of a call whose ``locals()`` are ``called`` (with its groups
    ``probing``, ``checks``, ``measures`` and its ``kw``), the groups spelled as keywords; a
    keyword set both ways (not at its default in the call) is a TypeError."""
    import inspect

    given = {**{k: v for k, v in called.items() if k in OWN}, **called.get("kw", {})}
    defaults = {k: p.default for k, p in inspect.signature(evaluate).parameters.items()}
    grouped = keywords(called.get("probing"), called.get("checks"), called.get("measures"))
    twice = sorted(k for k in grouped if k in given and given[k] != defaults.get(k))
    if twice:
        raise TypeError(f"evaluate(): {twice[0]} is given twice, by keyword and in its group")
    return {**given, **grouped}
