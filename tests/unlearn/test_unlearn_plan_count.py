"""The plan's counts by formula (:mod:`deepunlearn.unlearn.plan_count`) equal the model built on
torch's meta device, exactly: parameters (tied embeddings once), peft's default LoRA adapter,
buffer bytes and the MLP kind, for every architecture counted, at two sizes, tied and untied,
for the presets and for the tiny models the tool builds. And ``deepunlearn plan`` on such a
config imports no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.unlearn.plan import PlanError, meta_skeleton
from deepunlearn.unlearn.plan_config import PRESETS
from deepunlearn.unlearn.plan_count import COUNTED, count, plain_config

SIZES = [dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=100),
         dict(hidden_size=96, intermediate_size=160, num_hidden_layers=3, num_attention_heads=6,
              num_key_value_heads=2, head_dim=32, vocab_size=120)]
#: variants whose fields change the count
VARIANTS = [("phi", {"qk_layernorm": True}), ("gpt_neox", {"rotary_pct": 0.5, "attention_bias": False}),
            ("llama", {"attention_bias": True, "mlp_bias": True}), ("qwen3", {"attention_bias": True}),
            ("phi", {"partial_rotary_factor": 0.25})]


def _document(mt: str, size: dict, **extra) -> dict:
    if mt == "gpt2":
        size = {"n_embd": size["hidden_size"], "n_layer": size["num_hidden_layers"],
                "n_head": size["num_attention_heads"], "n_inner": size["intermediate_size"],
                "vocab_size": size["vocab_size"]}
    return {"model_type": mt, **size, **extra}


def _meta(data: dict, lora_r):
    """What the meta-device model says of transformers' config of ``data`` (None: peft has no
    default adapter for it)."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(data["model_type"], **{k: v for k, v in data.items() if k != "model_type"})
    try:
        sk = meta_skeleton(cfg, lora_r)
    except PlanError:
        return cfg, None
    return cfg, (sk.params, sk.lora, sk.buffer_bytes, sk.gated)


def _check(data: dict) -> None:
    for lora_r in (None, 8):
        cfg, want = _meta(data, lora_r)
        plain = plain_config(data)
        assert plain is not None, data
        assert count(plain, lora_r) == want, (data, lora_r)
        assert count(cfg, lora_r) == want, (data, lora_r)  # transformers' config reads the same


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mt", COUNTED)
@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("tied", [False, True])
def test_the_formula_counts_what_the_meta_device_model_holds(mt, size, tied):
    _check(_document(mt, SIZES[size], tie_word_embeddings=tied))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mt, extra", VARIANTS)
def test_fields_that_change_the_count_are_counted(mt, extra):
    _check(_document(mt, SIZES[0], **extra))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_presets_count_as_built(name):
    _check(PRESETS[name])


@pytest.mark.filterwarnings("ignore")
def test_the_tiny_models_count_as_built():
    from deepunlearn.probe.tiny import ARCHS, tiny_config

    tok = type("Tok", (), {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "__len__": lambda self: 293})()
    assert set(ARCHS) <= set(COUNTED)
    for arch in ARCHS:
        for hidden, layers, heads in ((32, 1, 2), (64, 2, 4)):
            cfg = tiny_config(tok, hidden=hidden, layers=layers, heads=heads, arch=arch)
            for lora_r in (None, 8):
                try:
                    sk = meta_skeleton(cfg, lora_r)
                    want = (sk.params, sk.lora, sk.buffer_bytes, sk.gated)
                except PlanError:
                    want = None
                assert count(cfg, lora_r) == want, (arch, hidden, lora_r)
                assert count(plain_config(cfg.to_dict()), lora_r) == want, (arch, hidden, lora_r)


def test_an_architecture_without_a_formula_is_left_to_the_meta_device():
    assert plain_config({"model_type": "bert", "hidden_size": 8}) is None
    assert count(type("C", (), {"model_type": "bert"})()) is None
    assert plain_config({"model_type": "llama", "hidden_size": 10, "num_attention_heads": 4}) is None  # 10 % 4


def test_plan_imports_no_torch(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(_document("gpt2", SIZES[0])))
    code = ("import sys, io, contextlib\n"
            "from deepunlearn.cli import main\n"
            "for argv in (['plan', '--model', 'llama-2-7b', '--method', 'ga', '--lora'],\n"
            f"             ['plan', '--model', {str(f)!r}, '--method', 'npo', '--json']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        assert main(argv) == 0\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
