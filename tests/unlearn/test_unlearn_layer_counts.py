"""A config.json whose layer count is not a count, or fewer layers than its safetensors hold,
is refused before a model is built (transformers would drop the extra layers' weights without a
word), by ``plan`` as by loading; a manifest row whose param is NaN or inf is refused (a NaN
never equals itself, so its verdict would never be found on resume and the row judged again)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main

CONFIG = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
          "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 16}


def _folder(tmp_path, layers, held: int = 2, name: str = "m"):
    import torch
    from safetensors.torch import save_file

    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": layers}))
    save_file({f"model.layers.{i}.mlp.up_proj.weight": torch.zeros(16, 8) for i in range(held)}
              | {"model.embed_tokens.weight": torch.zeros(32, 8)}, str(d / "model.safetensors"))
    return d


@pytest.mark.parametrize("layers", [0, -1, -5, True, "2"])
def test_plan_refuses_a_layer_count_that_is_no_count(tmp_path, capsys, layers):
    d = _folder(tmp_path, layers)
    assert main(["plan", "--model", str(d), "--method", "ga", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["field"] == "num_hidden_layers" and "expected a whole number of layers >= 1" in out["error"]


@pytest.mark.parametrize("layers", [0, -1])
def test_loading_refuses_a_layer_count_that_is_no_count(tmp_path, layers):
    from deepunlearn.probe.model_bounds import check_fits
    from deepunlearn.probe.sources import ModelLoadError

    d = _folder(tmp_path, layers)
    with pytest.raises(ModelLoadError, match="expected a whole number of layers >= 1"):
        check_fits(d, json.loads((d / "config.json").read_text()))


def test_loading_refuses_fewer_layers_than_the_weights_hold(tmp_path):
    from deepunlearn.probe.model_bounds import check_layers_held
    from deepunlearn.probe.sources import ModelLoadError

    d = _folder(tmp_path, 1, held=2)
    with pytest.raises(ModelLoadError, match=r"num_hidden_layers = 1 but the safetensors hold layers up to 1"):
        check_layers_held(d, json.loads((d / "config.json").read_text()))
    check_layers_held(_folder(tmp_path, 2, held=2, name="ok"), {**CONFIG, "num_hidden_layers": 2})  # as held: fine


@pytest.mark.parametrize("param", ["nan", "inf", "-inf"])
def test_a_manifest_param_that_is_not_finite_is_refused(tmp_path, param):
    from deepunlearn.unlearn.evaluate_manifest import ManifestError, read_manifest

    m = tmp_path / "m.csv"
    m.write_text(f"checkpoint,target,method,param\nck,4,ga,{param}\n")
    with pytest.raises(ManifestError, match="row 1 \\(line 2\\): field 'param' is .*expected a finite number"):
        read_manifest(m)
