"""du_loop's adversarial watch and sequential requests that keep their promises, on scripted
worlds whose truth is written out: du_loop watching the adversarial aggregate stops only when
the target is out of the closure under it (later than under the primary probe); the sequential
re-check unlearns again an earlier target a later request brought back through the rules; the
accuracy guard undoes a request that would take accuracy below the threshold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from deepunlearn.unlearn.methods import UnlearnError, get_method
from deepunlearn.unlearn.requests import run_sequential
from deepunlearn.unlearn.snapshot import WeightSnapshot


class TwoProbes:
    """The primary probe loses the target at the 2nd probe, the adversarial aggregate at the 4th."""

    def __init__(self, runner, targets, choice="fewest"):
        self.targets, self.watch = list(targets), list(targets)
        self.calls, self.forms = 0, None

    def forgotten_now(self):
        self.calls += 1
        return set(self.targets) if self.calls >= 2 else set()

    def forgotten_now_adversarial(self):
        self.calls += 1
        return set(self.targets) if self.calls >= 4 else set()

    def use_forms(self, session, forms):
        self.forms = forms
        TwoProbes.seen_forms = forms

    def deep(self, t, forgotten):
        return t in forgotten

    def choose(self, t, forgotten):
        return [t]


@pytest.mark.parametrize("watch, stop", [("primary", 2), ("adversarial", 4)])
def test_du_loop_stops_when_the_watched_probe_says_deep(five_people_runner, monkeypatch, watch, stop):
    import deepunlearn.unlearn.deep as deep

    monkeypatch.setattr(deep, "DeepContext", TwoProbes)
    TwoProbes.seen_forms = None
    runner = five_people_runner
    t = sorted(runner.known)[0]
    u = runner.unlearner("du_loop")
    u = type(u)(u.params, grid=[8], watch=watch, overshoot=0, heal=0)  # the plain loop
    (point,) = list(runner.run(t, u, seed=0))
    assert point.notes["steps_used"] == stop and point.notes["stopped_deep"]
    assert TwoProbes.seen_forms == ("train" if watch == "adversarial" else None)


def test_du_oracle_records_deep_under_the_watched_probe(five_people_runner, monkeypatch):
    """du_oracle shares the adversarial watch: it unlearns on the train forms and records at each
    grid point whether the target is out of the closure under the adversarial aggregate (here
    from its 4th probe on); it does not stop there. The primary watch records nothing."""
    import deepunlearn.unlearn.deep as deep

    monkeypatch.setattr(deep, "DeepContext", TwoProbes)
    runner = five_people_runner
    t = sorted(runner.known)[0]
    u = runner.unlearner("du_oracle")
    TwoProbes.seen_forms = None
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 3, 4, 5], watch="adversarial"), seed=0))
    assert [p.notes["deep_adversarial"] for p in points] == [False, False, False, True, True]
    assert [p.param for p in points] == [1, 2, 3, 4, 5] and TwoProbes.seen_forms == "train"
    TwoProbes.seen_forms = None
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2]), seed=0))
    assert all("deep_adversarial" not in p.notes for p in points) and TwoProbes.seen_forms is None


@pytest.mark.parametrize("method", ["du_loop", "du_oracle"])
def test_adversarial_watch_unlearns_on_the_watch_forms(five_people_runner, method):
    """The adversarial watch trains on the train forms of the facts it unlearns: with every
    form picked (``all``), the forget batch has one row per form of each fact; with the primary
    watch, one row per fact."""
    from deepunlearn.kg.forms import select_forms
    from deepunlearn.unlearn.methods import du

    runner = five_people_runner
    t = sorted(runner.known)[0]
    cls = du.DULoop if method == "du_loop" else du.DUOracle
    real = cls.trajectory

    def rows(**kw):
        seen = {}

        def spy(self, session, grid):
            for step in real(self, session, grid):
                seen.setdefault("rows", session.batch["input_ids"].shape[0])
                seen.setdefault("ids", list(session.forget_ids))
                yield step

        cls.trajectory = spy
        try:
            u = runner.unlearner(method)
            list(runner.run(t, type(u)(u.params, grid=[1], **kw), seed=0))
        finally:
            cls.trajectory = real
        return seen

    seen = rows(watch="adversarial", watch_forms="all")
    sel = select_forms(runner.kb, "all", seen["ids"])
    assert seen["rows"] == sum(len(sel.forms[i]) for i in seen["ids"]) > len(seen["ids"])
    seen = rows()
    assert seen["rows"] == len(seen["ids"])


# ---------------------------------------------------------------------- sequential requests
class World:
    """Six facts, all known; the model's weight w[f] = 1 says fact f is forgotten. Target 0 is
    derivable while 0 is known or (1 and 2 are both known): deep when 0 and one of 1, 2 are
    forgotten. Serving 0 forgets {0, 1}; serving 3 forgets 3 and brings 1 back (a later request
    re-teaches a member of 0's set); serving 4 forgets 4 and 5 (collateral)."""

    EFFECT = {0: ({0, 1}, set()), 3: ({3}, {1}), 4: ({4, 5}, set())}
    SETS = {0: {0, 1}, 3: {3}, 4: {4}}

    def __init__(self):
        self.known = frozenset(range(6))
        self.bundle = SimpleNamespace(model=torch.nn.Linear(6, 1, bias=False))
        with torch.no_grad():
            self.bundle.model.weight.zero_()
        self.snapshot = WeightSnapshot(self.bundle.model)
        self.lora = False
        self.kb = SimpleNamespace(resolve=int, facts={i: (i, 0, 0) for i in range(6)})
        self.served: list = []
        self.protected, self.protected_seen = frozenset(), []
        world = self

        class Ev:
            def evaluate(self, s, forgotten):
                return SimpleNamespace(recall=1.0 if world.deep(s, forgotten) else 0.5, set=sorted(World.SETS[s]))

            def accuracies(self, union, forgotten):
                rest = world.known - set(union)
                return (1 - len(set(forgotten) & rest) / len(rest),)

        self.evaluator = Ev()

    def known_target(self, t, field=None):
        return int(t)

    def unlearner(self, method, grid=None, params=None):
        return get_method(method)(None, grid=[1])

    def forgotten(self) -> set[int]:
        return {i for i in range(6) if self.bundle.model.weight[0, i] > 0.5}

    def known_after(self, model_fn=None):
        return set(self.known) - self.forgotten()

    def deep(self, s, forgotten):
        f = set(forgotten)
        return s in f and (s != 0 or bool(f & {1, 2}))

    def steps(self, targets, u, values, skip, n, seed=None, restore=True, sample=False):
        self.served.append(targets[0] if len(targets) == 1 else tuple(targets))
        self.protected_seen.append(sorted(self.protected))
        # a batch run keeps each of its targets deep: what one brings back, another does not undo
        with torch.no_grad():
            for f in set().union(*(World.EFFECT[t][1] for t in targets)):
                self.bundle.model.weight[0, f] = 0.0
            for f in set().union(*(World.EFFECT[t][0] for t in targets)):
                self.bundle.model.weight[0, f] = 1.0
        yield [SimpleNamespace(target=t, forgotten=sorted(self.forgotten()), notes={"steps_used": 1}) for t in targets]


def _last_points(points):
    return [p for p in points if "accuracy_after" in p.notes]


def test_recheck_unlearns_again_a_target_a_later_request_brought_back():
    plain = World()
    last = _last_points(run_sequential(plain, [0, 3], "ga"))
    assert [e["deep"] for e in last[1].notes["earlier"]] == [False, True]  # 0 came back through the rules
    w = World()
    last = _last_points(run_sequential(w, [0, 3], "ga", recheck=True))
    assert w.served == [0, 3, 0]  # 0 unlearnt again after request 3
    assert last[1].notes["reunlearned"] == [{"target": 0, "deep": True, "steps": 1, "pass": 1}]
    assert [e["deep"] for e in last[1].notes["earlier"]] == [True, True]
    assert last[0].notes["reunlearned"] == []
    assert w.forgotten() == set()  # the original weights are back at the end


def test_recheck_passes_again_when_a_re_unlearning_brings_back_an_earlier_target(monkeypatch):
    # serving 4 also brings 3 back; re-serving 3 then brings 1 back (0 derivable again)
    monkeypatch.setitem(World.EFFECT, 4, ({4, 5}, {3}))
    w = World()
    last = _last_points(run_sequential(w, [0, 3, 4], "ga", recheck=True))
    assert w.served == [0, 3, 0, 4, 3, 0]
    assert [(r["target"], r["pass"]) for r in last[2].notes["reunlearned"]] == [(3, 1), (0, 2)]
    assert [e["deep"] for e in last[2].notes["earlier"]] == [True, True, True]


def test_batch_recheck_unlearns_the_derivable_earlier_targets_together(monkeypatch):
    # serving 4 brings 3 and 1 back (0 and 3 derivable); one after another, re-serving 3 brings 1
    # back again and a second pass is needed; together, one batch run keeps both deep
    monkeypatch.setitem(World.EFFECT, 4, ({4, 5}, {3, 1}))
    each = World()
    last = _last_points(run_sequential(each, [0, 3, 4], "ga", recheck=True))
    assert each.served == [0, 3, 0, 4, 0, 3, 0]
    assert [(r["target"], r["pass"]) for r in last[2].notes["reunlearned"]] == [(0, 1), (3, 1), (0, 2)]
    batch = World()
    last = _last_points(run_sequential(batch, [0, 3, 4], "ga", recheck="batch"))
    assert batch.served == [0, 3, 0, 4, (0, 3)]
    assert [(r["target"], r["deep"], r["pass"]) for r in last[2].notes["reunlearned"]] == [(0, True, 1), (3, True, 1)]
    assert [e["deep"] for e in last[2].notes["earlier"]] == [True, True, True]
    with pytest.raises(UnlearnError, match="recheck"):
        run_sequential(World(), [0], "ga", recheck="all")


@pytest.mark.parametrize("protect", [True, False])
def test_a_request_never_retains_on_the_kept_targets_sets(protect):
    w = World()
    list(run_sequential(w, [0, 3], "ga", recheck=True, protect=protect))
    assert w.served == [0, 3, 0]
    # serving 3: target 0 and its set {0, 1} are protected; re-serving 0: target 3 and its set {3}
    assert w.protected_seen == ([[], [0, 1], [3]] if protect else [[], [], []])
    assert w.protected == frozenset()  # nothing stays protected after the sequence


def test_protected_facts_leave_the_retain_pool_and_the_healing_pool(five_people_runner):
    from deepunlearn.unlearn.methods.du_heal import Healer

    runner = five_people_runner
    t, other = sorted(runner.known)[:2]
    u = runner.unlearner("du_loop")
    assert other in runner.session(u, [t]).retain.pool
    runner.protected = frozenset({other})
    session = runner.session(u, [t])
    assert other not in session.retain.pool and set(session.retain.pool) <= set(runner.known) - {t, other}
    u2 = type(u)(u.params, retain="none")
    session = runner.session(u2, [t])
    assert session.retain is None
    healer = Healer(u2.params, session, session.rules, seed=0)
    assert other not in healer.batches.pool and healer.batches.pool


def test_accuracy_guard_undoes_a_request_that_would_fall_below_the_threshold():
    w = World()
    seen_weights = []
    points = []
    for p in run_sequential(w, [0, 4, 3], "ga", min_accuracy=0.8, recheck=True):
        points.append(p)
        seen_weights.append(sorted(w.forgotten()))
    last = _last_points(points)
    # request 4 would forget 5 too: accuracy over K minus {0, 1, 4} is 1 - 1/3 < 0.8: undone
    assert last[1].notes["skipped"] and last[1].notes["accuracy_would_be"] == pytest.approx(2 / 3)
    assert seen_weights[1] == [0, 1]  # the model as before request 4
    assert [e["target"] for e in last[1].notes["earlier"]] == [0] and last[1].notes["accuracy_after"] == 1.0
    # request 3 is still served (skip, not stop), and the re-check brings 0 back to deep
    assert not last[2].notes.get("skipped") and [e["deep"] for e in last[2].notes["earlier"]] == [True, True]
    w2 = World()
    stopped = _last_points(run_sequential(w2, [0, 4, 3], "ga", min_accuracy=0.8, on_guard="stop"))
    assert len(stopped) == 2 and w2.served == [0, 4]
    with pytest.raises(UnlearnError, match="min_accuracy"):
        run_sequential(World(), [0], "ga", min_accuracy=1.5)


def test_unlearn_cli_sequential_guard_and_recheck(five_people_model_dir, five_people_kb, tmp_path, capsys):
    import json

    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe

    kb_file = tmp_path / "kb.json"
    save_kb(five_people_kb, kb_file)
    known = probe(load_model(five_people_model_dir, device="cpu"), five_people_kb, progress=False).known_ids()
    a, b = [i for i in five_people_kb.entity_facts() if i in known][:2]
    common = ["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--grid", "2", "--json",
              "--method", "ga"]
    # a guard of 1.0 undoes any request that loses a fact outside the kept sets
    assert main(common + ["--target", f"{a},{b}", "--sequential", "--recheck", "--min-accuracy", "1"]) == 0
    obj = json.loads(capsys.readouterr().out)
    for r in obj["targets"]:
        notes = r["points"][-1]
        assert "reunlearned" in notes
        assert notes.get("skipped", False) == ("accuracy_would_be" in notes)
        if notes.get("skipped"):
            assert notes["accuracy_would_be"] < 1
        else:
            assert notes["accuracy_after"] == 1.0
    assert main(common + ["--target", f"{a},{b}", "--sequential", "--heal-steps", "8"]) == 0
    assert all(0 <= r["points"][-1]["healed"]["steps"] <= 8 for r in json.loads(capsys.readouterr().out)["targets"])
    assert main(common + ["--target", f"{a},{b}", "--sequential", "--recheck", "batch", "--no-protect"]) == 0
    assert all("reunlearned" in r["points"][-1] for r in json.loads(capsys.readouterr().out)["targets"])
    for extra, message in ((["--target", str(a), "--recheck"], "--recheck: applies to --sequential"),
                           (["--target", str(a), "--no-protect"], "--no-protect: applies to --sequential"),
                           (["--target", str(a), "--heal-steps", "4"], "--heal-steps: applies to --sequential"),
                           (["--target", f"{a},{b}", "--sequential", "--heal-steps", "-1"], "must be 0 or more"),
                           (["--target", f"{a},{b}", "--sequential", "--min-accuracy", "2"], "between 0 and 1")):
        assert main(common + extra) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
