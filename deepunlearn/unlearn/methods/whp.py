"""Who's Harry Potter (Eldan & Russinovich, 2023), as the EDU-RELAT paper applies it: the next-token
distribution ``p_orig - alpha * max(p_reinf - p_orig, 0)`` (paper eq. 3, ``space="prob"``, the
default, with the grid of the Table-3 notebook: alpha in {10, 1e3, 1e5, 1e7, 1e8}).

The public repository's current ``whp.py`` (from MUSE) mixes logits instead,
``logits_orig - alpha * relu(logits_reinf - logits_orig)`` with alpha in {0.5, 1, 5, 10, 100, 1000}
(``config/model_config.yaml``): ``space="logit"``. The code that produced the paper's numbers
decoded the two models separately and is not public, so neither space is "the reference's" for
certain; README's protocol table says so.

Full mode keeps two models while a target is probed: the reinforced copy and the original
(restored from the snapshot). LoRA mode keeps ONE: the reinforcement trains the LoRA adapter, so
the reinforced model is the model with the adapter on and the original the same model with it
off; :class:`WHPForward` gets two logits functions that switch the adapter around each forward.
No second copy of the weights and no full AdamW state, so WHP runs on a 7-8B model on one 80 GB
GPU.
"""

from __future__ import annotations

import copy
import gc
from typing import Callable, Iterator, Sequence

import torch

from .base import Session, Step
from .params.reinforced import WHPParams
from .reinforced import ReinforcedUnlearner


#: the repository's current grid for ``space="logit"`` (config/model_config.yaml ``whp_alpha_list``)
LOGIT_GRID = [0.5, 1.0, 5.0, 10.0, 100.0, 1000.0]


def whp_distribution(p_orig: torch.Tensor, p_reinf: torch.Tensor, alpha: float) -> torch.Tensor:
    """``p_orig - alpha * max(p_reinf - p_orig, 0)``, clamped at 0 and renormalised over the last axis.

    Computed in float64: with ``alpha`` up to 1e8, float32 rounding noise in ``p_reinf - p_orig``
    (about 1e-8) would otherwise wipe out tokens the two models agree on. A token the reinforced
    model does not prefer keeps its original probability, so the mass left is positive; where it
    underflows to 0 the original distribution is returned for that position.

    >>> import torch
    >>> p = whp_distribution(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.7, 0.2, 0.1]), alpha=1.0)
    >>> [round(x, 6) for x in p.tolist()]  # [0.5 - 0.2, 0.3, 0.2] / 0.8
    [0.375, 0.375, 0.25]
    """
    po = p_orig.double()
    pr = p_reinf.double()
    p = (po - alpha * torch.clamp(pr - po, min=0.0)).clamp(min=0.0)
    total = p.sum(-1, keepdim=True)
    return torch.where(total > 0, p / total.clamp(min=torch.finfo(torch.float64).tiny), po)


def whp_logprobs(orig_logits: torch.Tensor, reinf_logits: torch.Tensor, alpha: float,
                 space: str = "prob") -> torch.Tensor:
    """Log of :func:`whp_distribution` of the two models' softmaxes, float32, usable as logits
    (``-inf`` where a token got probability 0); ``space="logit"``: the log-softmax of
    ``orig - alpha * relu(reinf - orig)`` on the logits (the repository's current ``whp.py``).

    >>> import torch
    >>> lo, lr = torch.tensor([[2.0, 0.0]]), torch.tensor([[3.0, 0.0]])
    >>> torch.allclose(whp_logprobs(lo, lr, 1.0, "logit"), torch.log_softmax(torch.tensor([[1.0, 0.0]]), -1))
    True
    """
    if space == "logit":
        lo = orig_logits.float()
        return torch.log_softmax(lo - alpha * torch.relu(reinf_logits.float() - lo), -1)
    if space != "prob":
        raise ValueError(f"WHP space must be 'prob' or 'logit', got {space!r}")
    p = whp_distribution(torch.softmax(orig_logits.double(), -1), torch.softmax(reinf_logits.double(), -1), alpha)
    return torch.log(p).float()


class WHPForward:
    """``model_fn`` for the probe: both models' forward passes mixed by :func:`whp_logprobs`.

    ``original`` and ``reinforced`` are models or logits functions ``fn(input_ids,
    attention_mask, keep=None) -> logits`` (LoRA mode: the one model with its adapter switched off
    and on). A model's forward goes through the probe layer's :func:`~deepunlearn.probe.logits_fn`,
    which passes position ids that count real tokens, so left-padded probe batches give each row
    the logits it would get alone (as the probe's own forward does)."""

    def __init__(self, original: torch.nn.Module | Callable, reinforced: torch.nn.Module | Callable, alpha: float,
                 space: str = "prob"):
        from ...probe import logits_fn

        self.alpha, self.space = alpha, space
        as_fn = lambda m: logits_fn(m) if isinstance(m, torch.nn.Module) else m  # noqa: E731
        self._original, self._reinforced = as_fn(original), as_fn(reinforced)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """Log-probabilities ``[B, T, V]`` (the last ``keep`` positions when given)."""
        with torch.no_grad():
            lo = self._original(input_ids, attention_mask, keep=keep)
            lr = self._reinforced(input_ids, attention_mask, keep=keep)
        return whp_logprobs(lo, lr, self.alpha, self.space)


class WhoIsHarryPotter(ReinforcedUnlearner):
    name = "whp"
    Params = WHPParams

    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        alphas = self.begin(session, grid)
        if session.lora is not None:
            from ...probe import logits_fn

            # one model: the adapter on is the reinforced model, off the original
            reinforced = logits_fn(session.model)
            original = session.lora.without(reinforced)
            for alpha in alphas:
                yield Step(alpha, model_fn=WHPForward(original, reinforced, alpha, self.params.space))
            return
        # Two models' worth of weights only while probing this target: copy the reinforced model
        # (its optimizer state is gone by now), give the session's model its original weights back.
        reinforced = copy.deepcopy(session.model).eval().requires_grad_(False)
        session.restore()
        try:
            for alpha in alphas:
                yield Step(alpha, model_fn=WHPForward(session.model, reinforced, alpha, self.params.space))
        finally:
            del reinforced
            gc.collect()
