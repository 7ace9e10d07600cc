"""Reading a YAML (or decoded TOML/JSON) configuration safely, for every command that takes one
(a sweep's config, ``finetune --config``).

Whatever the text, the outcome is the decoded document or one :class:`UserError` (the caller's
error class) naming the file: a syntax error, a key given twice in one mapping (YAML keeps the
last one silently), nesting deeper than ``MAX_JSON_DEPTH`` levels (checked on the event stream,
before the recursive composer), or a document too large once its aliases are expanded (a
"billion laughs" file would keep validation busy for ever and exhaust memory).

This module imports nothing from the layers (all of them may import it).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import MAX_JSON_DEPTH
from .user_error import UserError

#: values in a decoded config (aliases counted each time they are used); a real sweep has ~100
MAX_CONFIG_NODES = 100_000


def yaml_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
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


def _unique_loader():
    """yaml's SafeLoader, refusing a key given twice in one mapping (line and key named)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[override]
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    twice = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader's own error names it
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice (line {key_node.start_mark.line + 1})")
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load_yaml(text: str, source: str | os.PathLike, error: type[UserError], *, prefix: str | None = None,
              field: str | None = None) -> Any:
    """The decoded YAML document of ``text`` (read from ``source``); every problem is one
    ``error`` line starting with ``prefix`` (default: the file)."""
    import yaml

    where = prefix if prefix is not None else str(source)
    try:
        if not yaml_depth_ok(text):
            raise error(f"{where}: configuration nested deeper than {MAX_JSON_DEPTH} levels", file=source,
                        field=field)
        data = yaml.load(text, Loader=_unique_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise error(f"{where}: cannot parse YAML: {' '.join(str(e).split())}", file=source, field=field) from None
    except (RecursionError, ValueError, OverflowError) as e:  # e.g. a timestamp out of range
        raise error(f"{where}: cannot parse YAML: {e}", file=source, field=field) from None
    check_shape(data, source, error)
    return data
