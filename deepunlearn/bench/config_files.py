"""Reading a sweep configuration file (TOML, YAML or JSON) into plain data, safely.

Whatever the bytes, the outcome is the decoded document or one :class:`UserError` (the caller's
error class) naming the file: not UTF-8, a syntax error, nesting deeper than
``MAX_JSON_DEPTH`` levels (checked before the recursive parsers and pydantic see it: a
``[[[[...]]]]`` of a few thousand levels overflowed their stacks), or a document too large once
YAML aliases are expanded (a "billion laughs" file would keep validation busy for ever).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

from ..errors import MAX_JSON_DEPTH, UserError, parse_json, read_text

#: values in a decoded config (aliases counted each time they are used); a real sweep has ~100
MAX_CONFIG_NODES = 100_000

FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}


def _yaml_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether no YAML collection nests deeper than ``limit`` (the event parser is not recursive;
    the composer that builds the objects is). Syntax errors surface here as ``yaml.YAMLError``."""
    import yaml

    depth = 0
    for ev in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > limit:
                return False
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return True


def check_shape(data: Any, source: str | os.PathLike, error: type[UserError]) -> None:
    """Refuse a decoded document nested deeper than ``MAX_JSON_DEPTH`` or with more than
    ``MAX_CONFIG_NODES`` values (iteratively: no recursion on hostile input)."""
    stack, nodes = [(data, 1)], 0
    while stack:
        obj, depth = stack.pop()
        nodes += 1
        if nodes > MAX_CONFIG_NODES:
            raise error(f"{source}: configuration too large (more than {MAX_CONFIG_NODES} values, "
                        "YAML aliases counted each time they are used)", file=source)
        if depth > MAX_JSON_DEPTH:
            raise error(f"{source}: configuration nested deeper than {MAX_JSON_DEPTH} levels", file=source)
        if isinstance(obj, dict):
            stack.extend((v, depth + 1) for v in obj.values())
            stack.extend((k, depth + 1) for k in obj if not isinstance(k, (str, int, float, bool)))
        elif isinstance(obj, (list, tuple)):
            stack.extend((v, depth + 1) for v in obj)


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
        import yaml

        try:
            if not _yaml_depth_ok(text):
                raise error(f"{p}: configuration nested deeper than {MAX_JSON_DEPTH} levels", file=p)
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise error(f"{p}: cannot parse YAML: {' '.join(str(e).split())}", file=p) from None
        except (RecursionError, ValueError, OverflowError) as e:  # e.g. a timestamp out of range
            raise error(f"{p}: cannot parse YAML: {e}", file=p) from None
    check_shape(data, p, error)
    return data


def describe_validation(e: "ValidationError") -> tuple[str, str | None]:
    """The message of a validation error (up to five problems) and the field of the first."""
    parts, fields = [], []
    for err in e.errors()[:5]:
        # keys come from the user's file: one with a newline or nothing printable is shown quoted
        loc = ".".join(str(x) if isinstance(x, int) or (x and str(x).isprintable()) else repr(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ").replace("\n", "\\n")
        # a check across fields names its field itself
        if not loc and msg.startswith("field "):
            parts.append(msg)
            fields.append(msg.split(":", 1)[0].removeprefix("field ").strip())
        else:
            parts.append(f"field {loc or '(top level)'}: {msg}")
            fields.append(loc or None)
    more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more, (fields[0] if fields else None)
