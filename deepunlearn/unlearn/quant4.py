"""4-bit round-to-nearest fake quantisation in plain torch, for the quantisation attack.

A quantisation attack needs the *quantisation error*, not 4-bit speed: unlearning by small weight
changes can fall below a 4-bit step and vanish. So each Linear (or GPT-2 ``Conv1D``) weight is
quantised and dequantised straight back to the model's dtype, on the module's own device:

* ``int4``: group-wise symmetric absmax. Each group of :data:`GROUP` consecutive weights of a row
  (along the input features) gets the scale ``s = absmax / 7``; a weight becomes
  ``clamp(round(w / s), -8, 7) * s`` (round half to even).
* ``nf4``: the NormalFloat-4 codebook of QLoRA (:data:`NF4`, the 16 values bitsandbytes uses),
  group-wise absmax: a weight becomes ``NF4[nearest code to w / absmax] * absmax``.

A row whose length is not a multiple of :data:`GROUP` is padded with zeros for the grouping (zeros
change no absmax). The quantised module is a new ``nn.Linear`` (the weight of a ``Conv1D``
transposed); the original module is never written to, so swapping it back restores the model
bit for bit. Biases stay in float, as in bitsandbytes and GPTQ.

Why not a library: on this CPU, bitsandbytes 0.50.2's 4-bit forward fails when a layer's output
size is not a multiple of its kernel block (a 237-token vocabulary's lm_head), optimum-quanto
0.2.7's qint4 Linear cannot run under ``torch.inference_mode`` (the probe's), and hqq 0.2.8 has
affine int4 but no NF4, brings transformers/accelerate-pinned dependencies and took about 40x
longer to quantise the fixture model. The plain-torch version needs nothing new, runs wherever the
model runs and gives the weights bitsandbytes' NF4 gives (same codebook and absmax blocks; on the
fixture model 2,157,823 of its 2,157,824 Linear weights are identical, the odd one a tie between
two codes).

Measured on the fixture model (tests/conftest.py: 181 facts, 172 known): quantising every Linear
takes 0.05 s (int4) / 0.8 s (nf4) and the quantised model still knows all 172. After GA on 6
targets (grid 1 to 16 steps, 30 points, 318 facts forgotten in all), int8 brought 5 forgotten facts
back, int4 5 and nf4 21; no target came back. On SmolLM2-135M quantising takes 1.5 s (int4) and
about 10-30 s (nf4, the 49152 x 576 lm_head alone 3 s) against 2 s for int8.
"""

from __future__ import annotations

import torch

#: weights per absmax group (bitsandbytes' NF4 block size)
GROUP = 64
#: the NF4 codebook (QLoRA; bitsandbytes' values), sorted
NF4 = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0)
#: the 4-bit kinds of :func:`fake_quantize`
KINDS_4BIT = ("int4", "nf4")


def fake_quantize(w: torch.Tensor, how: str, group: int = GROUP) -> torch.Tensor:
    """``w`` (2-D, rows = output features) quantised to 4 bits group-wise along its rows and
    dequantised back: a new tensor of ``w``'s dtype and device (computed in float32).

    >>> w = torch.tensor([[0.7, -0.35, 0.1, 0.0]])
    >>> fake_quantize(w, "int4", group=4)
    tensor([[ 0.7000, -0.4000,  0.1000,  0.0000]])
    >>> fake_quantize(w, "nf4", group=4)
    tensor([[ 0.7000, -0.3676,  0.1127,  0.0000]])
    """
    if how not in KINDS_4BIT:
        raise ValueError(f"4-bit quantisation is one of {', '.join(KINDS_4BIT)}, got {how!r}")
    rows, cols = w.shape
    x = w.detach().float()
    pad = (-cols) % group
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    x = x.reshape(rows, -1, group)
    absmax = x.abs().amax(-1, keepdim=True)
    safe = torch.where(absmax > 0, absmax, torch.ones_like(absmax))
    if how == "int4":
        scale = safe / 7
        q = torch.clamp(torch.round(x / scale), -8, 7) * scale
    else:
        code = torch.tensor(NF4, dtype=torch.float32, device=x.device)
        idx = torch.bucketize(x / safe, (code[1:] + code[:-1]) / 2)  # nearest code, O(n) memory
        q = code[idx] * safe
    q = torch.where(absmax > 0, q, torch.zeros_like(q))
    return q.reshape(rows, -1)[:, :cols].to(dtype=w.dtype).contiguous()


def fake_linear(mod, how: str, group: int = GROUP) -> torch.nn.Linear:
    """A new ``nn.Linear`` (``mod``'s device and dtype, no gradients) whose weight is ``mod``'s
    4-bit fake-quantised (a ``Conv1D``'s transposed weight); ``mod`` itself is left untouched."""
    conv = not isinstance(mod, torch.nn.Linear)
    w = mod.weight.detach()
    w = w.t() if conv else w
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=mod.bias is not None, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        lin.weight.copy_(fake_quantize(w, how, group))
        if mod.bias is not None:
            lin.bias.copy_(mod.bias.detach())
    lin.requires_grad_(False)
    return lin
