"""The KB reader's fast paths (orjson, the vectorised depth check, the bulk name and fact
checks) accept and refuse exactly what the plain paths do, with the same messages."""

from __future__ import annotations

import json
import random

import pytest

from deepunlearn import errors
from deepunlearn.errors import UserError, _depth_ok_loop, json_depth_ok, load_json, parse_json
from deepunlearn.kg.io import KBFileError, load_kb


def _jsonish(rng: random.Random, n: int) -> str:
    """Brackets, commas and strings full of brackets, quotes and backslashes (escaped)."""
    def tok() -> str:
        if rng.random() < 0.6:
            return rng.choice("[]{},: 1")
        s = "".join(rng.choice('[]{}"\\a\u00e9\n') for _ in range(rng.randint(0, 6)))
        return json.dumps(s, ensure_ascii=rng.random() < 0.5)
    return "".join(tok() for _ in range(n))


@pytest.mark.parametrize("chunk", [7, 1 << 23])
def test_vectorised_depth_check_agrees_with_the_character_loop(monkeypatch, chunk):
    monkeypatch.setattr(errors, "_DEPTH_CHUNK", chunk)  # state carried across chunk boundaries
    rng = random.Random(0)
    for _ in range(300):
        text = _jsonish(rng, rng.randint(900, 3000))  # above the size served by the loop itself
        for limit in (2, 5, 64):
            assert json_depth_ok(text, limit) == _depth_ok_loop(text, limit)
            assert json_depth_ok(text.encode(), limit) == _depth_ok_loop(text, limit)


def test_deep_nesting_in_a_large_file_is_refused_and_brackets_in_strings_do_not_count(tmp_path):
    pad = json.dumps("[" * 10_000)  # a long string of brackets: not nesting
    ok = tmp_path / "ok.json"
    ok.write_text(f'{{"a": {pad}, "b": ' + "[" * 63 + "]" * 63 + "}")  # 64 with the object
    assert load_json(ok)["a"] == "[" * 10_000
    deep = tmp_path / "deep.json"
    deep.write_text(f'{{"a": {pad}, "b": ' + "[" * 64 + "]" * 64 + "}")
    with pytest.raises(UserError, match=r"deep\.json: JSON nested deeper than 64 levels$"):
        load_json(deep)


@pytest.mark.parametrize("text", [
    '{"n": 123456789012345678901234567890}',  # over 64 bits: orjson would make it a float
    '{"n": [-9223372036854775808, 18446744073709551615, 1e400, 0.12345678901234567890123]}',
    '{"x": [1.5, -0.0, 1e300, "\\u00e9\\n", true, null], "y": {"a": {"b": []}}}',
    '{"s": "\\ud83d\\ude00"}',  # an escaped surrogate pair is one character
])
def test_fast_decoding_gives_the_standard_values(tmp_path, text):
    f = tmp_path / "v.json"
    f.write_text(text)
    assert load_json(f) == json.loads(text) == parse_json(text)


@pytest.mark.parametrize("text, problem", [
    ('{"a": 1,}', ":1:9: not valid JSON (Expecting property name enclosed in double quotes)"),
    ('{"a": NaN}', ": not valid JSON (NaN is not JSON)"),
    ('{"a": ["\\ud800"]}', ": a[0]: holds a lone surrogate escape (\\ud800-\\udfff), not a Unicode character"),
    ("[" * 2000 + "]" * 2000, ": JSON nested deeper than 64 levels"),
])
def test_refusals_keep_the_standard_messages(tmp_path, text, problem):
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_json(f)
    assert str(e.value) == f"{f}{problem}"


def test_not_utf8_is_still_named_with_its_byte(tmp_path):
    f = tmp_path / "latin.json"
    f.write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(UserError, match=r"latin\.json: not UTF-8 text \(byte 10: b'\\xe9'\)$"):
        load_json(f)


def _kb_doc(**over) -> dict:
    rel = {"kind": "entity", "group": "family", "questions": ["Who is {o2} to {o1}?"], "answer": "{r}"}
    doc = {"format": "deepunlearn-kb", "version": 2, "entities": {"Ann": {}, "Bob": {}},
           "relations": {"father": rel, "born": {**rel, "kind": "value"}},
           "facts": [["Ann", "father", "Bob"], ["Bob", "born", "1950"]]}
    return {**doc, **over}


@pytest.mark.parametrize("over, problem", [
    ({"facts": [["Ann", "father", "Bob"], ["Eve", "father", "Bob"]]}, "facts[1]: subject 'Eve' is not a declared entity"),
    ({"facts": [["Ann", "uncle", "Bob"]]}, "facts[0]: relation 'uncle' is not declared"),
    ({"facts": [["Ann", "born", "x"], ["Ann", "father", "Zed"]]},
     "facts[1]: object 'Zed' of entity relation 'father' is not a declared entity"),
    ({"facts": [["Ann", "father", "Bob"], ["Bob", "born", "1"], ["Ann", "father", "Bob"]]},
     "facts[2]: duplicate of facts[0] ['Ann', 'father', 'Bob']"),
    ({"facts": [["Ann", "born", "ok"], ["Bob", "born", "a|b"]]}, 'facts[1][2]: value "a|b" holds \'|\''),
    ({"entities": {"Ann": {}, "Bob": {}, " ": {}}}, 'entities[" "]: entity name " " is empty'),
    ({"entities": {"Ann": {}, "Bob": {}, "B" * 201: {}}}, "is 201 characters long, over the limit of 200"),
])
def test_bulk_fact_and_name_checks_name_the_first_problem(tmp_path, over, problem):
    f = tmp_path / "kb.json"
    f.write_text(json.dumps(_kb_doc(**over)))
    with pytest.raises(KBFileError) as e:
        load_kb(f)
    assert str(e.value).startswith(f"{f}: ") and problem in str(e.value)


def test_a_good_kb_reads_the_same_through_both_paths(tmp_path, monkeypatch):
    f = tmp_path / "kb.json"
    f.write_text(json.dumps(_kb_doc()))
    fast = load_kb(f)
    monkeypatch.setattr(errors, "_fast_loads", lambda doc: errors._FAILED)  # the standard parser only
    slow = load_kb(f)
    assert fast.facts == slow.facts == [("Ann", "father", "Bob"), ("Bob", "born", "1950")]
    assert fast.entities == slow.entities
