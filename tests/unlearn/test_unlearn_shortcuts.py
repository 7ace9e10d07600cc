"""``deepunlearn data shortcuts``: a baseline trained on a disjoint KB of the same generator,
probed on the KB's facts; per relation the share it answers, with n; cached; one-line errors."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main
from deepunlearn.kg import KnowledgeBase, save_kb
from deepunlearn.kg.domains.family.generate import FamilyParams, generate_family

FAST = ["--tiny-hidden", "32", "--tiny-heads", "4", "--tiny-layers", "1", "--epochs", "2"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def kb_file(tmp_path):
    kb = generate_family(10, seed=21, params=FamilyParams(names="independent"), questions="entity")
    return save_kb(kb, tmp_path / "kb.json"), kb


def test_floor_per_relation_with_n_and_a_cached_rerun(kb_file, tmp_path, capsys):
    path, kb = kb_file
    out, cache = tmp_path / "floor.json", tmp_path / "cache"
    code, text, err = run(capsys, "data", "shortcuts", "--kb", str(path), *FAST, "--cache-dir", str(cache),
                          "-o", str(out), "--json")
    assert code == 0, err
    floor = json.loads(out.read_text())
    assert json.loads(text)["relations"] == floor["relations"]
    assert floor["modes"] == ["exact", "rank"] and (floor["names"], floor["questions"]) == ("independent", "entity")
    counts = kb.relation_counts()
    assert {r: v["n"] for r, v in floor["relations"].items()} == counts
    for r, v in floor["relations"].items():
        for m in ("exact", "rank"):
            assert 0.0 <= v[m] <= 1.0 and v[f"{m}_known"] == round(v[m] * v["n"])
            lo, hi = v[f"{m}_ci95"]
            assert 0.0 <= lo <= v[m] <= hi <= 1.0 and hi - lo > 0.1  # a handful of facts: a wide interval
    assert floor["overall"]["n"] == len(kb.facts) == sum(counts.values())
    assert floor["holdout"]["people"] == 10 and floor["holdout"]["facts"] > 0 and not floor["cached"]
    # a second run finds the baseline and its probes: same floor, nothing trained
    code, text, err = run(capsys, "data", "shortcuts", "--kb", str(path), *FAST, "--cache-dir", str(cache),
                          "-o", str(out), "--force", "--json")
    again = json.loads(text)
    assert code == 0 and again["cached"] and again["relations"] == floor["relations"]


def test_a_kb_without_a_holdout_generator_is_one_line(tmp_path, capsys):
    kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "likes", "B")])
    path = save_kb(kb, tmp_path / "kb.json")
    code, out, err = run(capsys, "data", "shortcuts", "--kb", str(path), "-o", str(tmp_path / "f.json"))
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "no shortcut floor" in lines[0] and "family generator" in lines[0]
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("argv,code,message", [
    (["--recipe-from", "CKPT", "--lr", "0.1"], 2, "argument --recipe-from: not with --lr"),
    (["--modes", "exact,guess"], 2, "argument --modes: 'guess' is not a probe mode"),
    (["--recipe-from", "NOWHERE"], 1, "not a checkpoint folder"),
    (["--tiny-hidden", "30", "--tiny-heads", "4"], 1, "--tiny-hidden 30 is not a multiple of --tiny-heads 4"),
])
def test_bad_input_is_one_line(kb_file, tmp_path, capsys, argv, code, message):
    path, _ = kb_file
    argv = [str(tmp_path / a) if a in ("CKPT", "NOWHERE") else a for a in argv]
    if "--recipe-from" in argv and argv[1].endswith("CKPT"):
        (tmp_path / "CKPT").mkdir()
    got, out, err = run(capsys, "data", "shortcuts", "--kb", str(path), "-o", str(tmp_path / "f.json"),
                        "--cache-dir", str(tmp_path / "cache"), *argv)
    assert got == code and message in err.strip().splitlines()[-1], err
    assert not (tmp_path / "f.json").exists()


def test_finetune_trains_and_every_probe_mode_asks_the_entity_questions(tmp_path):
    """A tiny model finetuned on a KB with entity questions answers father, mother, husband and
    wife with the person's name under exact, rank (among every person) and generate."""
    import torch

    from deepunlearn.kg.candidates import answer_candidates
    from deepunlearn.probe.models import load_model
    from deepunlearn.probe.probing import probe
    from deepunlearn.probe.tiny import build_tiny_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    torch.set_num_threads(1)
    kb = generate_family(6, seed=2, params=FamilyParams(names="independent"), questions="entity")
    ids = [i for i, f in enumerate(kb.facts) if f[1] in ("father", "mother", "husband", "wife")]
    assert len(ids) >= 8 and all(answer_candidates(kb, i) == sorted(kb.entities) for i in ids)
    bundle = load_model(build_tiny_model(kb, tmp_path / "m", hidden=64, layers=1, heads=4), device="cpu")
    assert probe(bundle, kb, ids, mode="exact", progress=False).known_ids() == set()  # untrained: knows none
    res = finetune(bundle, kb, FinetuneConfig.tiny(epochs=60, batch_size=8, target_known=1.0), progress=False)
    assert res.known == res.total == len(kb.facts)
    for mode in ("exact", "rank", "generate"):
        assert probe(bundle, kb, ids, mode=mode, progress=False).known_ids() == set(ids), mode
    gen = probe(bundle, kb, ids[:1], mode="generate", progress=False)
    assert kb.facts[ids[0]][2] in gen.outputs[0]  # the answer is the person's name


def test_recipe_from_a_finetuned_checkpoint_reuses_its_base_and_recipe(kb_file, tmp_path, capsys):
    path, kb = kb_file
    ckpt = tmp_path / "ckpt"
    code, _, err = run(capsys, "finetune", "--kb", str(path), "--model", "tiny", *FAST, "--lr", "0.002",
                       "-o", str(ckpt), "--json")
    assert code == 0, err
    code, text, err = run(capsys, "data", "shortcuts", "--kb", str(path), "--recipe-from", str(ckpt),
                          "--modes", "exact", "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "f.json"),
                          "--json")
    assert code == 0, err
    floor = json.loads(text)
    assert floor["recipe"]["lr"] == 0.002 and floor["recipe"]["epochs"] == 2 and floor["modes"] == ["exact"]
    assert floor["base"]["tiny"]["hidden"] == 32 and set(floor["relations"]) == set(kb.relation_counts())
