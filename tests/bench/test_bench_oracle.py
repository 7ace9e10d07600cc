"""A sweep's ``oracle = true``: per target the model's own recipe retrained without the target's
smallest minimal set, stored as an ``oracle`` point and tabulated like a method; a model the tool
cannot retrain is refused up front; a killed sweep resumes without retraining cached oracles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepunlearn.bench.config import ConfigError, load_config
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.point_controls import FIELDS
from deepunlearn.bench.store import ResultsStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def family():
    """A 6-person family KB and a 32-wide tiny model finetuned on it (a recipe in its deepunlearn.json)."""
    import tempfile

    import deepunlearn
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = Path(tempfile.mkdtemp(prefix="oracle-sweep-"))
    kb = deepunlearn.generate_family(6, seed=1)
    deepunlearn.save_kb(kb, d / "kb.json")
    build_tiny_model(kb, d / "model", seed=0, hidden=32, layers=1, heads=4)
    finetune(load_model(d / "model", device="cpu"), kb, FinetuneConfig.tiny(epochs=4), out_dir=d / "model",
             progress=False)
    return d, kb


def _config(folder: Path, kb, name: str = "sweep.toml", *, oracle: str = "true", model: str = "model",
            out: str = "out", targets: int = 2, extra: str = "") -> Path:
    text = "\n".join([
        'kb = "kb.json"', f'output = "{out}"', 'k_mode = "dataset"', "threads = 1",
        *([f"oracle = {oracle}"] if oracle else []), extra,
        "[[models]]", 'name = "tiny"', f'path = "{model}"',
        "[methods]", "ga = [1]",
        "[targets]", f"refs = {json.dumps(list(kb.targets[:targets]))}", ""])
    (folder / name).write_text(text)
    return folder / name


def _without_controls(p) -> dict:
    """The point as a sweep without oracle and chance_calibration stores it."""
    return {k: v for k, v in p.to_dict(timing=False).items() if k not in FIELDS}


def _calibration(kb, path: Path, rate: float) -> Path:
    """A calibration file of mode ``exact`` whose raw false-positive rate is ``rate`` on every relation."""
    import math

    import numpy as np

    from deepunlearn.probe.calibration import calibrate

    n, rels = 40, sorted({f[1] for f in kb.facts})
    gid = {f[1]: kb.group_of(i) for i, f in enumerate(kb.facts)}
    names = [r for r in rels for _ in range(n)]
    ev = [x for _ in rels for x in [1.0] * round(rate * n) + [-math.inf] * (n - round(rate * n))]
    pos = [f[1] for f in kb.facts]
    cal = calibrate({"exact": np.array(ev)}, [gid[r] for r in names], {"exact": np.full(len(pos), 50.0)},
                    [gid[r] for r in pos], neg_relations=names, pos_relations=pos, meta={"model": "A"})
    path.write_text(json.dumps(cal.to_json()))
    return path


def _cached(cache: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every file of the cached retrained models: retraining would replace them."""
    return {str(p.relative_to(cache)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(cache.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference(family):
    d, kb = family
    return run_sweep(load_config(_config(d, kb, out="ref")), progress=False)


def test_oracle_row_in_every_summary_with_its_targets(family, reference):
    from deepunlearn.probe.models import read_meta
    from deepunlearn.rules import Evaluator

    d, kb = family
    targets = list(kb.targets[:2])
    s = reference.summary["tiny"]
    assert set(s) == {"ga", "oracle"} and s["oracle"]["n_targets"] == 2
    oracle = {p.target: p for p in reference.points if p.method == "oracle"}
    assert sorted(oracle) == targets and all(p.param == 0 for p in oracle.values())
    ev = Evaluator(kb, "family")
    for t, p in oracle.items():
        sets = ev.minimal_sets(t).sets
        removed = p.extra["oracle_removed"]
        assert len(removed) == min(map(len, sets)) and removed in [sorted(x) for x in sets]
        meta = read_meta(d / "ref" / "cache" / "retrain" / p.extra["oracle_key"])
        assert meta["retrain"]["removed"] == removed == meta["trained"]["excluded"]  # the KB minus exactly that set
        assert meta["trained"]["facts"] == len(kb) - len(removed)
        assert p.extra["deep"] == (p.recall >= 1 - 1e-9)
        assert p.extra["answers_target"] == (t not in p.forgotten)
    # the weights are the model's again after each oracle: GA's points equal those of a sweep without it
    plain = run_sweep(load_config(_config(d, kb, "plain.toml", oracle="", out="plain")), progress=False)
    assert [p.to_dict(timing=False) for p in plain.points] == [
        _without_controls(p) for p in reference.points if p.method == "ga"]
    assert all(not set(FIELDS) & set(p.extra) for p in plain.points)  # a sweep without oracle: as before
    # with oracle = true every method point carries deep_oracle; a deep point is deep relative to it
    assert all(isinstance(p.extra["deep_oracle"], bool) and (p.extra["deep_oracle"] or not p.extra["deep"])
               for p in reference.points if p.method == "ga")
    # the report's tables: headline, deep unlearning, per relation, per target
    from deepunlearn.bench.report import write_report

    report = write_report(reference.output).read_text()
    assert report.count("| tiny | ORACLE |") >= 1 and report.count("| tiny | oracle |") >= 1
    assert "- **oracle** (exact unlearning)" in report
    summary = json.loads((reference.output / "report" / "summary.json").read_text())
    assert summary["models"]["tiny"]["oracle"]["n_targets"] == 2
    assert set(summary["by_relation"]["tiny"]["oracle"]) == {kb.facts[t][1] for t in targets}


def test_oracle_added_to_a_finished_sweep_runs_only_its_rows(family, reference, tmp_path):
    d, kb = family
    out = tmp_path / "grow"
    first = run_sweep(load_config(_config(d, kb, "g.toml", oracle="false", out=str(out))), progress=False)
    assert {p.method for p in first.points} == {"ga"}
    more = run_sweep(load_config(_config(d, kb, "g2.toml", out=str(out))), progress=False)
    assert more.resumed and more.computed == 2 and {p.method for p in more.points} == {"ga", "oracle"}
    off = run_sweep(load_config(_config(d, kb, "g.toml", oracle="false", out=str(out))), progress=False)
    assert off.computed == 0 and "oracle" not in off.summary["tiny"]   # stored, not shown when off


@pytest.mark.slow
def test_killed_oracle_sweep_resumes_without_retraining(family, reference, monkeypatch):
    """The sweep is killed (SIGKILL) right after the second oracle is trained and cached (at the start
    of its target's first job, which judges every point against it), before any point of that
    target is stored; the rerun stores them with the cached oracle and trains nothing."""
    d, kb = family
    cfg = _config(d, kb, "killed.toml", out="killed")
    code = textwrap.dedent(f"""
        import os, signal
        import deepunlearn.unlearn.retrain as rt
        real, calls = rt.retrain, []
        def retrain_then_die(*a, **k):
            calls.append(real(*a, **k))
            if len(set(calls)) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return calls[-1]
        rt.retrain = retrain_then_die
        from deepunlearn.bench.config import load_config
        from deepunlearn.bench.runner import run_sweep
        run_sweep(load_config({str(cfg)!r}), progress=False)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()[-2000:]
    out, cache = d / "killed", d / "killed" / "cache" / "retrain"
    with ResultsStore(out, readonly=True) as s:
        stored = [(p.target, p.method) for p in s.points()]
    assert sorted(stored) == sorted([(kb.targets[0], "ga"), (kb.targets[0], "oracle")])
    assert len(list(cache.iterdir())) == 2   # both oracles trained, the second one's points lost
    before = _cached(cache)

    import deepunlearn.unlearn.finetune as ft

    def no_training(*a, **k):
        raise AssertionError("a cached oracle was retrained")
    monkeypatch.setattr(ft, "finetune", no_training)
    resumed = run_sweep(load_config(cfg), progress=False)
    assert resumed.resumed and resumed.computed == 2
    assert _cached(cache) == before
    key = lambda p: p.to_dict(timing=False)  # noqa: E731
    assert sorted(map(json.dumps, map(key, resumed.points))) == sorted(map(json.dumps, map(key, reference.points)))


def test_oracle_refused_for_a_model_without_recipe(family, tmp_path, capsys):
    import deepunlearn
    from deepunlearn.cli import main
    from deepunlearn.probe import build_tiny_model

    d, kb = family
    deepunlearn.save_kb(kb, tmp_path / "kb.json")
    build_tiny_model(kb, tmp_path / "raw", seed=0, hidden=32, layers=1, heads=4)   # never finetuned: no recipe
    cfg = _config(tmp_path, kb, model="raw")
    with pytest.raises(ConfigError, match=r"field models\.0\.path: .*raw: its deepunlearn\.json records no base "
                                          r"and training recipe .*set oracle = false"):
        run_sweep(load_config(cfg), progress=False)
    assert main(["bench", "--config", str(cfg), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no base and training recipe" in err and str(cfg) in err
    assert not (tmp_path / "out").exists()          # refused before anything is written
    hub = _config(tmp_path, kb, "hub.toml", model="gpt2")
    with pytest.raises(ConfigError, match=r"field models\.0\.path: gpt2 is a hub model, not a local checkpoint"):
        run_sweep(load_config(hub), progress=False)
    other = deepunlearn.generate_family(6, seed=2)
    deepunlearn.save_kb(other, tmp_path / "kb.json")
    mismatch = _config(tmp_path, other, "other.toml", model=str(d / "model"))
    with pytest.raises(ConfigError, match=r"finetuned on KB .* an oracle is retrained on the model's own KB"):
        run_sweep(load_config(mismatch), progress=False)


def test_oracle_defaults_to_off(tmp_path):
    (tmp_path / "s.toml").write_text('kb = "kb.json"\n[[models]]\nname = "m"\npath = "m"\n[methods]\nga = [1]\n')
    assert load_config(tmp_path / "s.toml").oracle is False


@pytest.mark.parametrize("line, targets, message", [
    ('oracle = "yes"', "", "field oracle: Input should be a valid boolean"),
    ("oracle = 1", "", "field oracle: Input should be a valid boolean"),
    ("oracle = true", "[targets]\nbatch = [2]", "field oracle: an oracle is retrained per target"),
    ("oracle = true", "[targets]\nsequential = true", "field oracle: an oracle is retrained per target"),
])
def test_oracle_config_values(tmp_path, line, targets, message):
    (tmp_path / "s.toml").write_text(
        f'kb = "kb.json"\n{line}\n[[models]]\nname = "m"\npath = "m"\n[methods]\nga = [1]\n{targets}\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "s.toml")
    assert message in str(e.value) and "\n" not in str(e.value) and str(tmp_path / "s.toml") in str(e.value)


def test_points_get_p_chance_and_resume_without_recomputing(family, reference, tmp_path):
    """chance_calibration: every point not deep (the oracle row's too) gets p_chance, a deep one
    none; the points are otherwise those of the sweep without it; a rerun computes nothing and the
    report shows the controls beside the raw deep rate."""
    d, kb = family
    _calibration(kb, d / "cal1.json", 1.0)   # every never-seen fact answered: chance explains everything
    cfg = _config(d, kb, "chance.toml", out="chance", extra='chance_calibration = "cal1.json"')
    out = run_sweep(load_config(cfg), progress=False)
    assert out.computed == len(reference.points)
    by = {(p.target, p.method, p.param): p for p in out.points}
    for p in reference.points:
        q = by[(p.target, p.method, p.param)]
        assert _without_controls(q) == _without_controls(p) and q.extra.get("deep_oracle") == p.extra.get("deep_oracle")
        assert ("p_chance" in q.extra) == (not q.extra["deep"])
        assert q.extra.get("p_chance", 1.0) == 1.0
    manifest = json.loads((d / "chance" / "manifest.json").read_text())
    assert manifest["chance_calibration"]["path"] == str(d / "cal1.json")
    again = run_sweep(load_config(cfg), progress=False)
    assert again.resumed and again.computed == 0
    assert [_without_controls(p) for p in again.points] == [_without_controls(p) for p in out.points]
    from deepunlearn.bench.report import write_report

    report = write_report(out.output).read_text()
    assert "### Deep against its controls" in report
    rows = json.loads((out.output / "report" / "summary.json").read_text())["controls"]
    ga = next(r for r in rows if r["method"] == "ga")
    assert ga["targets"] == 2 and ga["deep_oracle_n"] == 2 and ga["established"] == 0
    assert ga["established_n"] == ga["superficial"] == 2 - ga["deep"]


def test_chance_calibration_errors_are_one_line(family, tmp_path):
    d, kb = family
    (tmp_path / "bad.json").write_text("{")
    for extra, message in (('chance_calibration = "none.json"', "field chance_calibration: "),
                           (f'chance_calibration = "{tmp_path / "bad.json"}"', "field chance_calibration: ")):
        cfg = _config(d, kb, "bad.toml", out=str(tmp_path / "o"), extra=extra)
        with pytest.raises(ConfigError) as e:
            run_sweep(load_config(cfg), progress=False)
        assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "o").exists()


def test_oracle_seeds_train_each_seed_once_and_judge_against_all(family, reference, tmp_path):
    """oracle_seeds = [1]: each target's set is retrained with the model's seed (the oracle row's,
    already in the cache) and seed 1; deep_oracle compares against both; a resumed sweep retrains
    nothing; the fingerprint of a sweep without the option is unchanged."""
    from deepunlearn.probe.models import read_meta

    d, kb = family
    base = load_config(_config(d, kb, "plain-seeds.toml", out="ref"))
    assert "oracle_seeds" not in base.recorded() and "oracle_seeds" not in base.results_key("kb")
    cfg = load_config(_config(d, kb, "seeds.toml", out="seeds", extra="oracle_seeds = [1]"))
    assert cfg.recorded()["oracle_seeds"] == [1] and cfg.fingerprint("kb") != base.fingerprint("kb")
    res = run_sweep(cfg, progress=False)
    cache = d / "seeds" / "cache" / "retrain"
    seeds = sorted(read_meta(p)["retrain"]["seed"] for p in cache.iterdir() if (p / "deepunlearn.json").is_file())
    assert len(seeds) == 2 * 2 and seeds.count(1) == 2  # two targets, each with its own seed and seed 1
    ga = [p for p in res.points if p.method == "ga"]
    assert ga and all(isinstance(p.extra["deep_oracle"], bool) and (p.extra["deep_oracle"] or not p.extra["deep"])
                      for p in ga)
    # the oracle rows are the model's own recipe, as without the option
    own = {p.target: p.extra["oracle_key"] for p in reference.points if p.method == "oracle"}
    assert {p.target: p.extra["oracle_key"] for p in res.points if p.method == "oracle"} == own
    before = _cached(cache)
    again = run_sweep(load_config(_config(d, kb, "seeds.toml", out="seeds", extra="oracle_seeds = [1]")),
                      progress=False)
    assert _cached(cache) == before and len(again.points) == len(res.points)
    from deepunlearn.bench.report import write_report

    report = write_report(res.output).read_text()
    assert "strongest of the oracles of seeds [1]" in report


@pytest.mark.parametrize("lines, message", [
    ("oracle_seeds = [1]", "field oracle_seeds: more seeds of each target's oracle: set oracle = true too"),
    ("oracle = true\noracle_seeds = [1, 1]", "field oracle_seeds: a seed given twice in [1, 1]"),
    ("oracle = true\noracle_seeds = [-1]", "field oracle_seeds.0: Input should be greater than or equal to 0"),
])
def test_oracle_seeds_config_values(tmp_path, lines, message):
    (tmp_path / "s.toml").write_text(f'kb = "kb.json"\n{lines}\n[[models]]\nname = "m"\npath = "m"\n[methods]\nga = [1]\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "s.toml")
    assert message in str(e.value) and "\n" not in str(e.value)
