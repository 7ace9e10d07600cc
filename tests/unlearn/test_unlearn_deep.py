"""Rule-aware methods, forget/retain sets and several requests on a 5-person EDU-RELAT KB with a
one-layer model: du_loop stops once the target is out of Ω(K_after, R) (scripted prober), the set
du_oracle forgets is an exact minimal set, every point's deep flag agrees with pyDatalog's closure
of K minus its forgotten facts, retain draws avoid the forget and chosen sets, and bad requests
are refused before any weight changes."""

from __future__ import annotations

import pytest
import torch

from deepunlearn.rules import closure, is_deep_unlearning_set, is_minimal
from deepunlearn.unlearn import TargetRunner
from deepunlearn.unlearn.loop import TargetNotKnownError
from deepunlearn.unlearn.methods import GAParams, RetainPoolError, UnlearnError
from deepunlearn.unlearn.requests import run_batch, run_sequential


@pytest.fixture(scope="module")
def model_dir(five_people_model_dir):
    return five_people_model_dir


@pytest.fixture
def runner(five_people_runner):
    return five_people_runner


def _deep_target(runner) -> int:
    """A known target whose cheapest minimal set holds more than the target itself."""
    return next(t for t in sorted(runner.known) if runner.kb.relations[runner.kb.facts[t][1]].kind == "entity"
                and len(runner.chosen_set(t)) > 1)


def test_du_oracle_forgets_an_exact_minimal_set_and_deep_agrees_with_pydatalog(runner, five_people_kb):
    t = _deep_target(runner)
    points = list(runner.run(t, "du_oracle", grid=[2, 8], seed=0))
    chosen = frozenset(points[0].notes["sets"][str(t)])
    g = runner.evaluator.graph
    assert chosen in runner.evaluator.minimal_sets(t).sets and is_minimal(g, t, chosen)
    assert is_deep_unlearning_set(g, t, chosen)
    points += list(runner.run(t, "ga", grid=[1, 16], seed=0))
    for p in points:
        kept = sorted(runner.known - set(p.forgotten))
        omega = closure(five_people_kb, "edu-relat", engine="pydatalog", known=kept)
        assert p.notes["deep"] == (tuple(five_people_kb.facts[t]) not in omega), (p.method, p.param)
        assert p.notes["deep"] == (p.recall >= 1 - 1e-9)  # exact sets: deep iff recall 1
        assert p.notes["seconds"] > 0


class Scripted:
    """A prober that says the watched facts are all known at the first probe and the target
    forgotten from the second on."""

    def __init__(self, runner, targets, choice="fewest"):
        self.targets, self.watch, self.calls = list(targets), list(targets), 0

    def forgotten_now(self):
        self.calls += 1
        return set() if self.calls < 2 else set(self.targets)

    def deep(self, t, forgotten):
        return t in forgotten

    def choose(self, t, forgotten):
        return [t]


