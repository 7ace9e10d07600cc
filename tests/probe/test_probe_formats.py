"""Answer formats against the reference code (wrh14/deep_unlearning) and old checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.probe import PromptFormat, build_tiny_model, load_model, read_meta
from deepunlearn.probe.models import META_FILE
from deepunlearn.probe.prompts import encode_pairs, question_ids
from deepunlearn.probe.tiny import build_tokenizer
from deepunlearn.unlearn.data import IGNORE, encode_qa

#: config/model_config.yaml of the reference: question_start_tag, question_end_tag, answer_tag.
REFERENCE_CONFIGS = {
    "llama": {"question_start_tag": "Question: ", "question_end_tag": "\n", "answer_tag": "Answer:"},
    "phi": {"question_start_tag": "Question: ", "question_end_tag": "\n", "answer_tag": "Answer: "},
    "gpt2": {"question_start_tag": "Question: ", "question_end_tag": "\n Answer:", "answer_tag": ""},
}


# Copied literally from the reference's data_module.py (HEAD of wrh14/deep_unlearning).
def convert_raw_data_to_model_format(tokenizer, max_length,  question, answer, model_configs):
    question_start_token, question_end_token, answer_token = model_configs['question_start_tag'], model_configs['question_end_tag'], model_configs['answer_tag']
    new_question = question_start_token + question + question_end_token
    new_answer = answer_token + answer
    full_text = new_question + new_answer
    num_question_tokens = len(tokenizer.tokenize(new_question, add_special_tokens=True))
    encoded = tokenizer(
        full_text, 
        add_special_tokens=True, 
        max_length=max_length, 
        truncation=True, 
    )
    pad_length = max_length - len(encoded.input_ids)
    pad_input_ids = encoded['input_ids'] + [tokenizer.eos_token_id] * pad_length
    pad_attention_mask = encoded['attention_mask'] + [0] * pad_length
    if len(encoded.input_ids) == max_length:
        label = encoded.input_ids
    else:
        label = encoded['input_ids'] + [tokenizer.eos_token_id] + [-100] * (pad_length-1)
        
    encoded_answer = tokenizer(
        new_answer, 
        add_special_tokens=True, 
        max_length=max_length, 
        truncation=True, 
    )
        
        
    #change label to -100 for question tokens
#     print(encoded['input_ids'][num_question_tokens], label[num_question_tokens])
    for i in range(num_question_tokens): label[i] = -100
    
    return torch.tensor(pad_input_ids),torch.tensor(label),torch.tensor(pad_attention_mask)


def _reference_example(tokenizer, question, answer, config, max_length=128):
    """The reference's example without its padding: the attended tokens plus the EOS it appends."""
    ids, labels, mask = convert_raw_data_to_model_format(tokenizer, max_length, question, answer, config)
    n = int(mask.sum()) + 1
    assert n < max_length and (labels[n:] == -100).all()
    return ids[:n].tolist(), labels[:n].tolist()


def _texts(kb):
    return [PromptFormat.named(f).text(p.question, p.answer) for f in REFERENCE_CONFIGS for p in kb.probes()]


