"""IDK: "I don't know" preference optimisation as TOFU's code does it (Maini et al., 2024, TOFU:
A Task of Fictitious Unlearning for LLMs; the ``idk`` loss of its ``forget.py``): the answer of
every forget question is replaced by a refusal ("I don't know.", ...) and the model is finetuned
on those pairs, plus the finetuning loss on the retain set:
``L = NLL(q_forget, refusal) + λ · NLL(retain)`` with λ = 1 as TOFU (``idk_loss + retain_loss``).

TOFU draws one refusal at random from its ``idontknow.jsonl`` (100 lines) for every forget example
of a batch; here one is drawn per forget fact per optimiser step from :data:`REFUSALS`, seeded by
(``seed``, step, fact id), so a trajectory is reproducible and a run stopped at step s saw the
same refusals as a longer one. On the tiny word-level model most refusal words are ``<unk>``:
the method then teaches the forget questions to answer ``<unk> ... </s>``, still never the true
answer.
"""

from __future__ import annotations

import random

from ..losses import nll_loss
from .base import GradientUnlearner, Session, UnlearnError
from .params.gradient import IDKParams

#: Refusals in the style of TOFU's ``idontknow.jsonl`` (written for this project).
REFUSALS: tuple[str, ...] = (
    "I don't know.",
    "I'm not sure.",
    "I have no idea.",
    "I can't say.",
    "I don't have that information.",
    "I'm not able to answer that.",
    "That is not something I know.",
    "I couldn't tell you.",
    "I have no information about that.",
    "I'm afraid I don't know.",
    "Sorry, I can't help with that question.",
    "I don't remember.",
)


def refusal_for(fact: int, step: int, seed: int = 0, refusals: tuple[str, ...] = REFUSALS) -> str:
    """The refusal that replaces fact ``fact``'s answer at optimiser step ``step``.

    >>> refusal_for(3, 1) == refusal_for(3, 1) and refusal_for(3, 1) in REFUSALS
    True
    >>> len({refusal_for(3, s) for s in range(1, 40)}) > 1  # a fresh draw per step
    True
    """
    return random.Random(f"idk:{int(seed)}:{int(step)}:{int(fact)}").choice(refusals)


class IDK(GradientUnlearner):
    """Finetune the forget questions on refusals (:data:`REFUSALS`) plus retain NLL."""

    name = "idk"
    Params = IDKParams
    default_retain = "nll"

    def pairs(self, session: Session) -> list[tuple[str, str]]:
        """This step's (forget question, refusal) pairs, one per fact of the forget set."""
        if session.qa is None:
            raise UnlearnError("idk needs the forget set's questions (a session with qa)")
        ids = session.forget_ids
        questions = [q for q, _ in session.qa(ids)]
        return [(q, refusal_for(i, session.step, self.params.seed)) for q, i in zip(questions, ids)]

    def refusal_batch(self, session: Session) -> dict:
        if session.encode_pairs is None:
            raise UnlearnError("idk needs a session that encodes (question, answer) pairs")
        return session.encode_pairs(self.pairs(session))

    def loss(self, session: Session):
        batch = self.refusal_batch(session)
        return nll_loss(session.logits_of(batch), batch["labels"])
