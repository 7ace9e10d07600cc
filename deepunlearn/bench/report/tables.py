"""What the report's markdown tables share: the table itself, a number's cell, and the order
of the methods in a section.

>>> print("\\n".join(md_table(["model", "recall"], [["tiny", number(0.5)], ["base", number(None)]])))
| model | recall |
|---|---|
| tiny | 0.50 |
| base | – |
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .plots import is_missing


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a markdown table: the header, the rule under it, one line per row."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *["| " + " | ".join(r) + " |" for r in rows]]


def record_table(records: Sequence[Mapping[str, Any]],
                 columns: Sequence[tuple[str, str, Callable[[Any], str]]]) -> list[str]:
    """A markdown table of one row per record: ``columns`` are ``(header, key, format)``.

    >>> record_table([{"m": "ga", "r": 0.5}], [("method", "m", str), ("recall", "r", number)])[2]
    '| ga | 0.50 |'
    """
    return md_table([h for h, _, _ in columns], [[fmt(r[key]) for _, key, fmt in columns] for r in records])


def number(x: Any, digits: int = 2) -> str:
    """A value with ``digits`` decimals; "–" when there is none (None or NaN).

    >>> number(0.123456), number(0.5, 3), number(float("nan"))
    ('0.12', '0.500', '–')
    """
    return "–" if is_missing(x) else f"{x:.{digits}f}"


def in_order(per: Mapping[str, Any], methods: Sequence[str]) -> list[str]:
    """The methods of ``per``: those of ``methods`` in its order, then any other in ``per``'s.

    >>> in_order({"tv": 1, "ga": 2, "x@seq": 3}, ["ga", "npo", "tv"])
    ['ga', 'tv', 'x@seq']
    """
    return [m for m in methods if m in per] + [m for m in per if m not in methods]


def sort_rows(rows: list[dict[str, Any]], methods: Sequence[str]) -> list[dict[str, Any]]:
    """Per-(model, method) rows in place, by model, then the methods' order, then any other
    method by name.

    >>> [r["method"] for r in sort_rows([{"model": "a", "method": "x"}, {"model": "a", "method": "ga"}], ["ga"])]
    ['ga', 'x']
    """
    order = {m: i for i, m in enumerate(methods)}
    rows.sort(key=lambda r: (r["model"], order.get(r["method"], len(order)), r["method"]))
    return rows