def _bpe(texts, *, bos: str | None, metaspace: bool = False):
    """A BPE tokenizer trained here: byte-level like GPT-2 (no BOS) and Llama-3 (with BOS), or
    Metaspace like SentencePiece, whose pieces merge across the question/answer boundary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    specials = [eos] + ([bos] if bos else [])
    tok = Tokenizer(models.BPE())
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                           special_tokens=[(bos, tok.token_to_id(bos))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, bos_token=bos or eos)


@pytest.mark.parametrize("which", ["tiny-word-level", "gpt2-byte-bpe", "llama3-byte-bpe-bos"])
def test_finetuning_examples_equal_the_reference(small_kb, which):
    texts = _texts(small_kb)
    tok = {"tiny-word-level": lambda: build_tokenizer(texts),
           "gpt2-byte-bpe": lambda: _bpe(texts, bos=None),
           "llama3-byte-bpe-bos": lambda: _bpe(texts, bos="<|begin_of_text|>")}[which]()
    assert (tok("x").input_ids[0] == tok.bos_token_id) == (which != "gpt2-byte-bpe")  # GPT-2 adds no BOS
    probes = small_kb.probes()
    for family, config in REFERENCE_CONFIGS.items():
        ours = encode_qa(tok, PromptFormat.named(family), probes)
        for ex, p in zip(ours, probes):
            ids, labels = _reference_example(tok, p.question, p.answer, config)
            assert (ex["input_ids"], ex["labels"]) == (ids, labels), (which, family, p)
        # Not vacuous: the loss covers the tag, the answer and EOS; the question part is masked.
        ex, p = ours[0], probes[0]
        learnt = [t for t in ex["labels"] if t != IGNORE]
        assert tok.decode(learnt[:-1]) == config["answer_tag"] + p.answer and learnt[-1] == tok.eos_token_id
        assert ex["labels"][0] == IGNORE
        # These tokenizers split at the boundary: the generate prompt is the teacher-forced one.
        assert [q for q, _ in encode_pairs(tok, PromptFormat.named(family), probes)] == \
            question_ids(tok, PromptFormat.named(family), [p.question for p in probes])


def test_tokenizer_that_merges_across_the_boundary_is_cut_as_the_reference_cuts(small_kb):
    tok = _bpe(_texts(small_kb), bos="<s>", metaspace=True)
    fmt, config = PromptFormat.named("llama"), REFERENCE_CONFIGS["llama"]
    misaligned = 0
    for p in small_kb.probes():
        q_alone = tok(fmt.prompt(p.question)).input_ids
        full = tok(fmt.text(p.question, p.answer)).input_ids
        if len(full) <= len(q_alone):  # the reference would learn EOS alone; we refuse
            with pytest.raises(ValueError, match="adds no tokens"):
                encode_qa(tok, fmt, [p])
            continue
        misaligned += full[:len(q_alone)] != q_alone
        ex = encode_qa(tok, fmt, [p])[0]
        assert (ex["input_ids"], ex["labels"]) == _reference_example(tok, p.question, p.answer, config)
    assert misaligned > 0


def _old_encode_qa(tok, template: str, answer_prefix: str, question: str, answer: str):
    """deepunlearn's encoding before the reference formats (an independent reimplementation):
    the prompt tokenised alone, the answer the rest of the whole text, then EOS."""
    p = tok(template.format(question=question)).input_ids
    f = tok(template.format(question=question) + answer_prefix + answer).input_ids
    assert f[:len(p)] == p
    a = f[len(p):] + [tok.eos_token_id]
    return p + a, [IGNORE] * len(p) + a


@pytest.mark.parametrize("old", [
    {"name": "question", "template": "Question: {question}\n", "answer_prefix": ""},
    {"name": "gpt2", "template": "Question: {question}\n Answer:", "answer_prefix": " "},
])
def test_old_checkpoint_prompt_entries_load_to_the_same_behaviour(small_kb, tmp_path, old):
    kb = small_kb.subset(range(0, len(small_kb), 6))
    folder = build_tiny_model(kb, tmp_path / "m", hidden=32, heads=4,
                              prompt={"template": old["template"], "answer_prefix": old["answer_prefix"]})
    meta = read_meta(folder)
    meta["prompt"] = old  # the entry older checkpoints carry (no format name)
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    bundle = load_model(folder, device="cpu")
    assert bundle.prompt_source == "recorded"
    assert bundle.prompt.name == ("bare" if old["name"] == "question" else "gpt2-legacy")
    probes = kb.probes()
    for ex, p in zip(encode_qa(bundle.tokenizer, bundle.prompt, probes), probes):
        assert (ex["input_ids"], ex["labels"]) == _old_encode_qa(bundle.tokenizer, old["template"],
                                                                 old["answer_prefix"], p.question, p.answer)
    assert PromptFormat(**old) == bundle.prompt  # the old constructor, as bench/config.py calls it


def test_parse_names_templates_and_errors():
    assert PromptFormat.parse("Question: {question}\\n|Answer:") == PromptFormat.named("llama")
    assert PromptFormat.parse("Question: {question}\\n|Answer: {answer}") == PromptFormat.named("phi")
    assert PromptFormat.parse("Question: {question}\n Answer:") == PromptFormat.named("gpt2")
    assert PromptFormat.parse("Question: {question}\\n") == PromptFormat.named("bare")
    assert PromptFormat.parse(" LLaMA ") == PromptFormat.named("llama") == PromptFormat.parse("llama3-8b")
    assert PromptFormat.parse({"name": "phi", "eos": False}).eos is False
    custom = PromptFormat.parse("Q \\| {question}?|A=")
    assert (custom.name, custom.text("who", "x")) == ("custom", "Q | who?A=x")
    assert PromptFormat.parse(custom.spec) == custom
    for spec, problem in [("lama", "unknown answer format 'lama'"), ("Q: {q}", "placeholder {question}"),
                          ("Q {question}|A|B", "more than one '|'"), ("{answer} {question}", "only come at the end"),
                          ("A| {question}", "must come after {question}"),
                          ({"name": "llama", "answer_tag": "A="}, "need another name"),
                          ({"question_start": 1}, "question_start")]:
        with pytest.raises(ValueError, match=problem.replace("|", r"\|").replace("{", r"\{").replace("}", r"\}")):
            PromptFormat.parse(spec)


def test_load_model_picks_the_format_explicit_recorded_family(tmp_path):
    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "husband", "Bob"), ("Ann", "birthyear", "1950")])
    folder = build_tiny_model(kb, tmp_path / "m", hidden=32, heads=4, prompt="phi")
    tok = load_model(folder, device="cpu").tokenizer
    assert {"Answer", ":"} <= set(tok.get_vocab())  # trained on the KB in its format
    pick = lambda **kw: (lambda b: (b.prompt.name, b.prompt_source))(load_model(folder, device="cpu", **kw))  # noqa: E731
    assert pick() == ("phi", "recorded")
    assert pick(answer_format="family") == ("llama", "family")  # model_type llama
    assert pick(prompt="gpt2", answer_format="family") == ("gpt2", "explicit")
    meta = read_meta(folder)
    del meta["prompt"]
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    assert pick() == ("llama", "family")
    with pytest.raises(ValueError, match="answer_format"):
        load_model(folder, device="cpu", answer_format="checkpoint")
    gpt2 = load_model(build_tiny_model(kb, tmp_path / "g", hidden=32, heads=4, arch="gpt2"), device="cpu")
    assert gpt2.prompt == PromptFormat.named("gpt2") and gpt2.prompt_source == "recorded"


def _cli_probe(capsys, tmp_path, model, kb_file, *extra):
    from deepunlearn.cli import main

    out_file = tmp_path / f"known-{len(list(tmp_path.iterdir()))}.json"
    rc = main(["probe", "--model", str(model), "--kb", str(kb_file), "-o", str(out_file), "--json", *extra])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    out = json.loads(captured.out)
    return out, set(json.loads(out_file.read_text())["fact_ids"])


def test_reference_format_checkpoint_is_known_under_both_protocols(tiny_model_dir, small_kb, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb

    # The fixture model is finetuned in the reference's Llama format ("Question: q\nAnswer:a").
    assert read_meta(tiny_model_dir)["prompt"] == PromptFormat.named("llama").model_dump()
    kb_file = tmp_path / "kb.json"
    save_kb(small_kb, kb_file)
    ref, ref_known = _cli_probe(capsys, tmp_path, tiny_model_dir, kb_file, "--protocol", "reference")
    assert (ref["protocol"], ref["mode"], ref["format_source"]) == ("reference", "generate", "family")
    assert ref["prompt_format"]["spec"] == "llama"
    default, exact_known = _cli_probe(capsys, tmp_path, tiny_model_dir, kb_file)
    assert (default["protocol"], default["mode"], default["format_source"]) == ("default", "exact", "recorded")
    assert default["prompt_format"]["answer_tag"] == "Answer:"
    assert len(exact_known) >= 0.95 * len(small_kb) and len(ref_known) >= 0.95 * len(small_kb)
    assert exact_known <= ref_known
    # The same checkpoint asked in deepunlearn's earlier bare format: the model continues with
    # "Answer:", not with the answer, so exact probing finds (almost) nothing, while the
    # question part is the same and the generate rule still finds the answer.
    bare, bare_known = _cli_probe(capsys, tmp_path, tiny_model_dir, kb_file, "--answer-format", "bare")
    assert (bare["mode"], bare["format_source"], bare["prompt_format"]["name"]) == ("exact", "explicit", "bare")
    assert len(bare_known) <= 0.05 * len(small_kb)
    gen_bare, gen_bare_known = _cli_probe(capsys, tmp_path, tiny_model_dir, kb_file, "--answer-format",
                                          "Question: {question}\\n", "--mode", "generate")
    assert gen_bare["prompt_format"]["name"] == "bare" and gen_bare_known == ref_known


def test_cli_bad_answer_format_is_one_line(tmp_path, capsys):
    from deepunlearn.cli import main

    rc = main(["probe", "--model", str(tmp_path), "--kb", str(tmp_path / "kb.json"), "--answer-format", "Q: {q}",
               "--json"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "--answer-format" in err and "{question}" in err and len(err.splitlines()) == 1
