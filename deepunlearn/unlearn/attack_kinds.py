"""The choices of the attacks after unlearning, named once and without torch, for the attacks
themselves (:mod:`~deepunlearn.unlearn.attacks`), their flags (:mod:`~deepunlearn.unlearn.cli.attack_args`)
and the sweep config (:mod:`deepunlearn.bench.config_probe`).

>>> QUANT_KINDS, RELEARN_ON, ATTACK_AT
(('int8', 'int4', 'nf4'), ('other', 'split'), ('last', 'all'))
"""

from __future__ import annotations

from typing import Literal

#: the quantisation attacks: int8 dynamic quantisation (CPU); int4 / nf4 4-bit round-to-nearest
QUANT_KINDS: tuple[str, ...] = ("int8", "int4", "nf4")
QuantKind = Literal[QUANT_KINDS]  # type: ignore[valid-type]
#: what relearning trains on: other facts of K, or a split of the target's chosen set and its forms
RELEARN_ON: tuple[str, ...] = ("other", "split")
RelearnOn = Literal[RELEARN_ON]  # type: ignore[valid-type]
#: which grid points are attacked: a trajectory's last one, or every one
ATTACK_AT: tuple[str, ...] = ("last", "all")
AttackAt = Literal[ATTACK_AT]  # type: ignore[valid-type]
