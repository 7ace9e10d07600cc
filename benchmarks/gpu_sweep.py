#!/usr/bin/env python
"""Time the release sweep on one resident model on the GPU path, measured.

55 targets x GA, NPO, TV, WHP x the paper's grids, the 700-fact probe at every grid point, on a
Llama config built with random weights (``--config 1.3b``: 24 layers x 2048 wide, 1.3B
parameters; ``7b``: Llama-2-7b's shapes; ``tiny``: a few thousand parameters, for CPU tests) and
the tiny word-level tokenizer of :func:`deepunlearn.probe.tiny.build_tokenizer` trained on the
KB. It runs the library's own per-target loop (:class:`deepunlearn.unlearn.TargetRunner`) with
``k_mode="dataset"`` (K = the KB: the random model knows nothing, so every target runs), probe
batches sized to memory and ONE model kept resident, restored in memory after every run.

It prints one JSON object (also written to ``--out``): points/s, probed facts/s, seconds per
target (and per method), peak memory (``torch.cuda.max_memory_allocated``) beside the memory
plan's estimate (:mod:`deepunlearn.unlearn.plan`), the ratio of the measured times to the GPU's
limits (optimizer-step bytes / memory bandwidth; probe FLOPs / peak FLOP/s; from
:data:`GPU_LIMITS` by device name, or ``--bandwidth``/``--flops``), and the reference protocol's
cost on the same model and hardware for ``--ref-points`` grid points: save the checkpoint, load
it again, generate 10 tokens for every question (the reference does this with vLLM for each
of its ~11,300 points; here Hugging Face ``generate``, batched the same way as the probe).

Not a pytest file (no ``bench_`` prefix): run it, e.g. on an H100::

    python benchmarks/gpu_sweep.py --config 1.3b --out gpu-1.3b.json
    python benchmarks/gpu_sweep.py --config 7b --lora --out gpu-7b-lora.json
    python benchmarks/gpu_sweep.py --config tiny --targets 2 --device cpu --kb generate:12   # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: model shapes (Llama); the vocabulary is the KB's word-level tokenizer's
CONFIGS = {
    "tiny": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64},
    "1.3b": {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 6144},
    "7b": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008},
}
#: dense bf16 peak FLOP/s and memory bandwidth (bytes/s) by device name (longest match wins)
GPU_LIMITS = {
    "H100": {"flops": 989e12, "bandwidth": 3.35e12},  # SXM
    "H100 PCIe": {"flops": 756e12, "bandwidth": 2.0e12},
    "H100 NVL": {"flops": 835e12, "bandwidth": 3.9e12},
    "H200": {"flops": 989e12, "bandwidth": 4.8e12},
    "A100": {"flops": 312e12, "bandwidth": 2.04e12},
    "L40S": {"flops": 362e12, "bandwidth": 0.864e12},
    "cpu": {"flops": 1e11, "bandwidth": 2e10},  # a rough figure for one CPU socket: ratios on CPU mean little
}
METHODS = ("ga", "npo", "tv", "whp")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=tuple(CONFIGS), default="1.3b", help="model shape (default 1.3b)")
    p.add_argument("--targets", type=int, default=55, help="targets, drawn round-robin over relations (default 55)")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default ga,npo,tv,whp)")
    p.add_argument("--lora", action="store_true", help="LoRA mode (the adapter is trained and removed)")
    p.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when present)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None, help="default: bf16 on CUDA, fp32 on CPU")
    p.add_argument("--kb", default="release", help="'release' (EDU-RELAT, 700 facts), 'generate:N' (a generated "
                   "N-person family) or a KB file")
    p.add_argument("--ref-points", type=int, default=3, help="grid points timed with the reference protocol (0: none)")
    p.add_argument("--bandwidth", type=float, default=None, help="memory bandwidth, bytes/s (default: by GPU name)")
    p.add_argument("--flops", type=float, default=None, help="peak bf16 FLOP/s (default: by GPU name)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the JSON here too")
    return p.parse_args(argv)


def load_kb_arg(spec: str):
    """The KB of ``--kb``."""
    if spec == "release":
        from deepunlearn.kg.edu_relat import import_edu_relat

        return import_edu_relat(os.environ.get("DEEPUNLEARN_EDU_RELAT"))  # None: the shipped copy
    if spec.startswith("generate:"):
        from deepunlearn.kg.domains.family.generate import generate_family

        return generate_family(int(spec.split(":", 1)[1]), seed=0)
    from deepunlearn.kg.io import load_kb

    return load_kb(spec)


def pick_targets(kb, n: int) -> list[int]:
    """``n`` targets, round-robin over relations (the KB's listed targets, else its family facts)."""
    listed = list(dict.fromkeys(kb.targets)) or kb.entity_facts()
    by_rel: dict[str, list[int]] = {}
    for t in listed:
        by_rel.setdefault(kb.facts[t][1], []).append(t)
    out, queues = [], [list(v) for v in by_rel.values()]
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def build_bundle(kb, shape: str, device, dtype, seed: int):
    """A random-weight Llama of ``shape`` with the KB's word-level tokenizer, on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from deepunlearn.probe import ModelBundle, PromptFormat
    from deepunlearn.probe.tiny import build_tokenizer, probe_texts

    prompt = PromptFormat.named("llama")
    tok = build_tokenizer(probe_texts(kb, prompt))
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=256, tie_word_embeddings=False,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **CONFIGS[shape])
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return ModelBundle(model=model, tokenizer=tok, prompt=prompt, device=str(device), name=f"llama-{shape}-random"), cfg


def limits_for(device, args) -> dict:
    import torch

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    keys = sorted((k for k in GPU_LIMITS if k.lower() in name.lower()), key=len, reverse=True)
    base = dict(GPU_LIMITS[keys[0]] if keys else GPU_LIMITS["H100"])
    if args.bandwidth:
        base["bandwidth"] = args.bandwidth
    if args.flops:
        base["flops"] = args.flops
    return {"device_name": name, "table_entry": keys[0] if keys else None, **base}


def reference_point(bundle, kb, folder: Path, device, dtype) -> float:
    """Seconds of one grid point of the reference protocol: save the checkpoint, load it again,
    generate 10 tokens for every question."""
    from transformers import AutoModelForCausalLM

    from deepunlearn.probe import ModelBundle, probe

    t0 = time.perf_counter()
    bundle.model.save_pretrained(folder)
    bundle.tokenizer.save_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, device_map={"": str(device)}).eval()
    copy = ModelBundle(model=model, tokenizer=bundle.tokenizer, prompt=bundle.prompt, device=str(device), name="ref")
    probe(copy, kb, mode="generate", batch_size="auto", progress=False)
    _sync(device)
    took = time.perf_counter() - t0
    del model, copy
    return took


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    from deepunlearn.probe.models import resolve_dtype
    from deepunlearn.unlearn import TargetRunner, get_method
    from deepunlearn.unlearn.plan import GiB, RunShape, plan_memory

    torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    dtype_name = args.dtype or ("bf16" if cuda else "fp32")
    dtype = resolve_dtype(dtype_name, str(device))
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    notes = []
    if args.lora:
        no_lora = [m for m in methods if not get_method(m).supports_lora]
        if no_lora:
            notes.append(f"skipped in LoRA mode (no LoRA support in this version): {', '.join(no_lora)}")
            methods = [m for m in methods if m not in no_lora]

    kb = load_kb_arg(args.kb)
    targets = pick_targets(kb, args.targets)
    if cuda:  # refuse at once what cannot fit, naming the fix (the sweep's own check does the same)
        from deepunlearn.probe.batching import cuda_free_bytes
        from deepunlearn.unlearn.plan import suggest_fix

        shape = {**CONFIGS[args.config], "model_type": "llama", "vocab_size": 512, "tie_word_embeddings": False}
        free = cuda_free_bytes(device)
        run = RunShape(lora=args.lora, dtype=dtype_name, probe_batch=1, snapshot_device="same")
        worst = max((plan_memory(shape, m, run, fix_for=None) for m in methods), key=lambda p: p.peak)
        if worst.peak > free:
            fix = suggest_fix(worst, worst_config(shape), None, free)
            raise SystemExit(f"gpu_sweep: --config {args.config} needs {worst.peak_gib:.1f} GiB ({worst.method}), "
                             f"{free / GiB:.1f} GiB are free; fix: {fix}")
    t_build = time.perf_counter()
    bundle, cfg = build_bundle(kb, args.config, device, dtype, args.seed)
    n_params = sum(p.numel() for p in bundle.model.parameters())
    build_s = time.perf_counter() - t_build
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    snapshot_device = "same" if cuda else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        runner = TargetRunner(bundle, kb, k_mode="dataset", probe_mode="exact", lora=args.lora, cache_dir=tmp,
                              batch_size="auto", snapshot_device=snapshot_device, progress=False, seed=args.seed)
        baseline_s = time.perf_counter() - t0
        probe_time, probes = [0.0], [0]
        known_after = runner.known_after

        def timed(model_fn=None):
            _sync(device)
            start = time.perf_counter()
            out = known_after(model_fn)
            _sync(device)
            probe_time[0] += time.perf_counter() - start
            probes[0] += 1
            return out

        runner.known_after = timed
        per_method = {m: {"points": 0, "seconds": 0.0, "steps": 0} for m in methods}
        per_target, points = [], 0
        t_sweep = time.perf_counter()
        for t in targets:
            t_target = time.perf_counter()
            for m in methods:
                u = runner.unlearner(m)
                start = time.perf_counter()
                n = sum(1 for _ in runner.run(t, u, seed=args.seed))
                _sync(device)
                per_method[m]["seconds"] += time.perf_counter() - start
                per_method[m]["points"] += n
                grid = u.check_grid(u.params.grid)
                per_method[m]["steps"] += int(max(grid)) if m in ("ga", "npo") else runner.protocol.reinforce_steps
                points += n
            per_target.append(time.perf_counter() - t_target)
        sweep_s = time.perf_counter() - t_sweep
        peak = torch.cuda.max_memory_allocated(device) if cuda else None

        ref = {"points": 0}
        if args.ref_points > 0:
            times = [reference_point(bundle, kb, Path(tmp) / f"ref{i}", device, dtype) for i in range(args.ref_points)]
            ref = {"points": len(times), "seconds_per_point": sum(times) / len(times)}

    qa_tokens = [len(p) + len(a) for p, a in _encoded(bundle, kb)]
    seq = max(qa_tokens)
    from deepunlearn.probe.batching import resolve_batch_size

    probe_batch = min(len(kb), resolve_batch_size("auto", bundle.model, device, positions=8, seq=seq))
    run = RunShape(lora=args.lora, dtype=dtype_name, seq=seq, probe_batch=probe_batch, snapshot_device=snapshot_device)
    plans = {m: plan_memory(cfg, m, run, fix_for=None) for m in methods}
    plan_peak = max(p.peak for p in plans.values()) if plans else 0
    plan_alloc = plan_peak - (plans[methods[0]].parts["cuda_context"] if plans else 0)

    lim = limits_for(device, args)
    d = torch.finfo(dtype).bits // 8
    trainable = plans[methods[0]].trainable if plans else n_params
    # one optimizer step reads the weights forward and backward, and moves per trainable parameter
    # the gradient (d written, d read, float32 copy 8), the master (8), exp_avg (8), exp_avg_sq (8)
    step_bytes = 2 * n_params * d + trainable * (2 * d + 32)
    steps = sum(v["steps"] for v in per_method.values())
    optimizer_min_s = steps * step_bytes / lim["bandwidth"]
    probe_flops = 2 * n_params * sum(qa_tokens)  # one teacher-forced pass over every question + answer
    probe_min_s = probes[0] * probe_flops / lim["flops"]
    train_s = sweep_s - probe_time[0]
    ours_per_point = sweep_s / points if points else None
    if ref.get("seconds_per_point") and ours_per_point:
        ref["ratio_to_ours"] = ref["seconds_per_point"] / ours_per_point
    result = {
        "config": args.config, "device": str(device), "device_name": lim["device_name"], "dtype": dtype_name,
        "lora": args.lora, "params": n_params, "trainable": trainable, "kb": args.kb, "facts": len(kb),
        "targets": len(targets), "methods": methods, "points": points, "probes": probes[0],
        "build_s": build_s, "baseline_probe_s": baseline_s, "sweep_s": sweep_s, "probe_s": probe_time[0],
        "train_s": train_s, "points_per_s": points / sweep_s if sweep_s else None,
        "probed_facts_per_s": probes[0] * len(runner.known) / probe_time[0] if probe_time[0] else None,
        "seconds_per_target": sweep_s / len(targets) if targets else None,
        "seconds_per_target_max": max(per_target) if per_target else None,
        "per_method": {m: {**v, "seconds_per_target": v["seconds"] / len(targets)} for m, v in per_method.items()},
        "probe_batch": probe_batch,
        "peak_gib": peak / GiB if peak is not None else None,
        "plan_peak_gib": plan_peak / GiB, "plan_allocated_gib": plan_alloc / GiB,
        "plan_by_method_gib": {m: p.peak_gib for m, p in plans.items()},
        "gpu_limits": {**lim, "optimizer_steps": steps, "optimizer_step_bytes": step_bytes,
                       "optimizer_min_s": optimizer_min_s, "probe_flops": probe_flops, "probe_min_s": probe_min_s,
                       "train_ratio": train_s / optimizer_min_s if optimizer_min_s else None,
                       "probe_ratio": probe_time[0] / probe_min_s if probe_min_s else None},
        "reference_protocol": ref, "notes": notes,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return result


def worst_config(shape: dict):
    from deepunlearn.unlearn.plan import load_config

    return load_config(shape)[1]


def _encoded(bundle, kb):
    from deepunlearn.probe.prompts import encode_pairs

    return encode_pairs(bundle.tokenizer, bundle.prompt, kb.probes())


if __name__ == "__main__":
    main()
