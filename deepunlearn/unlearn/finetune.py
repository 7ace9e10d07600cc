"""Finetuning a causal LM on a KB's question/answer pairs until it knows the facts.

The paper finetunes each model on EDU-RELAT before unlearning (appendix D and the checkpoint names
its figure notebook loads, ``..._ft_epoch10_lr2e-05_phi_full_wd0.01_lr_scheduler_typelinear``):
question/answer format, loss on the answer tag + answer + EOS, AdamW with weight decay 0.01 and no
gradient clipping (DeepSpeed ZeRO-3 under the HF Trainer), batch 16, lr 2e-5 (1e-5 for 7-8B
models), 10 epochs (15 for GPT2-XL), HF's linear schedule with one epoch of warm-up
(:meth:`FinetuneConfig.paper`). A small model trained from scratch needs a far larger rate and a
warm-up (:meth:`FinetuneConfig.tiny`, measured in docs/models.md).

Under the ``default`` protocol training stops as soon as probing finds at least ``target_known``
(95 %) of the facts known; the ``reference`` protocol trains every epoch, as the paper's code
(``target_known=None``). The checkpoint's ``deepunlearn.json`` records the prompt format, how the
model was trained (``training``) and how much it knows, so the unlearning layer can scale its
learning rates to the training; ``base`` (:func:`base_of`), the model it started from; and
``kb``: ``{"name", "fingerprint", "facts"}`` of the KB it was trained on, ``fingerprint`` being
:func:`deepunlearn.probe.fingerprint.kb_fingerprint` (the probe cache's key), so a later command
can tell whether a model is used on the KB it learned.

``exclude`` trains on K minus some facts (a *retain model*, :mod:`.retrain`), and a KB
with canaries (:mod:`deepunlearn.kg.canaries`) shows each canary ``repeat`` times per epoch;
:func:`training_facts` is the training set. The checkpoint's ``trained`` entry records it:
``{"facts": distinct facts trained, "excluded": [ids], "fingerprint": sha256 of the sorted trained
ids, "excluded_known": [excluded ids the trained model still answers], "canary_repeat": r}``;
``kb`` stays the whole KB the model is used on. The known share (and early stopping) counts
the trained facts only.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..limits import MAX_SEED
from ..kg.kb import KnowledgeBase
from ..probe.models import ModelBundle, save_bundle
from ..probe.modes import PROTOCOL_MODES
from .data import IGNORE, collate, encode_qa, to_device

Schedule = Literal["linear", "one-cycle", "constant"]


class FinetuneConfig(BaseModel):
    """Hyper-parameters of :func:`finetune` (defaults = the paper's, appendix D)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    lr: float = Field(2e-5, gt=0, description="peak learning rate of AdamW")
    epochs: int = Field(10, ge=1, description="most epochs; training stops earlier at target_known")
    batch_size: int = Field(16, ge=1)
    schedule: Schedule = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="share of the steps spent warming up (one-cycle: rising)")
    grad_clip: float | None = Field(1.0, gt=0, description="clip the gradient norm (None: never)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay on matrices (not on norms or biases)")
    target_known: float | None = Field(0.95, gt=0, le=1, description="stop once this share of facts is known")
    probe_every: int = Field(1, ge=1, description="check the known share every this many epochs")
    probe_mode: Literal[PROTOCOL_MODES] = "exact"  # type: ignore[valid-type]  (asked on the primary question)
    seed: int = Field(0, ge=0, le=MAX_SEED, strict=True)
    mixed_precision: bool = Field(
        True, description="train half-precision models with float32 master weights (bf16 autocast on CUDA)")

    @model_validator(mode="after")
    def _one_cycle_needs_warmup(self) -> "FinetuneConfig":
        if self.schedule == "one-cycle" and self.warmup_ratio <= 0:
            raise ValueError("schedule 'one-cycle' needs warmup_ratio > 0 (the share of steps spent rising)")
        return self

    @classmethod
    def paper(cls, **overrides: Any) -> "FinetuneConfig":
        """Appendix D and the reference's runs: lr 2e-5, batch 16, 10 epochs, linear schedule
        after one epoch of warm-up, AdamW weight decay 0.01, no clipping."""
        epochs = int(overrides.get("epochs", 10))
        base = dict(lr=2e-5, epochs=epochs, batch_size=16, schedule="linear", warmup_ratio=1.0 / max(epochs, 2),
                    grad_clip=None, weight_decay=0.01)
        return cls(**{**base, **overrides})

    @classmethod
    def tiny(cls, **overrides: Any) -> "FinetuneConfig":
        """The small local model trained from scratch (docs/models.md): AdamW lr 1e-3,
        one-cycle schedule, batch 32, gradient clipping 1.0, up to 30 epochs."""
        base = dict(lr=1e-3, epochs=30, batch_size=32, schedule="one-cycle", warmup_ratio=0.3, grad_clip=1.0)
        return cls(**{**base, **overrides})

    @classmethod
    def for_bundle(cls, bundle: ModelBundle, protocol: Any = None, **overrides: Any) -> "FinetuneConfig":
        """The preset that suits a model: :meth:`tiny` for models built by
        :func:`~deepunlearn.probe.tiny.build_tiny_model`; else :meth:`paper`, with the paper's
        lr 1e-5 for models of 5B parameters or more and 15 epochs for GPT-2 models. A protocol
        (name or :class:`~deepunlearn.probe.protocol.Protocol`) without early stopping (the
        ``reference``) trains every epoch (``target_known=None``)."""
        from ..probe.protocol import get_protocol

        base: dict[str, Any] = {}
        if not get_protocol(protocol).finetune_early_stop:
            base["target_known"] = None
        if bundle.meta.get("origin") == "tiny":
            return cls.tiny(**{**base, **overrides})
        if bundle.num_parameters() >= 5e9:
            base["lr"] = 1e-5
        if getattr(bundle.model.config, "model_type", "") == "gpt2":
            base["epochs"] = 15
        return cls.paper(**{**base, **overrides})


