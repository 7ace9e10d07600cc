"""How a point's fields are read, whatever holds it (a dict of a stored or JSON point, a bench
store :class:`~deepunlearn.bench.store_point.Point`, an unlearn
:class:`~deepunlearn.unlearn.points.Point`), and its accuracy per relation group.

A point's accuracy per relation group is one mapping, ``accuracy_groups`` (``{group: accuracy}``,
the KB's groups in the KB's order). The groups are the KB's domain's: each relation declares its
``group`` (``domain.toml``, :attr:`~deepunlearn.kg.kb.KnowledgeBase.groups`), so a domain with
groups of its own (``org``: ``reporting``, ``location``) gets columns of its own, named after
them. Flat, a group's accuracy is the key ``accuracy_{group}`` (:func:`group_fields`): the
family domain's are ``accuracy_family`` and ``accuracy_biography``, as they always were.

Points written before per-group accuracies (older results stores and JSON outputs) hold only
``accuracy_family`` / ``accuracy_biography``: the two groups of the family domain, which is all
such a point can come from. :func:`legacy_groups` reads them as the mapping, and
:func:`group_accuracy` / :func:`point_groups` read either layout. The same module reads a point's
``deep`` flag (:func:`is_deep`) and its wall seconds (:func:`seconds_per_target`). This module
imports nothing but the standard library.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

#: tolerance of threshold comparisons (recall 4/5 counts as >= 0.8)
EPS = 1e-9

#: the groups of points written before per-group accuracies (``accuracy_family`` / ``_biography``)
LEGACY_GROUPS: tuple[str, ...] = ("family", "biography")
#: the former name of :data:`LEGACY_GROUPS`
DEFAULT_GROUPS = LEGACY_GROUPS
#: accuracy keys of a point that are no group's (``accuracy_rule``, ``accuracy_low`` ...): a group
#: named so keeps its value in ``accuracy_groups`` only, never as a flat key
RESERVED_GROUPS: tuple[str, ...] = ("rule", "other", "low", "high", "groups")


def value_of(p: Any, key: str) -> Any:
    """``p[key]`` for a mapping (a stored point's dict), else ``p.key`` (a Point)."""
    return p[key] if isinstance(p, Mapping) else getattr(p, key)


def field_of(p: Any, key: str, default: Any = None) -> Any:
    """An optional value of a point: a dict's key (or its ``extra`` dict's), an object's
    attribute, or the key in the object's ``extra`` (bench store points) or ``notes`` (unlearn
    points) dict; ``default`` when none has it.

    >>> field_of({"deep": True}, "deep"), field_of({"extra": {"deep": False}}, "deep"), field_of({}, "deep", 0)
    (True, False, 0)
    """
    if isinstance(p, Mapping):
        if key in p:
            return p[key]
        bags = [p.get("extra")]
    else:
        if hasattr(p, key):
            return getattr(p, key)
        bags = [getattr(p, "extra", None), getattr(p, "notes", None)]
    for bag in bags:
        if isinstance(bag, Mapping) and key in bag:
            return bag[key]
    return default


def is_deep(p: Any) -> bool:
    """Whether a point is deep (its target no longer derivable from what the model still knows):
    the stored ``deep`` flag, else (stores written before the flag) ``recall >= 1 - EPS``.

    >>> is_deep({"recall": 0.5, "deep": True}), is_deep({"recall": 1.0}), is_deep({"recall": 0.99})
    (True, True, False)
    """
    d = field_of(p, "deep")
    if d is None:
        r = value_of(p, "recall")
        return r is not None and float(r) >= 1.0 - EPS
    return bool(d)


def seconds_per_target(points: Iterable[Any]) -> float:
    """The wall seconds of one trajectory per target: the largest finite ``seconds`` of its
    points, divided by the point's ``batch_size`` for a batch row; NaN when no point has it.

    >>> seconds_per_target([{"seconds": 2.0}, {"seconds": 5.0}]), seconds_per_target([{"seconds": 8.0, "batch_size": 4}])
    (5.0, 2.0)
    >>> seconds_per_target([{}])
    nan
    """
    best = math.nan
    for p in points:
        s = field_of(p, "seconds")
        if s is None or isinstance(s, bool):
            continue
        s = float(s)
        n = field_of(p, "batch_size")
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1:
            s /= float(n)
        if math.isfinite(s) and not s <= best:
            best = s
    return best


def group_key(group: str) -> str:
    """The flat key of a group's accuracy: ``accuracy_{group}``."""
    return f"accuracy_{group}"


def group_fields(groups: Mapping[str, Any] | None) -> dict[str, Any]:
    """A point's group accuracies as flat keys, in the mapping's order (none for a reserved name,
    :data:`RESERVED_GROUPS`).

    >>> group_fields({"family": 0.5, "biography": None}), group_fields({"reporting": 1.0, "rule": 0.2}), group_fields(None)
    ({'accuracy_family': 0.5, 'accuracy_biography': None}, {'accuracy_reporting': 1.0}, {})
    """
    return {group_key(g): a for g, a in (groups or {}).items() if g not in RESERVED_GROUPS}


def legacy_groups(d: Mapping[str, Any]) -> dict[str, Any] | None:
    """The group mapping of a point dict written before per-group accuracies, from its
    ``accuracy_family`` / ``accuracy_biography`` keys; None when it has neither.

    >>> legacy_groups({"accuracy_family": 0.7}), legacy_groups({"recall": 1.0})
    ({'family': 0.7, 'biography': None}, None)
    """
    if not any(group_key(g) in d for g in LEGACY_GROUPS):
        return None
    return {g: d.get(group_key(g)) for g in LEGACY_GROUPS}


def group_accuracy(p: Any, group: str) -> float | None:
    """A point's accuracy over one relation group: its ``accuracy_groups[group]`` (None when the
    point has per-group accuracies but not this group), else, for points written before
    per-group accuracies, ``accuracy_family`` / ``accuracy_biography``.

    >>> group_accuracy({"accuracy_groups": {"reporting": 0.5}}, "reporting"), group_accuracy({"accuracy_family": 0.7}, "family")
    (0.5, 0.7)
    """
    groups = field_of(p, "accuracy_groups")
    if isinstance(groups, Mapping) and groups:
        return groups.get(group)
    return field_of(p, group_key(group)) if group in LEGACY_GROUPS else None


def point_groups(points: Iterable[Any]) -> list[str]:
    """The relation groups the points report, in order of first appearance; the family domain's
    ``family`` and ``biography`` for points without per-group accuracies (older outputs).

    >>> point_groups([{"accuracy_groups": {"reporting": 1.0, "location": 0.5}}]), point_groups([{}])
    (['reporting', 'location'], ['family', 'biography'])
    """
    seen: dict[str, None] = {}
    for p in points:
        groups = field_of(p, "accuracy_groups")
        if isinstance(groups, Mapping):
            seen.update(dict.fromkeys(str(g) for g in groups))
    return list(seen) if seen else list(LEGACY_GROUPS)
