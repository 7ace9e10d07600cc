"""What every layer shares at the boundary with the user: the user-error base class, safe
readers for the files a user hands us, and atomic writers for what we hand back.

The rule (docs/safety.md): bad input is one line naming the file, the flag or
field, and the problem; nothing already written is lost. Every layer's error class derives from
:class:`UserError`, so the CLI reports it as such (exit code 1) and, with ``--json``, prints
``{"error": ..., "file": ..., "field": ...}``. Anything else reaching the CLI is a bug.

This module imports nothing from the layers (all of them may import it); the atomic writers and
the output policy are :mod:`deepunlearn.outputs`, re-exported here.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterator

from .user_error import UserError
# the atomic writers live with the output policy they carry out (re-exported: every layer imports them here)
from .outputs import (OutputError, atomic_dir, atomic_write_bytes, atomic_write_text,  # noqa: F401
                      check_output)

#: JSON documents nested deeper than this are refused (a KB is 3 levels deep, a sweep config 5):
#: well under Python's recursion limit, so neither ``json`` nor pydantic ever overflows the stack.
MAX_JSON_DEPTH = 64


#: a message that opens with a file (``rules.dl: ...``, ``--rules r.dl:3: ...``, ``out/x.json: ...``)
_LEADING_FILE = re.compile(r"^(?:--[\w-]+ )?((?:[^\s:'\"]*/)?[^\s:/'\"]+\.[A-Za-z][\w]{0,9})(?::\d+)*: ")


def describe(e: BaseException) -> dict[str, Any]:
    """The ``--json`` error object of an exception: ``{"error", "file", "field"}``. An error
    raised without its file whose message opens with one (``r.dl:3: ...``) gets that file."""
    file = getattr(e, "file", None) if isinstance(e, UserError) else getattr(e, "filename", None)
    message = str(e) or type(e).__name__
    if file is None and isinstance(e, UserError):
        m = _LEADING_FILE.match(message)
        file = m.group(1) if m else None
    return {"error": message, "file": None if file is None else str(file), "field": getattr(e, "field", None)}


def _where(path: str | os.PathLike, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


#: Default cap on the size of a data file the user hands us (a KB, a forms file, a fact list):
#: 1 GiB, several times the largest KB the generators write. The environment variable
#: ``DEEPUNLEARN_MAX_INPUT_BYTES`` changes it (read at each call, so a test or a session may set it).
MAX_INPUT_BYTES = 1 << 30
INPUT_BYTES_ENV = "DEEPUNLEARN_MAX_INPUT_BYTES"
#: Cap on small hand-written files (``domain.toml``, rule files): 16 MiB.
MAX_SMALL_FILE_BYTES = 16 << 20


def env_limit(env: str, default: int, *, error: type[UserError] = UserError) -> int:
    """``$env`` as a positive integer (``error`` naming the variable if it is not one), else
    ``default``; read at each call, so a test or a session may set it."""
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        v = 0
    if v < 1:
        raise error(f"environment variable {env}: expected a positive integer, got {raw!r}", field=env)
    return v


def max_input_bytes() -> int:
    """The cap on data files: ``$DEEPUNLEARN_MAX_INPUT_BYTES`` if set, else :data:`MAX_INPUT_BYTES`."""
    return env_limit(INPUT_BYTES_ENV, MAX_INPUT_BYTES)


def _size(n: int, exact: bool = False) -> str:
    """``1 GiB``, ``2.99 KiB``; ``exact``: a size that is not a whole number of a unit (a cap
    someone set) in bytes, ``2,000 bytes``."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            if exact and n % (1 << k):
                return f"{n:,} bytes"
            return f"{n / (1 << k):.3g} {unit}"
    return f"{n:,} bytes"


def read_bytes(path: str | os.PathLike, *, flag: str | None = None, error: type[UserError] = UserError,
               limit: int | None = None, env: str | None = None) -> bytes:
    """The bytes of a file the user named (by ``flag``), read in a bounded way, or ``error``
    saying what is wrong: missing, a folder, not a regular file (a FIFO would block, ``/dev/zero``
    never ends), over ``limit`` bytes (default :func:`max_input_bytes`; ``env``: the variable
    that set ``limit``, named in the message), unreadable."""
    p = Path(path)
    where = _where(path, flag)
    cap = max_input_bytes() if limit is None else limit
    try:
        st = os.stat(p)  # stat, not open: opening a FIFO blocks until a writer comes
    except FileNotFoundError:
        raise error(f"{where}: no such file", file=p, field=flag) from None
    except OSError as e:
        raise error(f"{where}: cannot read ({e.strerror or e})", file=p, field=flag) from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{where}: is a folder, expected a file", file=p, field=flag)
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{where}: not a regular file (a device, FIFO or socket), expected a file", file=p, field=flag)
    too_big = f"{where}: file is over the size limit of {_size(cap, exact=True)}"
    hint = f" (set {env or INPUT_BYTES_ENV} to raise it)" if limit is None or env else ""
    if st.st_size > cap:
        raise error(f"{too_big} ({_size(st.st_size)}){hint}", file=p, field=flag)
    try:
        # O_NONBLOCK: the path may have been swapped for a FIFO since the stat
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise error(f"{where}: not a regular file, expected a file", file=p, field=flag)
            data = f.read(cap + 1)  # a file growing while read stops here
    except IsADirectoryError:
        raise error(f"{where}: is a folder, expected a file", file=p, field=flag) from None
    except OSError as e:
        raise error(f"{where}: cannot read ({e.strerror or e})", file=p, field=flag) from None
    if len(data) > cap:
        raise error(f"{too_big}{hint}", file=p, field=flag)
    return data


