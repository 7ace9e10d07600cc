"""TargetRunner's option groups (deepunlearn/unlearn/runner_options.py): every field of every group
has exactly one flat keyword, and a runner made with the groups measures the same points as one
made with the flat keywords of configs and command lines."""

from __future__ import annotations

import dataclasses

import pytest


def test_every_field_of_every_group_has_one_flat_keyword():
    from deepunlearn.unlearn.runner_options import FLAT, GROUPS

    fields = {(g, f.name) for g, cls in GROUPS.items() for f in dataclasses.fields(cls)}
    assert sorted(FLAT.values()) == sorted(fields)  # one keyword per field, none left out, none twice
    with pytest.raises(dataclasses.FrozenInstanceError):
        GROUPS["probing"]().mode = "exact"


def test_groups_and_flat_keywords_measure_the_same_points(five_people_model_dir, five_people_kb, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import MeasureOptions, ProbeOptions, SetOptions, TargetRunner, TrainOptions

    kb = five_people_kb
    flat = TargetRunner(load_model(five_people_model_dir, device="cpu"), kb, k_mode="dataset", sets="mdus", seeds=5,
                        lr=3e-4, accuracy="full", cache_dir=tmp_path / "a", progress=False)
    grouped = TargetRunner(load_model(five_people_model_dir, device="cpu"), kb, progress=False,
                           probing=ProbeOptions(k_mode="dataset", cache_dir=tmp_path / "b"),
                           minimal_sets=SetOptions(sets="mdus", seeds=5), training=TrainOptions(lr=3e-4),
                           measures=MeasureOptions(accuracy="full"))
    assert (grouped.k_mode, grouped.sets, grouped.lr) == ("dataset", "mdus", 3e-4)
    assert grouped.known == flat.known == frozenset(range(len(kb)))
    t = kb.targets[0]
    a = [(p.param, p.recall, p.accuracy, sorted(p.forgotten)) for p in flat.run(t, "ga", grid=[1, 2], seed=0)]
    b = [(p.param, p.recall, p.accuracy, sorted(p.forgotten)) for p in grouped.run(t, "ga", grid=[1, 2], seed=0)]
    assert a == b and len(a) == 2
    with pytest.raises(TypeError, match="unknown option 'stride'"):
        TargetRunner(None, kb, stride=2)
