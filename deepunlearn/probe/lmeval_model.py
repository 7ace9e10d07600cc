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

try:
    from lm_eval.api.registry import register_model
    from lm_eval.models.huggingface import HFLM
except ModuleNotFoundError as e:  # run as a command without the extra: one line, not a traceback
    if __name__ == "__main__" and (e.name or "").split(".")[0] == "lm_eval":
        raise SystemExit("python -m deepunlearn.probe.lmeval_model: lm-eval is not installed "
                         "(pip install 'deepunlearn[lmeval]')") from None
    raise

MODEL_NAME = "deepunlearn-hf"


@register_model(MODEL_NAME)
class DeepunlearnHFLM(HFLM):
    """:class:`HFLM` whose loglikelihood requests are cut as deepunlearn's exact probe cuts them."""

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        if self.backend != "causal":
            return super()._encode_pair(context, continuation)
        whole = self.tok_encode(context + continuation)
        ctx = self.tok_encode(context)
        return ctx, whole[len(ctx):]


def main() -> None:
    """lm-eval's command line with ``deepunlearn-hf`` registered."""
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
