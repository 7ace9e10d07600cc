"""Prompt formats and the tokenisation of question/answer pairs.

The reference release asks each model family its questions in the family's own format
(DESIGN.md section 4): ``"Question: {question}\\n"`` for Phi and Llama, whose answer follows
the newline directly, and ``"Question: {question}\\n Answer:"`` for GPT-2, whose answer follows
after a space. Probing, finetuning and unlearning all tokenise a fact the same way, through
:func:`encode_pair`, so the answer tokens a model is trained on are exactly the ones it is
probed on.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, field_validator

#: Model types (``config.model_type``) that use the GPT-2 prompt of the reference release.
GPT2_STYLE = ("gpt2", "gpt_neo", "gpt_neox", "gptj")


class PromptFormat(BaseModel):
    """How a question is put to a model and where its answer starts.

    ``template`` holds ``{question}``; the answer text follows the formatted template after
    ``answer_prefix``.

    >>> p = PromptFormat.for_model("gpt2")
    >>> p.text("Who is A to B?", "father")
    'Question: Who is A to B?\\n Answer: father'
    >>> PromptFormat.for_model("llama").text("Who is A to B?", "father")
    'Question: Who is A to B?\\nfather'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "question"
    template: str = "Question: {question}\n"
    answer_prefix: str = ""

    @field_validator("template")
    @classmethod
    def _has_question(cls, v: str) -> str:
        if "{question}" not in v:
            raise ValueError(f"prompt template {v!r} must contain the placeholder {{question}}")
        try:
            v.format(question="")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"prompt template {v!r} may only use the placeholder {{question}} ({e})") from None
        return v

    @classmethod
    def for_model(cls, model_type: str = "", name: str = "") -> "PromptFormat":
        """The reference format of a model family, from its ``config.model_type`` or its name."""
        key = f"{model_type} {name}".lower()
        if any(t in key for t in GPT2_STYLE):
            return cls(name="gpt2", template="Question: {question}\n Answer:", answer_prefix=" ")
        return cls(name="question", template="Question: {question}\n", answer_prefix="")

    def prompt(self, question: str) -> str:
        """The text the model is given."""
        return self.template.format(question=question)

    def text(self, question: str, answer: str) -> str:
        """Prompt followed by the answer, as in finetuning."""
        return self.prompt(question) + self.answer_prefix + answer


def _pairs(pairs: Iterable[Any]) -> list[tuple[str, str]]:
    out = []
    for i, p in enumerate(pairs):
        if hasattr(p, "question") and hasattr(p, "answer"):
            out.append((str(p.question), str(p.answer)))
        elif isinstance(p, (tuple, list)) and len(p) == 2:
            out.append((str(p[0]), str(p[1])))
        else:
            raise TypeError(f"pairs[{i}]: expected a (question, answer) pair or a Probe, got {p!r}")
    return out


def encode_pairs(tokenizer, prompt: PromptFormat, pairs: Iterable[Any]) -> list[tuple[list[int], list[int]]]:
    """Token ids of each pair's prompt (special tokens such as BOS included) and of its answer.

    The answer's tokens are those that follow the prompt when the whole text is tokenised, so a
    tokeniser that merges across the boundary still sees the answer as in training; where the
    prompt's tokens are not a prefix of the whole text's, the answer is tokenised on its own.
    ``pairs`` are ``(question, answer)`` tuples or :class:`~deepunlearn.kg.kb.Probe` objects.
    """
    pairs = _pairs(pairs)
    if not pairs:
        return []
    prompts = [prompt.prompt(q) for q, _ in pairs]
    fulls = [prompt.text(q, a) for q, a in pairs]
    p_ids = tokenizer(prompts, add_special_tokens=True)["input_ids"]
    f_ids = tokenizer(fulls, add_special_tokens=True)["input_ids"]
    out = []
    for (q, a), p, f in zip(pairs, p_ids, f_ids):
        p, f = list(p), list(f)
        if len(f) > len(p) and f[: len(p)] == p:
            ans = f[len(p):]
        else:
            ans = list(tokenizer(prompt.answer_prefix + a, add_special_tokens=False)["input_ids"])
        if not ans:
            raise ValueError(f"answer {a!r} of question {q!r} tokenises to no tokens")
        out.append((p, ans))
    return out


def encode_pair(tokenizer, prompt: PromptFormat, question: str, answer: str) -> tuple[list[int], list[int]]:
    """:func:`encode_pairs` for one pair."""
    return encode_pairs(tokenizer, prompt, [(question, answer)])[0]


def left_pad(rows: Sequence[Sequence[int]], pad_id: int):
    """Pad token-id rows to one length on the LEFT, keeping each row's first token in column 0.

    Rows end in the same column, so a decoder-only model continues every row at the end. The
    padding goes behind the first token rather than before it: then no query position attends
    to nothing (a fully masked attention row makes some SDPA kernels return NaN, which the next
    layer spreads to real tokens), while every real token still sees exactly its own row.
    Returns ``(input_ids, attention_mask, position_ids)`` as int64 tensors; position ids count
    real tokens only, so absolute-position models (GPT-2) read the same positions as unpadded.

    >>> ids, mask, pos = left_pad([[5, 6, 7], [8, 9]], pad_id=0)
    >>> ids.tolist(), mask.tolist(), pos.tolist()
    ([[5, 6, 7], [8, 0, 9]], [[1, 1, 1], [1, 0, 1]], [[0, 1, 2], [0, 0, 1]])
    """
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r)
        if n == 0:
            raise ValueError(f"rows[{i}] is empty")
        ids[i, 0] = r[0]
        mask[i, 0] = 1
        if n > 1:
            ids[i, width - n + 1:] = torch.as_tensor(r[1:], dtype=torch.long)
            mask[i, width - n + 1:] = 1
    return ids, mask, position_ids(mask)


def position_ids(attention_mask):
    """Positions that count only attended tokens (0 on padding), as Hugging Face generate does."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp_min_(0).masked_fill_(attention_mask == 0, 0)
