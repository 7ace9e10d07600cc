"""The bench layer's inputs and outputs: config files that are not UTF-8, nested too deeply or
hold NaN/negative/boolean grids and targets; model names as path components; a sweep whose
targets are all skipped; the report and the console agree; --help says what bench and demo run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from deepunlearn.bench.config import ConfigError, load_config
from deepunlearn.bench.jobs import safe_name
from deepunlearn.bench.runner import run_sweep
from deepunlearn.cli import main
from deepunlearn.errors import UserError

from bench_helpers import FakeExecutor


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} in JSON")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------- config files


def test_non_utf8_config_is_one_clear_error(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_bytes(b'kb = "k\xe9.json"\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{p}: not UTF-8 text (byte 7: b'\\xe9')" and e.value.file == str(p)
    assert main(["bench", "--config", str(p), "--json"]) == 1
    out, err = capsys.readouterr()
    assert err == f"deepunlearn bench: error: {p}: not UTF-8 text (byte 7: b'\\xe9')\n"
    assert _strict_json(out) == {"error": f"{p}: not UTF-8 text (byte 7: b'\\xe9')", "file": str(p), "field": None}


@pytest.mark.parametrize("suffix,text", [
    (".yaml", "kb: " + "[" * 5000 + "]" * 5000),
    (".yaml", "kb:\n" + "".join(" " * (2 * i) + "- \n" for i in range(100)) + " " * 200 + "x\n"),
    (".toml", "kb = " + "[" * 5000 + "]" * 5000),
    (".toml", "kb = " + "{a = " * 3000 + "1" + "}" * 3000),
    (".json", '{"kb": ' + "[" * 5000 + "]" * 5000 + "}"),
], ids=["yaml-flow", "yaml-block", "toml-array", "toml-table", "json"])
def test_deeply_nested_config_is_refused(tmp_path, suffix, text):
    p = tmp_path / f"s{suffix}"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"nested deeper than 64 levels") as e:
        load_config(p)
    assert str(e.value).startswith(str(p)) and e.value.file == str(p)


def test_yaml_alias_bomb_is_refused(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\nkb: *a8\n")
    with pytest.raises(ConfigError, match=r"configuration too large \(more than 100000 values"):
        load_config(p)


def test_config_errors_keep_file_and_field_through_the_cli(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text('kb = "kb.json"\n[[models]]\nname = "m"\n[methods]\ntv = [nan]\n')
    assert main(["bench", "--config", str(p), "--json"]) == 1
    obj = _strict_json(capsys.readouterr().out)
    assert obj == {"error": f"{p}: field methods: method 'tv': grid value nan is not a finite number",
                   "file": str(p), "field": "methods"}


# ------------------------------------------------------------------------- grids and targets


def _refused(tmp_path, body: str):
    """The ConfigError of a sweep config with one model ``m`` and ``body`` after it, and its path."""
    p = tmp_path / "s.toml"
    p.write_text(f'kb = "kb.json"\nmodels = ["m"]\n{body}\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    return e.value, p


@pytest.mark.parametrize("grid,msg", [
    ("tv = [nan]", "method 'tv': grid value nan is not a finite number"),
    ("tv = [inf]", "method 'tv': grid value inf is not a finite number"),
    ("tv = [0.5, -1.0]", "method 'tv': grid value -1 is negative (alpha is a strength, >= 0)"),
    ("whp = [-0.5]", "method 'whp': grid value -0.5 is negative (alpha is a strength, >= 0)"),
    ("ga = [0]", "method 'ga': grid value 0 is not a positive whole number of steps"),
    ("npo = [1.5]", "method 'npo': grid value 1.5 is not a positive whole number of steps"),
    ("ga = [true]", "method 'ga': grid [True] holds a true/false value, expected numbers"),
])
def test_bad_grid_values_are_refused(tmp_path, grid, msg):
    err, p = _refused(tmp_path, f"[methods]\n{grid}")
    assert str(err) == f"{p}: field methods: {msg}"


def test_model_grid_table_is_checked_too(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('kb = "kb.json"\n[methods]\ntv = []\n[[models]]\nname = "m"\n[models.grids]\ntv = [-0.5]\n')
    with pytest.raises(ConfigError, match=re.escape("field models.0.grids: method 'tv': grid value -0.5 is negative")):
        load_config(p)


@pytest.mark.parametrize("refs,msg", [
    ('["4"]', "item 0: fact index given as a string '4'; write it as a number"),
    ("[4.0]", "item 0: expected a fact index (a whole number) or 'S|r|O', found 4.0"),
    ("[1, true]", "item 1: expected a fact index (a whole number) or 'S|r|O', found True"),
    ("[-1]", "item 0: fact index -1 is negative"),
])
def test_target_refs_are_strict(tmp_path, refs, msg):
    err, p = _refused(tmp_path, f"[targets]\nrefs = {refs}")
    assert str(err) == f"{p}: field targets.refs: {msg}" and err.field == "targets.refs"


# ------------------------------------------------------------------------- model names


@pytest.mark.parametrize("name,msg", [("", "a model name must not be empty"), (" ", "a model name must not be empty"),
                                      ("a\tb", "model name 'a\\tb' has non-printable characters")])
def test_model_names_must_be_printable(tmp_path, name, msg):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"kb": "kb.json", "models": [{"name": name, "path": "x"}]}))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{p}: field models.0.name: {msg}"


def test_model_names_become_safe_path_components(tmp_path):
    names = ["..", ".", "a/b", "a_b", "../../etc", "/abs", ".hidden", "tiny", "phi-1.5", "caf\u00e9", "a\\b", "\u2028"]
    got = [safe_name(n) for n in names]
    assert len(set(got)) == len(names)
    for n, g in zip(names, got):
        assert g not in (".", "..") and "/" not in g and "\\" not in g and not g.startswith(".") and g.isascii()
        assert (tmp_path / "cache" / g).resolve().parent == (tmp_path / "cache").resolve()
    assert safe_name("tiny") == "tiny" and safe_name("phi-1.5") == "phi-1.5"   # existing caches stay valid


def test_worker_cache_of_a_model_named_dotdot_stays_inside(tmp_path, monkeypatch):
    import deepunlearn.bench.jobs as jobs
    import deepunlearn.probe as probe

    seen = {}
    monkeypatch.setattr(probe, "load_model", lambda *a, **k: object())
    monkeypatch.setattr(jobs, "new_target_runner", lambda spec, model, bundle, kb, cache: seen.setdefault("cache", cache))
    from deepunlearn.kg.io import to_dict
    from deepunlearn.kg.kb import KnowledgeBase

    kb = to_dict(KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")]))
    from deepunlearn.bench.modelspec import ModelSpec
    from deepunlearn.probe.protocol import get_protocol

    spec = jobs.WorkSpec(kb=kb, models={"..": jobs.ModelRun(ModelSpec(name="..", path="x"), get_protocol("default"))},
                         cache_dir=str(tmp_path / "cache"))
    jobs.ModelWorker(spec)._load("..")
    assert Path(seen["cache"]).resolve().parent == (tmp_path / "cache").resolve()


# ------------------------------------------------------------------------- all targets skipped


def test_sweep_with_every_target_skipped_reports_it(sweep_files, tmp_path, monkeypatch, capsys):
    import deepunlearn.bench.runner as runner

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor(skip=True))
    path = str(sweep_files())
    assert main(["bench", "--config", path, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "no target could be evaluated: all 2 skipped (the model does not know the target before unlearning)" in err
    assert "Traceback" not in err and "(no results: no point was evaluated)" in out
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert ("**No target could be evaluated: all 2 skipped** (4 job(s); the model does not know the target "
            "before unlearning).") in report
    assert sorted(f.name for f in (tmp_path / "out" / "report").iterdir()) == ["points.csv", "report.html", "report.md",
                                                                         "summary.json"]
    assert not [f for f in (tmp_path / "out").iterdir() if f.name.startswith(".report")]
    assert main(["bench", "--config", path, "--quiet", "--json"]) == 0
    obj = _strict_json(capsys.readouterr().out)
    assert obj["points"] == 0 and obj["skipped"] == 4 and obj["methods"] == {}
    _strict_json((tmp_path / "out" / "report" / "summary.json").read_text())


def test_failed_report_leaves_the_previous_one_whole(sweep_files, tmp_path, monkeypatch):
    import deepunlearn.bench.report as report
    import deepunlearn.bench.report.headline as headline

    from deepunlearn.bench.store import Point, ResultsStore

    cfg = load_config(sweep_files())
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    first = report.write_report(cfg.output)
    before = {f.name: f.read_bytes() for f in first.parent.iterdir()}
    with ResultsStore(cfg.output) as s:  # new results: a report written now differs in every file
        s.add_point(Point("tiny", 0, "ga", 3, recall=1.0, accuracy=0.1, target_forgotten=True, forgotten=(0,)))

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(headline, "plot_by_relation", boom)
    with pytest.raises(RuntimeError):
        report.write_report(cfg.output)
    assert {f.name: f.read_bytes() for f in first.parent.iterdir()} == before
    assert not [f for f in Path(cfg.output).iterdir() if f.name.startswith(".report")]


# ------------------------------------------------------------------------- metadata


def test_config_yaml_report_and_manifest_agree(sweep_files, tmp_path, capsys, monkeypatch):
    import yaml

    import deepunlearn.bench.runner as runner
    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe.fingerprint import kb_fingerprint

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())
    assert main(["bench", "--config", str(sweep_files()), "--quiet"]) == 0
    console = capsys.readouterr().out
    out = tmp_path / "out"
    assert yaml.safe_load((out / "config.yaml").read_text())["rules"] == "family"
    report = (out / "report" / "report.md").read_text()
    assert "- **rules**: `family`" in report
    manifest = _strict_json((out / "manifest.json").read_text())
    assert manifest["kb_fingerprint"] == kb_fingerprint(load_kb(tmp_path / "kb.json"))
    assert set(manifest["models"]["tiny"]["identity"]["files"]) == {"config.json", "model.safetensors"}
    # the headline block is the console's table, bootstrap intervals included; the table below orders metrics alike
    head = report.split("## Headline (paper Table 3 shape)")[1].split("```")[1].strip("\n")
    table, du = console.split("\n\nprotocol:")[0].split("\n\nDeep unlearning")
    assert head == table and "[low, high]: 95 % bootstrap interval" in head
    assert "| model | method | Acc@R≥0.8 |" in du and "Success-DU@0.9" in report  # the console's second table
    header = next(line for line in report.splitlines() if line.startswith("| model | method | targets |"))
    assert header.index("Recall@Acc≥0.8") < header.index("Acc@Recall≥0.8")


def test_bench_has_one_kb_fingerprint():
    import deepunlearn.bench.demo as demo
    import deepunlearn.bench.runner as runner
    from deepunlearn.probe.fingerprint import kb_fingerprint

    assert demo.kb_fingerprint is kb_fingerprint and runner.kb_fingerprint is kb_fingerprint


# ------------------------------------------------------------------------- --help


@pytest.mark.parametrize("cmd,words", [("bench", ["Run a sweep", "How long", "resume"]),
                                       ("demo", ["2-3 minutes on a 2-core CPU", "finetune", "GA, NPO, TV and WHP"])])
def test_help_describes_the_command(cmd, words, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert all(w in text for w in words), text
    import argparse

    from deepunlearn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(a.help for a in sub.choices[cmd]._actions)  # every option says what it does


def test_sweep_key_covers_what_the_rules_read_beyond_the_probe_fingerprint():
    """A gender edit leaves the probe fingerprint (facts and questions) unchanged but changes what
    `female(X)` derives, so a resumed sweep must not reuse points computed before it."""
    from deepunlearn.bench.runner import _sweep_kb_key
    from deepunlearn.kg.kb import KnowledgeBase
    from deepunlearn.probe.fingerprint import kb_fingerprint

    def kb(gender_b, targets=(0,)):
        return KnowledgeBase.build({"A": {"gender": "male"}, "B": {"gender": gender_b}}, [("A", "child", "B")],
                                   targets=list(targets))

    a, same, other_gender, no_target = kb("female"), kb("female"), kb("male"), kb("female", ())
    assert kb_fingerprint(a) == kb_fingerprint(other_gender)
    key = _sweep_kb_key(a, kb_fingerprint(a))
    assert key == _sweep_kb_key(same, kb_fingerprint(same)) and key.startswith(kb_fingerprint(a))
    assert key != _sweep_kb_key(other_gender, kb_fingerprint(other_gender))
    assert key != _sweep_kb_key(no_target, kb_fingerprint(no_target))
