"""The attacks on one unlearned model and their result, as ``deepunlearn attack`` and
``deepunlearn evaluate`` run them: :func:`run_attacks` and the text of its result (the flags
that ask for them are :mod:`deepunlearn.unlearn.cli.attack_args`).

:func:`run_attacks` probes the unlearned model on K, relearns (one trajectory, re-probing after
every step count of the grid; :func:`~deepunlearn.unlearn.attacks.relearn_attack` on a seeded
sample of the pool K minus the target minus its chosen minimal set; ``--relearn-on split``: on
half that set and the target's other forms, re-probing the rest; ``split-set``: the half alone,
:mod:`~deepunlearn.unlearn.relearn_pool`),
then quantises
(:func:`~deepunlearn.unlearn.attacks.quantize_attack`). torch's RNG is seeded with ``--seed``
for the attacks (and put back afterwards), so the same model, K and seed give the same known sets
whichever command runs them. The weights are restored exactly after each attack.

Nothing heavy is imported at import time.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

from .attack_kinds import SPLIT_ON

if TYPE_CHECKING:
    from .attacks import AttackParams
    from .runner_options import ProbeOptions

#: the relearning lr when neither --relearn-lr nor the checkpoint gives one (the paper's finetuning lr)
DEFAULT_RELEARN_LR = 2e-5


class KContext(Protocol):
    """What the attacks need of the original model's side: K, the evaluator over K, the chosen
    minimal set of a target, and how K and the sets were made (a TargetRunner or an evaluate Judge)."""

    known: frozenset[int]
    evaluator: Any
    k_mode: str
    sets: str

    def chosen_set(self, target: int) -> list[int]: ...


def relearn_lr(given: float | None, bundle) -> tuple[float, str]:
    """The relearning lr and where it came from: ``given`` (``--relearn-lr``), ``checkpoint`` (the
    finetuning lr recorded in its ``deepunlearn.json``) or ``default``."""
    if given is not None:
        return float(given), "--relearn-lr"
    lr = ((getattr(bundle, "meta", None) or {}).get("training") or {}).get("lr")
    if isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0:
        return float(lr), "checkpoint"
    return DEFAULT_RELEARN_LR, "default"


def encoder(bundle, kb):
    """Fact ids -> their (primary) questions and answers encoded as in finetuning, collated on
    the model's device (as :meth:`TargetRunner.encode`, for the unlearned model)."""
    from .data import collate, encode_qa

    def encode(ids):
        probes = [kb.probe(int(i)) for i in ids]
        batch = collate(encode_qa(bundle.tokenizer, bundle.prompt, [(p.question, p.answer) for p in probes]),
                        bundle.pad_id)
        device = next(bundle.model.parameters()).device
        return {k: v.to(device) for k, v in batch.items()}

    return encode