def read_text(path: str | os.PathLike, *, flag: str | None = None, error: type[UserError] = UserError,
              limit: int | None = None, env: str | None = None) -> str:
    """Read a UTF-8 text file the user named (by ``flag``) with :func:`read_bytes` (``limit``:
    its size cap, ``env`` the variable that set it), or raise ``error`` saying what is wrong:
    missing, a folder, not a regular file, too big, unreadable, or not UTF-8 (with the byte offset).
    A leading UTF-8 byte-order mark (spreadsheet exports) is dropped: it is no part of the text."""
    return _utf8(read_bytes(path, flag=flag, error=error, limit=limit, env=env), path, flag, error)


def text_lines(text: str) -> list[str]:
    r"""``text``'s lines, split at ``\n``, ``\r\n`` and ``\r`` only: ``str.splitlines`` also splits
    at U+2028, U+0085, form feeds and more, which a JSON string or a name may hold.

    >>> text_lines('{"a": "x\u2028y"}\r\nb\n'), "x\u2028y".splitlines()
    (['{"a": "x\u2028y"}', 'b'], ['x', 'y'])
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _utf8(data: bytes, path: str | os.PathLike, flag: str | None, error: type[UserError]) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise error(f"{_where(path, flag)}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})",
                    file=Path(path), field=flag) from None


def json_depth_ok(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether no bracket nesting in the JSON text goes deeper than ``limit`` (strings skipped).

    Vectorised (a KB of millions of facts is hundreds of MB of text, which a loop over its
    characters takes seconds to read): escapes ``\\x`` are dropped first (only strings hold
    them), then a quote's running parity marks the string bytes, and the running sum of the
    brackets outside them is the depth. UTF-8 bytes and characters agree here: every byte of
    a multi-byte character is >= 0x80, never a quote, bracket or backslash. The answer is the
    character loop's for every text whose backslashes lie inside strings (every JSON document;
    any other text is refused by the parser anyway)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if len(data) < 4096:  # small documents (configs, one JSONL line): numpy's overhead is not worth it
        return _depth_ok_loop(data.decode("utf-8", "surrogatepass"), limit)
    import numpy as np

    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    arr = np.frombuffer(data, dtype=np.uint8)
    depth, in_str = 0, 0
    for start in range(0, len(arr), _DEPTH_CHUNK):
        c = arr[start:start + _DEPTH_CHUNK]
        inside = (np.cumsum(c == 34, dtype=np.uint8) + in_str) & 1  # 34: '"'; wrapping keeps the parity
        step = ((c == 91) | (c == 123)).astype(np.int32) - ((c == 93) | (c == 125))  # [{ and ]}
        step[inside == 1] = 0
        running = np.cumsum(step, dtype=np.int32) + depth  # a chunk's sum fits: 2**23 bytes
        if running.max() > limit:
            return False
        depth, in_str = int(running[-1]), int(inside[-1])
    return True


_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_DEPTH_CHUNK = 1 << 23  # bytes per vectorised step: bounded temporaries on any file size


def _depth_ok_loop(text: str, limit: int) -> bool:
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


#: A ``\\uD800``-``\\uDFFF`` escape: the only way a lone surrogate (text no UTF-8 writer can
#: encode) gets into decoded JSON.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_path(parts: Any) -> str:
    """``facts[3][0]``, ``entities["Ann\\u202e"]``: a path into a JSON document, one line
    (keys that are not plain words are written as JSON strings with escapes)."""
    out = ""
    for x in parts:
        if isinstance(x, int):
            out += f"[{x}]"
        elif len(str(x)) > 60:  # a long key, shortened: the line is an error message
            out += f"[{json.dumps(str(x)[:57])[:-1]}...\"]"
        elif _BARE_KEY.match(str(x)):
            out += f".{x}" if out else str(x)
        else:
            out += f"[{json.dumps(str(x))}]"
    return out or "(top level)"


def lone_surrogate(value: Any) -> str | None:
    """The path (:func:`json_path`) of the first string of a decoded JSON value, keys included,
    that holds a lone surrogate, or ``None``."""
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        v, at = stack.pop()
        if isinstance(v, str):
            if _LONE_SURROGATE.search(v):
                return json_path(at)
        elif isinstance(v, dict):
            for k in v:
                if isinstance(k, str) and _LONE_SURROGATE.search(k):
                    return json_path((*at, k)) + " (the key)"
            stack.extend((x, (*at, k)) for k, x in reversed(v.items()))  # popped in document order
        elif isinstance(v, list):
            stack.extend((v[i], (*at, i)) for i in range(len(v) - 1, -1, -1))
    return None


def surrogate_problem(text: str, value: Any) -> str | None:
    """``"PATH: ..."`` if the JSON ``text`` decoded to ``value`` holds a lone surrogate (checked
    only when the text has a surrogate escape at all, so ordinary files cost one regex scan)."""
    if not _SURROGATE_ESCAPE.search(text):
        return None
    at = lone_surrogate(value)
    return None if at is None else f"{at}: holds a lone surrogate escape (\\ud800-\\udfff), not a Unicode character"


def parse_json(text: str, *, source: str | os.PathLike = "<input>", flag: str | None = None,
               error: type[UserError] = UserError) -> Any:
    """Decode JSON the user gave us; syntax errors, ``NaN``/``Infinity``, nesting deeper than
    :data:`MAX_JSON_DEPTH` and lone surrogates (``"\\ud800"``) are ``error`` naming the source
    (and line:column, or the path of the string)."""
    if not json_depth_ok(text):
        where = _where(source, flag)
        raise error(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels", file=source, field=flag)
    fast = _fast_loads(text)
    return fast if fast is not _FAILED else _standard_loads(text, source, flag, error)


def _standard_loads(text: str, source: str | os.PathLike, flag: str | None, error: type[UserError]) -> Any:
    """The standard library's decoding, whose messages (line:column, the surrogate's path) every
    refusal uses."""
    where = _where(source, flag)

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})", file=source, field=flag) from None
    except (ValueError, RecursionError) as e:
        raise error(f"{where}: not valid JSON ({e})", file=source, field=flag) from None
    bad = surrogate_problem(text, data)
    if bad is not None:
        raise error(f"{where}: {bad}", file=source, field=flag)
    return data


_FAILED = object()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off for the block: decoding and checking a KB of millions of facts
    allocates millions of lists and tuples (none in a cycle), and each allocation burst made the
    collector walk every object so far, most of the decoding time on a large KB."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _fast_loads(doc: str | bytes) -> Any:
    """orjson's decoding of ``doc`` (2-3x the standard library's speed on a large KB), or
    ``_FAILED``: orjson missing, a surrogate escape anywhere (the standard path names the
    string), 19 digits in a row (a big integer), or anything orjson refuses (invalid UTF-8,
    syntax, nesting over 1,024), which the standard path then decodes or refuses with its own
    messages.
    Documents orjson accepts decode to the same values (it refuses NaN and Infinity too)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency; without it the standard parser serves
        return _FAILED
    escape = _SURROGATE_ESCAPE_BYTES if isinstance(doc, bytes) else _SURROGATE_ESCAPE
    if escape.search(doc) or _long_digit_run(doc):
        return _FAILED
    try:
        return orjson.loads(doc)
    except (orjson.JSONDecodeError, TypeError, UnicodeError):
        return _FAILED


