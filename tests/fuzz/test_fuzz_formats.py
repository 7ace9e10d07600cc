"""Fuzz the data and rules commands with mutated copies of valid files: KB JSON (``data show``,
``rules closure --kb``, ``data forms --kb``), rule files (``rules closure --rules``), domain
folders (``data generate --domain``), forms files (``data forms --add``) and the EDU-RELAT
release's pickles (``data import-edu-relat``). The oracle is the harness's (fuzz_harness.py);
each test lists every failing input it found."""

from __future__ import annotations

import json
import pickle
import shutil
import zipfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import deepunlearn.rules
from fuzz_harness import Fuzzer, fuzz_settings
from fuzz_mutations import HOSTILE_NAMES, byte_mutations, hostile_file, json_mutations, line_mutations


def test_kb_json(seeds, work):
    fz = Fuzzer("kb-json")
    seed = seeds["kb"].read_bytes()
    org = seeds["org"].read_bytes()
    cmds = [["data", "show", "{kb}", "--json"], ["rules", "closure", "--kb", "{kb}", "--json", "-q"],
            ["data", "forms", "--kb", "{kb}"], ["data", "show", "{kb}"]]

    @fuzz_settings(3)
    @given(st.sampled_from([(seed, "family"), (org, "org")]).flatmap(
        lambda s: hostile_file(s[0], json.loads(s[0])).map(lambda m: (m, s[1]))), st.sampled_from(cmds))
    def run(mutated, cmd):
        (data, what), kind = mutated
        (work / "m.json").write_bytes(data)
        fz.check([a.format(kb="m.json") for a in cmd], work, protect=work, allow_change=(work / "m.json",),
                 note=f"{kind} KB: {what}")

    run()
    fz.finish()


RULE_TOKENS = ["X", "Y", "_", "child", "father(X, Y)", ":-", ",", ".", "!=", "(", ")", "\"Ann|Bob\"", "\u202e",
               "__class__", "__class__(X, Y)", "\x00", "\\ud800", "\ud800", "% c", "9" * 40, "p(X, Y) :- p(Y, X).",
               "r(X) :- r(X).", "q(X, Y) :- child(X, Y), " + ", ".join(f"child(X, Y{i})" for i in range(40)) + "."]


def _chain(n: int) -> bytes:
    """``n`` rules, each deriving the next relation from the previous one (a deep derivation)."""
    rules = ["r0(X, Y) :- child(X, Y).\n"] + [f"r{i}(X, Y) :- r{i - 1}(X, Y).\n" for i in range(1, n)]
    return "".join(rules).encode()


def test_rule_files(seeds, work):
    fz = Fuzzer("rules-dl")
    family = (Path(deepunlearn.rules.__file__).parent / "rulesets" / "edu-relat.dl").read_bytes()
    org = (seeds["domain"] / "rules.dl").read_bytes()
    texts = st.sampled_from([(family, "kb.json"), (org, "org.json")]).flatmap(lambda s: st.one_of(
        line_mutations(s[0].decode(), RULE_TOKENS), line_mutations(s[0].decode(), RULE_TOKENS),
        byte_mutations(s[0]), st.integers(2, 300).map(lambda n: (_chain(n), f"{n} chained rules"))).map(
        lambda m: (m, s[1])))

    @fuzz_settings(2)
    @given(texts, st.sampled_from([".dl", ".txt"]))
    def run(mutated, suffix):
        (data, what), kb = mutated
        (work / f"m{suffix}").write_bytes(data)
        fz.check(["rules", "closure", "--kb", kb, "--rules", f"m{suffix}", "--json", "-q"], work, protect=work,
                 allow_change=(work / f"m{suffix}",), note=what)

    run()
    fz.finish()


TOML_TOKENS = ["0", "-1", "1e999", "nan", "inf", "9" * 30, '"\\ud800"', '"Ann|Bob"', '"\u202eAnn"', '"__class__"',
               '"x"', "[]", "{}", '""', "true", "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]", '"/dev/zero"', '"../../x"',
               "\n[entities.__class__]\ncount = 3\n", "\n[attributes.__init__]\nof = \"person\"\n", "=", "\x00",
               '"' + "x" * 10_000 + '"', "1000000", "0.5"]
DL_TOKENS = RULE_TOKENS + ["superior(X, Z) :- superior(X, Y), superior(Y, Z).", "works_in(X, Y)"]


