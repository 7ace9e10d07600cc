"""What every layer shares at the boundary with the user: the user-error base class, safe
readers for the files a user hands us, and atomic writers for what we hand back.

The rule (DESIGN.md section 7, issue 11): bad input is one line naming the file, the flag or
field, and the problem; nothing already written is lost. Every layer's error class derives from
:class:`UserError`, so the CLI reports it as such (exit code 1) and, with ``--json``, prints
``{"error": ..., "file": ..., "field": ...}``. Anything else reaching the CLI is a bug.

This module imports nothing from the layers (all of them may import it); the atomic writers and
the output policy are :mod:`deepunlearn.outputs`, re-exported here.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .user_error import UserError
# the atomic writers live with the output policy they carry out (re-exported: every layer imports them here)
from .outputs import (OutputError, atomic_dir, atomic_write_bytes, atomic_write_text,  # noqa: F401
                      check_output)

#: JSON documents nested deeper than this are refused (a KB is 3 levels deep, a sweep config 5):
#: well under Python's recursion limit, so neither ``json`` nor pydantic ever overflows the stack.
MAX_JSON_DEPTH = 64


def describe(e: BaseException) -> dict[str, Any]:
    """The ``--json`` error object of an exception: ``{"error", "file", "field"}``."""
    file = getattr(e, "file", None) if isinstance(e, UserError) else getattr(e, "filename", None)
    return {"error": str(e) or type(e).__name__, "file": None if file is None else str(file),
            "field": getattr(e, "field", None)}


def _where(path: str | os.PathLike, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


def read_text(path: str | os.PathLike, *, flag: str | None = None, error: type[UserError] = UserError) -> str:
    """Read a UTF-8 text file the user named (by ``flag``), or raise ``error`` saying what is wrong:
    missing, a folder, unreadable, or not UTF-8 (with the byte offset)."""
    p = Path(path)
    where = _where(path, flag)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{where}: no such file", file=p, field=flag) from None
    except IsADirectoryError:
        raise error(f"{where}: is a folder, expected a file", file=p, field=flag) from None
    except OSError as e:
        raise error(f"{where}: cannot read ({e.strerror or e})", file=p, field=flag) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})",
                    file=p, field=flag) from None


def json_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether no bracket nesting in the JSON text goes deeper than ``limit`` (strings skipped)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def parse_json(text: str, *, source: str | os.PathLike = "<input>", flag: str | None = None,
               error: type[UserError] = UserError) -> Any:
    """Decode JSON the user gave us; syntax errors, ``NaN``/``Infinity`` and nesting deeper than
    :data:`MAX_JSON_DEPTH` are ``error`` naming the source (and line:column)."""
    where = _where(source, flag)
    if not json_depth_ok(text):
        raise error(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels", file=source, field=flag)

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})", file=source, field=flag) from None
    except (ValueError, RecursionError) as e:
        raise error(f"{where}: not valid JSON ({e})", file=source, field=flag) from None


def load_json(path: str | os.PathLike, *, flag: str | None = None, error: type[UserError] = UserError) -> Any:
    """:func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, flag=flag, error=error), source=path, flag=flag, error=error)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by ``None``, recursively, so
    ``json.dumps`` emits valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity`` (they become ``null``)."""
    return json.dumps(finite(obj), allow_nan=False, **kw)
