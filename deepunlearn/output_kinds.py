"""What each command's output IS, told from the path alone: the ``ours`` tests of
:func:`deepunlearn.outputs.check_output`. A JSON output is told by its own marker (a ``"format"``
key, or keys only that output holds together), never by being JSON at all; a model folder by the
``deepunlearn.json`` the tool writes into every model it saves, never by a ``config.json``.

Each test reads at most a bounded prefix of a file (a large KB is never read whole to be
refused), opens nothing that is not a regular file, and accepts an empty file or folder.

This module imports nothing from the package (:mod:`deepunlearn.outputs` re-exports it).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Iterable

def read_head(p: Path, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a file (empty if it cannot be read)."""
    try:
        with open(p, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def json_file(p: Path) -> bool:
    """An empty file or any JSON document (object or array). Too loose to tell a command's own
    output (a KB or a ``config.json`` passes): writers use :func:`deepunlearn.output_kinds.json_output`."""
    head = read_head(p).lstrip()
    return not head or head[:1] in (b"{", b"[")


def kb_file(p: Path) -> bool:
    """An empty file or a KB file (``"format": "deepunlearn-kb"`` at its top)."""
    head = read_head(p).lstrip()
    return not head or (head[:1] == b"{" and b'"deepunlearn-kb"' in head)


def graphml_file(p: Path) -> bool:
    """An empty file or a GraphML document (a ``<graphml`` element near its top), not any XML."""
    head = read_head(p).lstrip()
    return not head or (head.startswith((b"<?xml", b"<graphml")) and b"<graphml" in head)


FIGURE_MAGIC = (b"\x89PNG", b"%PDF", b"<?xml", b"<svg", b"%!PS", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"RIFF")


#: the formats whose files carry matplotlib's name (PNG and PDF metadata, an SVG comment, a PS
#: creator line); JPEG, TIFF and WebP carry none, so their magic number alone is what can be told
SIGNED_MAGIC = (b"\x89PNG", b"%PDF", b"<?xml", b"<svg", b"%!PS")


def _tail(p: Path, n: int = 4096) -> bytes:
    try:
        with open(p, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - n))
            return f.read(n)
    except OSError:
        return b""


def figure_file(p: Path) -> bool:
    """An empty file or an image matplotlib wrote: PNG, PDF, SVG or PS/EPS naming matplotlib in
    its metadata (the first or, PDF, the last 4 KiB), or a JPEG, TIFF or WebP (told by its magic
    number alone: those carry no writer's name)."""
    if _regular_size(p) is None:
        return False
    head = read_head(p).lstrip()
    if not head:
        return True
    if not head.startswith(FIGURE_MAGIC):
        return False
    if not head.startswith(SIGNED_MAGIC):
        return True
    return b"matplotlib" in (head + _tail(p)).lower()


#: the file that marks a model folder this tool wrote (``deepunlearn.probe.models.META_FILE``; every
#: model the tool saves carries it). A ``config.json`` alone does not: any folder may hold one.
MODEL_MARKERS = ("deepunlearn.json",)


def model_dir(p: Path) -> bool:
    """An empty folder or a model folder this tool wrote (:data:`MODEL_MARKERS`, a regular file,
    not a link)."""
    return not any(p.iterdir()) or any(os.path.isfile(p / m) and not os.path.islink(p / m) for m in MODEL_MARKERS)




# --------------------------------------------------------------------------------------------- JSON outputs

#: the most bytes a JSON output is read to tell whether it is the command's own (a larger file is
#: not taken for one unless its marker is in its first bytes: --force replaces it)
JSON_READ_LIMIT = 256 << 20


def _regular_size(p: Path) -> int | None:
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _read_doc(p: Path) -> tuple[bool, Any]:
    """``(True, None)`` for an empty file, ``(True, value)`` for a JSON document, ``(False, None)``
    for anything else (not a regular file, over :data:`JSON_READ_LIMIT`, not JSON)."""
    size = _regular_size(p)
    if size is None or size > JSON_READ_LIMIT:
        return False, None
    data = read_head(p, JSON_READ_LIMIT + 1)
    if not data.strip():
        return True, None
    try:
        return True, json.loads(data)
    except (ValueError, RecursionError):
        return False, None


