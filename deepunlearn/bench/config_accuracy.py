"""The sweep options ``accuracy`` and ``accuracy_sample``: how each grid point measures accuracy
(and the help texts of the other measures a point can carry: ``scores``, ``holdout``, ``reference``).

In a sweep configuration (top level)::

    accuracy = "sampled"          # auto (default) | full | sampled
    accuracy_sample = 300         # facts sampled outside each target's cone

``full`` probes all of K at every point, as the paper's code does. ``sampled`` probes the
target's derivation cone (its minimal sets included: recall and deep stay exact) and a seeded
sample of the other facts of K stratified by relation group, and reports the accuracy with its
95 % interval (:mod:`deepunlearn.unlearn.sampled`; store columns ``accuracy_low`` /
``accuracy_high``; ``{metric}_low`` / ``_high`` in the summary, :mod:`.intervals`). This departs
from the paper's code, so the ``reference`` protocol always probes all of K. ``auto`` samples when
K holds more than 2,000 facts and the model's protocol is not ``reference``, and probes all of K
otherwise.

A sweep that leaves both at their defaults fingerprints and builds its runners exactly as before
(:func:`accuracy_options` gives ``{}``).
"""

from __future__ import annotations

from typing import Any

ACCURACY_HELP = ("how a grid point measures accuracy: 'full' probes all of K (the paper's code), 'sampled' the "
                 "target's cone plus a stratified sample of accuracy_sample facts (exact recall and deep, accuracy "
                 "with a 95 % interval; differs from the paper's code), 'auto': sampled when K holds more than "
                 "2,000 facts, full otherwise and always under the reference protocol")
SAMPLE_HELP = "facts sampled (stratified by relation group) outside each target's cone when accuracy is sampled"
DEFAULT_SAMPLE = 300
SCORES_HELP = ("store how much remains with every point: answer probability, truth ratio, exposure, ROUGE-L, "
               "Min-K%/PPL/zlib, TOFU/MUSE summaries (costs a scoring pass over K with every answer candidate per "
               "point) and an 'original' baseline row per target")
HOLDOUT_HELP = "holdout KB (deepunlearn data holdout) for the membership measures (Min-K% AUC, PrivLeak); needs scores"
REFERENCE_HELP = ("'retrain': per target a retain model trained without the target's reference set (cached), a "
                  "'retrain' baseline row and the reference-based measures (forget quality, PrivLeak, generalised "
                  "exposure); turns scores on")


def accuracy_options(cfg: Any) -> dict[str, Any]:
    """``TargetRunner`` keyword arguments (and results-key part) of these options; ``{}`` at the defaults."""
    if cfg.accuracy == "auto" and cfg.accuracy_sample == DEFAULT_SAMPLE:
        return {}
    return {"accuracy": cfg.accuracy, "accuracy_sample": cfg.accuracy_sample}


def check_accuracy(cfg: Any) -> None:
    """``accuracy = "sampled"`` with an option that reads all of K is refused (field ``accuracy``)."""
    if cfg.accuracy != "sampled":
        return
    for i, m in enumerate(cfg.models):
        if cfg.protocol_for(m).name == "reference":
            raise cfg.error("accuracy", f"'sampled' departs from the reference protocol of model {m.name!r} "
                            "(models." + str(i) + "), which probes all of K: use accuracy = 'full' or 'auto'")
    need_all = ("scores" if cfg.measured else "adversarial" if cfg.adversarial else
                "attacks" if cfg.attacks is not None else
                "batch or sequential targets" if (cfg.targets.batch or cfg.targets.sequential) else None)
    if need_all:
        raise cfg.error("accuracy", f"'sampled' probes part of K, but {need_all} read all of K: use "
                        "accuracy = 'full' or 'auto'")
