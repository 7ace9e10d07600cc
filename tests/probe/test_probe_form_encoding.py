"""encode_forms / form_prompt_ids: where a form is cut into prompt and continuation,
with the tiny word-level tokenizer and a byte-level BPE one."""

from __future__ import annotations

import pytest

from deepunlearn.kg.forms import Form
from deepunlearn.probe import PromptFormat
from deepunlearn.probe.form_encoding import encode_forms, form_prompt_ids
from deepunlearn.probe.prompts import encode_pairs, question_ids
from deepunlearn.probe.tiny import build_tokenizer

ST = Form(0, "statement", "Bob is Ann's child.", "child", "st1")
ST_MID = Form(0, "statement", "In Ann's family, Bob is the child.", "child", "st3")
QA = Form(0, "qa", "What relation is Bob to Ann?", "child", "qa1")
YN = Form(0, "yesno", "Is Bob Ann's child?", "yes", "yes1")
TEXTS = ["Bob is Ann's child.", "In Ann's family, Bob is the child.", "Question: What relation is Bob to Ann?\nAnswer:child",
         "Question: Is Bob Ann's child?\nAnswer:yes"]


@pytest.fixture(scope="module", params=["wordlevel", "bpe"])
def tok(request):
    return build_tokenizer(TEXTS, model=request.param)


def test_statement_is_cut_before_the_space_of_its_answer(tok):
    fmt = PromptFormat.named("llama")
    (p, c), (p3, c3) = encode_forms(tok, fmt, [ST, ST_MID])
    # prompt: the text before the answer without its trailing space, tokenised alone
    assert p == tok("Bob is Ann's").input_ids and p[0] == tok.bos_token_id
    assert p + c == tok("Bob is Ann's child").input_ids  # no answer format, no rest
    assert tok.decode(c) == " child" and tok.convert_ids_to_tokens(c) == ["Ġchild"]
    assert p3 == tok("In Ann's family, Bob is the").input_ids and tok.decode(c3) == " child"


def test_statement_with_rest_is_the_whole_sentence(tok):
    (p, c), = encode_forms(tok, PromptFormat.named("llama"), [ST], with_rest=True)
    assert p + c == tok(ST.text).input_ids and tok.decode(c) == " child."


def test_qa_and_yesno_forms_are_encode_pairs(tok):
    fmt = PromptFormat.named("llama")
    got = encode_forms(tok, fmt, [QA, ST, YN])
    assert [got[0], got[2]] == encode_pairs(tok, fmt, [(QA.text, "child"), (YN.text, "yes")])
    assert tok.decode(got[0][1]) == "Answer:child" and tok.decode(got[2][1]) == "Answer:yes"
    assert encode_forms(tok, fmt, [QA], with_rest=True) == [got[0]]


def test_generate_prompts(tok):
    fmt = PromptFormat.named("llama")
    got = form_prompt_ids(tok, fmt, [QA, ST, YN])
    assert got == [question_ids(tok, fmt, [QA.text])[0], tok("Bob is Ann's").input_ids,
                   question_ids(tok, fmt, [YN.text])[0]]
    assert encode_forms(tok, fmt, []) == [] and form_prompt_ids(tok, fmt, []) == []
