"""unlearn layer: finetuning, the unlearning methods of the catalogue (:mod:`.methods.catalog`:
the paper's ga, npo, tv, whp; graddiff, npo_gdr, idk, simnpo, rmu; the rule-aware du_oracle and
du_loop), in-memory weight snapshot/restore and LoRA mode, and the per-target loop.

Public API (torch is imported on first use, not by ``import deepunlearn.unlearn``)::

    TargetRunner(bundle, kb, *, rules=None, protocol=None, probing=ProbeOptions(...),
                 minimal_sets=SetOptions(...), training=TrainOptions(...), measures=MeasureOptions(...),
                 checks=CheckOptions(...), seed=0, progress=True)
        .baseline, .known, .run(target, method, grid=None, skip_params=(), params=None) -> Iterator[Point]
    METHODS, register_method, get_method, Unlearner, MethodParams   # method classes, loaded from the catalogue
    WeightSnapshot, LoraAdapter, LoraParams                         # undoing a run in memory
    choose_lr                                                       # the learning-rate rule
    finetune, FinetuneConfig                                        # teach a model the KB
    AttackParams, relearn_attack, quantize_attack, relearn_sample, quantized  # attacks after unlearning
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "TargetRunner": "loop", "Point": "loop", "TargetNotKnownError": "loop",
    "ProbeOptions": "runner_options", "SetOptions": "runner_options", "TrainOptions": "runner_options",
    "MeasureOptions": "runner_options", "CheckOptions": "runner_options",
    "METHODS": "methods", "register_method": "methods", "get_method": "methods", "Unlearner": "methods",
    "MethodParams": "methods", "UnlearnError": "methods", "Session": "methods", "Step": "methods",
    "WeightSnapshot": "snapshot", "LoraAdapter": "snapshot", "LoraParams": "snapshot",
    "choose_lr": "lr", "LearningRate": "lr",
    "finetune": "finetune", "FinetuneConfig": "finetune", "FinetuneResult": "finetune",
    "AttackParams": "attacks", "relearn_attack": "attacks", "quantize_attack": "attacks",
    "relearn_sample": "attacks", "quantized": "attacks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
