"""The versioned JSON file format of a knowledge base, validated with pydantic at the boundary
(docs/design.md section 4).

::

    {
      "format": "deepunlearn-kb", "version": 2, "name": "edu-relat",
      "background": ["gender"],
      "entities": {"Sloane Lee": {"gender": "female"}, ...},
      "relations": {"child": {"kind": "entity", "group": "family",
                              "questions": ["Who is {o2} to {o1}?", ...], "statements": [...],
                              "answer": "{r}"}, ...},
      "facts": [["Reid Perry", "father", "Richard Perry"], ...],
      "targets": [272, ...],
      "probes": {"17": ["a question worded differently", "answer"]},
      "metadata": {...},
      "forms": [{"fact": 0, "kind": "statement", "text": "...", "answer": "father", "name": "question",
                 "split": "test"}, ...],
      "form_splits": {"qa1": "train", "st3": "test"}
    }

A relation's ``kind`` says whether its object is an ``entity`` or a ``value``; its ``group`` is
free text (accuracy is reported per group); ``questions`` (the first is the probe) and
``statements`` are its probe templates (forms ``qa1..``, ``st1..``). Version 1, every KB written
before domains (and the imported release), is still read: a relation there is ``{"kind":
"family"|"biography", "question", "answer"}``, read as kind entity|value in group family|biography.

``facts[i]`` is ``[o1, r, o2]`` ("o2 is o1's r"); ``targets`` are fact indices (JSON integers:
``"4"``, ``4.0`` and ``true`` are refused); ``probes`` holds only the probes whose wording
differs from their relation's template, keyed by fact index written as a string of digits;
``forms`` and ``form_splits`` (written only when there are any) hold the explicit probe forms and
the template forms' splits (:mod:`deepunlearn.kg.forms`).
Templates may use only plain ``{o1}``, ``{r}``, ``{o2}`` (:func:`~.kb.template_problem`).

Reading goes through :func:`deepunlearn.errors.load_json` (missing file, a folder, non-UTF-8
bytes, JSON syntax, NaN and nesting deeper than 64 levels are one :class:`KBFileError` naming the
file), then pydantic (a field's problem is an error naming the field and the file).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from ..errors import atomic_write_text, gc_paused, load_json
from .kb import KBError, KnowledgeBase, Relation, template_problem

FORMAT = "deepunlearn-kb"
VERSION = 2
#: The versions this deepunlearn reads.
READS = (1, 2)


class KBFileError(KBError):
    """A KB file cannot be read: the message names the file and the field."""


def _plain(v: str) -> str:
    problem = template_problem(v)
    if problem is not None:
        raise ValueError(f"template {v!r}: {problem}; templates may use only plain {{o1}}, {{r}}, {{o2}}")
    return v


class RelationSpecV1(BaseModel):
    """A relation of a version-1 file."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["family", "biography"]
    question: str
    answer: str

    @field_validator("question", "answer")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        return _plain(v)

    def relation(self, name: str) -> Relation:
        return Relation(name, self.kind, self.question, self.answer)


