"""Model files that declare more than they hold, and cache folders that are files: a small GGUF
file declaring 4,096 layers 65,536 wide, a checkpoint whose config.json does the same beside
small safetensors files, forged safetensors headers, a config asking for its own code handed to
``plan``, and ``--cache-dir`` / ``DEEPUNLEARN_CACHE`` naming a file. Each is exit 1 with one
line naming the file and the key or flag, before anything large is allocated."""

from __future__ import annotations

import json
import resource
import struct
import time

import numpy as np
import pytest

from deepunlearn.cli import main
from deepunlearn.probe import ModelLoadError, load_model
from deepunlearn.probe.model_bounds import MAX_SAFETENSORS_HEADER, read_safetensors_header

HUGE = {"num_hidden_layers": 4096, "hidden_size": 65536, "intermediate_size": 65536}


def write_huge_gguf(path):
    """A GGUF file of under 1 KB whose header declares 4,096 blocks 65,536 wide, with a small
    but valid tokenizer and one 3 x 16 tensor (it once hung ``model import``)."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    w.add_block_count(4096)
    w.add_embedding_length(65536)
    w.add_feed_forward_length(65536)
    w.add_head_count(64)
    w.add_context_length(128)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "ab"])
    w.add_token_merges(["a b"])
    w.add_eos_token_id(0)
    w.add_tensor("token_embd.weight", np.zeros((3, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def _grown_kib(before: int) -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before


@pytest.mark.parametrize("command", ["import", "info"])
def test_a_gguf_header_its_tensors_cannot_back_is_refused_at_once(tmp_path, capsys, command):
    f = write_huge_gguf(tmp_path / "huge.gguf")
    assert f.stat().st_size < 2500
    before, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    argv = ["model", "import", str(f), "-o", str(tmp_path / "out")] if command == "import" else ["model", "info", str(f)]
    assert main(argv) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.endswith(f"{f}: llama.block_count = 4,096 and llama.embedding_length = 65,536 plan at least "
                         "17,592,186,241,024 parameters but its tensors hold 48; refused (a damaged or forged GGUF "
                         "header)")
    assert time.perf_counter() - t0 < 30 and _grown_kib(before) < 500_000
    assert not (tmp_path / "out").exists()


def test_load_model_names_the_gguf_key(tmp_path):
    f = write_huge_gguf(tmp_path / "huge.gguf")
    with pytest.raises(ModelLoadError) as e:
        load_model(f, device="cpu")
    assert e.value.file == str(f) and e.value.field == "llama.block_count"


def test_a_config_its_safetensors_headers_cannot_back_is_refused_before_building(mini_copy):
    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, **HUGE}))
    before, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    assert str(e.value).startswith(f"{mini_copy / 'config.json'}: num_hidden_layers = 4,096 and hidden_size = 65,536 "
                                   "plan at least 17,592,188,469,248 parameters but the safetensors headers declare ")
    assert e.value.field == "num_hidden_layers"
    assert time.perf_counter() - t0 < 1.5 and _grown_kib(before) < 500_000  # no skeleton of 4,096 layers built


def test_safetensors_headers_are_bounded_and_their_data_must_be_in_the_file(tmp_path):
    big = tmp_path / "big.safetensors"
    big.write_bytes(struct.pack("<Q", MAX_SAFETENSORS_HEADER + 1) + b"{}")
    with pytest.raises(ModelLoadError, match=rf"^{big}: safetensors header of 100,000,001 bytes; refused"):
        read_safetensors_header(big)
    header = json.dumps({"w": {"dtype": "F32", "shape": [4096, 4096], "data_offsets": [0, 4 * 4096 * 4096]}}).encode()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    with pytest.raises(ModelLoadError) as e:
        read_safetensors_header(cut)
    assert str(e.value) == f"{cut}: truncated safetensors file (tensor 'w' ends at byte 67,108,864 of 64 data bytes)"


@pytest.mark.parametrize("as_file", [False, True], ids=["folder", "config.json"])
def test_plan_refuses_a_config_with_its_own_code_as_loading_does(mini_copy, capsys, as_file):
    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModelForCausalLM": "evil.Model"}}))
    with pytest.raises(ModelLoadError) as loaded:
        load_model(mini_copy, device="cpu")
    target = mini_copy / "config.json" if as_file else mini_copy
    assert main(["plan", "--model", str(target), "--method", "ga"]) == 1
    line = _one_line(capsys.readouterr().err)
    refusal = f"{mini_copy}: config.json asks to run the folder's own code (auto_map evil.Model); refused; "
    assert str(loaded.value).startswith(refusal) and refusal in line


def test_cache_dir_that_is_a_file_is_one_line_naming_the_flag(mini_model_dir, mini_kb_file, tmp_path, capsys):
    f = tmp_path / "small.json"
    f.write_text("{}")
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--cache-dir", str(f)]) == 1
    assert _one_line(capsys.readouterr().err).endswith(f"--cache-dir {f}: is a file, expected a folder")
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--cache-dir", str(f / "sub")]) == 1
    assert _one_line(capsys.readouterr().err).endswith(f"--cache-dir {f / 'sub'}: lies under {f}, a file, expected a folder")


def test_deepunlearn_cache_that_is_a_file_is_one_line_naming_it(mini_kb_file, tmp_path, monkeypatch, capsys):
    f = tmp_path / "small.json"
    f.write_text("{}")
    monkeypatch.setenv("DEEPUNLEARN_CACHE", str(f))
    assert main(["probe", "--model", "tiny", "--kb", str(mini_kb_file)]) == 1
    assert _one_line(capsys.readouterr().err).endswith(f"DEEPUNLEARN_CACHE {f}: is a file, expected a folder")


def test_a_bpe_merge_outside_the_vocabulary_is_one_line_not_a_rust_panic(tmp_path, capfd):
    # the tokenizers library panics on it (a BaseException with a Rust backtrace on stderr)
    from gguf import GGUFWriter

    f = tmp_path / "merges.gguf"
    w = GGUFWriter(str(f), "llama")
    for add, value in ((w.add_block_count, 1), (w.add_embedding_length, 16), (w.add_head_count, 2),
                       (w.add_context_length, 128), (w.add_tokenizer_model, "gpt2"), (w.add_eos_token_id, 0)):
        add(value)
    w.add_token_list(["a", "b", "c"])
    w.add_token_merges(["a b"])
    w.add_tensor("token_embd.weight", np.zeros((3, 16), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((16, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert main(["model", "import", str(f), "-o", str(tmp_path / "out")]) == 1
    assert _one_line(capfd.readouterr().err).endswith(
        f"{f}: tokenizer.ggml.merges[0] = 'a b' makes 'ab', which is not in tokenizer.ggml.tokens; refused "
        "(a damaged tokenizer)")


def test_a_dimension_left_out_of_the_gguf_header_counts_as_transformers_default(tmp_path):
    from gguf import GGUFWriter

    from deepunlearn.probe.gguf import check_gguf

    f = tmp_path / "noemb.gguf"
    w = GGUFWriter(str(f), "llama")
    w.add_block_count(4096)  # 4,096 layers of Llama's default 4,096 width: 68.7 billion parameters
    w.add_tensor("token_embd.weight", np.zeros((3, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelLoadError) as e:
        check_gguf(f)
    assert str(e.value) == (f"{f}: llama.block_count = 4,096 and llama.embedding_length (absent: 4,096 by default) "
                            "plan at least 68,719,476,736 parameters but its tensors hold 48; refused (a damaged or "
                            "forged GGUF header)")


def test_a_small_safetensors_header_padded_to_a_large_file_does_not_pass_for_weights(mini_copy):
    # its size would pass the file-size check; its header declares 4 elements
    for f in mini_copy.glob("*.safetensors"):
        f.unlink()
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    with open(mini_copy / "model.safetensors", "wb") as h:
        h.write(struct.pack("<Q", len(header)) + header + b"\0" * 16)
        h.truncate(64 << 20)  # sparse: 64 MiB on paper
    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, "hidden_size": 256, "intermediate_size": 2048,
                                                       "num_attention_heads": 4, "num_key_value_heads": 4,
                                                       "head_dim": 64, "num_hidden_layers": 4}))
    with pytest.raises(ModelLoadError, match=r"config\.json describes a model of [\d,]+ parameters but its safetensors "
                                             r"headers declare 4; refused"):
        load_model(mini_copy, device="cpu")
