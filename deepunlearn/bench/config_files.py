"""Reading a sweep configuration file (TOML, YAML or JSON) into plain data, safely.

Whatever the bytes, the outcome is the decoded document or one :class:`UserError` (the caller's
error class) naming the file: not UTF-8, a syntax error, nesting deeper than
``MAX_JSON_DEPTH`` levels (checked before the recursive parsers and pydantic see it: a
``[[[[...]]]]`` of a few thousand levels overflowed their stacks), or a document too large once
YAML aliases are expanded (a "billion laughs" file would keep validation busy for ever), or a
YAML key given twice (:mod:`deepunlearn.safe_yaml`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

from ..errors import MAX_JSON_DEPTH, UserError, parse_json, read_text
from ..safe_yaml import MAX_CONFIG_NODES, check_shape, load_yaml  # noqa: F401 - MAX_CONFIG_NODES re-exported

FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}


def read_config_data(path: str | os.PathLike, error: type[UserError]) -> Any:
    """The decoded document of a ``.toml``, ``.yaml``/``.yml`` or ``.json`` configuration file."""
    p = Path(path)
    if p.exists() and not p.is_file() and not p.is_dir():
        raise error(f"{p}: not a regular file", file=p)
    fmt = FORMATS.get(p.suffix.lower())
    text = read_text(p, error=error)
    if fmt is None:
        raise error(f"{p}: unknown configuration format {p.suffix!r}: use .toml, .yaml or .json", file=p)
    if fmt == "JSON":
        data = parse_json(text, source=p, error=error)
    elif fmt == "TOML":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise error(f"{p}: cannot parse TOML: {e}", file=p) from None
        except RecursionError:
            raise error(f"{p}: configuration nested deeper than {MAX_JSON_DEPTH} levels", file=p) from None
    else:
        data = load_yaml(text, p, error)
    check_shape(data, p, error)
    return data


def describe_validation(e: "ValidationError") -> tuple[str, str | None]:
    """The message of a validation error (up to five problems) and the field of the first."""
    parts, fields = [], []
    for err in e.errors()[:5]:
        # keys come from the user's file: one with a newline or nothing printable is shown quoted
        loc = ".".join(str(x) if isinstance(x, int) or (x and str(x).isprintable()) else repr(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ").replace("\n", "\\n")
        # a check across fields names its field itself, as does a check of a field's parts
        if msg.startswith("field ") and (not loc or msg.removeprefix("field ").startswith(f"{loc}.")):
            parts.append(msg)
            fields.append(msg.split(":", 1)[0].removeprefix("field ").strip())
        else:
            parts.append(f"field {loc or '(top level)'}: {msg}")
            fields.append(loc or None)
    more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more, (fields[0] if fields else None)
