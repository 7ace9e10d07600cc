"""What every layer shares at the boundary with the user: the user-error base class, safe
readers for the files a user hands us, and atomic writers for what we hand back.

The rule (DESIGN.md section 7, issue 11): bad input is one line naming the file, the flag or
field, and the problem; nothing already written is lost. Every layer's error class derives from
:class:`UserError`, so the CLI reports it as such (exit code 1) and, with ``--json``, prints
``{"error": ..., "file": ..., "field": ...}``. Anything else reaching the CLI is a bug.

This module imports nothing from the layers (all of them may import it).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

#: JSON documents nested deeper than this are refused (a KB is 3 levels deep, a sweep config 5):
#: well under Python's recursion limit, so neither ``json`` nor pydantic ever overflows the stack.
MAX_JSON_DEPTH = 64


class UserError(Exception):
    """Bad input from the user. ``file`` and ``field`` (the flag, the JSON field, the line) are
    kept apart from the message for ``--json`` error objects; ``str(e)`` is the one-line message.
    """

    def __init__(self, message: str = "", *args: Any, file: str | os.PathLike | None = None,
                 field: str | None = None):
        super().__init__(message, *args)
        self.file = None if file is None else str(file)
        self.field = field


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


def _tmp_sibling(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling renamed into place, so ``path`` is
    either its old content or the whole new one; missing parent folders are created."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary sibling folder of ``path``; when the block completes, it replaces
    ``path`` (an existing folder is removed only after the new one is in place); when the block
    raises, it is removed and ``path`` is untouched.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "ckpt"
    >>> with atomic_dir(d) as tmp:
    ...     _ = (tmp / "w.txt").write_text("new")
    >>> (d / "w.txt").read_text()
    'new'
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{p}: exists and is not a folder", file=p)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(p, "tmp")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if p.exists():
        old = _tmp_sibling(p, "old")
        os.replace(p, old)
    os.replace(tmp, p)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
