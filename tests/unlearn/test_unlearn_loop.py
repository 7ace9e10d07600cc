"""The per-target loop on the finetuned tiny model: every method gives one point per grid value,
GA forgets the target, and the model is restored bit for bit."""

from __future__ import annotations

import pytest
import torch

from deepunlearn.probe import probe
from deepunlearn.unlearn.loop import Point, TargetNotKnownError, TargetRunner
from deepunlearn.unlearn.methods import UnlearnError


@pytest.fixture(scope="module")
def runner(tiny_bundle, small_kb, tmp_path_factory):
    return TargetRunner(tiny_bundle, small_kb, cache_dir=tmp_path_factory.mktemp("unlearn_cache"), progress=False)


@pytest.fixture(scope="module")
def target(runner, small_kb) -> int:
    known_targets = [t for t in small_kb.targets if t in runner.known]
    assert known_targets, "the fixture model knows none of the KB's targets"
    return known_targets[0]


@pytest.fixture(scope="module")
def original_state(tiny_bundle):
    return {k: v.detach().clone() for k, v in tiny_bundle.model.state_dict().items()}


def assert_original(bundle, original_state):
    live = bundle.model.state_dict()
    assert set(live) == set(original_state)
    for k, v in original_state.items():
        assert torch.equal(live[k], v), k


@pytest.mark.parametrize("method,grid", [
    ("ga", [1, 2, 4, 8, 16]),
    ("npo", [1, 2, 4, 8, 16]),
    ("tv", [0.2, 0.5, 1.0, 5.0, 10.0]),
    ("whp", [1e1, 1e3, 1e5, 1e7, 1e8]),
])
def test_each_method_gives_one_point_per_grid_value_and_restores(runner, target, method, grid, tiny_bundle,
                                                                  original_state, small_kb):
    points = list(runner.run(target, method))  # the default grid is the paper's
    assert [p.param for p in points] == grid
    for p in points:
        assert isinstance(p, Point) and p.method == method and p.target == target
        assert 0.0 <= p.recall <= 1.0 and 0.0 <= p.accuracy <= 1.0
        assert set(p.forgotten) <= runner.known
        assert p.target_forgotten == (target in p.forgotten)
        assert p.exact
        # recall is the share of U*_A the method removed
        if p.set:
            assert p.recall == pytest.approx(len(set(p.set) & set(p.forgotten)) / len(p.set))
    assert_original(tiny_bundle, original_state)


def test_ga_forgets_the_target_by_16_steps_with_the_scaled_lr(runner, target):
    points = list(runner.run(target, "ga"))
    assert points[-1].param == 16
    assert points[-1].lr == pytest.approx(1e-4)  # a tenth of the tiny model's training lr 1e-3
    assert points[-1].target_forgotten
    assert points[-1].recall > 0
    # forgetting grows along the trajectory
    assert len(points[-1].forgotten) >= len(points[0].forgotten)


def test_after_the_loop_a_new_probe_returns_the_same_known_set(runner, target, tiny_bundle, small_kb,
                                                              original_state):
    for method in ("ga", "tv", "whp"):
        for _ in runner.run(target, method, grid=[16] if method == "ga" else [5.0]):
            pass
    assert_original(tiny_bundle, original_state)
    again = probe(tiny_bundle, small_kb, mode="exact", progress=False)
    assert again.known_ids() == runner.baseline.known_ids()


def test_skipped_grid_points_are_passed_through_but_not_probed(runner, target):
    full = {p.param: p for p in runner.run(target, "ga", grid=[1, 2, 4])}
    part = list(runner.run(target, "ga", grid=[1, 2, 4], skip_params=[1, 2]))
    assert [p.param for p in part] == [4]
    # the trajectory went through steps 1 and 2: step 4 is the same model as in the full run
    assert part[0].forgotten == full[4].forgotten and part[0].recall == full[4].recall
    assert list(runner.run(target, "ga", grid=[1, 2], skip_params=[1, 2])) == []


def test_closing_the_generator_early_restores_the_weights(runner, target, tiny_bundle, original_state):
    it = runner.run(target, "npo")
    first = next(it)
    assert first.param == 1
    it.close()
    assert_original(tiny_bundle, original_state)


def test_whp_with_alpha_zero_keeps_the_known_set_and_tv_alpha_zero_too(runner, target):
    for method in ("tv", "whp"):
        (p,) = runner.run(target, method, grid=[0.0])
        assert p.forgotten == [] and not p.target_forgotten and p.recall == 0.0 and p.accuracy == 1.0


def test_lora_mode_trains_an_adapter_and_leaves_the_base_untouched(tiny_bundle, small_kb, target, runner,
                                                                   original_state, tmp_path):
    lora = TargetRunner(tiny_bundle, small_kb, lora=True, cache_dir=tmp_path, progress=False)
    assert lora.snapshot is None
    points = list(lora.run(target, "ga", grid=[4, 16]))
    assert [p.param for p in points] == [4, 16]
    assert points[-1].lr == pytest.approx(1e-3)  # LoRA: ten times the full-finetuning rate
    assert len(points[-1].forgotten) > 0
    assert not any("lora_" in n for n, _ in tiny_bundle.model.named_modules())
    assert all(p.requires_grad for p in tiny_bundle.model.parameters())
    assert_original(tiny_bundle, original_state)
    with pytest.raises(UnlearnError, match="LoRA mode supports ga, npo"):
        next(lora.run(target, "tv"))


def test_dataset_k_mode_takes_the_whole_kb(tiny_bundle, small_kb, tmp_path):
    r = TargetRunner(tiny_bundle, small_kb, k_mode="dataset", cache_dir=tmp_path, progress=False)
    assert r.known == frozenset(range(len(small_kb)))


def test_a_target_the_model_never_knew_raises(untrained_runner, small_kb):
    t = small_kb.targets[0]
    assert t not in untrained_runner.known
    with pytest.raises(TargetNotKnownError, match=f"target {t} .* is not known by the model"):
        next(untrained_runner.run(t, "ga"))


def test_bad_arguments_are_reported(runner, target):
    with pytest.raises(UnlearnError, match="unknown unlearning method 'foo'"):
        next(runner.run(target, "foo"))
    with pytest.raises(UnlearnError, match="positive integers"):
        next(runner.run(target, "ga", grid=[0.5]))


@pytest.fixture(scope="module")
def untrained_runner(small_kb, tmp_path_factory):
    """A freshly initialised tiny model: it knows (almost) nothing."""
    from deepunlearn.probe import build_tiny_model, load_model

    d = build_tiny_model(small_kb, tmp_path_factory.mktemp("untrained"), seed=1)
    return TargetRunner(load_model(d, device="cpu"), small_kb, cache_dir=tmp_path_factory.mktemp("c"),
                        progress=False)
