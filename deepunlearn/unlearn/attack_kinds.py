"""The choices of the attacks after unlearning, named once and without torch, for the attacks
themselves (:mod:`~deepunlearn.unlearn.attacks`), their flags (:mod:`~deepunlearn.unlearn.cli.attack_args`)
and the sweep config (:mod:`deepunlearn.bench.config_probe`).

>>> QUANT_KINDS, RELEARN_ON, ATTACK_AT
(('int8', 'int4', 'nf4'), ('other', 'split', 'split-set'), ('last', 'all'))
"""

from __future__ import annotations

from typing import Literal

#: the quantisation attacks: int8 dynamic quantisation (CPU); int4 / nf4 4-bit round-to-nearest
QUANT_KINDS: tuple[str, ...] = ("int8", "int4", "nf4")
QuantKind = Literal[QUANT_KINDS]  # type: ignore[valid-type]
#: what relearning trains on, each with its one-line description (flags, config and docs use these)
RELEARN_ON_HELP: dict[str, str] = {
    "other": "a seeded sample of K minus the target and its chosen set",
    "split": "a seeded half of the target's chosen set and the target's other forms, re-probing the "
             "held-out half and the target",
    "split-set": "the same seeded half of the chosen set alone, never the target's forms (the facts "
                 "trained on and the facts re-probed are disjoint, as in Deeb & Roger's split)",
}
RELEARN_ON: tuple[str, ...] = tuple(RELEARN_ON_HELP)
RelearnOn = Literal[RELEARN_ON]  # type: ignore[valid-type]
#: the relearning kinds that split the target's chosen set (:mod:`~deepunlearn.unlearn.relearn_pool`)
SPLIT_ON: tuple[str, ...] = ("split", "split-set")


def relearn_on_help() -> str:
    """``"other = ...; split = ...; split-set = ..."``: every kind with its description."""
    return "; ".join(f"{k} = {v}" for k, v in RELEARN_ON_HELP.items())


#: which grid points are attacked: a trajectory's last one, or every one
ATTACK_AT: tuple[str, ...] = ("last", "all")
AttackAt = Literal[ATTACK_AT]  # type: ignore[valid-type]
