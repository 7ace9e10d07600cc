"""A memory plan: the peak GPU memory of a run of this code, from the model's config alone.
``deepunlearn plan`` prints it; a sweep on CUDA checks it before loading a
model (:func:`deepunlearn.bench.guard.check_fit`).

Its parameters are counted exactly (tied embeddings once), in LoRA mode with peft's default
adapter for the architecture (:class:`~deepunlearn.unlearn.snapshot.LoraAdapter` applies the same
to the real model): by formula from the config for the architectures the tool builds
(:mod:`.plan_count`; neither torch nor a transformers model class is imported), else by building
the model on torch's ``meta`` device (no memory for values; this imports torch).
Parts, in bytes, following what :meth:`Session.descend <deepunlearn.unlearn.methods.Session.descend>`,
the methods, the loop and the probe do (``N`` parameters, ``n`` trainable ones, ``d`` bytes of
the dtype):

==================  =====================================================================
weights             ``N d`` (plus buffers)
gradients           ``n d`` while the backward pass runs (``4 n`` for LoRA adapters, which peft
                    keeps in float32, and for finetuning, which trains a float32 copy under autocast)
master_weights      ``4 n`` float32 copies of half-precision trainable parameters
master_gradients    ``4 n`` float32 gradients the optimizer steps on (they stay until the next
                    step, so also while GA/NPO probe a grid point)
adamw_states        ``8 n`` exp_avg and exp_avg_sq, float32 (``2 n`` with 8-bit AdamW)
adamw_step_temp     ``4 n`` torch's foreach AdamW on CUDA takes ``sqrt(exp_avg_sq)`` of every
                    tensor at once
method_copy         WHP: a deepcopy of the reinforced model (``N d``, GPU) while probing; TV:
                    the reinforced weights on the snapshot's device; RMU: the frozen original
                    model, also while training; none in LoRA mode (the method catalogue's
                    memory profile says which)
method_step         (only when not 0) what a gradient method's step holds besides gradients:
                    its model copy, a profile's ``step_copies`` weights-sized tensors, and with
                    ``sam_rho > 0`` SAM's :data:`SAM_STEP_COPIES` (the weights it restores and the
                    first gradient, both in the trained tensors' dtype, alive through the second
                    backward pass)
method_guard        (only with ``guard``) du_loop's step guard: a copy of the trained tensors, their
                    float32 master copies and AdamW's state, from before each step to its probe
snapshot            the original weights (full mode) on the GPU when ``snapshot_device="same"``;
                    on CPU (the default) it is host memory: ``host_gib``
activations         saved for backward: ``batch x seq x layers x per-layer``, per layer and token
                    ``d (6 h + 4 kv + 4 I) + 4 h`` bytes for gated MLPs (Llama, Qwen, Gemma, OLMo,
                    Mistral), ``d (10 h + 4 kv + 4 I)`` otherwise (GPT-2 with its dropout masks;
                    an upper bound for Phi, 27 h, and GPT-NeoX, 18 h, at I = 4 h), plus ``4 h`` for
                    the float32 norm of half-precision models; measured with saved-tensor hooks
                    (tests/unlearn/test_unlearn_plan.py). Attention keeps no ``T x T`` matrix (SDPA /
                    flash attention on a GPU)
logits              the loss's logits: ``batch x seq x vocab x (d + 12)`` (the model's, a float32
                    copy, its log-softmax and the gradients)
probe               one probe batch: ``probe_batch x`` :func:`~deepunlearn.probe.batching.probe_row_bytes`
cuda_context        :data:`CUDA_CONTEXT` (context, cuBLAS workspaces; not in ``max_memory_allocated``)
==================  =====================================================================

Three phases can be the peak: ``train`` (the backward pass), ``step`` (the optimizer step) and
``probe`` (a grid point being probed). ``peak_gib`` is the largest plus ``cuda_context``.
Allocator fragmentation is not modelled: keep ~10 % spare.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from typing import Any

from ..probe.batching import config_dims, probe_row_bytes
from .methods import catalog
from .plan_config import PRESETS, PlanError, config_from_dict, load_config  # noqa: F401 - the public API
from .plan_skeleton import Skeleton, meta_skeleton, skeleton  # noqa: F401 - the public API

GiB = 1 << 30
#: GPU sizes the verdicts are given for, in GiB (RTX 4090 / A100-40 / A100-80, H100 / H200)
CARDS = (24, 40, 80, 141)
#: the CUDA context and library workspaces: memory the GPU loses that torch does not report
CUDA_CONTEXT = GiB // 2
#: the built-in methods a plan knows, and finetuning; :func:`plan_methods` adds the plug-ins
PLAN_METHODS = tuple(s.name for s in catalog.BUILTIN) + ("finetune",)
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
#: training batch per method when not given: one target's question/answer, or the paper's
#: finetuning batch
DEFAULT_BATCH = {"finetune": 16}
DEFAULT_SEQ = 64
DEFAULT_PROBE_BATCH = 64
#: trained-weights-sized tensors a SAM step (:func:`deepunlearn.unlearn.sam.sam_gradients`) holds
#: besides the loop's gradients: the weights it puts back and the first gradient
SAM_STEP_COPIES = 2


@dataclass(frozen=True)
class RunShape:
    """How a run is set up, as far as its memory goes (every option of :func:`plan_memory` but
    the model, the method and the fit).

    ``lora``: LoRA mode (adapters of rank ``lora_r``); ``dtype``: ``"bf16"``, ``"fp16"`` or
    ``"fp32"``; ``batch``: the training batch (``None``: :data:`DEFAULT_BATCH` of the method, else
    1) of sequences of ``seq`` tokens; ``probe_batch``: the probe's batch under ``probe_mode``;
    ``snapshot_device``: where the original weights are kept (``"cpu"`` or ``"same"``);
    ``adam8bit``: bitsandbytes' 8-bit AdamW; ``sam_rho > 0``: the method's steps are
    sharpness-aware (a gradient method's ``sam_rho``); ``guard``: du_loop's step guard is on
    (``guard > 0``)."""

    lora: bool = False
    lora_r: int = 8
    dtype: str = "bf16"
    batch: int | None = None
    seq: int = DEFAULT_SEQ
    probe_batch: int = DEFAULT_PROBE_BATCH
    probe_mode: str = "exact"
    snapshot_device: str = "cpu"
    adam8bit: bool = False
    sam_rho: float = 0.0
    guard: bool = False


@dataclass
class MemoryPlan:
    """The plan of one run; ``parts`` and the phases in bytes (:meth:`to_json` gives GiB)."""

    model: str
    model_type: str
    method: str
    dtype: str
    lora: bool
    params: int
    trainable: int
    batch: int
    seq: int
    probe_batch: int
    parts: dict[str, int]
    phases: dict[str, int]
    host: int
    options: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None

    @property
    def peak(self) -> int:
        return max(self.phases.values()) + self.parts["cuda_context"]

    @property
    def peak_gib(self) -> float:
        return self.peak / GiB

    def fits(self, gib: float) -> bool:
        return self.peak <= gib * GiB

    def to_json(self) -> dict[str, Any]:
        g = lambda b: round(b / GiB, 3)  # noqa: E731
        return {
            "model": self.model, "model_type": self.model_type, "method": self.method, "lora": self.lora,
            "params": self.params, "trainable": self.trainable, "dtype": self.dtype, "batch": self.batch,
            "seq": self.seq, "probe_batch": self.probe_batch, "peak_gib": g(self.peak),
            "peak_phase": max(self.phases, key=self.phases.get), "parts": {k: g(v) for k, v in self.parts.items()},
            "phases": {k: g(v) for k, v in self.phases.items()}, "host_gib": g(self.host),
            "fits": {str(c): self.fits(c) for c in CARDS}, "fix": self.fix,
        }


# --------------------------------------------------------------------------------------------- counting


def activation_bytes(dims: dict[str, int], *, batch: int, seq: int, dtype_bytes: int, gated: bool) -> int:
    """Saved activations of one training forward (module docstring), logits excluded."""
    h, kv, inter = dims["hidden"], dims["kv"], dims["intermediate"]
    per_token_layer = dtype_bytes * ((6 if gated else 10) * h + 4 * kv + 4 * inter)
    if dtype_bytes < 4:
        per_token_layer += 4 * h
    return batch * seq * dims["layers"] * per_token_layer


def bitsandbytes_installed() -> bool:
    return importlib.util.find_spec("bitsandbytes") is not None


def plan_methods() -> tuple[str, ...]:
    """Every method :func:`plan_memory` plans: the catalogue's (plug-ins included) and finetune."""
    return tuple(catalog.names()) + ("finetune",)


def has_guard(method: str) -> bool:
    """Whether ``method`` has du_loop's step guard: a ``guard`` parameter
    (:mod:`deepunlearn.unlearn.methods.du_guard`)."""
    from .methods import UnlearnError, get_method

    if method == "finetune":
        return False
    try:
        return "guard" in get_method(method).Params.model_fields
    except UnlearnError as e:  # a plug-in whose class cannot be loaded
        raise PlanError(str(e), field="--method") from None


def memory_params(params: Any) -> dict[str, Any]:
    """The fields of :class:`RunShape` that a method's parameters (a sweep's ``[params.METHOD]``,
    as a table or typed) set: SAM's radius and whether the step guard is on."""
    if hasattr(params, "model_dump"):
        params = params.model_dump(exclude_unset=True)
    out: dict[str, Any] = {}
    if params.get("sam_rho"):
        out["sam_rho"] = float(params["sam_rho"])
    if params.get("guard"):
        out["guard"] = True
    return out


def plan_memory(model: Any, method: str, shape: RunShape | None = None, *, fix_for: float | None = 80,
                flag: str = "--model") -> MemoryPlan:
    """The memory plan of ``method`` (:func:`plan_methods`) on ``model`` (anything
    :func:`load_config` takes), set up as ``shape`` (default: :class:`RunShape`'s defaults).
    ``fix_for``: GiB the run should fit; when it does not, ``fix`` names what makes it fit (LoRA,
    8-bit AdamW when bitsandbytes is installed, a smaller batch). ``shape.sam_rho > 0``: the
    method's steps are sharpness-aware. ``shape.guard``: every step keeps a copy of the trained
    tensors, their float32 master copies and AdamW's state until its probe accepts it. ``flag``
    names the model in errors."""
    shape = shape or RunShape()
    lora, dtype, sam_rho, guard = shape.lora, shape.dtype, shape.sam_rho, shape.guard
    method = method.lower()
    if method not in plan_methods():
        raise PlanError(f"unknown method {method!r}; expected one of {', '.join(plan_methods())}", field="--method")
    if method != "finetune":
        try:
            catalog.get_spec(method)  # a plug-in's spec is checked before it is planned
        except catalog.CatalogError as e:
            raise PlanError(str(e), field="--method") from None
    if dtype not in DTYPE_BYTES:
        raise PlanError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}", field="--dtype")
    if lora and method == "finetune":
        raise PlanError("finetune trains the full weights (no LoRA mode)", field="--lora")
    if not sam_rho >= 0:
        raise PlanError(f"--sam-rho must be a number >= 0, not {sam_rho!r}", field="--sam-rho")
    if sam_rho and (method == "finetune" or catalog.get_spec(method).kind != "steps"):
        raise PlanError(f"--sam-rho: sharpness-aware steps are the gradient methods', not {method}'s",
                        field="--sam-rho")
    if guard and not has_guard(method):
        raise PlanError(f"--guard: the step guard is du_loop's (a method with a guard parameter), not {method}'s",
                        field="--guard")
    name, config = load_config(model, flag=flag)
    sk = skeleton(config, lora_r=shape.lora_r if lora else None, source=name)
    return _plan(name, config, sk, method, replace(shape, batch=shape.batch or DEFAULT_BATCH.get(method, 1)), fix_for)


