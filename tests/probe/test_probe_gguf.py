"""GGUF files as models and what loading checks first, on small
files written here with the ``gguf`` package's writer and on the minimal 16-wide checkpoint:
several GGUF files in a folder, a file that is not GGUF, a truncated one, an unknown
architecture, a tokenizer with neither pad nor EOS, ``--answer-format chat`` without a chat
template, pad == EOS in training batches and probing, and the SDPA fallback of the GPU path."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from deepunlearn.probe import ModelLoadError, load_model


def write_gguf(path, arch="llama", n=4096):
    """A small valid GGUF file: an architecture, a block count and one float32 tensor."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_embedding_length(16)  # left out, transformers' default (4,096) is more than the tensor backs
    w.add_tensor("token_embd.weight", np.arange(n, dtype=np.float32).reshape(-1, 16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_folder_with_several_gguf_files_is_an_error_listing_them(tmp_path):
    write_gguf(tmp_path / "a.gguf")
    write_gguf(tmp_path / "b.gguf")
    with pytest.raises(ModelLoadError) as e:
        load_model(tmp_path, device="cpu")
    assert str(e.value) == (f"model folder {tmp_path} holds 2 GGUF files (a.gguf, b.gguf) and no config.json: "
                            "name the one to load (--model FOLDER/FILE.gguf)")


def test_a_file_that_is_not_gguf_is_refused_by_its_magic(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf file")
    with pytest.raises(ModelLoadError) as e:
        load_model(bad, device="cpu")
    assert str(e.value) == f"{bad}: not a GGUF file (it starts with b'PK\\x03\\x04', a GGUF file with b'GGUF')"
    assert e.value.file == str(bad)


def test_a_truncated_gguf_file_is_refused(tmp_path):
    from deepunlearn.probe.gguf import check_gguf, gguf_summary

    good = write_gguf(tmp_path / "good.gguf")
    assert gguf_summary(good)["parameters"] == 4096 and gguf_summary(good)["layers"] == 1
    data = good.read_bytes()
    for cut in (len(data) - 100, 40):  # inside the tensor data; inside the header
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(data[:cut])
        with pytest.raises(ModelLoadError) as e:
            check_gguf(bad)
        assert str(e.value).startswith(f"{bad}: "), str(e.value)
        assert "truncated" in str(e.value)
    with pytest.raises(ModelLoadError, match="unknown GGUF architecture 'foo'; transformers loads GGUF files of: "):
        gguf_summary(write_gguf(tmp_path / "foo.gguf", arch="foo"))


def test_an_unknown_architecture_in_config_json_is_named(mini_copy):
    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, "model_type": "foo"}))
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    msg = str(e.value)
    assert msg.startswith(f"{mini_copy / 'config.json'}: unknown architecture 'foo' (model_type); transformers ")
    assert "architectures, e.g. llama, mistral" in msg and e.value.field == "model_type"


def _drop_specials(folder, *keys):
    f = folder / "tokenizer_config.json"
    cfg = json.loads(f.read_text())
    for k in keys:
        cfg.pop(k, None)
    f.write_text(json.dumps(cfg))


def test_a_tokenizer_without_pad_and_eos_is_refused_not_resized(mini_copy):
    _drop_specials(mini_copy, "pad_token", "eos_token")
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    assert str(e.value).startswith(f"the tokenizer of {mini_copy} has neither a pad token nor an EOS token; give it one")
    assert e.value.field == "pad_token"


def test_finetune_refuses_it_before_writing_anything(mini_copy, mini_kb_file, tmp_path, capsys):
    from deepunlearn.cli import main

    _drop_specials(mini_copy, "pad_token", "eos_token")
    out = tmp_path / "ft"
    code = main(["finetune", "--model", str(mini_copy), "--kb", str(mini_kb_file), "-o", str(out), "--json"])
    assert code == 1
    cap = capsys.readouterr()
    assert json.loads(cap.out.splitlines()[-1])["field"] == "pad_token"
    assert "neither a pad token nor an EOS token" in cap.err and cap.err.count("\n") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == [mini_copy]


def test_pad_equal_to_eos_keeps_the_eos_in_the_loss_and_probing_unchanged(mini_copy, mini_kb):
    from deepunlearn.probe import probe
    from deepunlearn.unlearn.data import collate, encode_qa

    _drop_specials(mini_copy, "pad_token")
    b = load_model(mini_copy, device="cpu")
    assert b.pad_id == b.eos_id  # pad falls back to EOS
    exs = encode_qa(b.tokenizer, b.prompt, mini_kb.probes())
    batch = collate(exs + [{"input_ids": exs[0]["input_ids"][:2], "labels": [-100, -100]}], b.pad_id)
    for i, ex in enumerate(exs):
        n = len(ex["input_ids"])
        assert batch["labels"][i, n - 1].item() == b.eos_id and batch["attention_mask"][i, :n].all()
    assert batch["attention_mask"][-1].tolist()[2:] == [0] * (batch["input_ids"].shape[1] - 2)
    together = probe(b, mini_kb, progress=False)
    alone = [probe(b, mini_kb, fact_ids=[i], progress=False) for i in range(len(mini_kb.facts))]
    assert np.allclose(together.logprob, [r.logprob[0] for r in alone], atol=1e-5)


def test_answer_format_chat_without_a_chat_template_names_the_flag(mini_model_dir, mini_kb_file, capsys):
    from deepunlearn.cli import main
    from deepunlearn.probe import PromptFormat

    assert PromptFormat.parse("chat").pending and "chat" in PromptFormat.named("chat").name
    code = main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--answer-format", "chat",
                 "--device", "cpu"])
    assert code == 1
    err = capsys.readouterr().err
    assert err == (f"deepunlearn probe: error: --answer-format chat: the tokenizer of {mini_model_dir} has no chat "
                   "template; choose another answer format (llama, phi, gpt2, bare or a template)\n")


def test_answer_format_chat_takes_the_template_pieces(mini_model_dir):
    b = load_model(mini_model_dir, device="cpu")
    b.tokenizer.chat_template = "{% for m in messages %}<s> Question: {{ m['content'] }}{% endfor %} Answer:"
    from deepunlearn.probe.chat import chat_format

    fmt = chat_format(b.tokenizer)
    assert (fmt.name, fmt.question_start, fmt.question_end, fmt.answer_tag) == ("chat", "<s> Question: ", " Answer:", "")
    assert not fmt.pending and fmt.eos


def test_gpu_path_asks_for_sdpa_and_falls_back_silently():
    from deepunlearn.probe.models import _from_pretrained

    calls = []

    class Auto:
        @staticmethod
        def from_pretrained(where, **kw):
            calls.append(dict(kw))
            if kw.get("attn_implementation") == "sdpa":
                raise ValueError("FooForCausalLM does not support an attention implementation through "
                                 "torch.nn.functional.scaled_dot_product_attention (sdpa) yet")
            return "model", {}

    assert _from_pretrained(Auto, "x", {"attn_implementation": "sdpa", "dtype": torch.bfloat16}) == ("model", {})
    assert [c.get("attn_implementation") for c in calls] == ["sdpa", None]
    calls.clear()
    with pytest.raises(ValueError, match="other"):
        Auto.from_pretrained = staticmethod(lambda where, **kw: (_ for _ in ()).throw(ValueError("other")))
        _from_pretrained(Auto, "x", {"dtype": torch.float32})
