"""The per-target loop on the finetuned tiny fixture model: every method gives one point per grid
value, GA forgets the target, and the model comes back bit for bit."""

from __future__ import annotations

import pytest
import torch

from deepunlearn.probe import probe
from deepunlearn.unlearn.loop import Point, TargetNotKnownError, TargetRunner
from deepunlearn.unlearn.methods import UnlearnError

PAPER_GRIDS = {
    "ga": [1, 2, 4, 8, 16],
    "npo": [1, 2, 4, 8, 16],
    "tv": [0.2, 0.5, 1.0, 5.0, 10.0],
    "whp": [1e1, 1e3, 1e5, 1e7, 1e8],
}


@pytest.fixture(scope="module")
def bundle(tiny_model_dir):
    """One copy of the fixture model for the whole module: the loop must give it back unchanged."""
    from deepunlearn.probe import load_model

    return load_model(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def original_state(bundle):
    return {k: v.detach().clone() for k, v in bundle.model.state_dict().items()}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("unlearn_cache")


@pytest.fixture(scope="module")
def runner(bundle, small_kb, cache_dir, original_state):
    return TargetRunner(bundle, small_kb, cache_dir=cache_dir, progress=False)


@pytest.fixture(scope="module")
def target(runner, small_kb) -> int:
    known_targets = [t for t in small_kb.targets if t in runner.known]
    assert known_targets, "the fixture model knows none of the KB's targets"
    return known_targets[0]


@pytest.fixture(scope="module")
def runs(runner, target) -> dict[str, list[Point]]:
    """Each method through its default (the paper's) grid on one target."""
    return {m: list(runner.run(target, m)) for m in PAPER_GRIDS}


def assert_original(bundle, original_state):
    live = bundle.model.state_dict()
    assert set(live) == set(original_state)
    for k, v in original_state.items():
        assert torch.equal(live[k], v), k


@pytest.mark.parametrize("method", list(PAPER_GRIDS))
def test_each_method_gives_one_point_per_grid_value(runs, runner, target, method, small_kb):
    points = runs[method]
    assert [p.param for p in points] == PAPER_GRIDS[method]
    for p in points:
        assert p.method == method and p.target == target
        assert 0.0 <= p.recall <= 1.0 and 0.0 <= p.accuracy <= 1.0
        assert set(p.forgotten) <= runner.known
        assert p.target_forgotten == (target in p.forgotten)
        assert p.exact and target in p.set
        # recall is the share of U*_A (a minimal deep-unlearning set) that the model lost
        assert p.recall == pytest.approx(len(set(p.set) & set(p.forgotten)) / len(p.set))
        d = p.to_dict()
        assert d["param"] == p.param and d["recall"] == p.recall and d["forgotten"] == p.forgotten


def test_after_every_method_the_weights_are_bitwise_the_original_and_probe_the_same(
        runs, bundle, original_state, runner, small_kb):
    assert set(runs) == set(PAPER_GRIDS)
    assert_original(bundle, original_state)
    again = probe(bundle, small_kb, mode="exact", progress=False)
    assert again.known_ids() == runner.baseline.known_ids()


def test_ga_forgets_the_target_by_16_steps_with_the_scaled_lr(runs):
    points = runs["ga"]
    assert points[-1].param == 16
    assert points[-1].lr == pytest.approx(1e-4)  # a tenth of the tiny model's training lr 1e-3
    assert points[-1].target_forgotten
    assert points[-1].recall > 0
    assert len(points[-1].forgotten) >= len(points[0].forgotten)


def test_tv_and_whp_forget_more_as_alpha_grows(runs):
    for m in ("tv", "whp"):
        lost = [len(p.forgotten) for p in runs[m]]
        assert lost[-1] > lost[0], (m, lost)


def test_alpha_zero_changes_nothing(runner, target):
    for method in ("tv", "whp"):
        (p,) = runner.run(target, method, grid=[0.0])
        assert p.forgotten == [] and not p.target_forgotten and p.recall == 0.0 and p.accuracy == 1.0


def test_skipped_grid_points_are_passed_through_but_not_probed(runs, runner, target):
    part = list(runner.run(target, "ga", grid=[1, 2, 4, 8, 16], skip_params=[1, 2, 8, 16]))
    assert [p.param for p in part] == [4]
    # the trajectory went through steps 1 and 2 with the schedule of the whole grid (16 steps) and
    # stopped after step 4: step 4 is the model of the full run's step 4
    full = {p.param: p for p in runs["ga"]}
    assert part[0].forgotten == full[4].forgotten and part[0].recall == full[4].recall
    assert list(runner.run(target, "ga", grid=[1, 2], skip_params=[1, 2])) == []


def test_closing_the_generator_early_restores_the_weights(runner, target, bundle, original_state):
    it = runner.run(target, "npo", grid=[2, 16])
    assert next(it).param == 2
    it.close()
    assert_original(bundle, original_state)


def test_lora_mode_trains_an_adapter_and_leaves_the_base_untouched(bundle, small_kb, target, cache_dir,
                                                                   original_state):
    flags = {n: p.requires_grad for n, p in bundle.model.named_parameters()}
    lora = TargetRunner(bundle, small_kb, lora=True, cache_dir=cache_dir, progress=False)
    assert lora.snapshot is None
    points = list(lora.run(target, "ga", grid=[16]))
    assert [p.param for p in points] == [16]
    assert points[0].lr == pytest.approx(1e-3)  # LoRA: ten times the full-finetuning rate
    assert points[0].target_forgotten
    assert not any("lora_" in n for n, _ in bundle.model.named_modules())
    assert {n: p.requires_grad for n, p in bundle.model.named_parameters()} == flags
    assert_original(bundle, original_state)


def test_dataset_k_mode_takes_the_whole_kb(bundle, small_kb, cache_dir):
    r = TargetRunner(bundle, small_kb, k_mode="dataset", cache_dir=cache_dir, progress=False)
    assert r.known == frozenset(range(len(small_kb)))
    assert int(r.evaluator.known.sum()) == len(small_kb)


def test_a_target_the_model_never_knew_raises(small_kb, tmp_path):
    """A freshly initialised model knows next to nothing: some target is not in its K."""
    from deepunlearn.probe import build_tiny_model, load_model

    d = build_tiny_model(small_kb, tmp_path / "untrained", seed=1, hidden=64)
    r = TargetRunner(load_model(d, device="cpu"), small_kb, cache_dir=tmp_path, progress=False)
    unknown = [t for t in small_kb.targets if t not in r.known]
    assert unknown, "a random model should not know every target"
    t = unknown[0]
    with pytest.raises(TargetNotKnownError, match=rf"target {t} .* is not known by the model"):
        r.run(t, "ga")


def test_bad_arguments_are_reported(runner, target):
    with pytest.raises(UnlearnError, match="unknown unlearning method 'foo'"):
        runner.run(target, "foo")
    with pytest.raises(UnlearnError, match="positive integers"):
        runner.run(target, "ga", grid=[0.5])
    with pytest.raises(UnlearnError, match="k_mode"):
        TargetRunner(runner.bundle, runner.kb, k_mode="all")
