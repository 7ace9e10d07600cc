"""The loss maths of the unlearning methods, as plain functions over logits and labels.

Every loss here is *answer-only*: ``labels`` holds ``-100`` on the prompt tokens (and on padding),
so only the answer tokens of a question/answer pair count, as in the paper's finetuning and
unlearning (docs/data.md). Logits are shifted the usual causal-LM way: the logits at
position ``t`` predict the label at position ``t + 1``.

Examples
--------
A two-token answer after a three-token prompt; the model is uniform over 4 tokens, so the answer's
log-likelihood is ``2 * log(1/4)`` whatever the prompt:

>>> import math, torch
>>> logits = torch.zeros(1, 5, 4)
>>> labels = torch.tensor([[-100, -100, -100, 2, 3]])
>>> logp, n = sequence_logprob(logits, labels)
>>> round(float(logp[0]), 6) == round(2 * math.log(0.25), 6), int(n[0])
(True, 2)
>>> round(float(nll_loss(logits, labels)), 6) == round(-math.log(0.25), 6)
True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def sequence_logprob(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of the log-probabilities of the labelled (answer) tokens, per sequence.

    ``logits``: ``[B, T, V]``; ``labels``: ``[B, T]`` with ``-100`` where a token does not count.
    Returns ``(logp [B], n_tokens [B])``: ``logp[b] = sum_t log p(labels[b, t+1] | tokens[b, :t+1])``
    over the answer tokens, computed in float32 at least.
    """
    shift_logits = logits[:, :-1, :]
    shift_labels = labels[:, 1:]
    mask = shift_labels != IGNORE_INDEX
    logprobs = F.log_softmax(shift_logits.float(), dim=-1)
    picked = logprobs.gather(-1, shift_labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    picked = picked.masked_fill(~mask, 0.0)
    return picked.sum(-1), mask.sum(-1)


def nll_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per answer token over the batch (the finetuning loss).

    Equal to Hugging Face's causal-LM ``loss`` when the labels mask the prompt.
    """
    logp, n = sequence_logprob(logits, labels)
    return -logp.sum() / n.sum().clamp(min=1)


def gradient_ascent_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Gradient ascent (Jang et al., 2022): the finetuning loss negated, so that minimising it
    *raises* the answer's negative log-likelihood."""
    return -nll_loss(logits, labels)


def npo_loss(logp: torch.Tensor, ref_logp: torch.Tensor, beta: float = 0.1) -> torch.Tensor:
    """Negative preference optimisation (Zhang et al., 2024), mean over the batch.

    ``L = -(2/β) log σ(-β (log p_θ(a|q) - log p_ref(a|q)))`` with ``log p`` the summed answer-token
    log-likelihood (:func:`sequence_logprob`) of the current model and ``ref_logp`` that of the
    original model, computed once before unlearning.

    The sign inside σ is NPO's: the loss falls as ``p_θ`` drops below ``p_ref``, so minimising it
    unlearns. (The EDU-RELAT paper prints ``-(2/β) log σ(β log(L_θ/L_orig))``: the outer minus is
    there, the one inside σ is missing, so read literally it would *reinforce* the target. Its code
    gets the inner sign right, ``-(2/β) logsigmoid(β (ref - θ))``, but applies it to the raw logits
    of every position rather than to the answer's log-likelihood. This is the NPO paper's definition, as in open-unlearning's ``compute_dpo_loss``
    with no preferred answer.) At the start (``p_θ = p_ref``) the gradient equals that of
    ``log p_θ``: NPO starts as gradient ascent on the summed log-likelihood and slows down as the
    target's likelihood falls.

    The target's log-likelihood fell from -1 to -3: ``-(2/0.1) log σ(-0.1 (-3 + 1)) = -20 log σ(0.2)``.

    >>> import math, torch
    >>> round(float(npo_loss(torch.tensor([-3.0]), torch.tensor([-1.0]), beta=0.1)), 5)
    11.96278
    """
    log_ratio = logp - ref_logp
    return (-(2.0 / beta) * F.logsigmoid(-beta * log_ratio)).mean()


def simnpo_loss(logp: torch.Tensor, n_tokens: torch.Tensor, beta: float = 4.5, gamma: float = 0.0) -> torch.Tensor:
    """SimNPO (Fan et al., 2024, "Simplicity Prevails"), mean over the batch:
    ``L = -(2/β) log σ(-(β/|a|) log p_θ(a|q) - γ)``, reference-free and length-normalised
    (``log p / |a|`` is the mean answer-token log-likelihood). ``γ`` is the paper's reward margin;
    open-unlearning writes the same loss as ``-(2/β) logsigmoid(β (NLL/|a| - δ))``, i.e. ``γ = β δ``.

    Mean token log-likelihood -0.5, β = 4.5, γ = 0: ``-(2/4.5) log σ(2.25)``.

    >>> import math, torch
    >>> got = float(simnpo_loss(torch.tensor([-1.0]), torch.tensor([2]), beta=4.5))
    >>> round(got, 6) == round(-(2 / 4.5) * math.log(1 / (1 + math.exp(-2.25))), 6)
    True
    """
    mean_logp = logp / n_tokens.clamp(min=1).to(logp.dtype)
    return (-(2.0 / beta) * F.logsigmoid(-beta * mean_logp - gamma)).mean()


def masked_mse(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of hidden states ``a`` and ``b`` (``[B, T, D]``) over the positions
    where ``mask`` (``[B, T]``) is true: mean over the D features and the masked positions (RMU's
    forget and retain terms).

    >>> import torch
    >>> a = torch.zeros(1, 2, 2); b = torch.tensor([[[1.0, 3.0], [9.0, 9.0]]])
    >>> float(masked_mse(a, b, torch.tensor([[True, False]])))  # (1 + 9) / 2
    5.0
    """
    sq = (a.float() - b.float()).pow(2).mean(-1)
    m = mask.to(sq.dtype)
    return (sq * m).sum() / m.sum().clamp(min=1)
