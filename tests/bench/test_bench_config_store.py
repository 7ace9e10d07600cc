"""Sweep configuration files, target selection and the results store."""

import sqlite3
import json
import subprocess
import sys
import textwrap

import pytest

from deepunlearn.bench.config import PAPER_GRIDS, ConfigError, load_config
from deepunlearn.bench.runner import plan_jobs, select_targets
from deepunlearn.bench.store import Point, ResultsStore, StoreError
from deepunlearn.bench.config import TargetSpec


def _write(p, text):
    p.write_text(textwrap.dedent(text))
    return p


def test_toml_and_yaml_give_the_same_config(tmp_path):
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    t = _write(tmp_path / "s.toml", """
        kb = "kb.json"
        output = "out"
        [[models]]
        name = "tiny"
        path = "models/tiny"
        lr = 1e-4
        [[models]]
        name = "gpt2-xl"
        prompt = "gpt2"
        [methods]
        ga = [1, 2, 4]
        whp = []
        [targets]
        stratified = 2
        seed = 3
    """)
    y = _write(tmp_path / "s.yaml", """
        kb: kb.json
        output: out
        models:
          - {name: tiny, path: models/tiny, lr: 1.0e-4}
          - {name: gpt2-xl, prompt: gpt2}
        methods: {ga: [1, 2, 4], whp: []}
        targets: {stratified: 2, seed: 3}
    """)
    a, b = load_config(t), load_config(y)
    assert a.model_dump() == b.model_dump()
    assert a.kb == str(tmp_path / "kb.json") and a.output == str(tmp_path / "out")
    assert a.models[0].path == str(tmp_path / "models" / "tiny")   # an existing folder: made absolute
    assert a.models[1].path == "gpt2-xl"                          # no such folder: a hub name
    assert a.methods == {"ga": [1, 2, 4], "whp": list(PAPER_GRIDS["whp"])}
    assert a.targets.stratified == 2 and a.executor == "local" and a.protocol_for("tiny").k_mode == "probed"


def test_defaults_are_the_paper_grids(tmp_path):
    c = load_config(_write(tmp_path / "c.toml", 'kb = "kb.json"\nmodels = ["m"]\n'))
    assert c.methods == {k: list(v) for k, v in PAPER_GRIDS.items()}
    assert c.targets.all and c.protocol_for("m").sets == "exact" and c.mdus_seeds == 100


@pytest.mark.parametrize("body, field", [
    ('kb = "k.json"\nmodels = ["m"]\nk_mode = "guess"\n', "field k_mode"),
    ('kb = "k.json"\n[[models]]\nname = "m"\nlr = -1\n', "field models.0.lr"),
    ('kb = "k.json"\nmodels = ["m"]\n[methods]\nfoo = []\n', "field methods"),
    ('kb = "k.json"\nmodels = ["m"]\n[targets]\nstratified = 1\nrefs = [1]\n', "field targets"),
    ('kb = "k.json"\nmodels = ["m"]\nexecuter = "ray"\n', "field executer"),
    ('models = ["m"]\n', "field kb"),
    ('kb = "k.json"\nmodels = ["m", "m"]\n', "names must be unique"),
    ('kb = "k.json"\nmodels = [\n', "cannot parse TOML"),
])
def test_errors_name_the_file_and_the_field(tmp_path, body, field):
    p = _write(tmp_path / "bad.toml", body)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(p) in str(e.value) and field in str(e.value)


def test_cli_reports_config_errors_on_one_line(tmp_path):
    p = _write(tmp_path / "bad.yaml", "kb: k.json\nmodels: [m]\nseeds: 0\n")
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "bench", "--config", str(p), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and f"{p}: field seeds" in r.stderr and len(r.stderr.splitlines()) == 1
    err = json.loads(r.stdout)   # --json: exactly one JSON object, the error, on stdout
    assert f"{p}: field seeds" in err["error"] and set(err) == {"error", "file", "field"}


def test_select_targets(edu_kb):
    assert select_targets(edu_kb, TargetSpec(all=True)) == edu_kb.targets
    strat = select_targets(edu_kb, TargetSpec(stratified=2, seed=1))
    rels = [edu_kb.facts[t][1] for t in strat]
    assert len(strat) == 22 and all(rels.count(r) == 2 for r in set(rels)) and len(set(rels)) == 11
    assert set(strat) <= set(edu_kb.targets)
    assert strat == select_targets(edu_kb, TargetSpec(stratified=2, seed=1))
    assert strat != select_targets(edu_kb, TargetSpec(stratified=2, seed=2))
    f = edu_kb.facts[272]
    assert select_targets(edu_kb, TargetSpec(refs=["|".join(f), 3, 272])) == [272, 3]
    with pytest.raises(ConfigError, match=r"targets.refs.1"):
        select_targets(edu_kb, TargetSpec(refs=[0, "Nobody|child|Noone"]))


