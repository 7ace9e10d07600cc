"""Batch and sequential requests in a sweep: rows labelled METHOD@bN / METHOD@seq with
per-target recall and deep, resume without recomputation, the report's tables, and the config
errors (a target named twice, an unknown base, TV served sequentially, measures with requests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb


@pytest.fixture(scope="module")
def setup(five_people_kb, tmp_path_factory) -> tuple[Path, list[int]]:
    from deepunlearn.probe import build_tiny_model, load_model, probe
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = tmp_path_factory.mktemp("requests")
    save_kb(five_people_kb, d / "kb.json")
    build_tiny_model(five_people_kb, d / "model", seed=0, hidden=64, layers=1, heads=4)
    res = finetune(load_model(d / "model", device="cpu"), five_people_kb, FinetuneConfig.tiny(epochs=60, batch_size=4),
                   out_dir=d / "model", progress=False)
    assert res.share >= 0.95
    known = probe(load_model(d / "model", device="cpu"), five_people_kb, progress=False).known_ids()
    fam = [i for i in five_people_kb.entity_facts() if i in known][:3]
    return d, fam


def _config(d: Path, name: str, targets: str, methods: str = 'ga = [1, 2]\ndu_loop = [2, 4]', extra: str = "") -> Path:
    cfg = d / f"{name}.toml"
    params = '[params.du_loop]\nbase = "ga"\nround_steps = 2\n' if "du_loop" in methods else ""
    cfg.write_text(f'kb = "kb.json"\noutput = "{name}"\n{extra}\n[[models]]\nname = "m"\npath = "model"\n'
                   f"[methods]\n{methods}\n{params}[targets]\n{targets}\n")
    return cfg


def _bench(cfg: Path, capsys) -> tuple[int, dict, str]:
    code = main(["bench", "--config", str(cfg), "--quiet", "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_batch_sweep_rows_resume_and_report(setup, capsys):
    from deepunlearn.bench.store import ResultsStore

    d, fam = setup
    cfg = _config(d, "batch", f"refs = {fam}\nbatch = 2")
    code, obj, _ = _bench(cfg, capsys)
    assert code == 0 and set(obj["models"]["m"]) == {"ga@b2", "du_loop@b2"}
    with ResultsStore(d / "batch", readonly=True) as store:
        pts = store.points()
    assert len(pts) == 3 * 2 * 2  # 3 targets x 2 methods x 2 grid values
    for p in pts:
        assert p.extra["batch_targets"] in (fam[:2], fam[2:]) and isinstance(p.extra["deep"], bool)
        assert p.extra["batch_size"] == len(p.extra["batch_targets"]) and p.extra["base_method"] in ("ga", "du_loop")
    code, obj, _ = _bench(cfg, capsys)  # resume: nothing recomputed
    assert code == 0 and obj["computed"] == 0
    summary = json.loads((d / "batch" / "report" / "summary.json").read_text())
    assert {r["method"] for r in summary["batch"]} == {"ga@b2", "du_loop@b2"}
    assert "success_du_0.8" in summary["models"]["m"]["ga@b2"]


def test_sequential_sweep_records_earlier_targets(setup, capsys):
    from deepunlearn.bench.store import ResultsStore

    d, fam = setup
    code, obj, _ = _bench(_config(d, "seq", f"refs = {fam}\nsequential = true", methods="ga = [1, 4]"), capsys)
    assert code == 0 and set(obj["models"]["m"]) == {"ga@seq"}
    with ResultsStore(d / "seq", readonly=True) as store:
        last = sorted((p for p in store.points() if "earlier" in p.extra), key=lambda p: p.extra["request"])
    assert [[e["target"] for e in p.extra["earlier"]] for p in last] == [fam[:1], fam[:2], fam]
    assert all(0 <= p.extra["accuracy_after"] <= 1 for p in last)


@pytest.mark.parametrize("on_guard", ["skip", "stop"])
def test_sequential_guard_and_recheck_from_the_config(setup, capsys, on_guard):
    """[targets] min_accuracy / on_guard / recheck reach the sequence. Unguarded, GA at 16 steps
    loses other facts; with a guard at 1.0 the requests served before the first loss are kept at
    accuracy 1.0, that request is undone (marked skipped, the accuracy it would have left is the
    unguarded run's), and "stop" ends the sequence there while "skip" goes on, every later
    request either kept at 1.0 or undone; the re-check leaves its record on every request."""
    from deepunlearn.bench.store import ResultsStore

    d, fam = setup

    def requests(name, targets):
        code, obj, _ = _bench(_config(d, name, targets, methods="ga = [16]"), capsys)
        assert code == 0 and set(obj["models"]["m"]) == {"ga@seq"}
        with ResultsStore(d / name, readonly=True) as store:
            return sorted((p for p in store.points() if "earlier" in p.extra), key=lambda p: p.extra["request"])

    free = [p.extra["accuracy_after"] for p in requests("free", f"refs = {fam}\nsequential = true")]
    first = next(i for i, a in enumerate(free) if a < 1)  # the first request that costs another fact
    targets = f'refs = {fam}\nsequential = true\nmin_accuracy = 1.0\non_guard = "{on_guard}"\nrecheck = true'
    last = requests(f"guard_{on_guard}", targets)
    assert [p.extra["request"] for p in last] == list(range(len(fam) if on_guard == "skip" else first + 1))
    assert all(not p.extra.get("skipped") for p in last[:first]) and last[first].extra["skipped"]
    assert last[first].extra["accuracy_would_be"] == pytest.approx(free[first])
    for p in last:
        assert "reunlearned" in p.extra and p.extra["accuracy_after"] == 1.0
        assert p.extra.get("skipped") or [e["target"] for e in p.extra["earlier"]][-1] == fam[p.extra["request"]]
        assert not p.extra.get("skipped") or p.extra["accuracy_would_be"] < 1


def test_protect_and_the_batch_recheck_enter_the_fingerprint_of_sequential_sweeps_only():
    from deepunlearn.bench.targets import TargetSpec

    plain = TargetSpec(refs=[1, 2]).results_key()
    assert "protect" not in plain and "recheck" not in plain
    seq = TargetSpec(refs=[1, 2], sequential=True)
    assert seq.results_key()["protect"] is True and seq.sequential_options()["protect"] is True
    batch = TargetSpec(refs=[1, 2], sequential=True, recheck="batch", protect=False)
    assert batch.results_key()["recheck"] == "batch" and batch.sequential_options()["protect"] is False
    assert TargetSpec(refs=[1, 2], sequential=True, recheck=True).sequential_options()["recheck"] is True


def test_sequential_healing_from_the_config(setup, capsys):
    """[targets] heal_steps reaches the sequence: every request records its healing, and the
    accuracy after the last request is at least the unhealed sequence's."""
    from deepunlearn.bench.store import ResultsStore

    d, fam = setup

    def requests(name, targets):
        code, obj, _ = _bench(_config(d, name, targets, methods="ga = [16]"), capsys)
        assert code == 0
        with ResultsStore(d / name, readonly=True) as store:
            return sorted((p for p in store.points() if "earlier" in p.extra), key=lambda p: p.extra["request"])

    free = requests("free_h", f"refs = {fam}\nsequential = true\nrecheck = true")
    healed = requests("healed", f"refs = {fam}\nsequential = true\nrecheck = true\nheal_steps = 16")
    assert all(0 <= p.extra["healed"]["steps"] <= 16 for p in healed) and "healed" not in free[-1].extra
    assert healed[-1].extra["accuracy_after"] >= free[-1].extra["accuracy_after"]


@pytest.mark.parametrize("targets, methods, extra, message", [
    ("refs = [{0}, {1}, {0}]\nbatch = 2", "ga = [1]", "", "field targets.refs.2: fact {0} "),
    ("refs = [{0}]", "du_loop = [2]", "", "field params.du_loop.base: du_loop: base: Input should be"),
    ("refs = [{0}, {1}]\nsequential = true", "tv = [1]", "", "field methods.tv: sequential requests keep"),
    ("refs = [{0}, {1}]\nbatch = 2", "ga = [1]", "scores = true", "field targets: scores / reference measure"),
    ("refs = [{0}, {1}]\nmin_accuracy = 0.8", "ga = [1]", "", "min_accuracy: applies to sequential requests only"),
    ("refs = [{0}, {1}]\nsequential = true\non_guard = 'stop'", "ga = [1]", "", "on_guard: there is no guard"),
    ("refs = [{0}, {1}]\nsequential = true\nmin_accuracy = 1.5", "ga = [1]", "", "min_accuracy"),
    ("refs = [{0}, {1}]\nheal_steps = 8", "ga = [1]", "", "heal_steps: applies to sequential requests only"),
    ("refs = [{0}, {1}]\nsequential = true\nheal_steps = -1", "ga = [1]", "", "heal_steps"),
    ("refs = [{0}, {1}]\nprotect = false", "ga = [1]", "", "protect: applies to sequential requests only"),
    ("refs = [{0}, {1}]\nsequential = true\nrecheck = 'all'", "ga = [1]", "", "recheck"),
])
def test_request_config_errors_touch_nothing(setup, capsys, targets, methods, extra, message):
    d, fam = setup
    cfg = _config(d, "bad", targets.format(*fam), methods, extra)
    if "du_loop.base" in message:
        cfg.write_text(cfg.read_text().replace('base = "ga"', 'base = "sgd"'))
    code = main(["bench", "--config", str(cfg), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert message.format(*fam) in err and str(cfg) in err
    assert not (d / "bad").exists()
