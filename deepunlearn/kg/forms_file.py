"""Forms files: extra probe forms for a KB's facts, one JSON object a line.

A line is either a statement or a question::

    {"fact": ["Reid Perry", "father", "Richard Perry"], "text": "Richard Perry is the father of Reid Perry.", "answer": "father"}
    {"fact": ["Reid Perry", "father", "Richard Perry"], "question": "What is Richard Perry to Reid Perry?", "answer": "father"}

``text`` (a statement: ``answer`` must occur in it at a position > 0; the probe is the text
before its first such occurrence) or ``question`` (kind ``qa``; with ``"kind": "yesno"`` a
yes/no question whose answer is ``yes`` or ``no``; a QA line answered "yes" stays ``qa``
unless it says ``"kind": "yesno"``). Optional keys: ``name`` (default: the file's stem, so
``--forms STEM`` selects the file's forms), ``kind``, ``split`` (``train``, ``test``,
``unlearn`` or ``null``; default: the ``--split`` of ``data forms --add``) and ``fact_id`` (the
fact's index; with ``fact`` they must agree, so ``data export KB -o probes.jsonl`` lines and
:meth:`Form.to_json` lines read back). ``fact`` may also be a fact index or ``"S|r|O"``.
Blank lines are skipped.

Every problem is one :class:`~deepunlearn.kg.forms.FormError` naming the file and the line:
bad JSON, not an object, a missing or unknown key, a fact the KB does not hold, a statement
whose answer is not in its text (or only at its start), both or neither of ``text`` and
``question``, a bad split or kind, a name that is a template's (``primary``, ``qa1``...) or a
selection word (``default``, ``all``, a split).

Adding (:func:`add_forms`): a form identical to one the KB already holds as an explicit form,
or to an earlier line (same fact, kind, text and answer), is *skipped* and counted, so adding
the same file twice changes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MAX_JSON_DEPTH, env_limit, json_depth_ok, read_text, surrogate_problem
from . import names
from .forms import FORM_KINDS, SPLITS, Form, FormError, name_problem
from .kb import KBError, KnowledgeBase

KEYS = ("fact", "fact_id", "text", "question", "answer", "name", "kind", "split")

#: Cap on a forms file: 128 MiB, so the probes export of the 100,000-person generated KB (98 MiB)
#: reads back. Reading takes about 0.7 s per MiB (140,000 forms, 17 MiB: 12 s), so ``data forms
#: --add`` stays under two minutes rather than the quarter hour of a 1 GiB file.
#: ``DEEPUNLEARN_MAX_FORMS_BYTES`` changes it.
MAX_FORMS_BYTES = 128 << 20
FORMS_BYTES_ENV = "DEEPUNLEARN_MAX_FORMS_BYTES"


class _NotJSON(ValueError):
    """NaN/Infinity in a line (Python's json reads them; JSON has none)."""


def _line_json(line: str) -> Any:
    """One line's JSON value; duplicate keys, NaN/Infinity and deep nesting are refused."""
    if not json_depth_ok(line):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")

    def _pairs(pairs: list) -> dict:
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"key {k!r} given twice")
            out[k] = v
        return out

    def _no_constant(name: str) -> Any:
        raise _NotJSON(f"not valid JSON ({name} is not JSON)")

    try:
        obj = json.loads(line, object_pairs_hook=_pairs, parse_constant=_no_constant)
        bad = surrogate_problem(line, obj)
        if bad is not None:
            raise ValueError(bad)
        return obj
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:  # pragma: no cover - json_depth_ok refuses it first
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None


def _string(obj: dict, key: str) -> str:
    v = obj[key]
    if not isinstance(v, str):
        raise ValueError(f"{key!r} must be a JSON string, found {json.dumps(v)[:60]}")
    if not v.strip():
        raise ValueError(f"{key!r} is empty")
    return v


def _fact(kb: KnowledgeBase, obj: dict) -> int:
    from .refs import resolve_item

    if "fact" not in obj and "fact_id" not in obj:
        raise ValueError('missing key "fact" ([subject, relation, object])')
    ids = []
    for key in ("fact", "fact_id"):
        if key in obj:
            if key == "fact_id" and (isinstance(obj[key], bool) or not isinstance(obj[key], int)):
                raise ValueError(f'"fact_id" must be a JSON integer, found {json.dumps(obj[key])[:60]}')
            try:
                ids.append(resolve_item(kb, obj[key]))
            except KBError as e:
                raise ValueError(f"{key!r}: {e}") from None
    if len(ids) == 2 and ids[0] != ids[1]:
        raise ValueError(f'"fact" is fact {ids[0]} but "fact_id" is {ids[1]}')
    return ids[0]