def test_du_loop_stops_once_the_target_is_not_derivable(runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep

    monkeypatch.setattr(deep, "DeepContext", Scripted)
    t = _deep_target(runner)
    u = runner.unlearner("du_loop", grid=[2, 4, 8, 16], params=None)
    u = type(u)(u.params, grid=[2, 4, 8, 16], round_steps=2, overshoot=0, heal=0)  # the plain loop
    points = list(runner.run(t, u, seed=0))
    assert [p.notes["steps_used"] for p in points] == [2, 4, 4, 4]  # round 1 open, round 2 deep: stop
    assert [p.notes["stopped_deep"] for p in points] == [False, True, True, True]
    assert points[2].forgotten == points[3].forgotten == points[1].forgotten  # the same model


def test_du_loop_overshoot_goes_on_past_the_deep_point_on_the_last_sets(runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep
    from deepunlearn.unlearn.methods.base import Session

    t = _deep_target(runner)
    other = next(f for f in sorted(runner.known) if f != t)

    class TwoFacts(Scripted):  # the chosen set holds the target and one other fact
        def choose(self, target, forgotten):
            return [target, other]

    made = []
    monkeypatch.setattr(deep, "DeepContext", lambda *a, **k: made.append(TwoFacts(*a, **k)) or made[-1])
    forgets, real = [], Session.set_forget
    monkeypatch.setattr(Session, "set_forget", lambda self, ids: forgets.append(sorted(ids)) or real(self, ids))
    u = runner.unlearner("du_loop", grid=[1, 2, 4, 8], params=None)
    plain = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=0, heal=0), seed=0))
    assert [p.notes["steps_used"] for p in plain] == [1, 2, 2, 2]  # deep at the second probe: stop
    forgets.clear()
    points = list(runner.run(t, type(u)(u.params, grid=[1, 2, 4, 8], overshoot=1.0, heal=0, lookahead="off"), seed=0))
    # deep after 2 steps, then ceil(1.0 * 2) = 2 more steps without a probe, then stop
    assert [p.notes["steps_used"] for p in points] == [1, 2, 4, 4]
    assert [p.notes["steps_to_deep"] for p in points] == [None, 2, 2, 2]
    assert made[-1].calls == 2  # no probe of the watched facts during the margin
    assert forgets[-1] == sorted({t, other})  # the margin unlearns the whole last chosen set
    assert points[1].forgotten == plain[1].forgotten  # the same trajectory up to the deep point
    assert points[2].forgotten == points[3].forgotten


def test_du_loop_heal_trains_outside_the_sets_until_the_sample_recovers(runner, monkeypatch):
    import deepunlearn.unlearn.deep as deep
    from deepunlearn.unlearn.methods import du_heal

    t = _deep_target(runner)
    other = next(f for f in sorted(runner.known) if f != t)

    class Healing(Scripted):
        """Deep from the second probe; the third probe (the first healing round) finds the target
        back once; the heal sample forgets one fact, then knows all again at the next probe."""

        seed = property(lambda self: self.model.seed)  # what du_loop's healing reads of its context
        known = property(lambda self: self.model.known)
        protected = property(lambda self: self.model.protected)

        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.model, self.samples = runner, 0

        def forgotten_now(self):
            self.calls += 1
            return set() if self.calls in (1, 3) else set(self.targets)

        def choose(self, target, forgotten):
            return [target, other]

        def known_among(self, ids):
            self.samples += 1
            return set(ids[1:]) if self.samples == 2 else set(ids)

    made, healed = [], []
    monkeypatch.setattr(deep, "DeepContext", lambda *a, **k: made.append(Healing(*a, **k)) or made[-1])
    real = du_heal.Healer.loss
    monkeypatch.setattr(du_heal.Healer, "loss", lambda self, s: healed.append(self.batches.ids(s.step)) or real(self, s))
    u = runner.unlearner("du_loop", grid=[2, 32], params=None)
    points = list(runner.run(t, type(u)(u.params, grid=[2, 32], overshoot=0, heal=8, heal_every=2), seed=0))
    n = points[-1].notes
    # deep at step 2 (probes 1-2); healing steps 3-4: the target is back (probe 3), unlearn step 5
    # (probe 4: deep again); healing steps 6-7 find the sample one fact short (probe 5), steps 8-9
    # recovered (probe 6): stop after 9 steps, 6 of them healing
    assert [made[-1].calls, n["steps_used"], n["heal_steps"], n["heal_known"]] == [6, 9, 6, 1.0]
    assert len(healed) == 6 and all({t, other}.isdisjoint(ids) and ids for ids in healed)
    assert all(set(ids) <= runner.known for ids in healed)


def _du_loop_at_step_4(runner, monkeypatch, t, grid, **params):
    """du_loop's step-4 point over ``grid``: (its rates, its weights, the point)."""
    from deepunlearn.unlearn.methods import du

    seen, real = {}, du.DULoop.trajectory

    def spy(self, session, g):
        for step in real(self, session, g):
            if step.param == 4:
                seen["rates"] = list(session.rates[:4])
                seen["weights"] = [p.detach().clone() for p in session.model.parameters()]
            yield step

    monkeypatch.setattr(du.DULoop, "trajectory", spy)
    u = runner.unlearner("du_loop", grid=grid, params=None)
    u = type(u)(u.params, grid=grid, **params)
    point = next(p for p in runner.run(t, u, seed=0) if p.param == 4)
    return seen["rates"], seen["weights"], point


