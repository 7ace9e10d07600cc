"""The probe modes, in one place (torch-free; docs/design.md section 2): every command-line
choice, config field, report and the probe's dispatch read them here.

>>> MODES
('exact', 'generate', 'yesno', 'rank', 'any', 'compose')
>>> check_mode("rank"), ANY_MODES
('rank', ('exact', 'yesno', 'rank', 'generate'))
>>> FACT_MODES
('exact', 'generate', 'yesno', 'rank', 'any')
>>> check_mode("guess")
Traceback (most recent call last):
...
ValueError: unknown probe mode 'guess': expected one of exact, generate, yesno, rank, any, compose
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
    "compose": "a derived fact is answered (generated, as in generate) through a multi-hop question that "
               "composes the body of a rule deriving it (deepunlearn.kg.compose)",
}
MODES: tuple[str, ...] = tuple(DESCRIPTIONS)
Mode = Literal[MODES]  # type: ignore[valid-type]
#: the modes that ask a fact through its own forms: every mode but ``compose``, which asks derived
#: facts through the rules (``probe --mode compose --compose FILE``; after unlearning, the
#: model-derived recall of :mod:`deepunlearn.unlearn.derived`). The primary probe of unlearning,
#: attacks and sweeps takes one of these.
FACT_MODES: tuple[str, ...] = tuple(m for m in DESCRIPTIONS if m != "compose")
FactMode = Literal[FACT_MODES]  # type: ignore[valid-type]
#: the modes ``any`` combines, in the order it runs them (cheapest first)
ANY_MODES: tuple[str, ...] = ("exact", "yesno", "rank", "generate")
AnyMode = Literal[ANY_MODES]  # type: ignore[valid-type]
#: the form selection each mode probes when none is given (``deepunlearn.kg.forms``)
DEFAULT_SELECTION = {"exact": "default", "generate": "default", "rank": "default", "yesno": "all", "any": "all",
                     "compose": "default"}
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