class RelationSpec(BaseModel):
    """A relation of a version-2 file."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["entity", "value"]
    group: str = Field(min_length=1)
    questions: list[str] = Field(min_length=1)
    statements: list[str] = Field(default_factory=list)
    answer: str

    @field_validator("answer")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        return _plain(v)

    @field_validator("questions", "statements")
    @classmethod
    def _each(cls, v: list[str]) -> list[str]:
        return [_plain(t) for t in v]

    def relation(self, name: str) -> Relation:
        return Relation(name, self.kind, self.questions[0], self.answer, self.group, tuple(self.questions[1:]),
                        tuple(self.statements))


class FormSpec(BaseModel):
    """One explicit probe form (:class:`~deepunlearn.kg.forms.Form`) of fact index ``fact``."""

    model_config = ConfigDict(extra="forbid")
    fact: StrictInt
    kind: Literal["qa", "statement", "yesno"]
    text: str
    answer: str
    name: str
    split: Literal["train", "test", "unlearn"] | None = None


class KBFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["deepunlearn-kb"] = FORMAT
    version: Literal[2] = VERSION
    name: str = "kb"
    background: list[str] = Field(default_factory=lambda: ["gender"])
    entities: dict[str, dict[str, str]]
    relations: dict[str, RelationSpec]
    facts: list[tuple[str, str, str]]
    targets: list[StrictInt] = Field(default_factory=list)
    probes: dict[Annotated[str, Field(pattern=r"^[0-9]+$")], tuple[str, str]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    forms: list[FormSpec] = Field(default_factory=list)
    form_splits: dict[str, Literal["train", "test", "unlearn"]] = Field(default_factory=dict)

    @field_validator("version", mode="before")
    @classmethod
    def _strict_version(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):  # `true` and `1.0` are not version 1
            raise ValueError(f"expected the integer {VERSION}, found {json.dumps(v)[:60]}")
        return v


class KBFileV1(KBFile):
    """A version-1 file: relations with one question and kind family|biography."""

    version: Literal[1] = 1  # type: ignore[assignment]
    relations: dict[str, RelationSpecV1]  # type: ignore[assignment]

    @field_validator("version", mode="before")
    @classmethod
    def _strict_version(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"expected the integer 1, found {json.dumps(v)[:60]}")
        return v


def _loc(err: dict) -> str:
    """The field path of a validation error; a key that is empty or not printable (a newline
    would break the one-line error) is written as a JSON string."""
    parts = (str(x) if str(x).isprintable() and str(x) else json.dumps(str(x)) for x in err["loc"])
    return ".".join(parts) or "(top level)"


#: Plainer words for pydantic's messages on the fields a hand-edited KB gets wrong most.
_MESSAGES = {
    "int_type": "expected a JSON integer (no quotes, no decimal point, not true/false)",
    "string_pattern_mismatch": "expected a fact index written as a string of digits",
    "string_type": "expected a JSON string",
}


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        msg = _MESSAGES.get(err["type"], err["msg"].removeprefix("Value error, "))
        if err["type"] in ("int_type", "literal_error", "string_pattern_mismatch", "string_type"):
            msg += f", found {json.dumps(err.get('input'), default=repr)[:60]}"
        parts.append(f"field {_loc(err)}: {msg}")
    more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more


def from_dict(data: Any, source: str = "<dict>") -> KnowledgeBase:
    """Validate a decoded KB document and build the :class:`KnowledgeBase`; every problem is
    one :class:`KBFileError` naming ``source`` and the field."""
    version = data.get("version", VERSION) if isinstance(data, dict) else VERSION
    if (isinstance(data, dict) and data.get("format", FORMAT) == FORMAT and isinstance(version, int)
            and not isinstance(version, bool) and version not in READS):
        raise KBFileError(f"{source}: field version: this deepunlearn reads versions "
                          f"{', '.join(map(str, READS))}, the file is version {version!r}", file=source, field="version")
    try:
        doc = (KBFileV1 if version == 1 and not isinstance(version, bool) else KBFile).model_validate(data)
    except ValidationError as e:
        raise KBFileError(f"{source}: not a valid deepunlearn KB: {_describe(e)}", file=source,
                          field=_loc(e.errors()[0])) from None
    from .forms import TEMPLATE_NAMES, Form, is_template_name, name_problem

    try:
        relations = {n: s.relation(n) for n, s in doc.relations.items()}
        forms = []
        for j, f in enumerate(doc.forms):
            problem = name_problem(f.name)  # a template's name would make --forms/--label ambiguous
            if problem:
                raise KBError(f"forms[{j}]: form name {f.name!r} {problem}", field=f"forms.{j}.name")
            try:
                forms.append(Form(f.fact, f.kind, f.text, f.answer, f.name, f.split))
            except KBError as e:
                raise KBError(f"forms[{j}]: {e}", field=f"forms.{j}") from None
        for n in doc.form_splits:
            if not is_template_name(n):  # explicit forms carry their own splits
                raise KBError(f"form_splits: {n!r} is not a template form's name ({', '.join(TEMPLATE_NAMES)})",
                              field=f"form_splits.{n}")
        kb = KnowledgeBase(
            entities=doc.entities,
            relations=relations,
            facts=[tuple(f) for f in doc.facts],
            targets=list(doc.targets),
            name=doc.name,
            background=tuple(doc.background),
            probe_overrides={int(k): tuple(v) for k, v in doc.probes.items()},
            metadata=doc.metadata,
            forms=forms,
            form_splits=dict(doc.form_splits),
        )
        kb.validate()
    except KBError as e:
        raise KBFileError(f"{source}: {e}", file=source, field=e.field) from None
    return kb


def to_dict(kb: KnowledgeBase) -> dict[str, Any]:
    out = {
        "format": FORMAT,
        "version": VERSION,
        "name": kb.name,
        "background": list(kb.background),
        "entities": kb.entities,
        "relations": {
            n: {"kind": r.kind, "group": r.group, "questions": list(r.questions), "statements": list(r.statements),
                "answer": r.answer} for n, r in kb.relations.items()
        },
        "facts": [list(f) for f in kb.facts],
        "targets": list(kb.targets),
        "probes": {str(i): list(v) for i, v in sorted(kb.probe_overrides.items())},
        "metadata": kb.metadata,
    }
    if kb.forms or kb.form_splits:  # a KB without forms writes the bytes it always did
        out["forms"] = [{"fact": f.fact_id, "kind": f.kind, "text": f.text, "answer": f.answer, "name": f.name,
                         **({"split": f.split} if f.split else {})} for f in kb.forms]
        out["form_splits"] = dict(sorted(kb.form_splits.items()))
    return out


def load_kb(path: str | os.PathLike, *, flag: str | None = None) -> KnowledgeBase:
    """Read a KB file.

    Parameters
    ----------
    path : str or os.PathLike
        A KB file as :func:`save_kb` or ``deepunlearn data`` writes it (version 1 or 2).
    flag : str, optional
        The command-line flag that named the file (e.g. ``"--kb"``), put in front of the path in
        error messages.

    Returns
    -------
    KnowledgeBase
        The knowledge base, equal to the one that was saved.

    Raises
    ------
    KBFileError
        The file is missing, unreadable, not JSON or not a valid KB: one message naming the file
        and the field.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> path = save_kb(generate_family(6, seed=3), pathlib.Path(tempfile.mkdtemp()) / "kb.json")
    >>> kb = load_kb(path)
    >>> kb == generate_family(6, seed=3), kb.facts[0] == generate_family(6, seed=3).facts[0]
    (True, True)
    >>> load_kb(path.with_name("missing.json"), flag="--kb")
    Traceback (most recent call last):
    ...
    deepunlearn.kg.io.KBFileError: --kb .../missing.json: no such file
    """
    with gc_paused():
        return from_dict(load_json(path, flag=flag, error=KBFileError), source=str(path))


def dumps_kb(kb: KnowledgeBase) -> str:
    """Deterministic serialisation: the same KB always gives the same bytes."""
    return json.dumps(to_dict(kb), ensure_ascii=False, indent=1) + "\n"


def save_kb(kb: KnowledgeBase, path: str | os.PathLike) -> Path:
    """Write a KB file atomically.

    The file is written to a temporary sibling and renamed into place, so a crash never leaves
    half a KB; missing folders are created.

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base to write.
    path : str or os.PathLike
        The file to write (``.json``); an existing file is replaced.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    OutputError
        ``path`` cannot be written (a folder, a device, a full disk): one message naming it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> out = save_kb(generate_family(6, seed=3), pathlib.Path(tempfile.mkdtemp()) / "new" / "kb.json")
    >>> out.name, load_kb(out).name
    ('kb.json', 'family-6-seed3')
    """
    return atomic_write_text(path, dumps_kb(kb))
