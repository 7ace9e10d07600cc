"""Token ids of probe forms (:mod:`deepunlearn.kg.forms`): what probing, finetuning and
unlearning feed the model for each form of a fact.

``qa`` and ``yesno`` forms are written in the bundle's answer format exactly as the primary
probe (:func:`~deepunlearn.probe.prompts.encode_pairs`: question = ``form.text``, answer =
``form.answer``; a yes/no form's answer is ``"yes"``/``"no"``).

``statement`` forms are plain text, NOT in the answer format (a sentence is not a question): the
*question part* is ``form.prompt.rstrip()`` (the text before the answer span without its
trailing whitespace) and the *continuation* is that whitespace + the answer (+ ``form.rest``,
the text after the span, when ``with_rest``). Moving the whitespace into the continuation keeps
the cut at a word boundary for byte-level tokenizers, which glue a space to the word after it
(``"Ġfather"``): ``"Ann is Bob's "`` alone would end in a lone ``"Ġ"`` that the full sentence
never has. The ids are cut as :func:`encode_pairs` cuts them: the full text tokenised with
special tokens, split after as many tokens as the question part has on its own.

``with_rest=True`` is what finetuning and unlearning train on (the whole sentence; EOS is
added by the caller, :mod:`deepunlearn.unlearn`); probing never uses the rest.
"""

from __future__ import annotations

from typing import Sequence

from ..kg.forms import Form
from .prompts import PromptFormat, encode_pairs


def statement_parts(form: Form, *, with_rest: bool = False) -> tuple[str, str]:
    """A statement form's (question part, continuation) texts (module docstring).

    >>> statement_parts(Form(0, "statement", "Ann is Bob's wife.", "wife", "st1"))
    ("Ann is Bob's", ' wife')
    >>> statement_parts(Form(0, "statement", "Ann is Bob's wife.", "wife", "st1"), with_rest=True)
    ("Ann is Bob's", ' wife.')
    """
    prompt = form.prompt
    question = prompt.rstrip()
    return question, prompt[len(question):] + form.answer + (form.rest if with_rest else "")


def encode_forms(tokenizer, prompt: PromptFormat, forms: Sequence[Form], *,
                 with_rest: bool = False) -> list[tuple[list[int], list[int]]]:
    """Per form: (prompt ids, continuation ids), in the order of ``forms`` (module docstring).

    qa and yes/no forms go through :func:`encode_pairs` unchanged; statements are tokenised in
    one batch. A form whose question part or continuation has no token of its own is a
    ``ValueError`` naming the form and its fact."""
    out: list = [None] * len(forms)
    pairs = [(j, f) for j, f in enumerate(forms) if f.kind != "statement"]
    for (j, _), enc in zip(pairs, encode_pairs(tokenizer, prompt, [(f.text, f.answer) for _, f in pairs])):
        out[j] = enc
    stmts = [(j, f, *statement_parts(f, with_rest=with_rest)) for j, f in enumerate(forms) if f.kind == "statement"]
    if stmts:
        q_ids = tokenizer([q for _, _, q, _ in stmts], add_special_tokens=True)["input_ids"]
        f_ids = tokenizer([q + c for _, _, q, c in stmts], add_special_tokens=True)["input_ids"]
        for (j, f, q, c), qi, full in zip(stmts, q_ids, f_ids):
            n, full = len(qi), list(full)
            if n == 0 or len(full) <= n:
                part = "question part" if n == 0 else "answer"
                raise ValueError(f"form {f.name!r} of fact {f.fact_id}: the statement's {part} has no tokens of its "
                                 f"own ({f.text!r})")
            out[j] = (full[:n], full[n:])
    return out


def form_prompt_ids(tokenizer, prompt: PromptFormat, forms: Sequence[Form]) -> list[list[int]]:
    """Per form: the prompt of generate-mode probing, tokenised alone with special tokens: the
    question part in the answer format (qa, yes/no; as :func:`~deepunlearn.probe.prompts.question_ids`)
    or a statement's question part (``form.prompt.rstrip()``)."""
    texts = [statement_parts(f)[0] if f.kind == "statement" else prompt.question_part(f.text) for f in forms]
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]


def rank_texts(prompt: PromptFormat, form: Form, candidates: Sequence[str]) -> tuple[list[str], str]:
    """The ``(texts, tag)`` item of :func:`~deepunlearn.probe.scoring.candidate_rows` for scoring
    ``candidates`` in the answer slot of ``form``: each candidate's full text (no rest) and the
    text without an answer."""
    if form.kind == "statement":
        question, _ = statement_parts(form)
        gap = form.prompt[len(question):]
        return [question + gap + c for c in candidates], question
    return [prompt.text(form.text, c) for c in candidates], prompt.text(form.text, "")
