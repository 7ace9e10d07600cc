"""Fuzzing ``load_config``: random bytes, random TOML/YAML/JSON text and mutations of a
valid configuration (a random field replaced by random JSON) give a SweepConfig or a
ConfigError (a UserError), never another exception type.

Each test records what it tried (inputs, outcomes, seconds) in ``FUZZ_LOG`` and prints it
(``pytest -s`` shows the figures).
"""

from __future__ import annotations

import collections
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepunlearn.bench.config import ConfigError, SweepConfig, load_config
from deepunlearn.errors import UserError

FUZZ_LOG: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
SETTINGS = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

VALID = {
    "kb": "kb.json", "rules": "family", "output": "out", "protocol": "default", "seed": 0, "seeds": 10,
    "models": [{"name": "tiny", "path": "tiny", "lr": 1e-4, "grids": {"tv": [1, 5]}}],
    "methods": {"ga": [1, 2, 4], "npo": [], "tv": [0.5, 5], "whp": [10, 1e5]},
    "targets": {"stratified": 1, "seed": 0},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _load(tmp_path, name: str, data: bytes, kind: str) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    t0 = time.perf_counter()
    try:
        out = load_config(p)
    except ConfigError as e:
        assert isinstance(e, UserError) and str(e) and "\n" not in str(e).strip(), repr(e)
        outcome = "ConfigError"
    else:
        assert isinstance(out, SweepConfig)
        outcome = "SweepConfig"
    log = FUZZ_LOG[kind]
    log["inputs"] += 1
    log[outcome] += 1
    log["us"] += round((time.perf_counter() - t0) * 1e6)


def _dump(fmt: str, obj) -> bytes:
    if fmt == "json":
        return json.dumps(obj, allow_nan=True).encode()
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(obj).encode()
    return _toml(obj).encode()


def _toml(obj: dict) -> str:
    """A crude TOML writer for fuzzing: top-level keys as JSON-ish inline values (what it cannot
    express comes out as invalid TOML, which is fine: that is an input too)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))} = {val(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if v is None:
            return '""'
        if isinstance(v, float):
            return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(v), repr(v))
        return json.dumps(v)

    return "\n".join(f"{json.dumps(str(k))} = {val(v)}" for k, v in obj.items()) + "\n"


def _paths():
    """Where in VALID a mutation may land: every key path."""
    out = []

    def walk(obj, path):
        out.append(path)
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, path + (k,))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, path + (i,))

    walk(VALID, ())
    return [p for p in out if p]


PATHS = _paths()


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for kind, c in sorted(FUZZ_LOG.items()):
        print(f"\nfuzz load_config {kind}: {c['inputs']} inputs, {c['SweepConfig']} SweepConfig, "
              f"{c['ConfigError']} ConfigError, {c['us'] / 1e6:.2f} s")


@SETTINGS
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".toml", ".yaml", ".json", ".txt"]))
def test_random_bytes(tmp_path, data, suffix):
    _load(tmp_path, f"c{suffix}", data, f"bytes{suffix}")


@SETTINGS
@given(text=st.text(alphabet=st.sampled_from(list('[]{}:=,"\'#-*&!|>\n .0123456789abkmnotxyz\\e+')), max_size=200),
       suffix=st.sampled_from([".toml", ".yaml", ".json"]))
def test_random_syntax(tmp_path, text, suffix):
    _load(tmp_path, f"c{suffix}", text.encode(), f"text{suffix}")


@SETTINGS
@given(value=json_values, fmt=st.sampled_from(["json", "yaml", "toml"]))
def test_random_documents(tmp_path, value, fmt):
    _load(tmp_path, f"c.{fmt}", _dump(fmt, {"kb": "kb.json", "models": ["m"], "x": value} if fmt == "toml" else value),
          f"document.{fmt}")


@SETTINGS
@given(path=st.sampled_from(PATHS), value=json_values, fmt=st.sampled_from(["json", "yaml", "toml"]))
def test_mutated_valid_config(tmp_path, path, value, fmt):
    doc = json.loads(json.dumps(VALID))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    (tmp_path / "tiny").mkdir(exist_ok=True)
    _load(tmp_path, f"c.{fmt}", _dump(fmt, doc), f"mutation.{fmt}")


def test_valid_config_loads(tmp_path):
    (tmp_path / "tiny").mkdir()
    for fmt in ("json", "yaml", "toml"):
        (tmp_path / f"c.{fmt}").write_bytes(_dump(fmt, VALID))
        cfg = load_config(tmp_path / f"c.{fmt}")
        assert cfg.models[0].path == str(tmp_path / "tiny") and cfg.methods["ga"] == [1, 2, 4]
