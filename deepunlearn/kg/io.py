"""The versioned JSON file format of a knowledge base, validated with pydantic at the boundary.

::

    {
      "format": "deepunlearn-kb", "version": 1, "name": "edu-relat",
      "background": ["gender"],
      "entities": {"Sloane Lee": {"gender": "female"}, ...},
      "relations": {"child": {"kind": "family", "question": "Who is {o2} to {o1}?", "answer": "{r}"}, ...},
      "facts": [["Reid Perry", "father", "Richard Perry"], ...],
      "targets": [272, ...],
      "probes": {"17": ["a question worded differently", "answer"]},
      "metadata": {...}
    }

``facts[i]`` is ``[o1, r, o2]`` ("o2 is o1's r"); ``targets`` are fact indices; ``probes`` holds
only the probes whose wording differs from their relation's template.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .kb import KBError, KnowledgeBase, Relation

FORMAT = "deepunlearn-kb"
VERSION = 1


class KBFileError(KBError):
    """A KB file cannot be read: the message names the file and the field."""


class RelationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["family", "biography"]
    question: str
    answer: str

    @field_validator("question", "answer")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        try:
            v.format(o1="", r="", o2="")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"template {v!r} may only use the placeholders {{o1}}, {{r}}, {{o2}} ({e})") from None
        return v


class KBFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["deepunlearn-kb"] = FORMAT
    version: Literal[1] = VERSION
    name: str = "kb"
    background: list[str] = Field(default_factory=lambda: ["gender"])
    entities: dict[str, dict[str, str]]
    relations: dict[str, RelationSpec]
    facts: list[tuple[str, str, str]]
    targets: list[int] = Field(default_factory=list)
    probes: dict[int, tuple[str, str]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"field {loc}: {err['msg']}")
    more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more


def from_dict(data: Any, source: str = "<dict>") -> KnowledgeBase:
    """Validate a decoded KB document and build the :class:`KnowledgeBase`."""
    if isinstance(data, dict) and data.get("format", FORMAT) == FORMAT and data.get("version", VERSION) != VERSION:
        raise KBFileError(f"{source}: field version: this deepunlearn reads version {VERSION}, the file is version {data.get('version')!r}")
    try:
        doc = KBFile.model_validate(data)
    except ValidationError as e:
        raise KBFileError(f"{source}: not a valid deepunlearn KB: {_describe(e)}") from None
    relations = {n: Relation(n, s.kind, s.question, s.answer) for n, s in doc.relations.items()}
    kb = KnowledgeBase(
        entities=doc.entities,
        relations=relations,
        facts=[tuple(f) for f in doc.facts],
        targets=list(doc.targets),
        name=doc.name,
        background=tuple(doc.background),
        probe_overrides={int(k): tuple(v) for k, v in doc.probes.items()},
        metadata=doc.metadata,
    )
    try:
        kb.validate()
    except KBError as e:
        raise KBFileError(f"{source}: {e}") from None
    return kb


def to_dict(kb: KnowledgeBase) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": kb.name,
        "background": list(kb.background),
        "entities": kb.entities,
        "relations": {
            n: {"kind": r.kind, "question": r.question, "answer": r.answer} for n, r in kb.relations.items()
        },
        "facts": [list(f) for f in kb.facts],
        "targets": list(kb.targets),
        "probes": {str(i): list(v) for i, v in sorted(kb.probe_overrides.items())},
        "metadata": kb.metadata,
    }


def load_kb(path: str | os.PathLike) -> KnowledgeBase:
    """Read a KB file; errors name the file and the field."""
    p = Path(path)
    if not p.exists():
        raise KBFileError(f"{p}: no such KB file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise KBFileError(f"{p}: not valid JSON: line {e.lineno}, column {e.colno}: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise KBFileError(f"{p}: not UTF-8 text ({e.reason})") from None
    return from_dict(data, source=str(p))


def dumps_kb(kb: KnowledgeBase) -> str:
    """Deterministic serialisation: the same KB always gives the same bytes."""
    return json.dumps(to_dict(kb), ensure_ascii=False, indent=1) + "\n"


def save_kb(kb: KnowledgeBase, path: str | os.PathLike) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a KB."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(dumps_kb(kb), encoding="utf-8")
    os.replace(tmp, p)
    return p
