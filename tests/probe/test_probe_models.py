"""Model loading, prompt formats and the tiny model."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.probe import ModelLoadError, PromptFormat, build_tiny_model, load_model, read_meta
from deepunlearn.probe.models import META_FILE
from deepunlearn.probe.sources import looks_local
from deepunlearn.probe.prompts import encode_pairs
from deepunlearn.probe.tiny import build_tokenizer, probe_texts


def test_nonexistent_model_path_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="no such folder") as e:
        load_model(str(missing))
    assert str(missing) in str(e.value)
    with pytest.raises(ModelLoadError, match="^no such folder: ./no-such-model-here "):
        load_model("./no-such-model-here")


def test_folder_without_config_is_a_clear_error(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path)
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(tmp_path / "weights.bin")


def test_hub_names_go_to_the_hub_and_fail_cleanly(monkeypatch):
    # Hub ids ("gpt2", "owner/name") are not mistaken for missing folders; without a hub the
    # failure is a ModelLoadError naming the model, not a raw traceback.
    assert not looks_local("gpt2") and not looks_local("microsoft/phi-1_5")
    assert looks_local("/abs/path") and looks_local("a/b/c") and looks_local("~/m")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no network retries
    with pytest.raises(ModelLoadError, match="deepunlearn-no-such-org/no-such-model"):
        load_model("deepunlearn-no-such-org/no-such-model")


def test_cli_reports_missing_model_as_user_error(tmp_path, capsys, small_kb):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb_file = tmp_path / "kb.json"
    save_kb(small_kb, kb_file)
    rc = main(["probe", "--model", str(tmp_path / "missing"), "--kb", str(kb_file), "--json"])
    err = capsys.readouterr().err
    assert rc == 1
    assert f"error: no such folder: {tmp_path / 'missing'} " in err
    assert "Traceback" not in err


def test_prompt_formats_follow_the_reference():
    # config/model_config.yaml of wrh14/deep_unlearning: question_start_tag, question_end_tag, answer_tag.
    reference = {"gpt2": ("Question: ", "\n Answer:", ""), "phi": ("Question: ", "\n", "Answer: "),
                 "llama": ("Question: ", "\n", "Answer:")}
    for family, (start, end, tag) in reference.items():
        p = PromptFormat.named(family)
        assert p.prompt("Who is A to B?") == start + "Who is A to B?" + end
        assert p.text("Who is A to B?", "father") == start + "Who is A to B?" + end + tag + "father"
    assert PromptFormat.for_model("gpt2", "gpt2-xl") == PromptFormat.named("gpt2")
    for model_type, family in [("gpt_neox", "gpt2"), ("gptj", "gpt2"), ("phi", "phi"), ("llama", "llama"),
                               ("mistral", "llama"), ("", "gpt2")]:
        assert PromptFormat.for_model(model_type, "openai-community/gpt2-xl").name == family
    with pytest.raises(ValueError, match="question"):
        PromptFormat(template="Q: {q}")


def test_tiny_tokenizer_is_word_level_and_round_trips(edu_kb):
    tok = build_tokenizer(probe_texts(edu_kb))
    # Every word of the release's probes is one token (byte-level words keep their leading space).
    p = edu_kb.probe(401)
    assert p.answer == "Washington state"
    ids = tok(p.answer, add_special_tokens=False).input_ids
    assert tok.convert_ids_to_tokens(ids) == ["Washington", "Ġstate"]
    assert tok.decode(ids) == "Washington state"
    assert tok.unk_token_id not in tok(probe_texts(edu_kb)[401]).input_ids
    # Whole texts decode back exactly, and every encoding starts with BOS.
    for text in probe_texts(edu_kb)[::50]:
        enc = tok(text).input_ids
        assert enc[0] == tok.bos_token_id
        assert tok.decode(enc, skip_special_tokens=True) == text
    assert {tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token} == {"<pad>", "<s>", "</s>", "<unk>"}


def test_answer_tokens_are_the_tail_of_the_whole_text(edu_kb):
    tok = build_tokenizer(probe_texts(edu_kb))
    fmt = PromptFormat.for_model("llama")
    for (prompt_ids, answer_ids), probe in zip(encode_pairs(tok, fmt, edu_kb.probes()), edu_kb.probes()):
        assert prompt_ids + answer_ids == tok(fmt.text(probe.question, probe.answer)).input_ids
        assert prompt_ids == tok(fmt.prompt(probe.question)).input_ids
        assert tok.decode(answer_ids) == "Answer:" + probe.answer


def test_release_tiny_model_matches_design(edu_kb, tmp_path):
    # docs/models.md, the tiny model: 2 layers, 512 wide, ~291-word vocabulary -> 8.7M parameters. That is
    # the vocabulary of the questions alone; the tokenizer also reads every probe
    # form (paraphrases, statements, the release's own forms, yes/no), which brings it to 558
    # words: 267 more rows in the embedding and the output layer (2 x 512 each), ~8.97M.
    from deepunlearn.kg.forms import forms_of

    assert 280 <= len(build_tokenizer(probe_texts(edu_kb))) <= 300
    folder = build_tiny_model(edu_kb, tmp_path / "tiny")
    bundle = load_model(folder, device="cpu")
    assert bundle.model.config.model_type == "llama"
    assert bundle.model.config.num_hidden_layers == 2 and bundle.model.config.hidden_size == 512
    vocab = len(bundle.tokenizer)
    assert 540 <= vocab <= 580
    assert 8.9e6 <= bundle.num_parameters() <= 9.1e6
    unk = bundle.tokenizer.unk_token_id
    for i in range(0, len(edu_kb), 7):
        for f in forms_of(edu_kb, i):
            text = f.text if f.kind == "statement" else bundle.prompt.text(f.text, f.answer)
            assert unk not in bundle.tokenizer(text).input_ids, (i, f)
    meta = read_meta(folder)
    assert meta["origin"] == "tiny" and meta["tiny"]["parameters"] == bundle.num_parameters()
    assert bundle.prompt == PromptFormat.for_model("llama")
    # The same KB and seed give the same weights.
    again = load_model(build_tiny_model(edu_kb, tmp_path / "again"), device="cpu")
    import torch

    for (n1, p1), (_, p2) in zip(bundle.model.named_parameters(), again.model.named_parameters()):
        assert torch.equal(p1, p2), n1


def test_loaded_bundle_pads_left_with_a_pad_token(tiny_bundle):
    tok = tiny_bundle.tokenizer
    assert tok.pad_token_id is not None and tok.padding_side == "left"
    assert tiny_bundle.device == "cpu" and not tiny_bundle.model.training
    assert tiny_bundle.path is not None and tiny_bundle.meta["origin"] == "tiny"


def test_missing_pad_token_falls_back_to_eos(tmp_path):
    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "husband", "Bob"), ("Ann", "birthyear", "1950")])
    folder = build_tiny_model(kb, tmp_path / "m", hidden=32, heads=4)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg.pop("pad_token", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    bundle = load_model(folder, device="cpu")
    assert bundle.tokenizer.pad_token_id == bundle.tokenizer.eos_token_id
    assert bundle.tokenizer.padding_side == "left"


def test_prompt_format_is_kept_in_the_checkpoint(tmp_path):
    from deepunlearn.probe import save_bundle

    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "husband", "Bob")])
    folder = build_tiny_model(kb, tmp_path / "m", hidden=32, heads=4)
    custom = PromptFormat(name="qa", template="Q: {question}\nA:", answer_prefix=" ")
    bundle = load_model(folder, device="cpu", prompt=custom)
    save_bundle(bundle, tmp_path / "saved", {"note": "kept"})
    again = load_model(tmp_path / "saved", device="cpu")
    assert again.prompt == custom
    assert json.loads((tmp_path / "saved" / META_FILE).read_text())["note"] == "kept"
    # An explicit prompt wins over the file.
    assert load_model(tmp_path / "saved", device="cpu", prompt=PromptFormat()).prompt == PromptFormat()


def test_gpt2_tiny_model_uses_the_gpt2_prompt(tmp_path):
    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "husband", "Bob")])
    bundle = load_model(build_tiny_model(kb, tmp_path / "g", hidden=32, heads=4, arch="gpt2"), device="cpu")
    assert bundle.model.config.model_type == "gpt2"
    assert bundle.prompt == PromptFormat.for_model("gpt2")
    with pytest.raises(ValueError, match="architecture"):
        build_tiny_model(kb, tmp_path / "x", arch="mamba")
