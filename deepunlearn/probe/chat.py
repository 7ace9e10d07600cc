"""The ``chat`` answer format: an instruct model's own prompt, taken from its tokenizer's chat
template.

``--answer-format chat`` (finetune, probe, unlearn; ``PromptFormat.named("chat")``) is
:attr:`~deepunlearn.probe.prompts.PromptFormat.pending` until a tokenizer is known;
:func:`~deepunlearn.probe.models.load_model` then calls :func:`chat_format`, which gives it
concrete pieces (name still ``chat``), and a finetuned checkpoint records those pieces. The
default for a model not finetuned here stays its family's (the reference's) format.
"""

from __future__ import annotations

from pathlib import Path

from .chat_render import RenderBound, RenderFailed, bounds_text, render
from .prompts import CHAT, FORMAT_NAMES, PromptFormat
from .sources import ModelLoadError

#: Where a folder's chat template is read from, in transformers' order; else tokenizer_config.json.
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
#: What a render ran past, in words.
_BOUND_WORDS = {"time": "it ran past the time", "memory": "it needed more memory", "size": "its text is longer"}

#: Stands for the question while a chat template is rendered (no template holds it).
_MARK = "\u2063DEEPUNLEARN-QUESTION\u2063"


def template_file(folder: Path | None, source: str) -> str:
    """The file a folder's chat template comes from (``source`` for a hub model or a GGUF file)."""
    if folder is None:
        return source
    for name in TEMPLATE_FILES:
        if (folder / name).is_file():
            return str(folder / name)
    return str(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else str(folder)


def chat_format(tokenizer, *, source: str = "the tokenizer", flag: str | None = None,
                template: str | None = None) -> PromptFormat:
    """The ``chat`` format of ``tokenizer``: its chat template rendered for one user message
    (``[{"role": "user", "content": MARK}]``, ``add_generation_prompt=True``) and split at MARK:
    ``question_start`` is what comes before the question (a system prompt the template adds by
    default, the user header), ``question_end`` what follows it (end of turn, the assistant
    header), no answer tag; the answer ends with the tokenizer's EOS (SmolLM2: ``<|im_end|>``).

    Every special token of the tokenizer found in those pieces must tokenise as that one token
    (a fast tokenizer parses its added tokens out of text), else the model would be shown its
    turn markers spelt out. Errors are ModelLoadError naming ``source`` and ``flag``: no chat
    template, a template that fails or drops the question, no EOS token, a split marker. The
    template renders under the bounds of :mod:`.chat_render`; one over them is refused naming
    ``template`` (the file it came from, :func:`template_file`; default ``source``)."""
    where = f"{flag} {CHAT}: " if flag else f"answer format {CHAT!r}: "
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(f"{where}the tokenizer of {source} has no chat template; choose another answer format "
                             f"({', '.join(n for n in FORMAT_NAMES if n != CHAT)} or a template)",
                             file=source, field=flag)
    tfile = template or source
    try:
        text = render(tokenizer, [{"role": "user", "content": _MARK}], add_generation_prompt=True)
    except RenderBound as e:
        raise ModelLoadError(f"{where}the chat template in {tfile} exceeds the bound of a render ({bounds_text()}: "
                             f"{_BOUND_WORDS.get(e.what, e.what)}); refused", file=tfile, field="chat_template") from None
    except RenderFailed as e:  # a template is user code (Jinja); any failure is its own
        raise ModelLoadError(f"{where}the chat template in {tfile} cannot be rendered ({e.kind}: {e.message})",
                             file=tfile, field="chat_template") from None
    if not isinstance(text, str) or text.count(_MARK) != 1:
        raise ModelLoadError(f"{where}the chat template in {tfile} does not show the user's message once",
                             file=tfile, field="chat_template")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ModelLoadError(f"{where}the chat template in {tfile} writes a lone surrogate (\\ud800-\\udfff), not "
                             "a Unicode character", file=tfile, field="chat_template") from None
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
