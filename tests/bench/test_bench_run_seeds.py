"""Repeated runs (``[run] seeds``): the config's two meanings of ``seeds``, points stored per seed,
resumption per seed, stores written before the seed column, and the aggregate over seeds x targets
against a brute-force computation."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench_helpers import FakeExecutor
from deepunlearn.bench import runner
from deepunlearn.bench.bootstrap import LEVEL, N_RESAMPLES, bootstrap_interval, cluster_interval
from deepunlearn.bench.config import ConfigError, load_config, parse_config
from deepunlearn.bench.grids import job_seed
from deepunlearn.bench.metrics import summarize
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import STORE_NAME, ResultsStore

BASE = {"kb": "kb.json", "models": ["m"], "methods": {"ga": [1, 2]}}


# ------------------------------------------------------------------ config


def test_run_seeds_list_and_the_older_integer_meaning():
    c = parse_config({**BASE, "run": {"seeds": [4, 1, 2]}})
    assert c.run.seeds == [4, 1, 2] and c.seed == 4 and c.mdus_seeds == 100
    old = parse_config({**BASE, "seeds": 7})          # a top-level seeds = N: the MDUS seed count, as before
    assert old.mdus_seeds == 7 and old.run is None
    assert parse_config({**BASE, "mdus_seeds": 7}).fingerprint("kb") == old.fingerprint("kb")
    # the MDUS count keys the results under its older name: a store of an older config keeps its fingerprint
    assert old.results_key("kb")["seeds"] == 7 and "mdus_seeds" not in old.results_key("kb")
    # run seeds are not in the fingerprint (each point carries its seed); the sweep's seed is
    assert parse_config({**BASE, "run": {"seeds": [0, 1]}}).fingerprint("kb") == parse_config(BASE).fingerprint("kb")
    assert parse_config({**BASE, "run": {"seeds": [1, 0]}}).fingerprint("kb") != parse_config(BASE).fingerprint("kb")
    assert parse_config({**BASE, "seed": 1, "run": {"seeds": [0, 1]}}).seed == 1


@pytest.mark.parametrize("extra, field", [
    ({"seeds": [0, 1, 2]}, "seeds"),                       # a list where the MDUS count lives
    ({"run": {"seeds": 3}}, "run.seeds"),                  # an integer where the list lives
    ({"seeds": 5, "mdus_seeds": 5}, "seeds"),              # two spellings of the MDUS count
    ({"seeds": True}, "seeds"),
    ({"seeds": 0}, "seeds"),
    ({"run": {"seeds": [0, 0]}}, "run.seeds"),
    ({"run": {"seeds": [0, "1"]}}, "run.seeds"),
    ({"run": {"seeds": []}}, "run.seeds"),
    ({"seed": 9, "run": {"seeds": [0, 1]}}, "seed"),
])
def test_ambiguous_seeds_are_refused_naming_file_and_field(extra, field):
    with pytest.raises(ConfigError) as e:
        parse_config({**BASE, **extra}, source="sweep.toml")
    msg = str(e.value)
    assert msg.startswith(f"sweep.toml: field {field}: ") and "\n" not in msg and e.value.field == field


def test_cli_refuses_a_list_at_the_top_level_on_one_line(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('kb = "k.json"\nmodels = ["m"]\nseeds = [0, 1, 2]\n')
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "bench", "--config", str(p), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and f"{p}: field seeds: " in r.stderr


def test_a_dumped_config_reloads_to_the_same_sweep():
    import yaml

    c = parse_config({**BASE, "seeds": 9, "run": {"seeds": [2, 3]}})
    again = parse_config(yaml.safe_load(c.to_yaml()))
    assert (again.mdus_seeds, again.run.seeds, again.seed) == (9, [2, 3], 2)
    assert again.fingerprint("kb") == c.fingerprint("kb")


# ------------------------------------------------------------------ sweeps (fake executor)


class _Stop(Exception):
    pass


class _StoppingExecutor(FakeExecutor):
    """A FakeExecutor whose run stops (as a kill would) after ``after`` points."""

    def __init__(self, after: int):
        super().__init__()
        self.after, self.n = after, 0

    def run(self, spec, jobs, sink):
        def counting(job, ev):
            if ev.get("event") == "point":
                if self.n == self.after:
                    raise _Stop
                self.n += 1
            sink(job, ev)
        super().run(spec, jobs, counting)


def _rows(points):
    return sorted((p.seed, p.model, p.target, p.method, p.param, p.recall, p.accuracy) for p in points)


def test_points_carry_their_seed_and_resume_per_seed(sweep_files, tmp_path):
    cfg = load_config(sweep_files(extra="[run]\nseeds = [0, 5, 7]"))
    full = run_sweep(cfg.model_copy(update={"output": str(tmp_path / "full")}), executor=FakeExecutor(),
                     progress=False)
    per_seed = 2 * 4                                     # 2 targets x (ga 2 + tv 2)
    assert full.computed == len(full.points) == 3 * per_seed
    assert sorted({p.seed for p in full.points}) == [0, 5, 7]
    ex = FakeExecutor()
    out = tmp_path / "stopped"
    with pytest.raises(_Stop):
        run_sweep(cfg.model_copy(update={"output": str(out)}), executor=_StoppingExecutor(per_seed + 3), progress=False)
    with ResultsStore(out, readonly=True) as s:
        assert len(s.points()) == per_seed + 3 and {p.seed for p in s.points()} == {0, 5}
    again = run_sweep(cfg.model_copy(update={"output": str(out)}), executor=ex, progress=False)
    assert again.resumed and again.computed == 2 * per_seed - 3
    assert _rows(again.points) == _rows(full.points)
    # every job's seed is derived from its run seed; seed 5's jobs were planned only for what was missing
    assert all(j.seed == job_seed(j.run_seed, j.model, j.target, j.method) for j in ex.jobs)
    assert {j.run_seed for j in ex.jobs} == {5, 7}
    with ResultsStore(out, readonly=True) as s:
        keys = [(m, t, me, p) for m, t, me, p, _ in s.evaluations()]
        assert len(keys) == 3 * per_seed and len(s.all_jobs()) == 3 * 2 * 2
    again2 = run_sweep(cfg.model_copy(update={"output": str(out)}), executor=FakeExecutor(), progress=False)
    assert again2.computed == 0


_OLD_POINTS = """CREATE TABLE points (
    model TEXT NOT NULL, target INTEGER NOT NULL, method TEXT NOT NULL, param REAL NOT NULL,
    recall REAL, accuracy REAL, accuracy_family REAL, accuracy_biography REAL,
    accuracy_rule REAL, accuracy_other REAL,
    target_forgotten INTEGER NOT NULL, forgotten TEXT NOT NULL, exact INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}', written_at REAL NOT NULL, measures TEXT,
    accuracy_low REAL, accuracy_high REAL,
    PRIMARY KEY (model, target, method, param))"""
_OLD_JOBS = """CREATE TABLE jobs (
    model TEXT NOT NULL, target INTEGER NOT NULL, method TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'skipped')), reason TEXT, finished_at REAL NOT NULL,
    PRIMARY KEY (model, target, method))"""


def _make_seedless(store: Path) -> None:
    """Turn a store into one written before the seed column (the tables of that schema)."""
    con = sqlite3.connect(store)
    for table, sql in (("points", _OLD_POINTS), ("jobs", _OLD_JOBS)):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[1] != "seed"]
        con.execute(f"ALTER TABLE {table} RENAME TO t_new")
        con.execute(sql)
        con.execute(f"INSERT INTO {table} SELECT {', '.join(cols)} FROM t_new")
        con.execute("DROP TABLE t_new")
    con.execute("CREATE TABLE ev2 AS SELECT seq, model, target, method, param, pid, at FROM evaluations")
    con.execute("DROP TABLE evaluations")
    con.execute("ALTER TABLE ev2 RENAME TO evaluations")
    con.commit()
    con.close()


def test_a_store_without_the_seed_column_loads_and_extends(sweep_files, tmp_path):
    out = tmp_path / "old"
    cfg = load_config(sweep_files(extra="seed = 3"), output=str(out))
    first = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    _make_seedless(out / STORE_NAME)
    with ResultsStore(out, readonly=True) as s:             # read-only: every point is the sweep's seed
        assert "seed" not in s._columns
        assert {p.seed for p in s.points()} == {3} and _rows(s.points()) == _rows(first.points)
        assert s.done_params("tiny", 0, "ga") == {1, 2} and len(s.jobs()) == 4
    # the same sweep resumes with nothing to do; adding a seed keeps the older points as the sweep's seed
    assert run_sweep(cfg, executor=FakeExecutor(), progress=False).computed == 0
    more = load_config(sweep_files(name="more.toml", extra="[run]\nseeds = [3, 4]"), output=str(out))
    grown = run_sweep(more, executor=FakeExecutor(), progress=False)
    assert grown.resumed and grown.computed == 8 and sorted({p.seed for p in grown.points}) == [3, 4]
    assert _rows(p for p in grown.points if p.seed == 3) == _rows(first.points)


def test_per_seed_model_folders_are_checked(sweep_files, tmp_path, fake_model):
    import shutil

    shutil.copytree(fake_model, tmp_path / "m-s0")
    cfg = load_config(sweep_files(path="m-s{seed}", extra="[run]\nseeds = [0, 1]"))
    assert cfg.models[0].path == str(tmp_path.resolve() / "m-s{seed}")
    with pytest.raises(ConfigError, match=r"field models\.0\.path: no model folder .*m-s1$"):
        run_sweep(cfg, executor=FakeExecutor(), progress=False)
    shutil.copytree(fake_model, tmp_path / "m-s1")
    out = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert out.computed == 16


# ------------------------------------------------------------------ aggregation


def _brute_acc_at_recall(traj, t=0.8):
    """Acc@Recall>=t of one trajectory with the end points (0, 1) and (1, 0), by hand."""
    pts = [(0.0, 1.0), (1.0, 0.0)] + [(r, a) for r, a in traj]
    return max(a for r, a in pts if r >= t - 1e-9)


def test_aggregate_over_seeds_and_targets_equals_brute_force():
    rng = np.random.default_rng(11)
    targets, seeds, params = [3, 8, 13, 21, 34], [0, 1, 2], [1, 2, 4]
    points, runs = [], {}
    for s in seeds:
        for t in targets:
            traj = []
            for p in params:
                r, a = float(rng.choice([0.4, 0.8, 1.0])), float(rng.choice([0.5, 0.85, 0.95]))
                deep = bool(r == 1.0)
                points.append(dict(model="m", method="ga", target=t, param=p, recall=r, accuracy=a, deep=deep, target_forgotten=deep,
                                   seed=s))
                traj.append((r, a, deep))
            runs[(t, s)] = traj
    got = summarize(points)["m"]["ga"]
    acc = {k: _brute_acc_at_recall([(r, a) for r, a, _ in v]) for k, v in runs.items()}
    sdu = {k: float(any(d and a >= 0.8 - 1e-9 for r, a, d in v)) for k, v in runs.items()}
    assert got["n_targets"] == 5 and got["n_seeds"] == 3 and got["n_runs"] == 15
    assert got["acc_at_recall_0.8"] == pytest.approx(np.mean(list(acc.values())))
    assert got["success_du_0.8"] == pytest.approx(np.mean(list(sdu.values())))
    assert got["acc_at_recall_0.8_ci_n"] == 15
    # the interval: resample the 5 targets with replacement, each bringing its 3 seeds; percentile
    draws = np.random.default_rng(0).integers(0, len(targets), size=(N_RESAMPLES, len(targets)))
    stats = []
    for row in draws:
        vals = [acc[(targets[i], s)] for i in row for s in seeds]
        stats.append(sum(vals) / len(vals))
    lo, hi = np.percentile(stats, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    assert (got["acc_at_recall_0.8_ci_lo"], got["acc_at_recall_0.8_ci_hi"]) == pytest.approx((lo, hi))


def test_one_run_per_target_is_scipys_bootstrap_and_repeats_add_no_evidence():
    x = list(np.random.default_rng(3).random(9))
    # one value per cluster: exactly scipy's percentile bootstrap over targets
    assert cluster_interval(x, range(9)) == pytest.approx(bootstrap_interval(x))
    # three identical seeds per target: the same interval (the target is the unit), n = 27
    lo, hi, n = cluster_interval([v for v in x for _ in range(3)], [i for i in range(9) for _ in range(3)])
    assert (lo, hi) == pytest.approx(bootstrap_interval(x)[:2]) and n == 27
    # resampling the 27 runs one by one would narrow it: the evidence of 9 targets counted 3 times
    naive = bootstrap_interval([v for v in x for _ in range(3)])
    assert naive[1] - naive[0] < 0.8 * (hi - lo)


def test_one_seed_summaries_are_unchanged():
    pts = [dict(model="m", method="ga", target=t, param=1, recall=r, accuracy=a, seed=4,
           target_forgotten=r > 0.8) for t, r, a in [(0, 0.9, 0.6), (1, 0.5, 0.9), (2, 1.0, 0.95)]]
    bare = [{k: v for k, v in p.items() if k != "seed"} for p in pts]
    assert summarize(pts) == summarize(bare) and "n_seeds" not in summarize(pts)["m"]["ga"]


def test_adversarial_intervals_over_seeds_and_targets_equal_brute_force():
    from deepunlearn.bench.forms_intervals import adversarial_intervals

    rng = np.random.default_rng(5)
    targets, seeds = [2, 4, 6, 9], [0, 1, 2]
    points, last = [], {}
    for s in seeds:
        for t in targets:
            for param in (1, 4, 16):
                raw, cal, sup = (float(x) for x in rng.random(3))
                cal = raw + (1 - raw) * cal          # the calibrated aggregate knows less: recall_adv >= raw
                p = dict(model="m", method="npo", target=t, param=param, recall=1.0, accuracy=0.9, seed=s,
                         recall_adv_raw=raw, recall_adv=cal, superficial=None if t == 9 else sup, adv_floor=0.02)
                points.append(p)
                last[(t, s)] = p                          # params ascend: the last one written is the last point
    points.append(dict(model="m", method="original", target=2, param=0, recall=0.0, accuracy=1.0, seed=0,
                       recall_adv_raw=0.9, recall_adv=0.9, superficial=0.0, adv_floor=0.02))   # a baseline row: left out
    got = adversarial_intervals(points)["m"]
    assert set(got) == {"npo"}
    s = got["npo"]
    assert s["n_targets"] == 4 and s["n_seeds"] == 3 and s["recall_adv_ci_n"] == 12
    assert s["recall_adv_raw"] == pytest.approx(np.mean([p["recall_adv_raw"] for p in last.values()]))
    assert s["recall_adv"] == pytest.approx(np.mean([p["recall_adv"] for p in last.values()]))
    excess = {k: p["superficial"] - 0.02 for k, p in last.items() if p["superficial"] is not None}
    assert s["superficial_excess"] == pytest.approx(np.mean(list(excess.values()))) and s["superficial_excess_ci_n"] == 9
    # the interval of superficial - floor: targets resampled with their seeds, target 9 has no rate
    have = [t for t in targets if t != 9]
    draws = np.random.default_rng(0).integers(0, len(have), size=(N_RESAMPLES, len(have)))
    stats = [np.mean([excess[(have[i], sd)] for i in row for sd in seeds]) for row in draws]
    lo, hi = np.percentile(stats, [2.5, 97.5])
    assert (s["superficial_excess_ci_lo"], s["superficial_excess_ci_hi"]) == pytest.approx((lo, hi))


def test_each_seed_gets_its_own_calibration_and_checkpoint(tmp_path, monkeypatch):
    import deepunlearn.bench.jobs as jobs
    import deepunlearn.probe as probe
    import deepunlearn.unlearn as unlearn
    from deepunlearn.kg.io import to_dict
    from deepunlearn.kg.kb import KnowledgeBase

    got = []
    from deepunlearn.unlearn.runner_options import flat_options

    monkeypatch.setattr(unlearn, "TargetRunner", lambda *a, **k: got.append(flat_options(**k)) or k)
    loaded = []
    monkeypatch.setattr(probe, "load_model", lambda path, **k: loaded.append(path) or object())
    kb = to_dict(KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")]))
    from deepunlearn.unlearn.runner_options import CheckOptions, ProbeOptions, RunnerOptions, SetOptions

    options = RunnerOptions(probing=ProbeOptions(mode="exact", k_mode="probed"),
                            minimal_sets=SetOptions(sets="exact", tie="accuracy"), checks=CheckOptions(adversarial=True))
    from deepunlearn.bench.modelspec import ModelSpec
    from deepunlearn.probe.protocol import get_protocol

    run = jobs.ModelRun(ModelSpec(name="m", path=str(tmp_path / "m-s{seed}")), get_protocol("default"))
    spec = jobs.WorkSpec(kb=kb, models={"m": run},
                         options={"m": options}, cache_dir=str(tmp_path / "cache"),
                         calibration_by_seed={"0": {"cal": 0}, "7": {"cal": 7}})
    w = jobs.ModelWorker(spec)
    w._load("m", 7)
    w._load("m", 7)                                    # the same seed: the loaded runner is kept
    w._load("m", 0)
    assert loaded == [str(tmp_path / "m-s7"), str(tmp_path / "m-s0")]
    assert [k["adversarial_calibration"] for k in got] == [{"cal": 7}, {"cal": 0}]
    assert [Path(k["cache_dir"]).name for k in got] == ["seed-7", "seed-0"]
