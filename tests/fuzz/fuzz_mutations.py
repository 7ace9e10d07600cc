"""Hypothesis strategies that turn a valid seed file into a hostile one: raw byte mutations
(truncation, bit flips, inserted junk, repeated chunks, an empty file) and structured ones
(a JSON value, key or line replaced by a hostile token: huge numbers, deep nesting, lone
surrogate escapes, control characters, ``|`` and U+202E in names, dunder names, duplicate keys,
wrong types, very long strings)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

#: hostile JSON texts, spliced in raw so that what ``json.dumps`` cannot write (lone surrogate
#: escapes, NaN, 1e999, 5,000-deep nesting) reaches the reader
HOSTILE_JSON = [
    '"\\ud800"', '"Ann\\udfff"', '"\\udc80\\ud800x"', '"Ann|Bob"', '"\\u202eAnn"', '"A\\u0000n"', '"A\\nB"',
    '"\\t\\r\\u001b[31m"', '""', '" "', '"__class__"', '"__init__"', '"__proto__"', '"x" ', '"' + "x" * 100_000 + '"',
    "1e999", "-1e999", "NaN", "Infinity", "1" * 40, "-" + "9" * 30, "9223372036854775808", "2147483648", "-1", "0",
    "1.5", "-0.0", "1e308", "true", "false", "null", "[]", "{}", '[""]', '{"": null}', "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000, "[1e999, null, true]", '{"__class__": 1}',
]
#: hostile names (entities, relations, keys) as plain strings
HOSTILE_NAMES = ["Ann|Bob", "\u202eAnn", "A\x00n", "A\nB", "__class__", "__dict__", "", " ", "x" * 100_000,
                 "\ud800", "Zoë", "a b", "../x", "-o", "%s", "{question}", "\t"]
#: hostile chunks for byte-level insertion
HOSTILE_BYTES = [b"\x00", b"\xff\xfe", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\n", b"\r\n", b"\"", b"\\", b"{", b"[",
                 b"|", b"\xe2\x80\xae", b'\\ud800', b"\x1b[2J", b"9" * 40, b"[" * 2000]


def byte_mutations(seed: bytes) -> st.SearchStrategy[tuple[bytes, str]]:
    """(mutated bytes, a short description) from ``seed``."""
    n = max(len(seed), 1)
    pos = st.integers(0, n)
    return st.one_of(
        st.just((b"", "empty file")),
        pos.map(lambda i: (seed[:i], f"truncated at {i}")),
        st.tuples(st.integers(0, n - 1), st.integers(0, 7)).map(
            lambda t: (seed[:t[0]] + bytes([seed[t[0]] ^ (1 << t[1])]) + seed[t[0] + 1:] if seed else b"\x01",
                       f"bit {t[1]} of byte {t[0]} flipped")),
        st.tuples(pos, st.sampled_from(HOSTILE_BYTES) | st.binary(min_size=1, max_size=16)).map(
            lambda t: (seed[:t[0]] + t[1] + seed[t[0]:], f"{t[1][:16]!r} inserted at {t[0]}")),
        st.tuples(pos, pos).map(lambda t: (seed[:min(t)] + seed[max(t):], f"bytes {min(t)}:{max(t)} deleted")),
        st.tuples(pos, pos, st.integers(2, 50)).map(
            lambda t: (seed[:max(t[:2])] + seed[min(t[:2]):max(t[:2])] * t[2] + seed[max(t[:2]):],
                       f"bytes {min(t[:2])}:{max(t[:2])} repeated {t[2]} times")),
        st.binary(max_size=200).map(lambda b: (b, "random bytes")),
    )


def json_paths(obj, prefix=()):
    """Every place in a JSON document, as a path of keys/indices (the root included)."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):  # a long list's first items stand for the rest
            out += json_paths(v, prefix + (i,))
    return out


_MARK = "\u0001FUZZ\u0001"
_MARK_JSON = json.dumps(_MARK)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12)


def _copy(doc):
    return json.loads(json.dumps(doc))


