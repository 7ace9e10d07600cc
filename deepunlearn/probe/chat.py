"""The ``chat`` answer format: an instruct model's own prompt, taken from its tokenizer's chat
template.

``--answer-format chat`` (finetune, probe, unlearn; ``PromptFormat.named("chat")``) is
:attr:`~deepunlearn.probe.prompts.PromptFormat.pending` until a tokenizer is known;
:func:`~deepunlearn.probe.models.load_model` then calls :func:`chat_format`, which gives it
concrete pieces (name still ``chat``), and a finetuned checkpoint records those pieces. The
default for a model not finetuned here stays its family's (the reference's) format.
"""

from __future__ import annotations

from .prompts import CHAT, FORMAT_NAMES, PromptFormat
from .sources import ModelLoadError

#: Stands for the question while a chat template is rendered (no template holds it).
_MARK = "\u2063DEEPUNLEARN-QUESTION\u2063"


def chat_format(tokenizer, *, source: str = "the tokenizer", flag: str | None = None) -> PromptFormat:
    """The ``chat`` format of ``tokenizer``: its chat template rendered for one user message
    (``[{"role": "user", "content": MARK}]``, ``add_generation_prompt=True``) and split at MARK:
    ``question_start`` is what comes before the question (a system prompt the template adds by
    default, the user header), ``question_end`` what follows it (end of turn, the assistant
    header), no answer tag; the answer ends with the tokenizer's EOS (SmolLM2: ``<|im_end|>``).

    Every special token of the tokenizer found in those pieces must tokenise as that one token
    (a fast tokenizer parses its added tokens out of text), else the model would be shown its
    turn markers spelt out. Errors are ModelLoadError naming ``source`` and ``flag``: no chat
    template, a template that fails or drops the question, no EOS token, a split marker."""
    where = f"{flag} {CHAT}: " if flag else f"answer format {CHAT!r}: "
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(f"{where}the tokenizer of {source} has no chat template; choose another answer format "
                             f"({', '.join(n for n in FORMAT_NAMES if n != CHAT)} or a template)",
                             file=source, field=flag)
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": _MARK}], add_generation_prompt=True,
                                             tokenize=False)
    except Exception as e:  # noqa: BLE001 - a template is user code (Jinja); any failure is its own
        raise ModelLoadError(f"{where}the chat template of {source} cannot be rendered ({type(e).__name__}: {e})",
                             file=source, field=flag) from None
    if not isinstance(text, str) or text.count(_MARK) != 1:
        raise ModelLoadError(f"{where}the chat template of {source} does not show the user's message once",
                             file=source, field=flag)
    if tokenizer.eos_token_id is None:
        raise ModelLoadError(f"{where}the tokenizer of {source} has no EOS token to end an answer with",
                             file=source, field=flag)
    start, end = text.split(_MARK)
    specials = {t: tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens
                + [str(t) for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)]}
    for piece in (start, end):
        ids = tokenizer(piece, add_special_tokens=False)["input_ids"]
        for tok, tid in specials.items():
            if tok and tok in piece and tid not in ids:
                raise ModelLoadError(f"{where}the tokenizer of {source} splits its special token {tok!r} of the "
                                     "chat template into pieces", file=source, field=flag)
    return PromptFormat(name=CHAT, question_start=start, question_end=end, answer_tag="")