def json_output(*shapes: Iterable[str], format: str | None = None,
                test: Callable[[Any], bool] | None = None) -> Callable[[Path], bool]:
    """The ``ours`` test of a command writing one JSON document: an empty file, or a JSON object
    whose ``"format"`` is ``format``, or that holds every key of one of ``shapes`` (an output
    that carries no ``"format"``: the keys only it holds together), or a document ``test``
    accepts (an array output). Anything else, a KB or a ``config.json`` included, is not ours."""
    keysets = [frozenset(k) for k in shapes]
    marker = None if format is None else json.dumps({"format": format})[1:-1].encode()

    def ours(p: Path) -> bool:
        if marker is not None and marker in read_head(p, 4096):  # a large output, told by its first bytes
            return True
        ok, doc = _read_doc(p)
        if not ok or doc is None:
            return ok
        if isinstance(doc, dict):
            if format is not None and doc.get("format") == format:
                return True
            if any(k <= doc.keys() for k in keysets):
                return True
        return test is not None and test(doc)
    return ours


def triples_array(doc: Any) -> bool:
    """A JSON array of ``[subject, relation, object]`` string triples (``rules closure -o``)."""
    return isinstance(doc, list) and all(isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)
                                         for t in doc)


def jsonl_output(*keys: str) -> Callable[[Path], bool]:
    """The ``ours`` test of a command writing JSON lines: an empty file, or one whose first line
    is a JSON object holding every key of ``keys``."""
    need = frozenset(keys)

    def ours(p: Path) -> bool:
        if _regular_size(p) is None:
            return False
        head = read_head(p, 1 << 20)
        first = next((ln for ln in head.splitlines() if ln.strip()), None)
        if first is None:
            return True
        try:
            doc = json.loads(first)
        except (ValueError, RecursionError):
            return False
        return isinstance(doc, dict) and need <= doc.keys()
    return ours


def verdict_lines(p: Path) -> bool:
    """An empty file or the output of ``evaluate --manifest``: JSON lines each carrying the
    manifest ``row`` it judged (``{"row": {"checkpoint": ...}, ...}``). The first complete line
    decides; a file whose only line is torn (a run killed mid-write) is ours when it starts so."""
    if _regular_size(p) is None:
        return False
    head = read_head(p, 1 << 20)
    lines = [ln for ln in head.split(b"\n") if ln.strip()]
    if not lines:
        return True
    try:
        doc = json.loads(lines[0])
    except (ValueError, RecursionError):
        return len(lines) == 1 and lines[0].lstrip().startswith(b'{"row": {"checkpoint": ')
    return isinstance(doc, dict) and isinstance(doc.get("row"), dict) and "checkpoint" in doc["row"]


# --------------------------------------------------------------------------------------------- each writer's own

#: ``probe -o`` (and ``lm-eval import -o``): the known facts (``known``, ``total``), or the scores
#: (``means``, ``scores``), or the membership test (``mia``, ``holdout``)
KNOWN_DOC = json_output(("known", "total"), ("means", "scores"), ("mia", "holdout"))
#: ``evaluate -o``: one verdict, or the verdicts of several unlearned models
VERDICT_DOC = json_output(("original", "target_id", "recall", "forgotten"), ("original", "verdicts"))
#: ``unlearn -o``: one target's points, or several targets'
UNLEARN_DOC = json_output(("method", "points"), ("method", "targets"))
#: ``rules compose -o``
COMPOSE_DOC = json_output(("questions", "skipped", "rule_set"))
#: ``rules closure -o``: the closure's facts
CLOSURE_DOC = json_output(test=triples_array)
#: ``data export -o X.jsonl``: the KB's probes
PROBES_JSONL = jsonl_output("fact_id", "fact", "question", "answer")
