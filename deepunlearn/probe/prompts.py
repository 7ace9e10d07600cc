"""Answer formats and the tokenisation of question/answer pairs.

The reference code (wrh14/deep_unlearning) writes a fact as a *question part* followed by an
*answer part* (``config/model_config.yaml``, ``data_module.convert_raw_data_to_model_format``)::

    question part = question_start_tag + question + question_end_tag
    answer part   = answer_tag + answer

with, per model family,

======  ================  ================  ============  ====================================
family  question_start    question_end      answer_tag    full text
======  ================  ================  ============  ====================================
llama   ``"Question: "``  ``"\\n"``          ``"Answer:"``  ``"Question: q\\nAnswer:father"``
phi     ``"Question: "``  ``"\\n"``          ``"Answer: "`` ``"Question: q\\nAnswer: father"``
gpt2    ``"Question: "``  ``"\\n Answer:"``  ``""``        ``"Question: q\\n Answer:father"``
======  ================  ================  ============  ====================================

A finetuning example is ``tokenizer(full_text, add_special_tokens=True)`` plus EOS; the loss
skips the first ``len(tokenizer.tokenize(question_part, add_special_tokens=True))`` tokens, so it
covers the answer tag, the answer and EOS. Probing (``vllm_eval.py``, ``evaluate_util.eval_qa_vllm``)
gives the model the question part alone (no answer tag), decodes 10 tokens greedily and counts
the fact known iff ``answer.lower() in output.lower()``.

We do the same: :func:`encode_pairs` splits the full text's ids after as many tokens as the
question part has on its own (special tokens included), so the prompt ids are the question part
and the *continuation* ids are the answer tag plus the answer; finetuning, unlearning
(:func:`deepunlearn.unlearn.data.encode_qa`) and exact probing all use this split, and
generate-mode probing gives the model the question part tokenised alone
(:func:`question_ids`). For every tokenizer that splits at the question/answer boundary (the
tiny word-level one, GPT-2 and Llama-3 byte-level BPE, whose pre-tokenizers split ``"\\n"`` and
``":"`` from letters) the two prompts are the same ids. Where a tokenizer merges across the
boundary, we do what the reference does: the count comes from the question part alone and the
full text is cut there, even if its first tokens then differ from the question part's.

``bare`` is deepunlearn's earlier format (``"Question: {q}\\n"`` directly followed by the answer,
no tag), kept so that checkpoints finetuned with it still probe as they were trained.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

#: Model types (``config.model_type``) that use the reference's GPT-2 format.
GPT2_STYLE = ("gpt2", "gpt_neo", "gpt_neox", "gptj")
#: Model types that use the reference's Phi format (phi-1.5 is ``"phi"``).
PHI_STYLE = ("phi",)

_PIECES = {
    "llama": ("Question: ", "\n", "Answer:"),
    "phi": ("Question: ", "\n", "Answer: "),
    "gpt2": ("Question: ", "\n Answer:", ""),
    "bare": ("Question: ", "\n", ""),
}
#: The instruct model's own format, from its tokenizer's chat template (:func:`chat_format`).
CHAT = "chat"
#: The named formats: the reference's three, deepunlearn's earlier ``bare`` one and ``chat``.
FORMAT_NAMES = tuple(_PIECES) + (CHAT,)
#: The reference's ``model_family`` keys (``config/model_config.yaml``) and their formats.
_ALIASES = {"llama2-7b": "llama", "llama3-8b": "llama", "gpt2-xl": "gpt2", "question": "bare"}
_LEGACY_KEYS = {"template", "answer_prefix"}


class PromptFormat(BaseModel):
    """How a fact is written: question part ``question_start + q + question_end``, answer part
    ``answer_tag + a``, and EOS after the answer in training when ``eos``.

    >>> PromptFormat.named("gpt2").text("Who is A to B?", "father")
    'Question: Who is A to B?\\n Answer:father'
    >>> PromptFormat.named("llama").text("Who is A to B?", "father")
    'Question: Who is A to B?\\nAnswer:father'
    >>> PromptFormat.named("phi").prompt("Who is A to B?")
    'Question: Who is A to B?\\n'
    >>> PromptFormat.parse("Q: {question}\\\\n|A: {answer}").answer_tag
    'A: '

    The earlier construction ``PromptFormat(name=..., template="...{question}...",
    answer_prefix=...)`` still works: the template is the question part and ``answer_prefix``
    the answer tag (a checkpoint's old ``deepunlearn.json`` loads to the same tokens).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "bare"
    question_start: str = "Question: "
    question_end: str = "\n"
    answer_tag: str = ""
    eos: bool = True

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not (_LEGACY_KEYS & set(data)):
            return data
        mixed = sorted(set(data) & {"question_start", "question_end", "answer_tag"})
        if mixed:
            raise ValueError(f"give either template/answer_prefix (the old form) or {', '.join(mixed)}, not both")
        data = dict(data)
        template = data.pop("template", "Question: {question}\n")
        prefix = data.pop("answer_prefix", "")
        if not isinstance(template, str) or not isinstance(prefix, str):
            raise ValueError("template and answer_prefix must be strings")
        start, end = _split_template(template, "template")
        name = data.get("name")
        if name in _PIECES and _PIECES[name] != (start, end, prefix):
            name = f"{name}-legacy"  # an old name whose pieces differ (the old "gpt2" had tag " ")
        elif name in (None, "question"):  # the old default name
            name = _named_with((start, end, prefix))
        data.update(name=name or "custom", question_start=start, question_end=end, answer_tag=prefix)
        return data

    @model_validator(mode="after")
    def _name_matches(self) -> "PromptFormat":
        if not self.name.strip():
            raise ValueError("name must not be empty")
        if self.name in _PIECES and _PIECES[self.name] != self.pieces:
            raise ValueError(f"name {self.name!r} is the named format {_PIECES[self.name]!r}; these pieces "
                             f"{self.pieces!r} need another name")
        return self

    # ------------------------------------------------------------------ constructors
    @classmethod
    def named(cls, name: str) -> "PromptFormat":
        """A named format: ``llama``, ``phi``, ``gpt2`` (the reference's), ``bare`` (no tag), a
        reference model family key (``llama2-7b``, ``llama3-8b``, ``gpt2-xl``), or ``chat``: the
        instruct model's own format, whose pieces come from its tokenizer's chat template, so
        ``named("chat")`` is :attr:`pending` until :func:`chat_format` (which ``load_model``
        calls) resolves it. A model not finetuned here still defaults to its family's
        (the reference's) format; ``chat`` is asked for with ``--answer-format chat``."""
        key = _ALIASES.get(name.strip().lower(), name.strip().lower())
        if key == CHAT:  # pieces from a tokenizer: resolved by load_model (chat_format)
            return cls(name=CHAT, question_start="", question_end="", answer_tag="")
        if key not in _PIECES:
            raise ValueError(f"unknown answer format {name!r}; expected one of: {', '.join(FORMAT_NAMES)}")
        start, end, tag = _PIECES[key]
        return cls(name=key, question_start=start, question_end=end, answer_tag=tag)

    @classmethod
    def for_model(cls, model_type: str = "", name: str = "") -> "PromptFormat":
        """The reference format of a model family: ``gpt2`` for GPT-2-like model types
        (gpt2, gpt_neo, gptj, gpt_neox), ``phi`` for phi, ``llama`` for everything else. The
        ``config.model_type`` decides; a model name (``"gpt2-xl"``, ``"microsoft/phi-1_5"``)
        only when there is no model type."""
        key = (model_type or "").strip().lower()
        if not key:
            lowered = (name or "").lower()
            if any(t in lowered for t in GPT2_STYLE):
                return cls.named("gpt2")
            return cls.named("phi" if "phi" in lowered else "llama")
        if key in GPT2_STYLE:
            return cls.named("gpt2")
        return cls.named("phi" if key in PHI_STYLE else "llama")

    @classmethod
    def parse(cls, spec: "str | dict | PromptFormat") -> "PromptFormat":
        """A format from a CLI or config value.

        A string is a name (:meth:`named`) or a template: ``{question}`` once, the question
        part around it, then optionally ``|`` and the answer tag, then optionally ``{answer}``
        (only at the end). Without ``|`` the answer follows the question part with no tag.
        ``\\n``, ``\\t``, ``\\|`` and ``\\\\`` are unescaped, so shells can pass newlines:
        ``"Question: {question}\\n|Answer:"`` is ``llama``, ``"Question: {question}\\n Answer:"``
        is ``gpt2``. A dict holds the fields (``question_start``, ``question_end``,
        ``answer_tag``, ``eos``, ``name``), the old ``template``/``answer_prefix``, or just a
        ``name``. A result equal to a named format gets its name, else ``custom``. Errors are
        ``ValueError`` naming the problem.
        """
        if isinstance(spec, PromptFormat):
            return spec
        if isinstance(spec, dict):
            return _from_dict(spec)
        if not isinstance(spec, str):
            raise ValueError(f"answer format must be a name, a template or a table, got {type(spec).__name__}")
        text = spec.strip()
        if "{" not in text and "|" not in text:
            return cls.named(text)
        start, end, tag = _parse_template(spec)
        pieces = (start, end, tag)
        return cls(name=_named_with(pieces) or "custom", question_start=start, question_end=end, answer_tag=tag)

    # ------------------------------------------------------------------ text
    @property
    def template(self) -> str:
        """The question part with a ``{question}`` placeholder (the old field)."""
        return self.question_start + "{question}" + self.question_end

    @property
    def answer_prefix(self) -> str:
        """The answer tag (the old field's name)."""
        return self.answer_tag

    @property
    def spec(self) -> str:
        """A string :meth:`parse` turns back into this format (without ``eos``)."""
        if self.name in _PIECES and _PIECES[self.name] == self.pieces:
            return self.name
        esc = lambda s: s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\t", "\\t")  # noqa: E731
        body = esc(self.question_start) + "{question}" + esc(self.question_end)
        return body + ("|" + esc(self.answer_tag) if self.answer_tag else "")

    @property
    def pending(self) -> bool:
        """True for ``chat`` before a tokenizer gave it its pieces (all three empty)."""
        return self.name == CHAT and self.pieces == ("", "", "")

    @property
    def pieces(self) -> tuple[str, str, str]:
        return (self.question_start, self.question_end, self.answer_tag)

    def question_part(self, question: str) -> str:
        """``question_start + question + question_end``: what the model is asked."""
        return self.question_start + question + self.question_end

    def prompt(self, question: str) -> str:
        """The text the model is given when probed: the question part."""
        return self.question_part(question)

    def answer_part(self, answer: str) -> str:
        """``answer_tag + answer``: what the model should continue with."""
        return self.answer_tag + answer

    def text(self, question: str, answer: str) -> str:
        """The full text of a finetuning example (before EOS)."""
        return self.question_part(question) + self.answer_part(answer)

    def describe(self) -> dict[str, Any]:
        """The fields plus :attr:`spec`, for JSON answers."""
        return {**self.model_dump(), "spec": self.spec}


def _named_with(pieces: tuple[str, str, str]) -> str | None:
    for name, p in _PIECES.items():
        if p == pieces:
            return name
    return None


def _split_template(template: str, what: str) -> tuple[str, str]:
    if template.count("{question}") != 1:
        raise ValueError(f"{what}: {template!r} must contain the placeholder {{question}} exactly once")
    start, end = template.split("{question}")
    if re.search(r"\{[^{}]*\}", start + end):
        raise ValueError(f"{what}: {template!r} may only use the placeholder {{question}}")
    return start, end


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "|": "|"}