def test_du_loop_first_steps_do_not_depend_on_the_budgets(runner, monkeypatch):
    t = _deep_target(runner)
    rates, weights, point = _du_loop_at_step_4(runner, monkeypatch, t, [4])
    rates2, weights2, point2 = _du_loop_at_step_4(runner, monkeypatch, t, [4, 64])
    assert rates == rates2 and len(set(rates[1:])) == 1  # constant after the protocol's warm-up
    assert all(torch.equal(a, b) for a, b in zip(weights, weights2))
    assert point.forgotten == point2.forgotten and point.recall == point2.recall
    # the protocol's linear decay spans the largest budget: the first steps would differ
    lin, lin_w, _ = _du_loop_at_step_4(runner, monkeypatch, t, [4, 64], schedule="linear")
    assert lin != rates and not all(torch.equal(a, b) for a, b in zip(weights, lin_w))


def test_retain_draws_never_touch_the_forget_or_chosen_sets(runner, monkeypatch):
    from deepunlearn.unlearn.methods import retain

    drawn = []
    real = retain.RetainSampler.batch

    def spy(self, step):
        drawn.append(self.ids(step))
        return real(self, step)

    monkeypatch.setattr(retain.RetainSampler, "batch", spy)
    t = _deep_target(runner)
    for method in ("graddiff", "npo_gdr", "du_oracle", "du_loop"):
        drawn.clear()
        list(runner.run(t, method, grid=[4] if method != "du_loop" else [4], seed=0))
        assert drawn, method
        banned = {t} | set(runner.chosen_set(t))
        assert all(not banned & set(ids) for ids in drawn), method
    drawn.clear()
    list(runner.run(t, "ga", grid=[2], params=GAParams(retain="kl"), seed=0))
    assert len(drawn) == 2 and not any(t in ids for ids in drawn)


def test_kl_retain_is_zero_before_the_first_step(runner):
    from deepunlearn.unlearn.methods.retain import kl_to_original

    t = _deep_target(runner)
    u = runner.unlearner("ga", params=GAParams(retain="kl"))
    s = runner.session(u, t)
    b = s.retain.batch(1)
    with torch.no_grad():
        assert float(kl_to_original(s.logits_of(b), s.original_logits(b), b["labels"])) == pytest.approx(0, abs=1e-6)


def test_batch_and_sequential_requests(runner, model_dir):
    from deepunlearn.unlearn.snapshot import WeightSnapshot

    fam = [t for t in sorted(runner.known) if runner.kb.relations[runner.kb.facts[t][1]].kind == "entity"][:3]
    before = WeightSnapshot(runner.bundle.model)
    rows = list(run_batch(runner, fam, "ga", grid=[1, 4], seed=0))
    assert [len(r) for r in rows] == [3, 3]
    for r in rows:  # one accuracy for the batch, recall and deep per target
        assert len({p.accuracy for p in r}) == 1 and [p.target for p in r] == fam
    seq = list(run_sequential(runner, fam, "ga", grid=[1, 4], seed=0))
    assert [p.notes["request"] for p in seq] == [0, 0, 1, 1, 2, 2]
    last = [p for p in seq if "earlier" in p.notes]
    assert [[e["target"] for e in p.notes["earlier"]] for p in last] == [fam[:1], fam[:2], fam]
    assert before.equal(runner.bundle.model)  # the original weights are back


def test_bad_requests_are_refused_before_any_work(runner, five_people_kb):
    fam = sorted(runner.known)[:2]
    with pytest.raises(UnlearnError, match="named twice"):
        list(run_batch(runner, [fam[0], fam[1], fam[0]], "ga"))
    unknown = [i for i in range(len(five_people_kb)) if i not in runner.known]
    if unknown:
        with pytest.raises(TargetNotKnownError, match="not known by the model"):
            list(run_batch(runner, [fam[0], unknown[0]], "ga"))
    with pytest.raises(UnlearnError, match="sequential requests keep each request's weights"):
        list(run_sequential(runner, fam, "tv"))
    with pytest.raises(UnlearnError, match="base: Input should be 'ga', 'npo', 'simnpo' or 'rmu'"):
        runner.unlearner("du_loop").__class__(base="sgd")


