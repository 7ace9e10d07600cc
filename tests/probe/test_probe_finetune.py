"""Finetuning: reaching the target share, the checkpoint, its metadata, and the CLIs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from deepunlearn.probe import kb_fingerprint, load_model, probe, read_meta
from deepunlearn.unlearn.finetune import FinetuneConfig, make_scheduler


def test_finetuned_fixture_reaches_target_and_reloads_with_the_same_known_set(tiny_model_dir, small_kb):
    meta = read_meta(tiny_model_dir)
    assert meta["known"] >= 0.95 * meta["total"] and meta["total"] == len(small_kb)
    a = probe(load_model(tiny_model_dir, device="cpu"), small_kb, progress=False)
    b = probe(load_model(tiny_model_dir, device="cpu"), small_kb, progress=False)
    assert a.n_known == meta["known"]
    assert a.known_ids() == b.known_ids()
    # What the unlearning layer reads to scale its learning rates.
    training = meta["training"]
    assert training["lr"] == 1e-3 and training["schedule"] == "one-cycle" and training["batch_size"] == 32
    assert 1 <= training["epochs_run"] <= training["epochs"]
    assert meta["kb"]["fingerprint"] == kb_fingerprint(small_kb)
    assert meta["prompt"] == {"name": "llama", "question_start": "Question: ", "question_end": "\n",
                              "answer_tag": "Answer:", "eos": True}
    assert meta["origin"] == "tiny"


def test_finetune_stops_at_the_target_and_saves(small_kb, tmp_path):
    from deepunlearn.probe import build_tiny_model
    from deepunlearn.unlearn.finetune import finetune

    kb = small_kb.subset(range(0, len(small_kb), 4))  # 46 facts: a quick run
    bundle = load_model(build_tiny_model(kb, tmp_path / "m", hidden=128, heads=4), device="cpu")
    before = probe(bundle, kb, progress=False)
    cfg = FinetuneConfig.tiny(target_known=0.9, epochs=60, batch_size=16)
    res = finetune(bundle, kb, cfg, out_dir=tmp_path / "out", progress=False)
    assert before.share < 0.2
    assert res.share >= 0.9 and res.total == len(kb)
    assert res.epochs < 60  # stopped early
    assert res.history[-1]["known"] >= 0.9
    assert not bundle.model.training
    reloaded = load_model(tmp_path / "out", device="cpu")
    assert probe(reloaded, kb, progress=False).known_ids() == probe(bundle, kb, progress=False).known_ids()
    assert read_meta(tmp_path / "out")["known"] == res.known


def test_presets_and_validation():
    paper = FinetuneConfig.paper()
    assert (paper.lr, paper.batch_size, paper.epochs, paper.schedule) == (2e-5, 16, 10, "linear")
    tiny = FinetuneConfig.tiny()
    assert (tiny.lr, tiny.batch_size, tiny.schedule, tiny.grad_clip) == (1e-3, 32, "one-cycle", 1.0)
    assert FinetuneConfig.tiny(epochs=5).epochs == 5
    with pytest.raises(ValueError, match="warmup_ratio"):
        FinetuneConfig(schedule="one-cycle", warmup_ratio=0.0)
    with pytest.raises(ValueError):
        FinetuneConfig(lr=-1)
    with pytest.raises(ValueError):
        FinetuneConfig(batch_sizee=3)


def test_for_bundle_picks_the_preset(tiny_bundle):
    assert FinetuneConfig.for_bundle(tiny_bundle).lr == 1e-3
    tiny_bundle.meta = {}
    assert FinetuneConfig.for_bundle(tiny_bundle) == FinetuneConfig.paper()


def _lrs(config, steps):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=config.lr)
    sched = make_scheduler(opt, config, steps)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return np.array(out)


def test_schedules():
    lin = _lrs(FinetuneConfig.paper(lr=1.0, warmup_ratio=0.0), 10)
    np.testing.assert_allclose(lin, [1.0 - k / 10 for k in range(10)])  # HF linear, no warm-up
    warm = _lrs(FinetuneConfig.paper(lr=1.0, warmup_ratio=0.2), 10)
    np.testing.assert_allclose(warm[:4], [0.0, 0.5, 1.0, 7 / 8])  # HF: step s < w has lr s / w
    cyc = _lrs(FinetuneConfig.tiny(lr=1.0, warmup_ratio=0.3), 100)
    assert cyc.argmax() in range(28, 32) and cyc.max() == pytest.approx(1.0, abs=1e-3)
    assert cyc[0] < 0.05 and cyc[-1] < 1e-3


def test_cli_finetune_tiny_then_probe_agrees(small_kb, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb = small_kb.subset(range(0, len(small_kb), 4))
    kb_file = tmp_path / "kb.json"
    save_kb(kb, kb_file)
    out_dir = tmp_path / "tiny-out"
    rc = main(["finetune", "--kb", str(kb_file), "--model", "tiny", "-o", str(out_dir), "--tiny-hidden", "128",
               "--tiny-heads", "4", "--batch-size", "16", "--epochs", "60", "--target-known", "0.9", "--json"])
    assert rc == 0
    ft = json.loads(capsys.readouterr().out)
    assert ft["total"] == len(kb) and ft["known"] >= 0.9 * len(kb)
    assert (out_dir / "config.json").is_file() and (out_dir / "deepunlearn.json").is_file()
    known_file = tmp_path / "known.json"
    rc = main(["probe", "--model", str(out_dir), "--kb", str(kb_file), "-o", str(known_file), "--json"])
    assert rc == 0
    pr = json.loads(capsys.readouterr().out)
    assert (pr["known"], pr["total"]) == (ft["known"], ft["total"])
    assert pr["family_known"] + pr["biography_known"] == pr["known"]
    listed = json.loads(known_file.read_text())
    assert len(listed["fact_ids"]) == pr["known"]
    assert listed["facts"] == [list(kb.facts[i]) for i in listed["fact_ids"]]
    rc = main(["probe", "--model", str(out_dir), "--kb", str(kb_file), "--mode", "generate", "--json"])
    gen = json.loads(capsys.readouterr().out)
    assert rc == 0 and abs(gen["known"] - pr["known"]) <= 1


def test_cli_finetune_rejects_bad_config(small_kb, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    save_kb(small_kb, tmp_path / "kb.json")
    (tmp_path / "cfg.yaml").write_text("lr: -3\n")
    rc = main(["finetune", "--kb", str(tmp_path / "kb.json"), "--model", "tiny", "-o", str(tmp_path / "o"),
               "--config", str(tmp_path / "cfg.yaml"), "--tiny-hidden", "32", "--tiny-heads", "4"])
    assert rc == 1
    assert "lr" in capsys.readouterr().err


def test_cli_probe_accepts_tiny_and_builds_it_once(small_kb, tmp_path, capsys, monkeypatch):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    monkeypatch.setenv("DEEPUNLEARN_CACHE", str(tmp_path / "cache"))
    kb = small_kb.subset(range(0, len(small_kb), 8))
    save_kb(kb, tmp_path / "kb.json")
    for _ in range(2):
        rc = main(["probe", "--model", "tiny", "--kb", str(tmp_path / "kb.json"), "--json"])
        assert rc == 0
        out = json.loads(capsys.readouterr().out)
        assert out["total"] == len(kb) and out["known"] <= len(kb)
    built = list((tmp_path / "cache" / "tiny").iterdir())
    assert len(built) == 1 and (built[0] / "config.json").is_file()
    assert read_meta(built[0])["prompt"]["name"] == "llama"
    # Another answer format builds another tiny model, its tokenizer trained in that format.
    rc = main(["probe", "--model", "tiny", "--kb", str(tmp_path / "kb.json"), "--answer-format", "phi", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and (out["prompt_format"]["name"], out["format_source"]) == ("phi", "explicit")
    built = {read_meta(f)["prompt"]["name"] for f in (tmp_path / "cache" / "tiny").iterdir()}
    assert built == {"llama", "phi"}
