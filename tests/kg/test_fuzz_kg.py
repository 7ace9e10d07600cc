"""Fuzzing the KB layer's loaders: random bytes, random JSON and mutations of a valid
KB document go to :func:`load_kb` (through a file) and to :func:`read_fact_list`; the answer is
a result or a :class:`UserError`, never another exception type. A few go through the CLI
in-process (``data show --json``): exit code 0 or 1, never 70 (an internal error).

Each test counts the inputs hypothesis tried (``FIGURES``); ``pytest -s`` prints them.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepunlearn.cli import main
from deepunlearn.errors import UserError
from deepunlearn.kg import KnowledgeBase, load_kb, to_dict
from deepunlearn.kg.refs import read_fact_list

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FIGURES: dict[str, list] = {}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=25,
)


def valid_kb() -> KnowledgeBase:
    return KnowledgeBase.build(
        {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
        [("Ann", "husband", "Bob"), ("Bob", "wife", "Ann"), ("Ann", "child", "Cy"), ("Cy", "mother", "Ann"),
         ("Ann", "birthyear", "1950")],
        targets=[0, 2], name="small", probe_overrides={4: ("When was Ann born?", "1950")}, metadata={"rules": "family"})


VALID = to_dict(valid_kb())


def _paths(obj, prefix=()):
    """Every place in a JSON document, as a path of keys/indices (the root included)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


PATHS = list(_paths(VALID))


def _replace(doc, path, value):
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _dump(value) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8")  # NaN/Infinity kept: the reader must refuse them


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def _check_load_kb(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    try:
        kb = load_kb(path)
    except UserError as e:
        assert str(e) and "\n" not in str(e) and e.file == str(path)
        return "error"
    assert isinstance(kb, KnowledgeBase)
    return "kb"


def _record(name: str, outcomes: dict, t0: float) -> None:
    FIGURES[name] = [sum(outcomes.values()), dict(outcomes), round(time.perf_counter() - t0, 2)]
    print(f"\nfuzz {name}: {sum(outcomes.values())} inputs, outcomes {outcomes}, {time.perf_counter() - t0:.2f} s")


def test_load_kb_random_bytes(scratch):
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()

    @settings(max_examples=300, **SETTINGS)
    @given(st.binary(max_size=200)
           | JSON.map(_dump).flatmap(lambda b: st.integers(0, len(b)).map(lambda i: b[:i] + b"\xff" + b[i:]))
           | st.tuples(st.integers(1, 5000), st.sampled_from([b"[", b'{"a":'])).map(
               lambda t: t[1] * t[0] + (b"]" if t[1] == b"[" else b"}") * t[0]))
    def run(data):
        k = _check_load_kb(scratch / "bytes.json", data)
        outcomes[k] = outcomes.get(k, 0) + 1

    run()
    _record("load_kb bytes", outcomes, t0)


def test_load_kb_random_json(scratch):
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()

    @settings(max_examples=200, **SETTINGS)
    @given(JSON)
    def run(value):
        k = _check_load_kb(scratch / "json.json", _dump(value))
        outcomes[k] = outcomes.get(k, 0) + 1

    run()
    _record("load_kb json", outcomes, t0)


def test_load_kb_mutated_documents(scratch):
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()

    @settings(max_examples=300, **SETTINGS)
    @given(st.sampled_from(PATHS), JSON)
    def run(path, value):
        k = _check_load_kb(scratch / "mut.json", _dump(_replace(VALID, path, value)))
        outcomes[k] = outcomes.get(k, 0) + 1

    run()
    assert outcomes.get("kb", 0) > 0 and outcomes.get("error", 0) > 0  # both outcomes were reached
    _record("load_kb mutations", outcomes, t0)


def test_read_fact_list_random_input(scratch):
    kb = valid_kb()
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()
    facts = st.sampled_from([0, 4, "0", "Ann|husband|Bob", ["Ann", "child", "Cy"], True, 4.0, -1, 99])

    @settings(max_examples=300, **SETTINGS)
    @given(st.binary(max_size=80) | JSON.map(_dump) | st.lists(facts | JSON, max_size=6).map(_dump)
           | st.dictionaries(st.sampled_from(["known", "fact_ids", "facts", "x"]), st.lists(facts, max_size=4)
                             | JSON, max_size=3).map(_dump))
    def run(data):
        p = scratch / "facts.json"
        p.write_bytes(data)
        try:
            ids = read_fact_list(kb, p, flag="--known", key="known")
        except UserError as e:
            assert str(e).startswith(f"--known {p}") and e.file == str(p)
            k = "error"
        else:
            assert all(type(i) is int and 0 <= i < len(kb) for i in ids)
            k = "list"
        outcomes[k] = outcomes.get(k, 0) + 1

    run()
    assert outcomes.get("list", 0) > 0 and outcomes.get("error", 0) > 0
    _record("read_fact_list", outcomes, t0)


def test_data_show_cli_never_an_internal_error(scratch, capsys):
    outcomes: dict[str, int] = {}
    t0 = time.perf_counter()

    @settings(max_examples=40, **SETTINGS)
    @given(st.sampled_from(PATHS), JSON)
    def run(path, value):
        p = scratch / "cli.json"
        p.write_bytes(_dump(_replace(VALID, path, value)))
        code = main(["data", "show", str(p), "--json"])
        out, err = capsys.readouterr()
        assert code in (0, 1), err
        obj = json.loads(out)  # exactly one JSON object, also on error
        assert ("error" in obj) == (code == 1) and all(not isinstance(v, float) or math.isfinite(v)
                                                         for v in obj.values())
        outcomes[str(code)] = outcomes.get(str(code), 0) + 1

    run()
    _record("data show --json", outcomes, t0)
