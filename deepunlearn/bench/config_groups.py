"""The runner options of a sweep file, in the groups ``TargetRunner`` takes
(:mod:`deepunlearn.unlearn.runner_options`): a table per group, its keys the group's fields::

    [probing]                  # ProbeOptions
    mode = "generate"
    k_mode = "dataset"
    forms = "test"
    batch_size = 32

    [minimal_sets]             # SetOptions
    sets = "mdus"
    seeds = 100
    tie = "first"

    [training]                 # TrainOptions (the learning rate is each model's: [[models]] lr)
    lora = true
    unlearn_forms = "st1"

    [measures]                 # MeasureOptions
    scores = true
    accuracy = "sampled"

    [checks]                   # CheckOptions
    adversarial = true
    modes = ["exact", "rank"]
    [checks.attacks]
    relearn = [2, 4]

The older flat keys (``probe_mode``, ``k_mode``, ``mdus_seeds``, ``adversarial_modes``, ...
at the top level) are still read; each prints a one-line note naming its place in a group.
A sweep writes its configuration back (``config.yaml``, the store) with the flat keys.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..unlearn.runner_options import FLAT, GROUPS

#: the flat keywords a sweep spells otherwise (the MDUS seed count is ``mdus_seeds`` there)
_SWEEP_NAME = {"seeds": "mdus_seeds"}
#: runner options a sweep file does not set in a group: the cache root and the retrain cache are
#: folders of the sweep, the rate is each model's, the others are not sweep options
_NOT_IN_GROUPS = {"cache_dir", "lr", "lora_params", "snapshot_device", "retrain_cache"}

#: group table -> {its key (the group's field) -> the sweep's flat field}
SECTIONS: dict[str, dict[str, str]] = {
    group: {f: _SWEEP_NAME.get(k, k) for k, (g, f) in FLAT.items() if g == group and k not in _NOT_IN_GROUPS}
    for group in GROUPS
}
#: the sweep's flat field -> (group table, key)
PLACES: dict[str, tuple[str, str]] = {flat: (g, key) for g, keys in SECTIONS.items() for key, flat in keys.items()}


def ungroup(data: dict[str, Any], source: str, fail: Callable[[str, str], Exception],
            note: Callable[[str], None] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """``data`` with its group tables spelled out as the flat fields of
    :class:`~.config.SweepConfig`, and ``{flat field: "group.key"}`` for the keys given in a group
    (to name them so in errors). A flat key prints ``note: SOURCE: KEY is read as [GROUP] FIELD``
    (``note``: where to; default stderr); ``fail(field, message)`` makes the error of a group that
    is not a table, an unknown key in one, or an option given twice.

    >>> flat, where = ungroup({"probing": {"mode": "rank"}, "k_mode": "dataset"}, "s.toml", ValueError, print)
    note: s.toml: k_mode is read as [probing] k_mode
    >>> flat, where
    ({'k_mode': 'dataset', 'probe_mode': 'rank'}, {'probe_mode': 'probing.mode'})
    """
    note = note or (lambda line: print(line, file=sys.stderr))
    out = {k: v for k, v in data.items() if k not in SECTIONS}
    where: dict[str, str] = {}
    for key in out:
        if key in PLACES:
            group, field = PLACES[key]
            note(f"note: {source}: {key} is read as [{group}] {field}")
    for group, keys in SECTIONS.items():
        if group not in data:
            continue
        table = data[group]
        if not isinstance(table, dict):
            raise fail(group, f"[{group}] is a table of options ({', '.join(keys)}), got {type(table).__name__}")
        for key, value in table.items():
            if key not in keys:
                raise fail(f"{group}.{key}", f"unknown option {key!r} of [{group}]; expected one of: {', '.join(keys)}")
            flat = keys[key]
            if flat in out:
                raise fail(f"{group}.{key}", f"given twice, as [{group}] {key} and as {flat}: give it once")
            out[flat], where[flat] = value, f"{group}.{key}"
    return out, where


def grouped_field(message: str, field: str | None, where: dict[str, str]) -> tuple[str, str | None]:
    """An error's message and field with the field as the file spells it: ``probe_mode`` ->
    ``probing.mode`` when it was given in [probing] (a sub-field keeps its tail:
    ``attacks.relearn`` -> ``checks.attacks.relearn``).

    >>> grouped_field("field attacks.relearn: bad", "attacks.relearn", {"attacks": "checks.attacks"})
    ('field checks.attacks.relearn: bad', 'checks.attacks.relearn')
    """
    head, _, tail = (field or "").partition(".")
    if head not in where:
        return message, field
    spelled = where[head] + (f".{tail}" if tail else "")
    return message.replace(f"field {field}", f"field {spelled}", 1), spelled
