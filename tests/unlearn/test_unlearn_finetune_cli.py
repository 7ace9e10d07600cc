"""``deepunlearn finetune`` on bad input and failures: a bad argument or a failure
mid-training leaves an existing checkpoint byte for byte; arguments are checked before anything
is built; the progress bar ends at the steps taken; the metadata's ``base`` stays true."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepunlearn.cli import main

TINY = ["--model", "tiny", "--tiny-hidden", "32", "--tiny-heads", "4", "--tiny-layers", "1"]


def tree_hash(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def kb_file(small_kb, tmp_path):
    from deepunlearn.kg.io import save_kb

    return save_kb(small_kb.subset(range(0, len(small_kb), 3)), tmp_path / "kb.json")


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A stand-in for a trained checkpoint: the command must not touch any of its files."""
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"trained weights" * 100)
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "deepunlearn.json").write_text('{"training": {"lr": 0.001, "epochs_run": 17}}')
    return d


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


@pytest.mark.parametrize("flag,value", [
    ("--epochs", "0"), ("--lr", "nan"), ("--lr", "inf"), ("--lr", "0"), ("--lr", "-1"), ("--batch-size", "0"),
    ("--target-known", "1.01"), ("--target-known", "0"), ("--warmup-ratio", "1"), ("--weight-decay", "-0.1"),
    ("--grad-clip", "nan"), ("--seed", "-3"), ("--tiny-hidden", "0"), ("--threads", "0"),
])
def test_bad_flag_leaves_the_checkpoint_untouched(kb_file, checkpoint, capsys, flag, value):
    before = tree_hash(checkpoint)
    with pytest.raises(SystemExit) as e:
        main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(checkpoint), flag, value, "--json"])
    assert e.value.code == 2
    cap = capsys.readouterr()
    last = cap.err.strip().splitlines()[-1]
    assert last.startswith(f"deepunlearn finetune: error: argument {flag}") and repr(value) in last
    assert json.loads(cap.out)["error"].startswith("deepunlearn finetune: argument")
    assert tree_hash(checkpoint) == before and leftovers(checkpoint) == []


@pytest.mark.parametrize("content,msg", [
    ("lr: .nan\n", "field lr: Input should be a finite number (got nan)"),
    ("epochs: 0\n", "field epochs: Input should be greater than or equal to 1 (got 0)"),
    ("target_known: 1.01\n", "field target_known: Input should be less than or equal to 1 (got 1.01)"),
    ("warmup_ratio: 0\n", "one-cycle"),  # the tiny preset's one-cycle schedule needs a warm-up
    ("- 1\n", "expected a mapping of FinetuneConfig fields"),
])
def test_bad_config_file_leaves_the_checkpoint_untouched(kb_file, checkpoint, tmp_path, capsys, monkeypatch,
                                                         content, msg):
    import deepunlearn.probe.tiny as tiny

    monkeypatch.setattr(tiny, "build_tiny_model", lambda *a, **k: pytest.fail("built a model before checking"))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(content)
    before = tree_hash(checkpoint)
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(checkpoint), "--config", str(cfg), "--json"])
    cap = capsys.readouterr()
    assert rc == 1
    line = cap.err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("deepunlearn finetune: error: ") and msg in line
    assert set(json.loads(cap.out)) == {"error", "file", "field"}
    assert tree_hash(checkpoint) == before and leftovers(checkpoint) == []


@pytest.mark.parametrize("exc,code", [(RuntimeError("boom"), 70), (KeyboardInterrupt(), 130)])
def test_failure_mid_training_leaves_the_checkpoint_untouched(kb_file, checkpoint, capsys, monkeypatch, exc, code):
    import deepunlearn.unlearn.finetune as ft

    calls = []

    def failing_loss(logits, labels):
        calls.append(1)
        raise exc

    monkeypatch.setattr(ft, "answer_loss", failing_loss)
    before = tree_hash(checkpoint)
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(checkpoint), "--epochs", "1"])
    assert rc == code and calls == [1]  # it did get as far as training
    assert tree_hash(checkpoint) == before and leftovers(checkpoint) == []


def test_finetune_replaces_the_checkpoint_records_a_lasting_base_and_closes_its_bar(
        kb_file, small_kb, checkpoint, capsys, monkeypatch):
    """Early stop after epoch 1 of 5 (the probe is faked to say everything is known): the bar ends
    at the steps taken with 'early stop', not at a stalled 20 %; -o is replaced as a whole."""
    import deepunlearn.probe.probing as probing
    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe.fingerprint import kb_fingerprint

    kb = load_kb(kb_file)
    fake = SimpleNamespace(share=1.0, n_known=len(kb), total=len(kb))
    monkeypatch.setattr(probing, "probe", lambda *a, **k: fake)
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(checkpoint), "--epochs", "5",
               "--target-known", "0.05", "--batch-size", "64", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    assert out["epochs"] == 1 and out["checkpoint"] == str(checkpoint)
    steps = -(-len(kb) // 64)
    final = [seg for seg in cap.err.replace("\n", "\r").split("\r") if seg.startswith("finetune")][-1]
    assert f"{steps}/{steps}" in final and "100%" in final and "early stop: 100% known" in final
    assert not (checkpoint / "model.safetensors").read_bytes().startswith(b"trained weights")
    meta = json.loads((checkpoint / "deepunlearn.json").read_text())
    assert meta["base"] == "tiny" and meta["origin"] == "tiny"
    assert meta["tiny"]["hidden"] == 32 and meta["tiny"]["layers"] == 1
    assert meta["kb"]["fingerprint"] == kb_fingerprint(kb) and len(meta["kb"]["fingerprint"]) == 32
    assert leftovers(checkpoint) == []


def test_base_of_a_finetuned_folder_is_its_absolute_path_and_survives_refinetuning(tiny_model_dir):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.finetune import base_of

    b = load_model(tiny_model_dir, device="cpu")
    assert base_of(b) == "tiny"  # the fixture was built as tiny and finetuned: base stays "tiny"
    b.meta = {k: v for k, v in b.meta.items() if k not in ("base", "origin")}
    assert base_of(b) == str(Path(tiny_model_dir).resolve())
    b.meta["base"] = "gpt2"
    assert base_of(b) == "gpt2"


def test_help_text_of_every_finetune_flag(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "--help"])
    text = capsys.readouterr().out
    import argparse

    from deepunlearn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for cmd in ("finetune", "unlearn"):
        for action in sub.choices[cmd]._actions:
            assert action.help, (cmd, action.option_strings)
    assert "LORA_LR_FACTOR" in " ".join(a.help for a in sub.choices["unlearn"]._actions)
    assert "--warmup-ratio" in text
