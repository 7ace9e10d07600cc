"""Finetuning honours excludes and canary repeats (``training_facts``, ``finetune
--exclude``), and retain models (``retrain``) come from the same base, recipe and seed, never
see the removed facts, and are cached."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from deepunlearn.unlearn.finetune import FinetuneConfig, finetune, trained_fingerprint, training_facts
from deepunlearn.unlearn.methods.base import UnlearnError
from deepunlearn.unlearn.retrain import retrain

TINY = ["--model", "tiny", "--tiny-hidden", "32", "--tiny-heads", "4", "--tiny-layers", "1"]
RECIPE = FinetuneConfig.tiny(epochs=12)


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


def tree_hash(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finetuned(five_people_kb, tmp_path_factory) -> Path:
    """A 32-wide tiny model finetuned (12 epochs, seed 0) on the 5-person KB."""
    from deepunlearn.probe import build_tiny_model, load_model

    folder = tmp_path_factory.mktemp("ft")
    build_tiny_model(five_people_kb, folder, seed=0, hidden=32, layers=1, heads=4)
    finetune(load_model(folder, device="cpu"), five_people_kb, RECIPE, out_dir=folder, progress=False)
    return folder


def test_training_facts_exclude_and_repeat_canaries(five_people_kb):
    from deepunlearn.kg import KBError
    from deepunlearn.kg.canaries import add_canaries

    kb = five_people_kb
    assert training_facts(kb) == list(range(len(kb.facts)))
    assert training_facts(kb, exclude=[3, 0]) == [i for i in range(len(kb.facts)) if i not in (0, 3)]
    c = add_canaries(kb, 2, repeat=10)
    order = training_facts(c, exclude=[c.metadata["canaries"]["facts"][0]])
    a, b = c.metadata["canaries"]["facts"]
    assert order.count(b) == 10 and a not in order and len(order) == len(kb.facts) + 10
    with pytest.raises(KBError, match="out of range"):
        training_facts(kb, exclude=[len(kb.facts)])


def test_retain_model_never_sees_the_removed_facts(finetuned, five_people_kb, tmp_path, monkeypatch):
    import deepunlearn.unlearn.finetune as ft

    seen: list[str] = []
    real = ft.encode_qa

    def spy(tokenizer, prompt, pairs):
        pairs = list(pairs)
        seen.extend(p.question + " -> " + p.answer for p in pairs)
        return real(tokenizer, prompt, pairs)

    monkeypatch.setattr(ft, "encode_qa", spy)
    kb = five_people_kb
    removed = [kb.targets[0], 2]
    out = retrain(finetuned, kb, removed, cache_dir=tmp_path, progress=False)
    gone = {f"{kb.probe(i).question} -> {kb.probe(i).answer}" for i in removed}
    assert len(seen) == len(kb.facts) - 2 and not gone & set(seen)
    meta = json.loads((out / "deepunlearn.json").read_text())
    kept = [i for i in range(len(kb.facts)) if i not in removed]
    assert meta["trained"]["excluded"] == sorted(removed) and meta["trained"]["facts"] == len(kept)
    assert meta["trained"]["fingerprint"] == trained_fingerprint(kept)
    assert set(meta["trained"]["excluded_known"]) <= set(removed)
    assert meta["retrain"]["removed"] == sorted(removed) and meta["base"] == "tiny"
    assert meta["total"] == len(kept)  # the known share counts the trained facts only
    assert out.parent == tmp_path and out.name == meta["retrain"]["key"]


def test_same_base_recipe_and_seed_reproduce_the_model(finetuned, five_people_kb, tmp_path):
    """Removing nothing retrains the finetuned model bit for bit: same tiny base (vocabulary,
    initial weights), same recipe, same seed."""
    out = retrain(finetuned, five_people_kb, [], cache_dir=tmp_path, progress=False)
    mine, theirs = weights(out), weights(finetuned)
    assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine)


def test_a_second_call_hits_the_cache(finetuned, five_people_kb, tmp_path, monkeypatch):
    import deepunlearn.unlearn.finetune as ft

    first = retrain(finetuned, five_people_kb, [1], cache_dir=tmp_path, progress=False)
    before = tree_hash(first)

    def no_training(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(ft, "finetune", no_training)
    assert retrain(finetuned, five_people_kb, [1], cache_dir=tmp_path, progress=False) == first
    assert tree_hash(first) == before
    with pytest.raises(AssertionError, match="trained again"):  # another removed set is another model
        retrain(finetuned, five_people_kb, [2], cache_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # the failed run left nothing


def test_two_seeds_give_two_models(finetuned, five_people_kb, tmp_path):
    a = retrain(finetuned, five_people_kb, [1], cache_dir=tmp_path, seed=1, progress=False)
    b = retrain(finetuned, five_people_kb, [1], cache_dir=tmp_path, seed=2, progress=False)
    assert a != b
    wa, wb = weights(a), weights(b)
    assert any(not (wa[k] == wb[k]).all() for k in wa)
    assert json.loads((b / "deepunlearn.json").read_text())["training"]["seed"] == 2


def test_errors(finetuned, five_people_kb, small_kb, tmp_path):
    from deepunlearn.probe import build_tiny_model

    raw = build_tiny_model(five_people_kb, tmp_path / "raw", hidden=16, layers=1, heads=2)
    with pytest.raises(UnlearnError) as e:
        retrain(raw, five_people_kb, [0], cache_dir=tmp_path / "c")
    assert str(e.value) == (f"model {raw}: its deepunlearn.json records no base and training recipe (it was not "
                            "finetuned by deepunlearn); a retain model needs the base the model started from and "
                            "the recipe it was trained with")
    with pytest.raises(UnlearnError, match=r"removed fact: fact index 99 out of range"):
        retrain(finetuned, five_people_kb, [99], cache_dir=tmp_path / "c")
    with pytest.raises(UnlearnError, match=r"was finetuned on KB 'edu-relat-5' .* not on 'edu-relat-25'"):
        retrain(finetuned, small_kb, [0], cache_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_cli_exclude(five_people_kb, tmp_path, capsys):
    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')
    (ckpt / "deepunlearn.json").write_text("{}")  # a model folder of the tool's: -o may replace it
    before = tree_hash(ckpt)
    bad = tmp_path / "ex.json"
    bad.write_text(json.dumps([0, ["Nobody", "child", "Zoey Jenkins"]]))
    assert main(["finetune", "--kb", str(kb_file), *TINY, "--epochs", "2", "--exclude", str(bad), "-o", str(ckpt),
                 "--json"]) == 1
    cap = capsys.readouterr()
    assert cap.err == (f"deepunlearn finetune: error: --exclude {bad}: item 1: fact ['Nobody', 'child', "
                       f"'Zoey Jenkins'] is not in knowledge base 'edu-relat-5'\n")
    assert json.loads(cap.out)["file"] == str(bad) and tree_hash(ckpt) == before

    good = tmp_path / "ok.json"
    good.write_text(json.dumps({"exclude": [3, list(five_people_kb.facts[1])]}))
    assert main(["finetune", "--kb", str(kb_file), *TINY, "--epochs", "2", "--exclude", str(good), "-o", str(ckpt),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["excluded"] == [1, 3] and out["total"] == len(five_people_kb.facts) - 2
    meta = json.loads((ckpt / "deepunlearn.json").read_text())
    assert meta["trained"]["excluded"] == [1, 3] and meta["kb"]["facts"] == len(five_people_kb.facts)


def test_a_tiny_model_recording_its_own_folder_as_base_is_rebuilt_from_scratch(finetuned, five_people_kb, tmp_path):
    """Checkpoints written by older versions recorded their own folder as ``base``: a retain model must
    still start from a fresh tiny model, not from the finetuned weights (which know every fact)."""
    import shutil

    old = tmp_path / "old-ckpt"
    shutil.copytree(finetuned, old)
    meta = json.loads((old / "deepunlearn.json").read_text())
    meta["base"] = str(old)
    (old / "deepunlearn.json").write_text(json.dumps(meta))
    out = retrain(old, five_people_kb, [], cache_dir=tmp_path / "cache", progress=False)
    got = json.loads((Path(out) / "deepunlearn.json").read_text())
    assert "tiny" in got["retrain"]["base"]
    # trained from scratch it takes the finetuned model's epochs; from the finetuned weights it would stop after one
    assert got["training"]["epochs_run"] == meta["training"]["epochs_run"] > 1
