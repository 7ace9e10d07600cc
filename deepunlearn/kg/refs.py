"""Fact references the user gives on the command line or in files, resolved against a KB with
errors that name the file and the flag ("target errors name the KB's internal name, not
its file, nor the flag").

Accepted forms: a fact index (``7`` or ``"7"``), ``"subject|relation|object"`` or
``["subject", "relation", "object"]``. In a JSON file a fact index must be a JSON integer: ``4.0``,
``true`` and ``"4"`` are refused there (``true`` used to become fact 1).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import load_json
from .kb import KBError, KnowledgeBase


class FactRefError(KBError):
    """A fact reference is malformed or names no fact of the KB."""


def resolve_target(kb: KnowledgeBase, ref: str, *, kb_file: str | os.PathLike | None = None,
                   flag: str = "--target", allow_all: bool = True) -> list[int]:
    """``--target`` (``"all"``, an index or ``"S|r|O"``) -> fact ids, or one error naming the flag
    and the KB's file.

    >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")], targets=[0])
    >>> resolve_target(kb, "all"), resolve_target(kb, "A|child|B")
    ([0], [0])
    """
    where = f"{flag} {ref!r}" + (f" (KB {kb_file})" if kb_file else "")
    if allow_all and ref.strip().lower() == "all":
        if not kb.targets:
            raise FactRefError(f"{where}: the KB lists no targets; give an index or 'subject|relation|object'",
                               file=kb_file, field=flag)
        return list(kb.targets)
    try:
        return [kb.resolve(ref)]
    except KBError as e:
        raise FactRefError(f"{where}: {e}", file=kb_file, field=flag) from None


def resolve_item(kb: KnowledgeBase, item: Any) -> int:
    """One fact reference decoded from JSON: an int (not a bool or float), ``"S|r|O"`` or a
    3-list of strings."""
    if isinstance(item, bool) or not isinstance(item, (int, str, list)):
        raise KBError(f"expected a fact index, 'S|r|O' or [s, r, o], found {item!r}")
    if isinstance(item, str) and item.strip().lstrip("-").isdigit():
        raise KBError(f"fact index given as a string {item!r}; write it as a JSON number")
    if isinstance(item, list) and not (len(item) == 3 and all(isinstance(x, str) for x in item)):
        raise KBError(f"expected [subject, relation, object] as three strings, found {item!r}")
    return kb.resolve(item)


def read_fact_list(kb: KnowledgeBase, path: str | os.PathLike, *, flag: str, key: str) -> list[int]:
    """A JSON list of facts (indices, ``[s, r, o]`` or ``"S|r|O"``) from ``path``, or an object
    holding it under ``key`` (or ``fact_ids``/``facts``, as ``probe -o`` and ``unlearn -o`` write).
    Every problem is one :class:`FactRefError` naming ``flag``, the file and the item."""
    return fact_list(kb, load_json(path, flag=flag, error=FactRefError), path=path, flag=flag, key=key)


def fact_list(kb: KnowledgeBase, data: Any, *, path: str | os.PathLike, flag: str, key: str) -> list[int]:
    """:func:`read_fact_list` of an already decoded document ``data`` (read from ``path``)."""
    if isinstance(data, dict):
        data = next((data[k] for k in (key, "fact_ids", "facts") if isinstance(data.get(k), list)), data)
    if not isinstance(data, list):
        raise FactRefError(f"{flag} {path}: expected a JSON list of facts (fact indices or [s, r, o]) "
                           f"or an object with a {key!r} list", file=path, field=flag)
    out = []
    for i, item in enumerate(data):
        try:
            out.append(resolve_item(kb, item))
        except KBError as e:
            raise FactRefError(f"{flag} {path}: item {i}: {e}", file=path, field=f"{flag}[{i}]") from None
    return out