def _pt(t, param, **kw):
    return Point("m", t, "ga", param, recall=kw.get("recall", 0.5), accuracy=kw.get("accuracy", 0.9),
                 accuracy_groups={"family": 0.8, "biography": None}, forgotten=kw.get("forgotten", (1, 2)), target_forgotten=True, exact=True)


def test_store_roundtrip_duplicates_and_binding(tmp_path):
    with ResultsStore(tmp_path) as s:
        assert s.bind("fp1", {"a": 1}) is False
        s.add_point(_pt(3, 1))
        s.add_point(_pt(3, 2, forgotten=(5,)))
        with pytest.raises(sqlite3.IntegrityError):   # a point is never written twice
            s.add_point(_pt(3, 2))
        assert s.count_points() == 2
    with ResultsStore(tmp_path) as s:
        assert s.bind("fp1", {"a": 1}) is True         # same sweep: resume
        assert s.done_params("m", 3, "ga") == {1, 2}
        p = s.points()[1]
        assert p.forgotten == (5,) and p.accuracy_groups == {"family": 0.8, "biography": None} and p.param == 2
        assert [e[:4] for e in s.evaluations()] == [("m", 3, "ga", 1), ("m", 3, "ga", 2)]
        with pytest.raises(StoreError, match="different sweep"):
            s.bind("fp2", {"a": 2})
        assert s.bind("fp2", {"a": 2}, overwrite=True) is False
        assert s.count_points() == 0 and s.evaluations() == []


def test_store_survives_a_killed_writer(tmp_path):
    """A process killed with SIGKILL in the middle of writing leaves only whole points."""
    code = textwrap.dedent(f"""
        import os, signal
        from deepunlearn.bench.store import Point, ResultsStore
        s = ResultsStore({str(tmp_path)!r})
        s.bind("fp", {{}})
        for i in range(10**6):
            s.add_point(Point("m", i, "ga", 1, recall=0.5, accuracy=0.5, forgotten=tuple(range(50))))
            if i == 200:
                os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert r.returncode == -9
    with ResultsStore(tmp_path) as s:
        pts = s.points()
        assert len(pts) == 201 and all(p.forgotten == tuple(range(50)) for p in pts)
        assert len(s.evaluations()) == 201


def test_plan_skips_finished_jobs_and_passes_done_params(tmp_path):
    cfg = load_config(_write(tmp_path / "c.toml", 'kb = "kb.json"\nmodels = ["m"]\n[methods]\nga = [1, 2, 4]\n'
                             'tv = [0.5]\n'))
    with ResultsStore(tmp_path / "o") as s:
        s.bind("fp", {})
        s.add_point(_pt(7, 1))
        s.add_point(_pt(7, 2))
        s.finish_job("m", 8, "ga")
        s.finish_job("m", 8, "tv", status="skipped", reason="unknown")
        for p in (1, 2, 4):
            s.add_point(_pt(9, p))      # all points in, job not marked: planning marks it
        jobs, done = plan_jobs(cfg, [7, 8, 9], s)
        assert [(j.target, j.method, j.skip_params, j.todo) for j in jobs] == [(7, "ga", (1, 2), 1), (7, "tv", (), 1),
                                                                                  (9, "tv", (), 1)]
        assert done == 2 + 1 + 3   # stored points of target 7, the skipped job's grid, target 9
        assert s.job_status("m", 9, "ga") == "done"


def test_the_documented_example_config_loads(tmp_path):
    """The TOML in deepunlearn.bench.config's docstring is a valid configuration."""
    import deepunlearn.bench.config as mod

    doc = mod.__doc__
    body = doc[doc.index("::") + 2:doc.index("Errors name")]
    text = textwrap.dedent(body).strip("\n")
    p = _write(tmp_path / "sweep.toml", text + "\n")
    cfg = load_config(p)
    assert cfg.models[0].lr == 1e-4 and cfg.targets.stratified == 1
    assert cfg.methods["npo"] == list(PAPER_GRIDS["npo"]) and cfg.methods["tv"] == [0.2, 0.5, 1, 5, 10]