def _parse_template(spec: str) -> tuple[str, str, str]:
    """Split ``START{question}END[|TAG][{answer}]`` with escapes into its three pieces."""
    if spec.endswith("{answer}"):
        spec = spec[: -len("{answer}")]
    if "{answer}" in spec:
        raise ValueError(f"answer format {spec!r}: {{answer}} may only come at the end")
    parts, cur, i = [], [], 0
    while i < len(spec):
        c = spec[i]
        if c == "\\" and i + 1 < len(spec) and spec[i + 1] in _ESCAPES:
            cur.append(_ESCAPES[spec[i + 1]])
            i += 2
            continue
        if c == "|":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    if len(parts) > 2:
        raise ValueError(f"answer format {spec!r}: more than one '|' (write a literal bar as \\|)")
    question, tag = parts[0], (parts[1] if len(parts) == 2 else "")
    if "{question}" in tag:
        raise ValueError(f"answer format {spec!r}: '|' (the start of the answer tag) must come after {{question}}")
    if re.search(r"\{[^{}]*\}", tag):
        raise ValueError(f"answer format {spec!r}: the answer tag may not hold a placeholder")
    start, end = _split_template(question, "answer format")
    return start, end, tag


def _from_dict(spec: dict) -> PromptFormat:
    if set(spec) <= {"name", "eos"} and "name" in spec:
        base = PromptFormat.named(str(spec["name"]))
        return base.model_copy(update={"eos": bool(spec["eos"])}) if "eos" in spec else base
    try:
        fmt = PromptFormat.model_validate({"name": "custom", **spec})
    except ValidationError as e:
        err = e.errors()[0]
        where = "".join(f"{x}: " for x in err.get("loc", ()))
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ValueError(f"answer format: {where}{msg}") from None
    return fmt


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
    """Per pair: the ids of its question part and of its continuation (answer tag + answer).

    As the reference's ``convert_raw_data_to_model_format``: the full text
    (:meth:`PromptFormat.text`) is tokenised with special tokens (BOS where the tokenizer adds
    one) and cut after ``n`` tokens, ``n`` being the length of the question part tokenised on
    its own with special tokens. The first ``n`` ids are the prompt (teacher-forced in exact
    probing, loss-masked in training), the rest the continuation (what exact probing checks
    and the loss covers; EOS is added by :func:`deepunlearn.unlearn.data.encode_qa`).
    ``pairs`` are ``(question, answer)`` tuples or :class:`~deepunlearn.kg.kb.Probe` objects.
    """
    pairs = _pairs(pairs)
    if not pairs:
        return []
    q_ids = tokenizer([prompt.question_part(q) for q, _ in pairs], add_special_tokens=True)["input_ids"]
    f_ids = tokenizer([prompt.text(q, a) for q, a in pairs], add_special_tokens=True)["input_ids"]
    out = []
    for (q, a), qi, f in zip(pairs, q_ids, f_ids):
        n, f = len(qi), list(f)
        if len(f) <= n:
            raise ValueError(f"answer {a!r} of question {q!r} adds no tokens to the question part in format "
                             f"{prompt.name!r}")
        out.append((f[:n], f[n:]))
    return out


def encode_pair(tokenizer, prompt: PromptFormat, question: str, answer: str) -> tuple[list[int], list[int]]:
    """:func:`encode_pairs` for one pair."""
    return encode_pairs(tokenizer, prompt, [(question, answer)])[0]


def question_ids(tokenizer, prompt: PromptFormat, questions: Iterable[str]) -> list[list[int]]:
    """The question part of each question tokenised on its own, special tokens included: the
    prompt of generate-mode probing, as ``vllm_eval.py`` gives vLLM the question part's text."""
    texts = [prompt.question_part(str(q)) for q in questions]
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]


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
