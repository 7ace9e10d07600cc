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


def modes_help(modes: tuple[str, ...] = MODES) -> str:
    """``exact: ...; generate: ...`` for help texts: what "known" means under each of ``modes``.

    >>> modes_help(("exact", "rank"))
    'exact: the greedy (teacher-forced) answer is the gold answer; rank: the answer ranks first among the answers of its type'
    """
    return "; ".join(f"{m}: {DESCRIPTIONS[m]}" for m in modes)


def check_tables(descriptions: dict[str, str] | None = None, default_selection: dict[str, str] | None = None,
                 any_modes: tuple[str, ...] | None = None, protocol_modes: tuple[str, ...] | None = None) -> None:
    """A ``TypeError`` naming the table and the mode when the tables above disagree: a mode of
    :data:`DESCRIPTIONS` without its :data:`DEFAULT_SELECTION`, or a mode of :data:`ANY_MODES` or
    :data:`PROTOCOL_MODES` that is no fact mode (checked when this module is imported; the
    probe's dispatch is checked by :func:`deepunlearn.probe.forms_probe.check_form_modes`)."""
    desc = DESCRIPTIONS if descriptions is None else descriptions
    sel = DEFAULT_SELECTION if default_selection is None else default_selection
    fact = [m for m in desc if m != "compose"]
    problems = [f"DEFAULT_SELECTION: no entry for probe mode {m!r}" for m in desc if m not in sel]
    problems += [f"DEFAULT_SELECTION: {m!r} is not a mode of DESCRIPTIONS" for m in sel if m not in desc]
    for name, table in (("ANY_MODES", ANY_MODES if any_modes is None else any_modes),
                        ("PROTOCOL_MODES", PROTOCOL_MODES if protocol_modes is None else protocol_modes)):
        problems += [f"{name}: {m!r} is not a fact mode of DESCRIPTIONS" for m in table if m not in fact or m == "any"]
    if problems:
        raise TypeError("deepunlearn.probe.modes: " + "; ".join(problems))


check_tables()
