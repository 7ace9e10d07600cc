"""The memory plan (``deepunlearn plan``) and probe batches sized to memory:
Llama-2-7b's figures checked by hand, the activation factor against saved-tensor
hooks, bad input, and the batch-size arithmetic with injected free memory."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main

GiB = 2 ** 30
#: Llama-2-7b's published config (the shapes that decide its size)
LLAMA2_7B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
             "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
             "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "hidden_act": "silu"}
N7B = 6_738_415_616


def run_json(capsys, *argv) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.fixture
def llama2_config(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(LLAMA2_7B))
    return f


def test_llama2_7b_full_adamw_does_not_fit_80_lora_does(capsys, llama2_config):
    code, full = run_json(capsys, "plan", "--model", str(llama2_config), "--method", "ga", "--dtype", "bf16")
    assert code == 0
    assert full["params"] == N7B and full["trainable"] == N7B
    parts = full["parts"]
    # by hand, bf16 (2 bytes) with float32 masters: weights 2N, grads 2N, masters 4N, AdamW 8N,
    # float32 grads 4N, foreach sqrt temp 4N; the optimizer step is the peak: 22N bytes
    assert parts["weights"] == pytest.approx(2 * N7B / GiB, abs=1e-3)          # 12.551 GiB
    assert parts["master_weights"] == pytest.approx(4 * N7B / GiB, abs=1e-3)   # 25.103 GiB
    assert parts["adamw_states"] == pytest.approx(8 * N7B / GiB, abs=1e-3)     # 50.205 GiB
    assert full["phases"]["step"] == pytest.approx(22 * N7B / GiB, abs=1e-3)   # 138.064 GiB
    assert full["phases"]["train"] == pytest.approx(
        16 * N7B / GiB + parts["activations"] + parts["logits"], abs=2e-3)
    # activations: 1 x 64 tokens x 32 layers x (2 (6h + 4kv + 4I) + 4h) bytes
    assert parts["activations"] == pytest.approx(64 * 32 * (2 * (10 * 4096 + 4 * 11008) + 4 * 4096) / GiB, abs=1e-3)
    assert full["peak_gib"] == pytest.approx(22 * N7B / GiB + 0.5, abs=1e-3)
    assert full["peak_phase"] == "step" and full["host_gib"] == pytest.approx(2 * N7B / GiB, abs=1e-3)
    assert full["fits"] == {"24": False, "40": False, "80": False, "141": True}
    assert full["fix"].startswith("LoRA (--lora): ")

    code, lora = run_json(capsys, "plan", "--model", str(llama2_config), "--method", "ga", "--lora")
    assert code == 0
    assert lora["trainable"] == 32 * 2 * 8 * (4096 + 4096)  # peft's default q_proj, v_proj at r=8
    assert lora["fits"] == {"24": True, "40": True, "80": True, "141": True} and lora["fix"] is None
    assert 12.5 < lora["peak_gib"] < 16
    assert lora["host_gib"] == 0  # no weight snapshot in LoRA mode


def test_methods_keep_their_copies(capsys):
    code, whp = run_json(capsys, "plan", "--model", "llama-2-7b", "--method", "whp")
    _, tv = run_json(capsys, "plan", "--model", "llama-2-7b", "--method", "tv")
    _, tv_same = run_json(capsys, "plan", "--model", "llama-2-7b", "--method", "tv", "--snapshot-device", "same")
    _, whp_lora = run_json(capsys, "plan", "--model", "llama-2-7b", "--method", "whp", "--lora")
    w = whp["parts"]["weights"]
    assert whp["parts"]["method_copy"] == pytest.approx(w)                     # WHP's deepcopy, on the GPU
    assert tv["parts"]["method_copy"] == 0 and tv["host_gib"] == pytest.approx(2 * w, abs=3e-3)  # snapshot + reinforced
    assert tv_same["parts"]["snapshot"] == pytest.approx(w) and tv_same["host_gib"] == 0
    assert whp_lora["parts"]["method_copy"] == 0
    assert whp["parts"]["probe"] > 5 * tv["parts"]["probe"]  # WHP probes every position in float64
    assert whp_lora["parts"]["probe"] == whp["parts"]["probe"]  # adapter on/off: two distributions too


def test_tied_embeddings_count_once_and_finetune_is_float32(capsys):
    code, obj = run_json(capsys, "plan", "--model", "smollm2-135m", "--method", "finetune")
    assert code == 0 and obj["params"] == 134_515_008 and obj["batch"] == 16
    assert obj["parts"]["weights"] == pytest.approx(4 * 134_515_008 / GiB, abs=1e-3)
    assert obj["parts"]["master_weights"] == 0


@pytest.mark.parametrize("text,field,needle", [
    ("{bad", None, "not valid JSON"),
    ('{"model_type": "no-such-arch", "hidden_size": 8}', "model_type", "unknown architecture 'no-such-arch'"),
    ('{"hidden_size": 8}', "model_type", "model_type: missing"),
    ("[1, 2]", None, "expected a JSON object"),
])
def test_bad_config_is_one_clear_line(tmp_path, capsys, text, field, needle):
    f = tmp_path / "config.json"
    f.write_text(text)
    code = main(["plan", "--model", str(f), "--method", "ga", "--json"])
    cap = capsys.readouterr()
    assert code == 1
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deepunlearn plan: error: ") and str(f) in err[0] and needle in err[0]
    obj = json.loads(cap.out)
    assert obj["file"] == str(f) and obj["field"] == field and needle in obj["error"]


def test_every_plan_flag_has_help():
    import argparse

    from deepunlearn.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    plan = sub.choices["plan"]
    assert [a.option_strings for a in plan._actions if a.option_strings and not a.help] == []
    assert "llama-2-7b" in plan.format_help()


def test_missing_path_and_bad_method(tmp_path, capsys):
    code = main(["plan", "--model", str(tmp_path / "nope"), "--method", "ga"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "--model" in err and "no such file or folder" in err
    with pytest.raises(SystemExit) as e:
        main(["plan", "--model", "llama-2-7b", "--method", "sgd"])
    assert e.value.code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["plan", "--model", str(empty), "--method", "ga"]) == 1
    assert "no config.json" in capsys.readouterr().err


@pytest.mark.parametrize("data,needle", [
    (b"not a gguf file at all", "does not start with the GGUF magic bytes"),
    (b"GGUF\x03\x00\x00\x00\x01\x00", "a truncated or corrupt GGUF file"),
])
def test_bad_gguf_is_one_clear_line(tmp_path, capsys, data, needle):
    f = tmp_path / "model.gguf"
    f.write_bytes(data)
    code = main(["plan", "--model", str(f), "--method", "ga", "--json"])
    cap = capsys.readouterr()
    assert code == 1 and cap.err.count("\n") == 1 and needle in cap.err and str(f) in cap.err
    assert json.loads(cap.out)["file"] == str(f)


@pytest.mark.parametrize("arch,dtype", [("llama", "float32"), ("llama", "bfloat16"), ("gpt2", "float32")])
def test_activation_factor_matches_saved_tensors(arch, dtype):
    """The per-layer activation factor against what autograd really saves (two layers minus one)."""
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    from deepunlearn.probe.batching import config_dims
    from deepunlearn.unlearn.plan import activation_bytes, skeleton

    def cfg(layers):
        if arch == "gpt2":
            # attention dropout off: on CPU it makes SDPA keep the probability matrix (heads x T a
            # token), which flash attention on a GPU does not
            return GPT2Config(n_embd=64, n_layer=layers, n_head=4, vocab_size=50, bos_token_id=0, eos_token_id=0,
                              attn_pdrop=0.0)
        return LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=layers, num_attention_heads=4,
                           vocab_size=50)

    def saved(c):
        torch.manual_seed(0)
        m = AutoModelForCausalLM.from_config(c).to(getattr(torch, dtype)).train()
        params = {p.data_ptr() for p in m.parameters()}
        seen: dict[int, int] = {}

        def pack(t):
            if t.data_ptr() not in params and t.numel():
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            m(input_ids=torch.randint(0, 50, (2, 32)), use_cache=False)
        return sum(seen.values())

    measured = saved(cfg(2)) - saved(cfg(1))
    d = 2 if dtype == "bfloat16" else 4
    planned = activation_bytes(config_dims(cfg(1)), batch=2, seq=32, dtype_bytes=d, gated=skeleton(cfg(1)).gated)
    assert planned == pytest.approx(measured, rel=0.1)


def test_probe_batch_sizing_with_injected_memory():
    from transformers import LlamaConfig

    from deepunlearn.probe.batching import CPU_BATCH, auto_batch_size, probe_row_bytes, resolve_batch_size

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
                      vocab_size=32000)
    row = probe_row_bytes(cfg, dtype_bytes=2, positions=8, seq=40)
    assert row == 8 * 32000 * 12 + 40 * (2 * (6 * 2048 + 3 * 5632) + 4 * 2048)
    assert auto_batch_size(4 * GiB, row) == int(4 * GiB * 0.8) // row
    assert auto_batch_size(80 * GiB, row) == 1024 and auto_batch_size(1000, row) == 1
    gen = probe_row_bytes(cfg, dtype_bytes=2, positions=8, seq=40, mode="generate")
    assert gen - row == 2 * 24 * 50 * 2048 * 2  # the KV cache of 40 + 10 positions

    class Tiny(torch_module()):
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                             vocab_size=1000)

    model = Tiny()
    assert resolve_batch_size(None, model, "cpu", positions=4, seq=10) == CPU_BATCH   # CPU: no CUDA call
    assert resolve_batch_size("auto", model, "cpu", positions=4, seq=10) == CPU_BATCH
    assert resolve_batch_size(7, model, "cpu", positions=4, seq=10) == 7
    # an injected free memory sizes it as on CUDA: fp32 row = 4*1000*16 + 10*(4*(384+384) + 256)
    row32 = 4 * 1000 * 16 + 10 * (4 * 768 + 256)
    assert resolve_batch_size("auto", model, "cuda", positions=4, seq=10, free_bytes=100 * row32) == 80
    with pytest.raises(ValueError, match="positive integer"):
        resolve_batch_size(0, model, "cpu", positions=4, seq=10)


def torch_module():
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2))

    return M


def test_probe_auto_batch_on_cpu_answers_as_fixed(tiny_bundle, small_kb):
    from deepunlearn.probe import probe

    ids = list(range(20))
    auto = probe(tiny_bundle, small_kb, ids, progress=False)                   # default: auto, 64 on CPU
    fixed = probe(tiny_bundle, small_kb, ids, batch_size=3, progress=False)
    assert (auto.known == fixed.known).all()
    assert auto.logprob == pytest.approx(fixed.logprob, abs=1e-4)
    with pytest.raises(ValueError, match="batch_size"):
        probe(tiny_bundle, small_kb, ids, batch_size=0, progress=False)


def live_bytes() -> int:
    """The bytes of every live CPU tensor storage, each storage counted once."""
    import gc
    import warnings

    import torch

    gc.collect()
    seen = {}
    with warnings.catch_warnings():  # isinstance on torch's deprecated module attributes warns
        warnings.simplefilter("ignore")
        tensors = [o for o in gc.get_objects() if torch.is_tensor(o)]
    for o in tensors:
        if o.device.type == "cpu" and o.numel():
            seen[o.untyped_storage().data_ptr()] = o.untyped_storage().nbytes()
    return sum(seen.values())


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_sam_step_copies_match_what_a_sam_step_holds(dtype):
    """With sam_rho > 0 the plan's extra step memory equals what sam_gradients really keeps alive
    while it takes the second gradient: the live tensor bytes (every storage counted once) at the
    second forward minus those at the first forward, on a tiny Llama trained in full."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from deepunlearn.unlearn.plan import RunShape, plan_memory
    from deepunlearn.unlearn.sam import sam_gradients

    cfg = LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
                      vocab_size=50)
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg).to(torch.float32 if dtype == "fp32" else torch.bfloat16)
    params = [p for p in m.parameters() if p.requires_grad]
    ids = torch.randint(0, 50, (1, 8))

    at = []

    def loss_fn():
        at.append(live_bytes())
        return m(input_ids=ids, labels=ids).loss

    loss_fn().backward()
    sam_gradients(params, loss_fn, 0.05)
    held = at[1] - at[0]
    plain = plan_memory(cfg, "ga", RunShape(dtype=dtype), fix_for=None)
    sam = plan_memory(cfg, "ga", RunShape(dtype=dtype, sam_rho=0.05), fix_for=None)
    extra = sam.parts.get("method_step", 0) - plain.parts.get("method_step", 0)
    assert extra == pytest.approx(held, rel=0.02) and extra > 0
    assert sam.phases["train"] - plain.phases["train"] == extra and sam.phases["step"] == plain.phases["step"]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_guard_copies_match_what_the_step_guard_saves(dtype):
    """With the step guard the plan adds what StepGuard.save really copies before a step: the
    live tensor bytes after the save minus before, on a tiny Llama whose AdamW (over float32
    master copies when bf16, as du_loop's descend) has taken one step; the guard is du_loop's only."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from deepunlearn.unlearn.methods.du_guard import StepGuard
    from deepunlearn.unlearn.plan import PlanError, RunShape, plan_memory

    cfg = LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
                      vocab_size=50)
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg).to(torch.float32 if dtype == "fp32" else torch.bfloat16)
    params = [p for p in m.parameters() if p.requires_grad]
    masters = [p.detach().float().requires_grad_(True) if p.dtype != torch.float32 else p for p in params]
    opt = torch.optim.AdamW(masters, lr=1e-3)
    for w in masters:
        w.grad = torch.ones_like(w)
    opt.step()
    for w in masters:
        w.grad = None
    state = params + [w for p, w in zip(params, masters) if w is not p]
    guard = StepGuard(lambda ids: set(), [], drop=0.05, min_scale=0.125)
    before = live_bytes()
    guard.save(state, opt)
    held = live_bytes() - before
    plain = plan_memory(cfg, "du_loop", RunShape(dtype=dtype), fix_for=None)
    guarded = plan_memory(cfg, "du_loop", RunShape(dtype=dtype, guard=True), fix_for=None)
    extra = guarded.parts["method_guard"]
    assert extra == pytest.approx(held, rel=0.02) and extra > 0 and "method_guard" not in plain.parts
    assert all(guarded.phases[k] - plain.phases[k] == extra for k in plain.phases)
    with pytest.raises(PlanError, match="--guard"):
        plan_memory(cfg, "ga", RunShape(dtype=dtype, guard=True), fix_for=None)


def test_sam_rho_is_planned_for_gradient_methods_only(capsys):
    code, obj = run_json(capsys, "plan", "--model", "smollm2-135m", "--method", "du_loop", "--sam-rho", "0.05")
    assert code == 0 and obj["parts"]["method_step"] == pytest.approx(2 * 2 * obj["trainable"] / GiB, abs=1e-3)
    code = main(["plan", "--model", "smollm2-135m", "--method", "tv", "--sam-rho", "0.05"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--sam-rho" in err and "tv" in err


def test_guard_flag_is_planned_for_du_loop_only(capsys):
    code, plain = run_json(capsys, "plan", "--model", "smollm2-135m", "--method", "du_loop")
    code2, obj = run_json(capsys, "plan", "--model", "smollm2-135m", "--method", "du_loop", "--guard")
    # bf16: the trained tensors (2 n), their float32 masters (4 n) and AdamW's two float32 states (8 n)
    assert code == code2 == 0 and obj["parts"]["method_guard"] == pytest.approx(14 * obj["trainable"] / GiB, abs=1e-3)
    assert obj["peak_gib"] > plain["peak_gib"] and "method_guard" not in plain["parts"]
    code = main(["plan", "--model", "smollm2-135m", "--method", "npo", "--guard"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--guard" in err and "npo" in err