def test_domain_folders(seeds, work):
    fz = Fuzzer("domain-folder")
    toml = (seeds["domain"] / "domain.toml").read_text()
    dl = (seeds["domain"] / "rules.dl").read_text()
    mutations = st.one_of(
        line_mutations(toml, TOML_TOKENS).map(lambda m: ("domain.toml", m)),
        line_mutations(toml, TOML_TOKENS).map(lambda m: ("domain.toml", m)),
        byte_mutations(toml.encode()).map(lambda m: ("domain.toml", m)),
        line_mutations(dl, DL_TOKENS).map(lambda m: ("rules.dl", m)))

    @fuzz_settings(2)
    @given(mutations, st.sampled_from([["--people", "4"], ["--people", "3", "--stored-derived", "release"], []]))
    def run(mutated, extra):
        name, (data, what) = mutated
        d = work / "dom"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(seeds["domain"], d)
        (d / name).write_bytes(data)
        fz.check(["data", "generate", "--domain", "dom", *extra, "-o", "gen/out.json", "--json"], work, protect=work,
                 allow_change=(d / name, work / "gen" / "out.json"), note=f"{name}: {what}")

    run()
    fz.finish()


def test_forms_files(seeds, work):
    fz = Fuzzer("forms-jsonl")
    lines = seeds["forms"].read_text().splitlines()
    first = json.loads(lines[0])
    line_variants = json_mutations(first).map(
        lambda m: ((m[0] + b"\n" + "\n".join(lines[1:]).encode() + b"\n"), "line 1: " + m[1]))
    mutations = st.one_of(line_variants, line_variants, byte_mutations(seeds["forms"].read_bytes()),
                          line_mutations(seeds["forms"].read_text(), ["\ud800", "{}", "[]", "\\ud800", "\x00", "|"]))

    @fuzz_settings(2)
    @given(mutations, st.sampled_from([[], ["--split", "test"], ["--json"], ["-o", "new.json"]]))
    def run(mutated, extra):
        data, what = mutated
        (work / "f.jsonl").write_bytes(data)
        (work / "new.json").unlink(missing_ok=True)
        fz.check(["data", "forms", "--kb", "kb.json", "--add", "f.jsonl", *extra], work, protect=work,
                 allow_change=(work / "f.jsonl",), note=what)

    run()
    fz.finish()


def _data_pkl(path) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))


def _bomb(depth: int):
    x: list = []
    for _ in range(depth):
        x = [x, x]  # pickled once per level (memo references), but 2**depth items when walked
    return x


PICKLE_LEAVES = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8) \
    | st.sampled_from(HOSTILE_NAMES)
PICKLE_VALUES = st.recursive(PICKLE_LEAVES, lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids)
                             | st.dictionaries(PICKLE_LEAVES, kids, max_size=4), max_leaves=10)
RELEASE = ["subsample.pt", "family-200-graph.pt", "family_relationships.pt", "family_biographies.pt"]


def _pickle_test(edu_dir, tmp_path, fz: Fuzzer, mutations) -> None:
    @fuzz_settings(1)
    @given(mutations)
    def run(mutated):
        name, data, what = mutated
        d = tmp_path / "release"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(edu_dir, d)
        (d / name).write_bytes(data)
        fz.check(["data", "import-edu-relat", str(d), "-o", "kb.json", "--json"], tmp_path, protect=tmp_path,
                 allow_change=(d / name, tmp_path / "kb.json"), note=f"{name}: {what}")

    run()
    fz.finish()


def test_release_pickles_damaged(edu_dir, tmp_path):
    """The release's own pickle streams (its records reference each other), damaged as bytes."""
    raw = {name: _data_pkl(edu_dir / name) for name in RELEASE}
    _pickle_test(edu_dir, tmp_path, Fuzzer("release-pickle-bytes"), st.sampled_from(RELEASE).flatmap(
        lambda name: byte_mutations(raw[name]).map(lambda m: (name, m[0], m[1]))))


def test_release_pickles_wrong_types(edu_dir, tmp_path):
    """Well-formed pickles of plain containers, of the wrong shape or with hostile items."""
    from deepunlearn.kg.safe_pickle import safe_load

    targets = [int(t) for t in safe_load(edu_dir / "subsample.pt")]

    def replaced(name, value, pick):
        if name != "subsample.pt":
            return value
        return targets[:pick % len(targets)] + [value] + targets[pick % len(targets) + 1:]

    mutations = st.sampled_from(RELEASE).flatmap(lambda name: st.one_of(
        st.tuples(PICKLE_VALUES, st.integers(0, 10_000), st.integers(2, 5)).map(
            lambda t: (name, pickle.dumps(replaced(name, t[0], t[1]), protocol=t[2]), f"one item <- {t[0]!r:.40}")),
        PICKLE_VALUES.map(lambda v: (name, pickle.dumps(v), f"whole file <- {v!r:.40}")),
        st.integers(10, 40).map(lambda n: (name, pickle.dumps(_bomb(n)), f"reference bomb of depth {n}"))))
    _pickle_test(edu_dir, tmp_path, Fuzzer("release-pickle-types", max_failures=1), mutations)
