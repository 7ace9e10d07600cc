"""``deepunlearn model info|import`` on the minimal checkpoint and on bad input: info
counts parameters without loading weights and names the answer format and
where it comes from; import refuses a file that is not GGUF, a truncated one and an ``-o`` it
must not replace, writing nothing."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_info_of_a_checkpoint_folder(mini_model_dir, capsys):
    from deepunlearn.probe import load_model

    code, out, err = run(capsys, "model", "info", str(mini_model_dir), "--json")
    assert code == 0, err
    d = json.loads(out)
    b = load_model(mini_model_dir, device="cpu")
    assert d["architecture"] == "llama" and d["class"] == "LlamaForCausalLM"
    assert d["parameters"] == b.num_parameters() and d["layers"] == 1 and d["hidden_size"] == 16
    assert d["vocab_size"] == b.model.config.vocab_size and d["dtype"].startswith("F32 (")
    assert d["tokenizer"] == {"size": len(b.tokenizer), "pad": "<pad>", "eos": "</s>", "bos": "<s>",
                              "chat_template": False}
    assert d["prompt_format"] == {**b.prompt.describe(), "source": "recorded"} and d["source"] == "folder"
    code, out, _ = run(capsys, "model", "info", str(mini_model_dir))
    assert code == 0 and out.startswith(f"{mini_model_dir}: llama (LlamaForCausalLM), ")
    assert "answer format: " in out and "(recorded)" in out


def test_info_without_deepunlearn_json_takes_the_family_format(mini_copy, capsys):
    (mini_copy / "deepunlearn.json").unlink()
    code, out, _ = run(capsys, "model", "info", str(mini_copy), "--json")
    assert code == 0 and json.loads(out)["prompt_format"]["source"] == "family"
    assert json.loads(out)["prompt_format"]["name"] == "llama"


def test_info_of_a_gguf_file_reads_its_header(tmp_path, capsys):
    from test_probe_gguf import write_gguf

    f = write_gguf(tmp_path / "m.gguf")
    code, out, err = run(capsys, "model", "info", str(f), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert (d["architecture"], d["parameters"], d["layers"], d["dtype"]) == ("llama", 4096, 1, "F32 (1)")
    assert d["prompt_format"]["source"] == "family" and d["tokenizer"]["size"] is None


def test_info_of_an_unknown_architecture_exits_1(mini_copy, capsys):
    cfg = json.loads((mini_copy / "config.json").read_text())
    (mini_copy / "config.json").write_text(json.dumps({**cfg, "model_type": "foo"}))
    code, out, err = run(capsys, "model", "info", str(mini_copy), "--json")
    assert code == 1
    assert err.startswith(f"deepunlearn model: error: {mini_copy / 'config.json'}: unknown architecture 'foo'")
    assert json.loads(out)["field"] == "model_type" and err.count("\n") == 1


@pytest.mark.parametrize("content", [b"not a model at all", b"GGUF\x03\x00\x00\x00"])
def test_import_of_a_bad_file_writes_nothing(content, tmp_path, capsys):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(content)
    out = tmp_path / "out"
    code, stdout, err = run(capsys, "model", "import", str(bad), "-o", str(out), "--json")
    assert code == 1 and err.count("\n") == 1 and str(bad) in err
    why = "not a GGUF file" if content[:4] != b"GGUF" else "not a readable GGUF file"
    assert why in json.loads(stdout)["error"] and json.loads(stdout)["file"] == str(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.gguf"]


def test_import_refuses_a_folder_of_other_files_and_its_own_folder(tmp_path, capsys):
    from test_probe_gguf import write_gguf

    f = write_gguf(tmp_path / "m.gguf")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code, _, err = run(capsys, "model", "import", str(f), "-o", str(other))
    assert code == 1 and err == (f"deepunlearn model: error: -o {other}: a non-empty folder that is not a model "
                                 "folder of this tool (no deepunlearn.json); refusing to replace it (pass --force to replace it)\n")
    assert [p.name for p in other.iterdir()] == ["keep.txt"]
    code, _, err = run(capsys, "model", "import", str(f), "-o", str(tmp_path))
    assert code == 1 and "holds the GGUF file being imported" in err and f.exists()


def test_import_of_an_unloadable_gguf_leaves_an_existing_model_folder_untouched(mini_copy, tmp_path, capsys):
    from test_probe_gguf import write_gguf

    f = write_gguf(tmp_path / "m.gguf")  # a valid header, but no model transformers can build from it
    before = {p.name: p.read_bytes() for p in mini_copy.iterdir()}
    code, out, err = run(capsys, "model", "import", str(f), "-o", str(mini_copy), "--json")
    assert code == 1 and err.count("\n") == 1 and json.loads(out)["file"] == str(f)
    assert {p.name: p.read_bytes() for p in mini_copy.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "model"]