def run_attacks(params: "AttackParams", bundle, kb, ctx: KContext, target: int, probing: "ProbeOptions", *,
                seed: int = 0, relearn_lr_given: float | None = None, progress: bool = True,
                model_derived: bool = False) -> dict:
    """Probe the unlearned model ``bundle`` on ``ctx.known`` as ``probing`` says (its ``mode``, on
    its ``forms``, in batches of its ``batch_size``; a
    :class:`~deepunlearn.unlearn.runner_options.ProbeOptions` whose mode is given), run the
    attacks of ``params`` (relearning seeded with ``seed``, at
    ``relearn_lr_given`` or the checkpoint's lr, :func:`relearn_lr`) and build the result object.
    ``model_derived``: also ask the target's compose questions at every probe (before, after each
    relearning step count, quantised) and add ``deep_model``, ``deep_model_relearn``,
    ``deep_model_quant`` and their ``model_derived*`` details (:mod:`.derived`)."""
    import torch
    from tqdm.auto import tqdm

    from ..probe import probe
    from ..rules.recall_inputs import deep_after
    from .attacks import quantize_attack, relearn_attack, relearn_sample

    mode, forms, batch_size = probing.mode, probing.forms, probing.batch_size
    ids = sorted(ctx.known)
    extra = {"forms": forms} if forms else {}

    verdicts: list[dict] = []  # model-derived verdicts, one per probe, in the order of the probes
    questions = None
    if model_derived:
        from .derived import compose_questions

        questions = compose_questions(kb, ctx.evaluator.rules, target, graph=ctx.evaluator.graph)

    def known() -> set[int]:
        res = probe(bundle, kb, ids, mode=mode, batch_size=batch_size, progress=False, **extra)
        now = {int(i) for i in res.known_ids()}
        if questions is not None:  # the model as it is at this probe
            from .derived import model_derived as verdict

            verdicts.append(verdict(bundle, kb, target, ctx.evaluator.rules, direct=target in now,
                                    questions=questions, batch_size=batch_size))
        return now

    def score(now: set[int]) -> tuple[float, float]:
        ev = ctx.evaluator.evaluate(target, sorted(ctx.known - now))
        return float(ev.recall), float(ev.accuracy)

    before = known()
    recall, accuracy = score(before)
    chosen = ctx.chosen_set(target)
    lr, lr_from = relearn_lr(relearn_lr_given, bundle)
    split = None
    if params.relearn_on in SPLIT_ON:
        from .relearn_pool import split_plan

        split = split_plan(kb, chosen, target, seed=seed, probe_forms=forms, on=params.relearn_on)
        pool, facts = sorted(set(chosen) - {target}), (split.relearned if params.relearn else [])
    else:
        pool = sorted(ctx.known - {target} - set(chosen))
        facts = relearn_sample(pool, params.relearn_size, seed) if params.relearn else []
    runs = bool(facts) or (split is not None and not split.empty)
    total = (params.relearn[-1] if params.relearn and runs else 0) + (params.quantize is not None)
    bar = tqdm(total=total, desc=f"attack target {target}", unit="step", file=sys.stderr,
               disable=total == 0 or not progress, leave=False)
    devices = sorted({p.device.index or 0 for p in bundle.model.parameters() if p.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices):  # the seed drives dropout in the steps; put back after
            torch.manual_seed(seed)
            if split is not None and params.relearn:
                from .relearn_pool import run_split, split_batch

                relearned = run_split(bundle.model, lambda: split_batch(bundle, kb, split), split, params.relearn,
                                      lr=lr, known=known, on_step=lambda s: bar.update(), before=before)[1]
            else:
                relearned = relearn_attack(bundle.model, encoder(bundle, kb), pool, params.relearn, lr=lr,
                                           size=params.relearn_size, seed=seed, known=known,
                                           on_step=lambda s: bar.update()) if params.relearn else {}
        quant = None
        if params.quantize is not None:
            quant = quantize_attack(bundle.model, known, how=params.quantize)
            bar.update()
    finally:
        bar.close()
    if split is not None:  # a relearned fact counts as it stood before the attack
        from .relearn_pool import as_before, recovered, returned

        recovery = {str(n): recovered(split, before, k) for n, k in relearned.items()}
        known_k = set(ctx.known)
        back = {str(n): returned(split, before, k, ctx.evaluator.graph, known_k) for n, k in relearned.items()}
        relearned = {n: as_before(split, before, k) for n, k in relearned.items()}
    after = {n: score(k) for n, k in relearned.items()}
    q = score(quant) if quant is not None else (None, None)

    def deep(now: set[int]) -> bool:  # the target outside the closure of what the model knows now
        return bool(deep_after(kb, ctx.evaluator.rules, sorted(now), target, None)["deep"])

    return {
        **(_model_derived_keys(verdicts, list(relearned), quant is not None) if model_derived else {}),
        "deep": deep(before), "deep_relearn": {str(n): deep(k) for n, k in relearned.items()},
        "deep_quant": None if quant is None else deep(quant),
        "target": list(kb.facts[target]), "index": target, "known": len(ctx.known), "total": len(kb),
        "k_mode": ctx.k_mode, "mode": mode, "forms": forms, "sets": ctx.sets,
        "chosen_set": [list(kb.facts[i]) for i in chosen],
        "recall": recall, "accuracy": accuracy, "target_forgotten": target not in before,
        "recall_relearn": {str(n): r for n, (r, _) in after.items()},
        "accuracy_relearn": {str(n): a for n, (_, a) in after.items()},
        "target_relearned": {str(n): target in relearned[n] for n in relearned},
        "forgotten_relearn": {str(n): sorted(ctx.known - k) for n, k in relearned.items()},
        "recall_quant": q[0], "accuracy_quant": q[1], "quantize": params.quantize,
        "target_quant": None if quant is None else target in quant,
        "forgotten_quant": None if quant is None else sorted(ctx.known - quant),
        "relearn_pool": len(pool), "relearn_facts": [list(kb.facts[i]) for i in facts],
        "relearn_size": params.relearn_size, "relearn_lr": lr if params.relearn else None,
        "relearn_lr_from": lr_from if params.relearn else None, "seed": seed,
        "relearn_on": params.relearn_on,
        **({} if split is None else {
            "relearn_forms": [f.name for f in split.forms] if params.relearn else [],
            "held_out": [list(kb.facts[i]) for i in split.held_out],
            "recovered_relearn": recovery if params.relearn else {},
            "returned_relearn": back if params.relearn else {}}),
    }


def _model_derived_keys(verdicts: list[dict], steps: list, quantized: bool) -> dict:
    """The model-derived verdicts of :func:`run_attacks`' probes (before, each relearning step
    count in order, the quantised model) as result keys."""
    verdicts = [dict(v) for v in verdicts]
    deep = [v.pop("deep_model") for v in verdicts]
    relearn = dict(zip((str(n) for n in steps), zip(deep[1:], verdicts[1:])))
    quant = (deep[-1], verdicts[-1]) if quantized else (None, None)
    return {"deep_model": deep[0], "model_derived": verdicts[0],
            "deep_model_relearn": {n: d for n, (d, _) in relearn.items()},
            "model_derived_relearn": {n: v for n, (_, v) in relearn.items()},
            "deep_model_quant": quant[0], "model_derived_quant": quant[1]}


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def attack_rows(obj: dict, indent: str = "  ") -> list[str]:
    """The table rows of the attacks of :func:`run_attacks`'s object (relearning steps, the
    quantised model, the relearning sample's line)."""
    lines = []
    for n, rec in obj["recall_relearn"].items():
        label = f"relearn {n} step{'s' if n != '1' else ''}"
        lines.append(f"{indent}{label:<22}  {rec:6.3f}  {obj['accuracy_relearn'][n]:6.3f}  "
                     f"{'known' if obj['target_relearned'][n] else 'forgotten':<9}  {_yes(obj['deep_relearn'][n])}"
                     + _md_cell(obj.get("deep_model_relearn", {}).get(n)))
    if obj["recall_quant"] is not None:
        lines.append(f"{indent}{obj['quantize']:<22}  {obj['recall_quant']:6.3f}  {obj['accuracy_quant']:6.3f}  "
                     f"{'known' if obj['target_quant'] else 'forgotten':<9}  {_yes(obj['deep_quant'])}"
                     + _md_cell(obj.get("deep_model_quant")))
    if obj["relearn_lr"] is not None and obj.get("relearn_on") in SPLIT_ON:
        lines.append(f"{indent}{obj['relearn_on']}: relearned on {len(obj['relearn_facts'])} of the "
                     f"{obj['relearn_pool']} facts of the chosen set and {len(obj['relearn_forms'])} other forms of the target; re-probed "
                     f"{len(obj['held_out']) - 1} held-out facts and the target (lr {obj['relearn_lr']:g} from "
                     f"{obj['relearn_lr_from']}, seed {obj['seed']})")
        for n, share in obj["recovered_relearn"].items():
            lines.append(f"{indent}recovered after {n}: {'-' if share is None else f'{share:.3f}'} of the held-out "
                         "facts forgotten before")
    elif obj["relearn_lr"] is not None:
        lines.append(f"{indent}relearned on {len(obj['relearn_facts'])} of a pool of {obj['relearn_pool']} facts "
                     f"(lr {obj['relearn_lr']:g} from {obj['relearn_lr_from']}, seed {obj['seed']})")
    return lines


def _md_cell(flag: bool | None) -> str:
    """The model-derived column of a row ("" without it)."""
    return "" if flag is None else f"  {_yes(flag):>4}"


def attack_text(obj: dict) -> str:
    """``deepunlearn attack``'s table."""
    s, r, o = obj["target"]
    lines = [f"attack on [{obj['index']}] {o} is {s}'s {r} (K: {obj['known']} of {obj['total']} facts, "
             f"k_mode {obj['k_mode']}, probe {obj['mode']})",
             f"  {'model':<22}  {'recall':>6}  {'acc':>6}  {'target':<9}  deep"
             + ("  deep (model)" if "deep_model" in obj else ""),
             f"  {'unlearned':<22}  {obj['recall']:6.3f}  {obj['accuracy']:6.3f}  "
             f"{'forgotten' if obj['target_forgotten'] else 'known':<9}  {_yes(obj['deep'])}"
             + _md_cell(obj.get("deep_model"))]
    return "\n".join(lines + attack_rows(obj))