def form_of_line(kb: KnowledgeBase, obj: Any, *, name: str, split: str | None) -> Form:
    """The form one decoded line describes (``name``/``split``: the defaults), or ``ValueError``
    saying what is wrong (the caller adds the file and line)."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, found {type(obj).__name__ if obj is not None else 'null'}")
    unknown = [k for k in obj if k not in KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
    fact_id = _fact(kb, obj)
    if ("text" in obj) == ("question" in obj):
        raise ValueError('give exactly one of "text" (a statement) and "question" (a question)'
                         + (", not both" if "text" in obj else ""))
    if "answer" not in obj:
        raise ValueError('missing key "answer"')
    answer = _string(obj, "answer")
    if answer != answer.strip():
        raise ValueError(f"answer {answer!r} starts or ends with whitespace; remove it")
    key = "text" if "text" in obj else "question"
    text = _string(obj, key)
    kind = obj.get("kind", "statement" if key == "text" else "qa")
    if kind not in FORM_KINDS:
        raise ValueError(f"kind must be one of {', '.join(FORM_KINDS)}, found {json.dumps(kind)[:60]}")
    if (kind == "statement") != (key == "text"):
        raise ValueError(f'a {kind} form gives its text as "{"text" if kind == "statement" else "question"}", '
                         f'not "{key}"')
    if kind == "yesno":
        if answer.lower() not in ("yes", "no"):
            raise ValueError(f"a yes/no form's answer is 'yes' or 'no', found {answer!r}")
        answer = answer.lower()
    if "name" in obj:
        name = _string(obj, "name")
    problem = name_problem(name) or names.name_problem(name)
    if problem:
        raise ValueError(f"form name {name!r}{'' if 'name' in obj else ' (the file name, the default)'} {problem}; "
                         'give the line another "name"')
    if "split" in obj:
        split = obj["split"]
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)} or null, found {json.dumps(split)[:60]}")
    try:
        return Form(fact_id, kind, text, answer, name, split)
    except FormError as e:
        raise ValueError(str(e).removeprefix("statement form: ")) from None


def read_forms_file(kb: KnowledgeBase, path: str | os.PathLike, *, split: str | None = None,
                    flag: str = "--add") -> list[Form]:
    """Every form of the forms file ``path`` (named on the command line by ``flag``), in file
    order; lines without their own ``split`` get ``split``. Any problem is one
    :class:`FormError` naming the flag, the file and the line number (module docstring)."""
    if split is not None and split not in SPLITS:
        raise FormError(f"--split: expected one of {', '.join(SPLITS)} or none, got {split!r}", field="--split")
    cap = env_limit(FORMS_BYTES_ENV, MAX_FORMS_BYTES, error=FormError)
    text = read_text(path, flag=flag, error=FormError, limit=cap, env=FORMS_BYTES_ENV).removeprefix("\ufeff")
    default_name = Path(path).stem
    forms = []
    # split on "\n" only: a JSON string may hold U+2028 and the other breaks str.splitlines knows
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            forms.append(form_of_line(kb, _line_json(line), name=default_name, split=split))
        except ValueError as e:
            raise FormError(f"{flag} {path}: line {n}: {e}", file=path, field=f"line {n}") from None
    if not forms:
        raise FormError(f"{flag} {path}: no forms in the file (only blank lines)", file=path, field=flag)
    return forms


@dataclass
class Added:
    """What :func:`add_forms` did: forms added, and exact duplicates skipped."""

    added: int
    skipped: int


def add_forms(kb: KnowledgeBase, forms: list[Form]) -> Added:
    """Append ``forms`` to ``kb.forms`` (in place), skipping any identical (fact, kind, text,
    answer) to an explicit form the KB holds or to an earlier one of ``forms``."""
    seen = {(f.fact_id, f.kind, f.text, f.answer) for f in kb.forms}
    new = []
    for f in forms:
        key = (f.fact_id, f.kind, f.text, f.answer)
        if key not in seen:
            seen.add(key)
            new.append(f)
    kb.forms = list(kb.forms) + new
    kb.__dict__.pop("_forms_cache", None)
    return Added(len(new), len(forms) - len(new))
