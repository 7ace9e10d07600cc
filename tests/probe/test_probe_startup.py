"""What runs before a model is loaded stays cheap and keeps its refusals: ``model info`` of a
folder reads headers without importing torch; ``data`` commands never import torch; on CUDA a
model larger than the device's free memory is refused before anything is copied there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.probe.model_bounds import check_device_memory
from deepunlearn.probe.hf_tables import auto_table, known_model_types
from deepunlearn.probe.model_headers import folder_summary
from deepunlearn.probe.sources import ModelLoadError

ROOT = Path(__file__).resolve().parents[2]
HEAVY = "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules); print('HEAVY', heavy)"


def _heavy_after(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n{HEAVY}"], capture_output=True, text=True,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_model_info_of_a_folder_imports_neither_torch_nor_transformers(mini_model_dir):
    code = (f"from deepunlearn.cli import main\n"
            f"assert main(['model', 'info', {str(mini_model_dir)!r}, '--json']) == 0")
    assert _heavy_after(code) == "HEAVY []"


def test_data_commands_do_not_import_torch(tmp_path):
    kb = tmp_path / "kb.json"
    code = (f"from deepunlearn.cli import main\n"
            f"assert main(['data', 'generate', '--people', '12', '-o', {str(kb)!r}]) == 0\n"
            f"assert main(['data', 'show', {str(kb)!r}, '--json']) == 0")
    assert _heavy_after(code) == "HEAVY []"


def test_transformers_tables_read_from_source_agree_with_the_imported_ones():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    known = known_model_types()
    assert known and known <= set(CONFIG_MAPPING_NAMES) and "llama" in known
    assert auto_table("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES") == dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def test_info_falls_back_to_transformers_where_the_headers_do_not_say(mini_copy, capsys):
    from deepunlearn.cli import main

    cfg = json.loads((mini_copy / "config.json").read_text())
    del cfg["num_hidden_layers"]  # left to the config class's default: only transformers knows it
    (mini_copy / "config.json").write_text(json.dumps(cfg))
    assert folder_summary(mini_copy, cfg) is None
    assert main(["model", "info", str(mini_copy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == 32  # LlamaConfig's default


def test_unknown_architecture_is_refused_by_the_torch_free_check_too(mini_copy):
    from deepunlearn.probe.sources import check_folder

    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, "model_type": "lama"}))
    with pytest.raises(ModelLoadError, match=r"unknown architecture 'lama' \(model_type\); .* the closest being llama"):
        check_folder(mini_copy, torch_free=True)


@pytest.fixture
def fake_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 << 30, 8 << 30))


def test_a_model_larger_than_the_free_gpu_memory_is_refused_before_loading(fake_gpu):
    import torch

    with pytest.raises(ModelLoadError) as e:
        check_device_memory(1_500_000_000, torch.float32, "cuda:0", "m")
    assert str(e.value) == ("m: 1,500,000,000 parameters in float32 need 5.6 GiB, but cuda:0 has 2.0 GiB free of 8.0 "
                            "GiB; refused before loading (try --dtype bf16, or a larger GPU)")
    check_device_memory(1_000_000_000, torch.bfloat16, "cuda:0", "m")  # 1.9 GiB: fits
    check_device_memory(10**12, torch.float32, "cpu", "m")  # CPU: the operating system's to give