def _plan(name, config, sk: Skeleton, method: str, shape: RunShape, fix_for: float | None) -> MemoryPlan:
    """The plan of ``method`` set up as ``shape`` (its ``batch`` given)."""
    lora, lora_r, dtype, batch, seq = shape.lora, shape.lora_r, shape.dtype, shape.batch, shape.seq
    probe_batch, probe_mode, snapshot_device = shape.probe_batch, shape.probe_mode, shape.snapshot_device
    adam8bit, sam_rho, guard = shape.adam8bit, shape.sam_rho, shape.guard
    dims = config_dims(config)
    d = DTYPE_BYTES[dtype]
    n_all, n = sk.params, (sk.lora if lora else sk.params)
    finetune = method == "finetune"
    memory = None if finetune else catalog.get_spec(method).memory
    weights = n_all * (4 if finetune else d) + sk.buffer_bytes  # finetune: model.float(), autocast
    # trainable tensors: float32 when finetuning (model.float()) and for LoRA adapters (peft keeps
    # half-precision adapters in float32), else the model's dtype with float32 master copies
    td = 4 if (finetune or lora) else d
    masters = 4 * n if td < 4 else 0
    state_bytes = 4 if (masters or td == 4) else td
    parts = {
        "weights": weights,
        "gradients": n * td,
        "master_weights": masters,
        "master_gradients": 4 * n if masters else 0,
        "adamw_states": (2 if adam8bit else 2 * state_bytes) * n,
        "adamw_step_temp": 0 if adam8bit else state_bytes * n,
        "method_copy": 0,
        "snapshot": 0,
        "activations": activation_bytes(dims, batch=batch, seq=seq, dtype_bytes=d, gated=sk.gated),
        "logits": batch * seq * dims["vocab"] * (d + 12),
        "probe": probe_batch * probe_row_bytes(config, dtype_bytes=d, seq=seq, mode=probe_mode,
                                               model_fn=bool(memory and memory.mixed_forward)),  # e.g. WHP
        "cuda_context": CUDA_CONTEXT,
    }
    snap = 0 if (lora or finetune) else n_all * d + sk.buffer_bytes
    host = 0
    if snap:
        if snapshot_device == "same":
            parts["snapshot"] = snap
        else:
            host += snap
    copy = memory.model_copy if memory else "none"
    if not lora and copy == "weights":  # a second model (WHP's reinforced copy)
        parts["method_copy"] = weights
    elif not lora and copy == "delta":  # a weights-sized delta (TV's task vector)
        if snapshot_device == "same":
            parts["method_copy"] = n_all * d
        else:
            host += n_all * d
    copies = (memory.step_copies if memory else 0) + (SAM_STEP_COPIES if sam_rho else 0)
    if copies:  # a profile's own (a plug-in's) and SAM's: the weights put back and the first gradient
        parts["method_step"] = copies * n * td
    if memory and memory.optimizer_while_probing and parts["method_copy"]:  # e.g. RMU's frozen original
        parts["method_step"] = parts.get("method_step", 0) + parts["method_copy"]
    if guard:  # the step guard's copy of what a step changes, held from before the step to its probe
        parts["method_guard"] = n * td + parts["master_weights"] + parts["adamw_states"]
    p = parts
    resident = p["weights"] + p["snapshot"] + p.get("method_guard", 0)
    optimizer = p["master_weights"] + p["adamw_states"]
    phases = {
        "train": resident + optimizer + p["gradients"] + p["activations"] + p["logits"] + p.get("method_step", 0),
        "step": resident + optimizer + (p["master_gradients"] or p["gradients"]) + p["adamw_step_temp"],
    }
    if not finetune:
        # GA/NPO probe inside the trajectory: the optimizer and the last step's float32 gradients
        # are still alive; TV/WHP probe after their reinforcing run has dropped them.
        kept = optimizer + (p["master_gradients"] or p["gradients"]) if memory.optimizer_while_probing else 0
        phases["probe"] = resident + kept + p["method_copy"] + p["probe"]
    plan = MemoryPlan(model=name, model_type=str(config.model_type), method=method, dtype=dtype, lora=lora,
                      params=n_all, trainable=n, batch=batch, seq=seq, probe_batch=probe_batch, parts=parts,
                      phases=phases, host=host,
                      options={"lora_r": lora_r, "probe_mode": probe_mode, "snapshot_device": snapshot_device,
                               "adam8bit": adam8bit, "sam_rho": sam_rho, "guard": guard})
    if fix_for is not None and not plan.fits(fix_for):
        plan.fix = suggest_fix(plan, config, sk, fix_for * GiB)
    return plan