@dataclass
class FinetuneResult:
    """Outcome: trained facts known after training out of ``total`` (the facts trained on),
    epochs run, wall seconds; the ``excluded`` facts and those of them the model still answers
    (``excluded_known``: knowledge it inferred from what it was trained on)."""

    known: int
    total: int
    epochs: int
    seconds: float
    history: list[dict] = field(default_factory=list)
    checkpoint: Path | None = None
    excluded: list[int] = field(default_factory=list)
    excluded_known: list[int] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.known / self.total if self.total else 0.0

    def to_json(self) -> dict:
        return {"known": self.known, "total": self.total, "known_share": round(self.share, 6),
                "epochs": self.epochs, "seconds": round(self.seconds, 3),
                "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
                "excluded": list(self.excluded), "excluded_known": list(self.excluded_known)}


def make_scheduler(optimizer, config: FinetuneConfig, total_steps: int):
    """The learning-rate schedule over ``total_steps`` optimizer steps."""
    import torch

    warm = int(round(config.warmup_ratio * total_steps))
    if config.schedule == "one-cycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=config.lr, total_steps=max(total_steps, 2),
            pct_start=config.warmup_ratio, anneal_strategy="cos", cycle_momentum=False,
        )

    from .methods.base import lr_factor

    def factor(step: int) -> float:  # HF's get_linear_schedule_with_warmup / constant_with_warmup
        return lr_factor(step, total_steps, config.schedule, warm)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def training_facts(kb: KnowledgeBase, exclude: Iterable[Any] = ()) -> list[int]:
    """The fact ids one epoch of :func:`finetune` trains on, in id order: every fact of ``kb``
    but those in ``exclude`` (fact ids or any reference :meth:`KnowledgeBase.resolve` takes; one
    that names no fact is a :class:`~deepunlearn.kg.kb.KBError`), each canary
    (``metadata["canaries"]``) ``repeat`` times.

    >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B"), ("A", "job", "x"), ("B", "job", "y")])
    >>> training_facts(kb, exclude=[1])
    [0, 2]
    """
    from ..kg.canaries import canary_info

    excluded = {kb.resolve(f) for f in exclude}
    info = canary_info(kb)
    repeat = dict.fromkeys(info["facts"], info["repeat"]) if info else {}
    out: list[int] = []
    for i in range(len(kb.facts)):
        if i not in excluded:
            out.extend([i] * repeat.get(i, 1))
    return out