#: Bytes -> b"0" for a digit, b" " otherwise: runs of digits become runs of b"0", found by substring search.
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))


def _long_digit_run(doc: str | bytes) -> bool:
    """Whether ``doc`` holds 19 digits in a row: an integer orjson may not hold in 64 bits (it
    turns those into floats, silently), so such a document takes the standard path. In chunks,
    overlapping by 18 bytes, so the translated copy stays small."""
    data = doc.encode("utf-8", "surrogatepass") if isinstance(doc, str) else doc
    run = b"0" * 19
    return any(run in data[max(0, i - 18):i + _DEPTH_CHUNK].translate(_DIGITS)
               for i in range(0, len(data), _DEPTH_CHUNK))


def load_json(path: str | os.PathLike, *, flag: str | None = None, error: type[UserError] = UserError) -> Any:
    """:func:`read_text` then :func:`parse_json`, with the same refusals and messages. orjson
    reads the bytes first (it also refuses bytes that are not UTF-8); only when it refuses them
    are they decoded and checked in :func:`read_text`'s and :func:`parse_json`'s order, so a
    large KB is neither decoded twice nor held twice."""
    data = read_bytes(path, flag=flag, error=error)
    fast = _fast_loads(data)
    if fast is not _FAILED and json_depth_ok(data):
        return fast
    return parse_json(_utf8(data, path, flag, error), source=path, flag=flag, error=error)


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
