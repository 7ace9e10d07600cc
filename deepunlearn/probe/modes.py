"""The probe modes, in one place (torch-free): every command-line choice, config field, report
and the probe's dispatch read them here.

>>> MODES
('exact', 'generate', 'yesno', 'rank', 'any')
>>> check_mode("rank"), ANY_MODES
('rank', ('exact', 'yesno', 'rank', 'generate'))
>>> check_mode("guess")
Traceback (most recent call last):
...
ValueError: unknown probe mode 'guess': expected one of exact, generate, yesno, rank, any
"""

from __future__ import annotations

from typing import Literal

#: every probe mode, with what "known" means under it
DESCRIPTIONS = {
    "exact": "the greedy (teacher-forced) answer is the gold answer",
    "generate": "the answer appears in the generated tokens",
    "yesno": "the yes/no forms are answered right",
    "rank": "the answer ranks first among the answers of its type",
    "any": "known under any mode on any form",
}
MODES: tuple[str, ...] = tuple(DESCRIPTIONS)
Mode = Literal[MODES]  # type: ignore[valid-type]
#: the modes ``any`` combines, in the order it runs them (cheapest first)
ANY_MODES: tuple[str, ...] = ("exact", "yesno", "rank", "generate")
AnyMode = Literal[ANY_MODES]  # type: ignore[valid-type]
#: the form selection each mode probes when none is given (``deepunlearn.kg.forms``)
DEFAULT_SELECTION = {"exact": "default", "generate": "default", "rank": "default", "yesno": "all", "any": "all"}
#: the modes a protocol may name (the others probe over forms)
PROTOCOL_MODES: tuple[str, ...] = ("exact", "generate")


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else a ``ValueError`` naming the choices (the
    entries check the user's mode first; one reaching the probe unchecked is a bug)."""
    if mode not in MODES:
        raise ValueError(f"unknown probe mode {mode!r}: expected one of {', '.join(MODES)}")
    return mode


def modes_help() -> str:
    """``exact: ...; generate: ...`` for help texts."""
    return "; ".join(f"{m}: {d}" for m, d in DESCRIPTIONS.items())