def test_empty_retain_pool_is_one_clear_error(runner):
    # forget every known fact: nothing is left to retain
    with pytest.raises(RetainPoolError, match="the retain pool is empty"):
        runner.session(runner.unlearner("graddiff"), sorted(runner.known)[0], forget=sorted(runner.known))


def test_unlearn_cli_batch_sequential_and_option_errors(model_dir, five_people_kb, tmp_path, capsys):
    import json

    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe

    kb_file = tmp_path / "kb.json"
    save_kb(five_people_kb, kb_file)
    known = probe(load_model(model_dir, device="cpu"), five_people_kb, progress=False).known_ids()
    a, b = [i for i in five_people_kb.entity_facts() if i in known][:2]
    common = ["unlearn", "--model", str(model_dir), "--kb", str(kb_file), "--grid", "2", "--json"]
    for extra, mode in ((["--method", "du_loop"], "batch"), (["--method", "ga", "--sequential"], "sequential")):
        assert main(common + ["--target", f"{a},{b}"] + extra) == 0
        obj = json.loads(capsys.readouterr().out)
        assert obj["mode"] == mode and [r["index"] for r in obj["targets"]] == [a, b]
        assert all(isinstance(r["points"][-1]["deep"], bool) for r in obj["targets"])
    for extra, message in ((["--method", "ga", "--target", f"{a},{b},{a}"], f"names fact {a} "),
                           (["--method", "ga", "--target", str(a), "--base", "npo"], "--base: ga has no base"),
                           (["--method", "tv", "--target", str(a), "--retain", "kl"], "--retain: tv: a retain term"),
                           (["--method", "ga", "--target", str(a), "--sequential"], "--sequential serves several")):
        assert main(common + extra) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_sequential_healing_wins_back_accuracy_and_never_trains_on_a_kept_set(runner, monkeypatch, five_people_kb):
    import deepunlearn.unlearn.heal as heal_mod

    fam = [t for t in sorted(runner.known) if runner.kb.relations[runner.kb.facts[t][1]].kind == "entity"][:3]
    u = runner.unlearner("ga", grid=[4], params=GAParams(lr=5e-3))
    plain = [p for p in run_sequential(runner, fam, u, seed=0, recheck=True) if "accuracy_after" in p.notes]
    pools, real = [], heal_mod.heal

    def spy(m, kept, protected, goal, accuracy, **kw):
        from deepunlearn.unlearn.methods import retain_pool

        pools.append((list(kept), retain_pool(m.known, kept, protected)))
        assert m.optimiser.schedule == "linear" and m.optimiser.lr == 5e-3  # the run's settings; heal makes it constant
        return real(m, kept, protected, goal, accuracy, **kw)

    monkeypatch.setattr(heal_mod, "heal", spy)
    healed = [p for p in run_sequential(runner, fam, u, seed=0, recheck=True, heal_steps=32)
              if "accuracy_after" in p.notes]
    assert len(pools) == 3 and all(p.notes["healed"]["steps"] <= 32 for p in healed)
    assert any(p.notes["healed"]["steps"] > 0 for p in healed) and all(pool for _, pool in pools)
    for kept, pool in pools:  # what healing trains on cannot derive a kept target (pyDatalog's closure)
        omega = closure(five_people_kb, "edu-relat", engine="pydatalog", known=pool)
        assert not any(tuple(five_people_kb.facts[s]) in omega for s in kept) and not set(kept) & set(pool)
    # GA at this rate costs accuracy; healing wins it back, and every served target stays deep
    assert plain[-1].notes["accuracy_after"] < 1
    assert healed[-1].notes["accuracy_after"] > plain[-1].notes["accuracy_after"]
    assert all(e["deep"] for p in healed for e in p.notes["earlier"])  # the request's own target included
