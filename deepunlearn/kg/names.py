"""What an entity, value or relation name may be, checked wherever names enter a KB (KB files,
``domain.toml``, the release import, generated KBs).

A name is printed on one line, written into targets as ``S|r|O`` and, for a relation, named in
``rules.dl``. So a name holds no control character (NUL, newline, ...), no ``|``, no Unicode bidi
override, isolate or mark (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C: they make a name
display as another), no invisible zero-width space or byte-order mark (U+200B, U+FEFF), no line or
paragraph separator (U+2028, U+2029: JSON-lines readers split at them), no lone surrogate (no
UTF-8 writer can encode it), and at most :data:`MAX_NAME_LENGTH` characters. A
relation name is also a word ``rules.dl`` can write: a lower-case letter, then letters, digits
and ``_`` (so never a Python dunder such as ``__class__``).
"""

from __future__ import annotations

import json
import re

#: Longest entity, value or relation name, in characters (the release's longest is 23).
MAX_NAME_LENGTH = 200

_BAD = re.compile("[\x00-\x1f\x7f-\x9f|\u202a-\u202e\u2066-\u2069\ud800-\udfff"
                  "\u200e\u200f\u061c\u200b\ufeff\u2028\u2029]")
#: bidi marks (left-to-right, right-to-left, Arabic letter mark): invisible, they reorder the text
_BIDI_MARKS = "\u200e\u200f\u061c"
#: invisible characters that are no part of any name (zero-width space, byte-order mark)
_INVISIBLE = "\u200b\ufeff"
#: A relation name as ``rules.dl`` writes it (the parser's name token).
RELATION_NAME = re.compile(r"^[a-z][A-Za-z0-9_]*$")

_WHAT = {"|": "'|' (targets are written S|r|O)"}


def shown(name: str) -> str:
    """``name`` as a JSON string with escapes (one printable line), cut to 80 characters."""
    s = json.dumps(name)
    return s if len(s) <= 80 else s[:76] + '..."'


def name_problem(name: object, *, relation: bool = False) -> str | None:
    """Why ``name`` cannot name an entity or value (``relation``: a relation), or ``None``.

    >>> name_problem("Ann Lee") is None, name_problem("Ann|Lee"), name_problem("x", relation=True)
    (True, "holds '|' (targets are written S|r|O)", None)
    >>> name_problem("__class__", relation=True)
    "is not a name rules.dl can write (a lower-case letter, then letters, digits and '_')"
    """
    if not isinstance(name, str):
        return f"expected a string, found {type(name).__name__}"
    if not name.strip():
        return "is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"is {len(name)} characters long, over the limit of {MAX_NAME_LENGTH}"
    m = _BAD.search(name)
    if m:
        ch = m.group()
        if ch in _WHAT:
            return f"holds {_WHAT[ch]}"
        if "\ud800" <= ch <= "\udfff":
            return f"holds a lone surrogate (U+{ord(ch):04X}), not a Unicode character"
        if ("\u202a" <= ch <= "\u202e") or ("\u2066" <= ch <= "\u2069") or ch in _BIDI_MARKS:
            return f"holds a Unicode bidi control (U+{ord(ch):04X}), which makes a name display as another"
        if ch in _INVISIBLE:
            return f"holds an invisible character (U+{ord(ch):04X}), which makes a name look like another"
        if ch in "\u2028\u2029":
            return f"holds a line or paragraph separator (U+{ord(ch):04X}), which splits a line"
        return f"holds a control character (U+{ord(ch):04X})"
    if relation and not RELATION_NAME.match(name):
        return "is not a name rules.dl can write (a lower-case letter, then letters, digits and '_')"
    return None


def check_name(name: object, at: str, *, error: type, what: str = "name", relation: bool = False) -> None:
    """Raise ``error`` ``"AT: WHAT NAME PROBLEM"`` if ``name`` is bad; ``at`` is its key path
    (``entities["Ann"]``, ``facts[3][2]``)."""
    problem = name_problem(name, relation=relation)
    if problem is not None:
        raise error(f"{at}: {what} {shown(name) if isinstance(name, str) else repr(name)[:80]} {problem}", field=at)


def check_kb_names(kb, error: type) -> None:
    """Every entity, relation and value name of a :class:`~.kb.KnowledgeBase`; ``error`` names
    the key (``entities["Ann\\u202e"]``, ``facts[3][2]``)."""
    from ..errors import json_path

    values = {r for r, rel in kb.relations.items() if rel.kind == "value"}
    objects = list(dict.fromkeys(o for _, r, o in kb.facts if r in values)) if values else []
    if all_fine(kb.entities) and all_fine(objects) and all(name_problem(r, relation=True) is None
                                                          for r in kb.relations):
        return
    for e in kb.entities:  # a bad name somewhere: find the first, in file order, for the message
        check_name(e, json_path(("entities", e)), what="entity name", error=error)
    for r in kb.relations:
        check_name(r, json_path(("relations", r)), what="relation name", relation=True, error=error)
    seen: set = set()
    for i, (_, r, o) in enumerate(kb.facts):
        if r in values and o not in seen:  # entity objects are checked as entities
            check_name(o, json_path(("facts", i, 2)), what="value", error=error)
            seen.add(o)


def all_fine(names) -> bool:
    """Whether :func:`name_problem` passes every name of ``names`` (entity or value names),
    checked in bulk: one regex scan of all of them joined (a million names cost one C call,
    not a million Python ones). ``False`` only says to look name by name."""
    names = names if isinstance(names, list) else list(names)
    if not all(type(n) is str for n in names):
        return False
    if not names:
        return True
    return (max(map(len, names)) <= MAX_NAME_LENGTH and all(map(str.strip, names))
            and _BAD.search("".join(names)) is None)