#: how :func:`suggest_fix` names each change (the CLI's flags); a sweep names its config fields
FIX_NAMES = {"lora": "LoRA (--lora)", "batch": "a smaller batch (--batch {})",
             "probe_batch": "a smaller probe batch (--probe-batch {})"}


def suggest_fix(plan: MemoryPlan, config: Any, sk: Skeleton | None, limit: int,
                names: dict[str, str] | None = None) -> str:
    """What makes ``plan`` fit ``limit`` bytes, best first: LoRA (for a method that has it),
    8-bit AdamW (only when bitsandbytes is installed), a smaller batch or probe batch; else that
    nothing does. ``names`` overrides :data:`FIX_NAMES` (a change named ``""`` is not offered)."""
    names = {**FIX_NAMES, **(names or {})}
    if sk is None:
        sk = skeleton(config, lora_r=plan.options["lora_r"])
    o = plan.options
    base = RunShape(lora=plan.lora, lora_r=o["lora_r"], dtype=plan.dtype, batch=plan.batch, seq=plan.seq,
                    probe_batch=plan.probe_batch, probe_mode=o["probe_mode"], snapshot_device=o["snapshot_device"],
                    adam8bit=o["adam8bit"], sam_rho=o.get("sam_rho", 0.0), guard=o.get("guard", False))
    gib = lambda q: f"{q.peak_gib:.1f} GiB"  # noqa: E731
    tries: list[tuple[str, dict]] = []
    if not plan.lora and plan.method != "finetune" and names["lora"]:
        tries.append((names["lora"], {"lora": True}))
    if not o["adam8bit"] and bitsandbytes_installed():
        tries.append(("8-bit AdamW (bitsandbytes)", {"adam8bit": True}))
    for key, now in (("batch", plan.batch), ("probe_batch", plan.probe_batch)):
        for b in sorted({now // 2, now // 8, 1}, reverse=True):
            if names[key] and 1 <= b < now:
                tries.append((names[key].format(b), {key: b}))
    ok, best = [], None
    for label, change in tries:
        need_sk = sk if change.get("lora", plan.lora) == plan.lora else skeleton(config, lora_r=o["lora_r"])
        q = _plan(plan.model, config, need_sk, plan.method, replace(base, **change), None)
        if q.peak <= limit:
            ok.append(f"{label}: {gib(q)}")
        elif best is None or q.peak < best[1].peak:
            best = (label, q)
    if ok:
        return "; ".join(ok)
    tail = f"; the best single change, {best[0]}, still needs {gib(best[1])}" if best else ""
    return f"nothing tried fits {limit / GiB:.0f} GiB (needs {plan.peak_gib:.1f} GiB){tail}: use a larger GPU"
