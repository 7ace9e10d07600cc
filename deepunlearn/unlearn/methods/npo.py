"""Negative preference optimisation (Zhang et al., 2024) with the target as the only
dispreferred answer and no preferred one."""

from __future__ import annotations

import torch

from ..losses import npo_loss, sequence_logprob
from .base import GradientUnlearner, Session
from .params.gradient import NPOParams


class NPO(GradientUnlearner):
    """``L = -(2/β) log σ(-β (log p_θ(a|q) - log p_ref(a|q)))`` (:func:`~deepunlearn.unlearn.losses.npo_loss`).

    ``log p_ref`` is the original model's log-likelihood of the fixed target, computed once before
    the trajectory: no second model is kept in memory."""

    name = "npo"
    Params = NPOParams

    #: the original model's log-likelihood of the forget rows, and of each row by its key (set by prepare)
    ref_logp: torch.Tensor | None = None
    ref_by_id: dict | None = None

    def prepare(self, session: Session) -> None:
        """The original model's log-likelihood of every forget row, kept per row key (fact, form)
        so that a method changing its forget set mid-run (``du_loop``) finds each row's reference."""
        with torch.no_grad():
            self.ref_logp, _ = sequence_logprob(session.logits(), session.batch["labels"])
        self.ref_by_id = dict(zip(session.rows(), self.ref_logp))

    def reference(self, session: Session) -> torch.Tensor:
        keys, by_id = session.rows(), self.ref_by_id or {}
        if keys and len(keys) == session.batch["input_ids"].shape[0] and all(k in by_id for k in keys):
            return torch.stack([by_id[k] for k in keys])
        return self.ref_logp

    def loss(self, session: Session):
        logp, _ = sequence_logprob(session.logits(), session.batch["labels"])
        return npo_loss(logp, self.reference(session), self.params.beta)
