"""benchmarks/relearn_floor.py on the five-person model: the retain model it attacks never saw the
served target or its chosen set; an attack that cannot move the weights leaves the row as the
retain model stood, and one that trains hard teaches the never-seen target from its other forms;
the table and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def script():
    return load_benchmark("relearn_floor")


@pytest.fixture(scope="module")
def kb_file(five_people_kb, tmp_path_factory):
    from deepunlearn.kg.io import save_kb

    return save_kb(five_people_kb, tmp_path_factory.mktemp("floor") / "kb.json")


def _rows(script, kb_file, model, out: Path, cache: Path, *extra: str) -> list[dict]:
    script.main(["--kb", str(kb_file), "--model", str(model), "--max-targets", "1", "--retrain-cache", str(cache),
                 "-o", str(out), *extra])
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_retain_model_never_saw_the_target_and_a_hard_attack_teaches_it(script, kb_file, five_people_model_dir,
                                                                             five_people_kb, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.probe.models import read_meta
    from deepunlearn.unlearn import TargetRunner

    cache = tmp_path / "retrain"
    still = _rows(script, kb_file, five_people_model_dir, tmp_path / "still.jsonl", cache, "--lr", "1e-12",
                  "--steps", "1")
    hard = _rows(script, kb_file, five_people_model_dir, tmp_path / "hard.jsonl", cache, "--lr", "3e-3",
                 "--steps", "24")
    assert len(still) == len(hard) == 1 and still[0]["target"] == hard[0]["target"]
    t = still[0]["target"]
    # one retain model for both runs, trained without the target and its chosen set
    (folder,) = [p for p in cache.iterdir() if p.is_dir()]
    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, progress=False)
    removed = set(read_meta(folder)["retrain"]["removed"])
    assert {t, *runner.chosen_set(t)} <= removed
    assert still[0]["forms"], "the split trains on the target's other forms"
    # a step of 1e-12 changes nothing: the row is the retain model as it stood
    assert still[0]["target_learned"] == still[0]["target_known_before"]
    assert still[0]["floor_deep"] == still[0]["deep_before"]
    # 24 steps at 3e-3 on the target's other forms teach the never-seen target: derivable again
    assert hard[0]["target_learned"] and not hard[0]["floor_deep"]
    assert hard[0]["relearned"] == still[0]["relearned"]  # the same seeded half
    # split-set: the same half, none of the target's forms (the same retain model)
    half = _rows(script, kb_file, five_people_model_dir, tmp_path / "half.jsonl", cache, "--lr", "3e-3",
                 "--steps", "24", "--relearn-on", "split-set")
    assert half[0]["relearn_on"] == "split-set" and hard[0]["relearn_on"] == "split"
    assert half[0]["forms"] == [] and half[0]["relearned"] == hard[0]["relearned"]
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 1


def test_the_table_and_its_errors(script, tmp_path):
    rows = [{"deep_before": True, "target_known_before": False, "target_learned": True, "floor_deep": False},
            {"deep_before": True, "target_known_before": False, "target_learned": False, "floor_deep": True}]
    f = tmp_path / "floor.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = script.table(str(f))
    assert "| 2 | 1.00 [1.00, 1.00] | 0.00 [0.00, 0.00] | 0.50 [0.00, 1.00] | 0.50 [0.00, 1.00] |" in text
    # a target with nothing to relearn (split-set, its set is itself) is left out of the floor only
    rows.append({"deep_before": True, "target_known_before": False, "target_learned": False, "floor_deep": None})
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "| 3 (2 with something to relearn) | 1.00 [1.00, 1.00] |" in script.table(str(f))
    assert script.table(str(f)).endswith("| 0.50 [0.00, 1.00] |")
    for bad, says in ((tmp_path / "none.jsonl", "no such file"), (tmp_path / "empty.jsonl", "no rows")):
        if "empty" in bad.name:
            bad.write_text("")
        with pytest.raises(SystemExit) as e:
            script.table(str(bad))
        assert says in str(e.value) and str(bad) in str(e.value)
    with pytest.raises(SystemExit, match="--kb and --model"):
        script.main(["--kb", "kb.json"])
    with pytest.raises(SystemExit, match="--targets: 'x:2' is not a slice"):
        script.main(["--kb", "kb.json", "--model", "m", "--targets", "0:5,x:2"])


def test_against_pairs_each_variant_with_the_floor_on_the_same_targets(script, tmp_path):
    floor = tmp_path / "floor.jsonl"
    cells = ((1, False), (2, True), (3, False))
    floor.write_text("".join(json.dumps({"target": t, "floor_deep": d}) + "\n" for t, d in cells))
    rows = [("ga", 1, 0.0), ("ga", 2, 0.0), ("du", 1, 1.0), ("du", 2, 1.0), ("du", 3, 0.0), ("du", 9, 1.0),
            ("skip", 1, None)]
    variants = tmp_path / "variants.jsonl"
    variants.write_text("".join(json.dumps({"variant": v, "target": t, "relearn_deep": d}) + "\n" for v, t, d in rows))
    text = script.against(str(floor), str(variants))
    # ga on targets 1, 2: 0.00 against a floor of 0.50, difference -0.50; du on 1-3 (9 has no floor)
    assert "| `ga` | 2 | 0.00 [0.00, 0.00] | 0.50 [0.00, 1.00] | -0.50 [-1.00, 0.00] |" in text
    assert "| `du` | 3 | 0.67 [0.00, 1.00] | 0.33 [0.00, 1.00] | 0.33 [0.00, 1.00] |" in text
    assert "skip" not in text
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"variant": "ga", "target": 7, "relearn_deep": 1.0}) + "\n")
    with pytest.raises(SystemExit, match="no target in common"):
        script.against(str(floor), str(other))
    other.write_text(json.dumps({"variant": "ga", "target": 1}) + "\n")
    with pytest.raises(SystemExit, match="no row has relearn_deep"):
        script.against(str(floor), str(other))


def test_a_kb_other_than_the_checkpoints_is_one_line_naming_train_kb(script, edu_kb, five_people_model_dir, tmp_path):
    from deepunlearn.kg.graph import nearest_people
    from deepunlearn.kg.io import save_kb

    other = save_kb(edu_kb.subset(nearest_people(edu_kb, "Zoey Jenkins", 6), name="edu-relat-6"), tmp_path / "kb6.json")
    with pytest.raises(SystemExit) as e:
        script.main(["--kb", str(other), "--model", str(five_people_model_dir), "--max-targets", "1",
                     "--retrain-cache", str(tmp_path / "rc"), "-o", str(tmp_path / "f.jsonl")])
    assert "own KB" in str(e.value) and "--train-kb" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "f.jsonl").exists() and not (tmp_path / "rc").exists()
