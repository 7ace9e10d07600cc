"""Protocols: every choice of the evaluation protocol in one place, with three presets.

``reference`` reproduces the paper's public code (wrh14/deep_unlearning: ``forget.py``,
``unlearn_trainer.py``, ``finetune_reinforced_model.py``, ``config/model_config.yaml``,
``data_module.py``, ``vllm_eval.py`` and the figure notebook that computed Table 3).
``default`` keeps the reference wherever nothing is gained by leaving it and departs from it
where the reference is wrong or wasteful. ``pretrained`` evaluates what a model learned in
pretraining (no finetuning: K is what the model answers in its own chat template, answers in
sentences count by whole words; :mod:`deepunlearn.probe.pretrained`). README's protocol table lists each choice, both values
and why. A protocol is plain data: the probe, unlearn, rules and bench layers each read the fields
they own (this module lives in the probe layer, the leftmost one that every user of a protocol
may import).

>>> get_protocol("reference").probe_mode, get_protocol("default").probe_mode
('generate', 'exact')
>>> get_protocol("reference").warmup_steps, get_protocol("default").warmup_steps
(1, 0)
>>> get_protocol("default", probe_mode="generate").probe_mode
'generate'
>>> get_protocol("paper")
Traceback (most recent call last):
...
ValueError: unknown protocol 'paper'; expected one of: default, reference, pretrained
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .modes import PROTOCOL_MODES

PROTOCOL_NAMES = ("default", "reference", "pretrained")


class Protocol(BaseModel):
    """The protocol choices a run makes (see README's protocol table)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"

    # ---------------------------------------------------------------- probing (probe layer)
    probe_mode: Literal[PROTOCOL_MODES] = Field(  # type: ignore[valid-type]
        "exact", description="exact: the teacher-forced greedy continuation is the gold answer; "
        "generate: the reference's rule (greedy, 10 new tokens, answer.lower() in output.lower())")
    answer_format: Literal["recorded", "family", "chat"] = Field(
        "recorded", description="recorded: the format in the checkpoint's deepunlearn.json, else the model "
        "family's; family: always the reference's format of the model family (llama, phi, gpt2); chat: the "
        "tokenizer's chat template where it has one, else as recorded")
    answer_match: Literal["substring", "words"] = Field(
        "substring", description="generate mode: substring (the reference's answer.lower() in output.lower()) "
        "or words (the answer as whole words: an echo of 'Nigeria' does not answer 'Niger')")
    new_tokens: int = Field(10, ge=1, le=512, description="generate mode: greedy new tokens (the reference's 10)")

    # ---------------------------------------------------------------- K and the sets (rules layer)
    k_mode: Literal["probed", "dataset"] = Field(
        "probed", description="probed: K = what the model answered before unlearning; dataset: K = the KB")
    sets: Literal["exact", "mdus", "release"] = Field(
        "exact", description="exact: all minimal sets (clingo); mdus: DUS+RP over seeds; release: the "
        "release's stored unlearn_minimal_set/ (MDUS with 100 seeds where a target has none)")
    tie: Literal["accuracy", "first"] = Field(
        "accuracy", description="among sets of equal recall: the one giving the best accuracy, or the first "
        "in the set collection's order (the reference's np.argmax)")

    # ---------------------------------------------------------------- GA / NPO (unlearn layer)
    schedule: Literal["linear", "constant"] = Field(
        "linear", description="lr schedule of ONE trajectory over the grid's largest step count")
    warmup_steps: int = Field(0, ge=0, description="linear warm-up steps (HF: step s < w has lr s/w, so w = 1 "
                              "makes step 1 a zero-lr step)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    max_grad_norm: float | None = Field(None, gt=0, description="gradient clipping (None: none)")

    # ---------------------------------------------------------------- TV / WHP reinforcement
    reinforce_steps: int = Field(10, ge=1)
    reinforce_schedule: Literal["linear", "constant"] = "linear"
    reinforce_warmup_steps: int = Field(0, ge=0)

    # ---------------------------------------------------------------- finetuning
    finetune_early_stop: bool = Field(
        True, description="stop finetuning once target_known of the facts are known (the reference trains "
        "its full 10 epochs, 15 for GPT2-XL)")

    # ---------------------------------------------------------------- per-model grids (bench layer)
    family_grids: bool = Field(
        True, description="GPT-2 models get the reference's GPT2-XL grids (32 GA/NPO steps, TV alpha up to 80)")

    def describe(self) -> dict[str, Any]:
        return self.model_dump()


def _presets() -> dict[str, Protocol]:
    default = Protocol(name="default")
    reference = Protocol(
        name="reference", probe_mode="generate", answer_format="family", k_mode="dataset", sets="release",
        tie="first", schedule="linear", warmup_steps=1, weight_decay=0.01, max_grad_norm=None,
        reinforce_steps=10, reinforce_schedule="linear", reinforce_warmup_steps=1, finetune_early_stop=False,
        family_grids=True,
    )
    # what a model learned in pretraining: no finetuning, K probed in the model's own chat
    # template, answers in sentences (probe/pretrained.py)
    pretrained = Protocol(
        name="pretrained", probe_mode="generate", answer_format="chat", answer_match="words", new_tokens=32,
        k_mode="probed",
    )
    return {"default": default, "reference": reference, "pretrained": pretrained}


def get_protocol(name: str | Protocol | None = None, **overrides: Any) -> Protocol:
    """A preset by name (``None``: ``default``), with ``overrides`` of single fields."""
    if isinstance(name, Protocol):
        base = name
    else:
        key = (name or "default").lower()
        presets = _presets()
        if key not in presets:
            raise ValueError(f"unknown protocol {name!r}; expected one of: {', '.join(PROTOCOL_NAMES)}")
        base = presets[key]
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if not overrides:
        return base
    return Protocol.model_validate({**base.model_dump(), **overrides})