def trained_fingerprint(fact_ids: Iterable[int]) -> str:
    """sha256 of the sorted distinct trained fact ids (the ``trained.fingerprint`` of a checkpoint)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(sorted(set(int(i) for i in fact_ids))).encode()).hexdigest()


def finetune(
    bundle: ModelBundle,
    kb: KnowledgeBase,
    config: FinetuneConfig | None = None,
    *,
    out_dir: str | Path | None = None,
    progress: bool = True,
    exclude: Iterable[Any] = (),
    forms: str | None = None,
) -> FinetuneResult:
    """Train ``bundle.model`` in place on the facts of ``kb`` but ``exclude``
    (:func:`training_facts`: canaries repeated) with an answer-only loss and, with ``out_dir``,
    save the checkpoint (``save_pretrained`` + ``deepunlearn.json``, see the module docstring).

    ``config`` defaults to :meth:`FinetuneConfig.for_bundle`. After every ``probe_every``
    epochs the facts are probed (``probe_mode``) once the training batches suggest the target
    is near, and training stops when ``known / total >= target_known`` (over the trained
    facts). The returned counts come from a final probe of the trained model; the excluded
    facts are probed too (``excluded_known``).

    ``forms`` (a :mod:`deepunlearn.kg.forms` selection such as ``"train"`` or ``"primary,qa1,st1"``;
    ``None``: the primary form, as always) picks the forms every fact is trained on, one example per
    form; the probes during and after training ask the same forms (under ``probe_mode``).
    """
    import torch
    from tqdm.auto import tqdm

    from ..probe.fingerprint import kb_fingerprint
    from ..probe.probing import probe
    from .methods.base import decay_groups

    config = config or FinetuneConfig.for_bundle(bundle)
    if not kb.facts:
        raise ValueError(f"knowledge base {kb.name!r} has no facts to finetune on")
    t0 = time.perf_counter()
    model = bundle.model
    device = next(model.parameters()).device
    orig_dtype = next(model.parameters()).dtype
    half = orig_dtype in (torch.float16, torch.bfloat16)
    autocast_dtype = None
    if half and config.mixed_precision:
        model.float()
        if device.type == "cuda":
            autocast_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda") if autocast_dtype == torch.float16 else None

    order = training_facts(kb, exclude)
    trained = sorted(set(order))
    excluded = sorted(set(range(len(kb.facts))) - set(trained))
    if not order:
        raise ValueError(f"knowledge base {kb.name!r}: every fact is excluded, nothing is left to finetune on")
    probe_kw: dict[str, Any] = {}
    if forms is None or forms == "default":
        examples = encode_qa(bundle.tokenizer, bundle.prompt, kb.probes(order))
    else:
        from ..kg.forms import select_forms
        from .data import encode_forms_qa

        probe_kw["forms"] = forms
        sel = select_forms(kb, forms, trained)
        per_fact = {i: encode_forms_qa(bundle.tokenizer, bundle.prompt, sel.forms[i]) for i in trained}
        examples = [ex for i in order for ex in per_fact[i]]
    n = len(examples)
    steps_per_epoch = math.ceil(n / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(decay_groups([p for p in model.parameters() if p.requires_grad], config.weight_decay),
                                  lr=config.lr)
    scheduler = make_scheduler(optimizer, config, total_steps)

    history: list[dict] = []
    last_known: float | None = None
    epochs_run = 0
    bar = tqdm(total=total_steps, desc="finetune", unit="step", file=sys.stderr, disable=not progress)
    model.train()
    try:
        for epoch in range(1, config.epochs + 1):
            epochs_run = epoch
            perm = torch.randperm(n, generator=gen).tolist()
            loss_sum, tokens, hits = 0.0, 0, 0
            for s in range(0, n, config.batch_size):
                batch = to_device(collate([examples[i] for i in perm[s:s + config.batch_size]], bundle.pad_id), device)
                with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
                    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
                    loss, n_tok, n_hit = answer_loss(out.logits, batch["labels"])
                optimizer.zero_grad(set_to_none=True)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                else:
                    loss.backward()
                if config.grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                scheduler.step()
                loss_sum += float(loss.detach()) * n_tok
                tokens += n_tok
                hits += n_hit
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss_sum / max(tokens, 1):.4f}",
                                known="-" if last_known is None else f"{last_known:.1%}")
            # Share of examples whose every answer token was the argmax while training: a free,
            # slightly pessimistic estimate (the weights improved during the epoch) of the known share.
            train_share = hits / n
            row = {"epoch": epoch, "loss": loss_sum / max(tokens, 1), "train_known": train_share,
                   "lr": scheduler.get_last_lr()[0]}
            target = config.target_known
            if target is not None and epoch % config.probe_every == 0 and train_share >= target - 0.1:
                res = probe(bundle, kb, trained, mode=config.probe_mode, progress=False, **probe_kw)
                model.train()
                last_known = res.share
                row["known"] = res.share
                history.append(row)
                bar.set_postfix(epoch=epoch, loss=f"{row['loss']:.4f}", known=f"{last_known:.1%}")
                if res.share >= target:
                    # close the bar at the steps actually taken, not at a stalled share of the most
                    bar.total = bar.n
                    bar.set_postfix_str(f"early stop: {res.share:.0%} known", refresh=False)
                    bar.refresh()
                    break
            else:
                history.append(row)
    finally:
        bar.close()
        model.eval()
        if half and config.mixed_precision:
            model.to(orig_dtype)

    final = probe(bundle, kb, trained, mode=config.probe_mode, progress=False, **probe_kw)
    inferred: list[int] = []
    if excluded:
        res = probe(bundle, kb, excluded, mode=config.probe_mode, progress=False, **probe_kw)
        inferred = [int(i) for i, k in zip(res.fact_ids, res.known) if k]
    seconds = time.perf_counter() - t0
    result = FinetuneResult(known=final.n_known, total=final.total, epochs=epochs_run, seconds=seconds,
                            history=history, excluded=excluded, excluded_known=inferred)
    if out_dir is not None:
        meta = {
            "origin": bundle.meta.get("origin", "finetuned"),
            "base": base_of(bundle),
            "training": {**config.model_dump(), "epochs_run": epochs_run, "steps": epochs_run * steps_per_epoch,
                         "seconds": round(seconds, 3)},
            "kb": {"name": kb.name, "fingerprint": kb_fingerprint(kb), "facts": len(kb.facts)},
            "trained": {"facts": len(trained), "excluded": excluded, "fingerprint": trained_fingerprint(trained),
                        "excluded_known": inferred, "examples_per_epoch": n},
            "known": final.n_known,
            "total": final.total,
            "probe_mode": config.probe_mode,
            **({"forms": forms} if probe_kw else {}),
        }
        result.checkpoint = save_bundle(bundle, out_dir, meta)
    return result


def base_of(bundle: ModelBundle) -> Any:
    """What a finetuned checkpoint records as its ``base`` (the model it started from), chosen to
    stay true after the run: the base a finetuned checkpoint itself records (finetuning again keeps
    the original); ``"tiny"`` for a tiny model built from scratch (its ``tiny`` entry, kept in
    the metadata, has the architecture, sizes and seed: the folder it was built in may be
    temporary); the hub name of a hub model; else the checkpoint folder's absolute path."""
    meta = bundle.meta or {}
    if meta.get("base") is not None:
        return meta["base"]
    if meta.get("origin") == "tiny":
        return "tiny"
    if bundle.path is None:
        return bundle.name
    return str(Path(bundle.path).resolve())


def answer_loss(logits, labels):
    """Mean cross-entropy over the labelled (answer and EOS) tokens; also the number of such
    tokens and of rows whose labelled tokens are all the argmax."""
    import torch

    shift_logits = logits[:, :-1].float()
    shift_labels = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1), ignore_index=IGNORE)
    valid = shift_labels != IGNORE
    with torch.no_grad():
        right = (shift_logits.argmax(-1) == shift_labels) | ~valid
        hits = int(right.all(-1).sum())
    return loss, int(valid.sum()), hits
