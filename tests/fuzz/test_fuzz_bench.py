"""Fuzz ``bench``'s inputs: the sweep config (TOML, YAML, JSON: structured and byte mutations of a
valid one) and the results store ``results.sqlite`` a previous run left (byte mutations, and SQL
edits: tables dropped, rows with hostile values added, meta values changed), each followed by
``bench --config``. The config's model is an empty folder, so no example trains anything: a run
that gets past the config and the store stops at loading the model (exit 1)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tomllib


from hypothesis import given
from hypothesis import strategies as st

from fuzz_harness import Fuzzer, fuzz_settings
from fuzz_mutations import HOSTILE_JSON, HOSTILE_NAMES, byte_mutations, json_mutations, line_mutations

TOML_TOKENS = ["0", "-1", "1e999", "nan", "inf", "9" * 30, '"\\ud800"', '"Ann|Bob"', '"\u202eAnn"', '"__class__"',
               "[]", "{}", '""', "true", "[[[[[[[[[[1]]]]]]]]]]", '"../x"', "=", "\x00", "[1, 2, 1e999]",
               "\n[methods.__class__]\n", "\n[[models]]\nname = \"tiny\"\npath = \"tiny\"\n", "ga = [1, 2]"]


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if v is None:
        return '""'
    if isinstance(v, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(v), repr(v))
    return json.dumps(v)


def _as_format(text: bytes, fmt: str) -> bytes:
    """A mutated JSON document as ``fmt``: JSON as is; YAML accepts JSON's flow syntax, so the
    raw text (lone surrogate escapes included) goes as is too; TOML through a small writer."""
    if fmt != "toml":
        return text
    try:
        doc = json.loads(text)
    except ValueError:
        return text  # not JSON: still an input, just an invalid one
    if not isinstance(doc, dict):
        return text
    return "\n".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in doc.items()).encode("utf-8",
                                                                                                  "surrogatepass")


def test_sweep_config(seeds, work):
    fz = Fuzzer("sweep-config")
    text = seeds["sweep"].read_text()
    doc = tomllib.loads(text)
    mutations = st.one_of(
        st.tuples(json_mutations(doc), st.sampled_from(["json", "yaml", "toml"])).map(
            lambda t: (_as_format(t[0][0], t[1]), t[1], t[0][1])),
        line_mutations(text, TOML_TOKENS).map(lambda m: (m[0], "toml", m[1])),
        st.tuples(byte_mutations(text.encode()), st.sampled_from(["toml", "yaml"])).map(
            lambda t: (t[0][0], t[1], t[0][1])))

    seeded = {p.name for p in work.iterdir()}

    @fuzz_settings(2)
    @given(mutations, st.sampled_from([["--quiet"], ["--quiet", "--json"], ["--quiet", "-o", "out2"]]))
    def run(mutated, extra):
        data, fmt, what = mutated
        # every example starts from the seeds: a results folder an earlier example made (its config
        # named an output such as "__proto__") is the tool's own, not a user's file to protect
        for p in work.iterdir():
            if p.name not in seeded:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        (work / f"c.{fmt}").write_bytes(data)
        fz.check(["bench", "--config", f"c.{fmt}", *extra], work, protect=work,
                 allow_change=(work / f"c.{fmt}", work / "out", work / "out2"), note=f"{fmt}: {what}")

    run()
    fz.finish()


HOSTILE_SQL = [None, -1, 2**62, 1e308, float("nan"), "", "x", "\ud800", "{}", "[]", "null", "{\"a\": 1e999}",
               b"\xff\x00", "done", "skipped"] + HOSTILE_NAMES[:6] + [j for j in HOSTILE_JSON if len(j) < 100][:10]
TABLES = {"meta": ["key", "value"], "points": ["model", "target", "method", "param", "recall", "accuracy",
                                                "target_forgotten", "forgotten", "exact", "extra", "written_at",
                                                "measures"],
          "jobs": ["model", "target", "method", "status", "reason", "finished_at"]}


def _sql_edit(path, how: str, table: str, column: str, value) -> None:
    text = "?"
    if isinstance(value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        # sqlite3 cannot bind a lone surrogate: store its bytes as TEXT (invalid UTF-8 in the file)
        value, text = value.encode("utf-8", "surrogatepass"), "CAST(? AS TEXT)"
    con = sqlite3.connect(path)
    try:
        if how == "drop":
            con.execute(f"DROP TABLE {table}")
        elif how == "update":
            con.execute(f"UPDATE {table} SET {column} = {text}", (value,))
        elif how == "insert":
            cols = TABLES[table]
            row = {"model": "tiny", "target": 0, "method": "ga", "param": 1.0, "recall": 0.5, "accuracy": 0.5,
                   "target_forgotten": 1, "forgotten": "[]", "exact": 1, "extra": "{}", "written_at": 0.0,
                   "measures": None, "status": "done", "reason": None, "finished_at": 0.0, "key": "x", "value": "y"}
            row[column] = value
            marks = ", ".join(text if c == column else "?" for c in cols)
            con.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({marks})", [row[c] for c in cols])
        con.commit()
    except sqlite3.Error:
        pass  # the schema refused the edit (a NOT NULL column, a CHECK): the store stays as it was
    finally:
        con.close()


def _safe(v) -> str:
    return repr(v)[:30]


def _store_test(seeds, work, fz: Fuzzer, mutations) -> None:
    seed = seeds["store"].read_bytes()
    store = work / "out" / "results.sqlite"

    @fuzz_settings(1)
    @given(mutations, st.sampled_from([["--quiet"], ["--quiet", "--json"], ["--quiet", "--overwrite"]]))
    def run(mutated, extra):
        kind, m = mutated
        store.write_bytes(seed)
        for side in ("-wal", "-shm", "-journal"):
            store.with_name(store.name + side).unlink(missing_ok=True)
        if kind == "sql":
            _sql_edit(store, *m)
            what = f"{m[0]} {m[1]}.{m[2]} <- {_safe(m[3])}"
        else:
            store.write_bytes(m[0])
            what = m[1]
        fz.check(["bench", "--config", "sweep.toml", *extra], work, protect=work,
                 allow_change=(work / "out",), note=what)

    run()
    fz.finish()


def test_results_store_sql_edits(seeds, work):
    sql = st.sampled_from(sorted(TABLES)).flatmap(lambda t: st.tuples(
        st.sampled_from(["update", "insert", "insert", "drop"]), st.just(t), st.sampled_from(TABLES[t]),
        st.sampled_from(HOSTILE_SQL)))
    _store_test(seeds, work, Fuzzer("results-sqlite-sql"), sql.map(lambda e: ("sql", e)))


def test_results_store_bytes(seeds, work):
    seed = seeds["store"].read_bytes()
    pages = st.tuples(st.integers(0, len(seed) // 4096 - 1), st.sampled_from([b"\x00", b"\xff"])).map(
        lambda t: (seed[:t[0] * 4096] + t[1] * 4096 + seed[(t[0] + 1) * 4096:], f"page {t[0]} <- {t[1]!r}"))
    _store_test(seeds, work, Fuzzer("results-sqlite-bytes", max_failures=1),
                st.one_of(byte_mutations(seed), pages).map(lambda m: ("bytes", m)))
