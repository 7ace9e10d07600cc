"""``deepunlearn-hf``: lm-eval's Hugging Face model with deepunlearn's context/continuation cut.

lm-eval's ``hf`` model (``TemplateLM._encode_pair``) moves whitespace that ends the context
into the continuation before it tokenises, so with the answer formats whose question part ends
in a newline (``llama``, ``phi``, ``bare``) it scores ``"\\nAnswer:x"`` where deepunlearn's
exact probe scores ``"Answer:x"`` after a teacher-forced newline: its ``acc`` then also asks the
model to predict the newline, which finetuning never taught it (the loss skips the question
part), and a model that knows every fact can score 0. This model keeps the context as it is:
the full text is tokenised with the tokenizer's special tokens (BOS where it adds one) and cut
after as many tokens as the context has on its own, as
:func:`deepunlearn.probe.prompts.encode_pairs` does; everything else is lm-eval's ``hf``.

Use it through lm-eval's own command line, with this module registering the model first::

    python -m deepunlearn.probe.lmeval_model --model deepunlearn-hf --model_args pretrained=DIR \\
        --include_path TASKS --tasks deepunlearn --log_samples --output_path OUT

or in Python: ``import deepunlearn.probe.lmeval_model`` and then
``lm_eval.simple_evaluate(model="deepunlearn-hf", ...)``. For formats whose question part ends
in no whitespace (``gpt2``: ``"...\\n Answer:"``) the plain ``hf`` model already agrees.
Needs the ``lmeval`` extra (``pip install 'deepunlearn[lmeval]'``).
"""

from __future__ import annotations

from pathlib import Path

try:
    from lm_eval.api.registry import register_model
    from lm_eval.models.huggingface import HFLM
except ModuleNotFoundError as e:  # run as a command without the extra: one line, not a traceback
    if __name__ == "__main__" and (e.name or "").split(".")[0] == "lm_eval":
        raise SystemExit("python -m deepunlearn.probe.lmeval_model: lm-eval is not installed "
                         "(pip install 'deepunlearn[lmeval]')") from None
    raise

MODEL_NAME = "deepunlearn-hf"


#: HFLM's arguments that name a folder transformers or peft reads.
FOLDER_ARGS = ("pretrained", "tokenizer", "peft", "delta")


@register_model(MODEL_NAME)
class DeepunlearnHFLM(HFLM):
    """:class:`HFLM` whose loglikelihood requests are cut as deepunlearn's exact probe cuts them.

    Its folders (``pretrained``, ``tokenizer``, ``peft``, ``delta``) go through deepunlearn's
    guarded loader first (:func:`~deepunlearn.probe.hf_load.check_code_files`: an ``auto_map``
    is refused unless ``trust_remote_code=True``), and a chat template renders under the bounds
    of :mod:`deepunlearn.probe.chat_render`."""

    def __init__(self, pretrained="gpt2", **kwargs) -> None:
        from .hf_load import check_code_files, local_folder

        trust = bool(kwargs.get("trust_remote_code", False))
        for arg, value in (("pretrained", pretrained), *((a, kwargs.get(a)) for a in FOLDER_ARGS[1:])):
            folder = local_folder(value) if isinstance(value, (str, Path)) else None
            if folder is not None:
                check_code_files(folder, trust_remote_code=trust)
        kwargs["trust_remote_code"] = trust  # explicit: transformers never asks
        super().__init__(pretrained=pretrained, **kwargs)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        from .chat_render import RenderBound, RenderFailed, bounds_text, render
        from .sources import ModelLoadError

        source = str(getattr(self.tokenizer, "name_or_path", "") or "the tokenizer")
        args = dict(add_generation_prompt=add_generation_prompt, continue_final_message=not add_generation_prompt,
                    **(self.chat_template_args or {}))
        try:
            try:
                return render(self.tokenizer, chat_history, **args)
            except RenderFailed:  # as lm-eval's hf model: once more without the system turn
                return render(self.tokenizer, [m for m in chat_history if m.get("role") != "system"], **args)
        except RenderBound as e:
            raise ModelLoadError(f"the chat template of {source} exceeds the bound of a render ({bounds_text()}: "
                                 f"{e.what}); refused", file=source, field="chat_template") from None
        except RenderFailed as e:
            raise ModelLoadError(f"the chat template of {source} cannot be rendered ({e})", file=source,
                                 field="chat_template") from None

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        if self.backend != "causal":
            return super()._encode_pair(context, continuation)
        whole = self.tok_encode(context + continuation)
        ctx = self.tok_encode(context)
        return ctx, whole[len(ctx):]


def main() -> None:
    """lm-eval's command line with ``deepunlearn-hf`` registered; a refused or broken input
    (deepunlearn's own error) is one line on stderr and exit status 1."""
    import sys

    from lm_eval.__main__ import cli_evaluate

    from ..errors import UserError

    try:
        cli_evaluate()
    except UserError as e:
        print(f"python -m deepunlearn.probe.lmeval_model: error: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