def _splice(doc, path, raw: str, *, as_key: bool = False, duplicate: bool = False, indent=None) -> str:
    """``doc`` as JSON text with the value (or key) at ``path`` replaced by the raw text ``raw``;
    ``duplicate``: the key appears twice, the second time with ``raw`` as its value."""
    doc = _copy(doc)
    if not path:
        return raw
    node = doc
    for k in path[:-1]:
        node = node[k]
    last = path[-1]
    if as_key and isinstance(node, dict):
        node[_MARK] = node.pop(last)
        return json.dumps(doc, indent=indent).replace(_MARK_JSON, raw if raw.startswith('"') else json.dumps(raw), 1)
    if duplicate and isinstance(node, dict):
        text = json.dumps(node[last])
        node[last] = _MARK
        return json.dumps(doc, indent=indent).replace(_MARK_JSON, f"{text}, {json.dumps(last)}: {raw}", 1)
    node[last] = _MARK
    return json.dumps(doc, indent=indent).replace(_MARK_JSON, raw, 1)


def json_mutations(doc, *, indent=None) -> st.SearchStrategy[tuple[bytes, str]]:
    """(JSON text, description): one value, key or duplicate key of ``doc`` made hostile."""
    paths = json_paths(doc)
    raw = st.sampled_from(HOSTILE_JSON) | JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True))
    how = st.sampled_from(["value", "value", "value", "key", "duplicate"])

    def make(t):
        path, r, h = t
        text = _splice(doc, path, r, as_key=h == "key" and bool(path), duplicate=h == "duplicate" and bool(path),
                       indent=indent)
        return text.encode("utf-8", "surrogatepass"), f"{h} at {list(path)[:6]} <- {r[:40]}"

    return st.tuples(st.sampled_from(paths), raw, how).map(make)


def hostile_file(seed_bytes: bytes, doc=None) -> st.SearchStrategy[tuple[bytes, str]]:
    """Structured mutations of a JSON seed (when ``doc`` is given), or byte mutations."""
    if doc is None:
        return byte_mutations(seed_bytes)
    return st.one_of(json_mutations(doc), json_mutations(doc), byte_mutations(seed_bytes))


def line_mutations(text: str, tokens: list[str]) -> st.SearchStrategy[tuple[bytes, str]]:
    """(text, description) with one line of ``text`` deleted, repeated, moved, or with a hostile
    token inserted into it or replacing one of its words."""
    lines = text.splitlines(keepends=True) or [""]
    n = len(lines)
    idx = st.integers(0, n - 1)
    tok = st.sampled_from(tokens)

    def insert(t):
        i, j, w = t
        ln = lines[i]
        j = min(j, len(ln))
        return "".join(lines[:i] + [ln[:j] + w + ln[j:]] + lines[i + 1:]), f"line {i + 1}: {w[:30]!r} at col {j}"

    def replace_word(t):
        i, k, w = t
        words = lines[i].split(" ")
        k %= len(words)
        words[k] = w
        return "".join(lines[:i] + [" ".join(words)] + lines[i + 1:]), f"line {i + 1}: word {k} <- {w[:30]!r}"

    def repeat(t):
        i, r = t
        return "".join(lines[:i] + [lines[i]] * r + lines[i + 1:]), f"line {i + 1} repeated {r} times"

    out = st.one_of(
        st.tuples(idx, st.integers(0, 80), tok).map(insert),
        st.tuples(idx, st.integers(0, 20), tok).map(replace_word),
        st.tuples(idx, st.integers(2, 200)).map(repeat),
        idx.map(lambda i: ("".join(lines[:i] + lines[i + 1:]), f"line {i + 1} deleted")),
        st.tuples(idx, idx).map(lambda t: ("".join(lines[:t[1]] + [lines[t[0]]] + lines[t[1]:]),
                                           f"line {t[0] + 1} copied before {t[1] + 1}")),
    )
    return out.map(lambda p: (p[0].encode("utf-8", "surrogatepass"), p[1]))
