"""Loading a model safely: no code from a checkpoint folder, hub names without a network,
--device checked before loading, corrupt checkpoint files as one clear error."""

from __future__ import annotations

import json
import re
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.errors import UserError
from deepunlearn.probe import ModelLoadError, load_model
from deepunlearn.probe.sources import looks_local

ROOT = Path(__file__).resolve().parents[2]


def _evil_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A folder whose config names its own code (auto_map); the code writes a marker file."""
    folder, marker = tmp_path / "evil", tmp_path / "MARKER"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "evilmodel",
        "auto_map": {"AutoConfig": "evil_code.EvilConfig", "AutoModelForCausalLM": "evil_code.EvilModel"}}))
    (folder / "evil_code.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PretrainedConfig\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evilmodel'\n"
        "class EvilModel:\n    pass\n")
    return folder, marker


def test_remote_code_is_refused_and_no_prompt_reaches_stdout(tmp_path, mini_kb_file):
    # Before: transformers asked "Do you wish to run the custom code? [y/N]" on stdout and ran
    # evil_code.py on "y". The process boundary matters here (stdin, stdout), so a subprocess.
    folder, marker = _evil_folder(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HOME": str(tmp_path / "hf")}
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "probe", "--model", str(folder), "--kb",
                        str(mini_kb_file), "--json"], input="y\n", capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120)
    assert r.returncode == 1, r.stderr
    assert not marker.exists()
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    err = json.loads(lines[0])
    assert err == {
        "error": f"{folder}: config.json asks to run the folder's own code (auto_map evil_code.EvilConfig, "
                 "evil_code.EvilModel); refused; pass --trust-remote-code (trust_remote_code=True) to allow it",
        "file": str(folder / "config.json"), "field": "auto_map"}
    assert r.stderr.strip() == f"deepunlearn probe: error: {err['error']}"


def test_remote_code_in_tokenizer_config_is_refused_too(mini_copy):
    cfg = json.loads((mini_copy / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["evil.Tok", None]}
    (mini_copy / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match=r"tokenizer_config.json asks to run the folder's own code \(auto_map"):
        load_model(mini_copy, device="cpu")


def test_trust_remote_code_is_passed_explicitly_and_the_flag_reaches_every_model_command(
        tmp_path, monkeypatch, mini_kb_file):
    import transformers

    from deepunlearn.cli import build_parser
    from deepunlearn.probe.cli.probe import resolve_format

    seen = []

    def fake(source, **kw):
        seen.append(kw.get("trust_remote_code", "missing"))
        raise OSError("stop here")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake)
    folder, marker = _evil_folder(tmp_path)
    with pytest.raises(ModelLoadError, match="stop here"):
        load_model(folder, device="cpu", trust_remote_code=True)  # the flag lets it through ...
    assert seen == [True] and not marker.exists()  # ... (our fake ran nothing)
    parser = build_parser()
    for argv in (["probe", "--model", "m", "--kb", "k"],
                 ["finetune", "--model", "m", "--kb", "k", "-o", "o"],
                 ["unlearn", "--model", "m", "--kb", "k", "--method", "ga", "--target", "0"]):
        assert resolve_format(parser.parse_args(argv))["trust_remote_code"] is False
        assert resolve_format(parser.parse_args([*argv, "--trust-remote-code"]))["trust_remote_code"] is True


def test_a_hub_model_is_loaded_with_trust_remote_code_false(monkeypatch, mini_model_dir):
    import transformers

    calls = []

    def fake(source, **kw):
        calls.append((source, kw["trust_remote_code"]))
        raise ValueError("The repository x contains custom code; set trust_remote_code=True")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake)
    from deepunlearn.probe import models

    monkeypatch.setattr(models, "resolve_hub", lambda name: None)  # "the hub is there"
    with pytest.raises(ModelLoadError, match="^org/model: the model asks to run its own code; refused; pass "
                                             "--trust-remote-code"):
        load_model("org/model", device="cpu")
    assert calls == [("org/model", False)]


# --- hub names without a network ---------------------------------------------


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """An empty hub cache, a hub endpoint that refuses connections, and transformers' loaders
    replaced by a failure: the error must come before any download (and so any retry)."""
    import huggingface_hub.constants as c
    import transformers

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connecting is refused at once
    monkeypatch.setattr(c, "ENDPOINT", f"http://127.0.0.1:{port}")

    def never(*a, **kw):
        raise AssertionError("transformers was asked to fetch a model")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", never)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", never)
    return c


@pytest.mark.parametrize("name", ["tiny-edu2", "some-org/some-model"])
def test_hub_name_with_hf_hub_offline_fails_at_once(no_hub, monkeypatch, name, capfd):
    from deepunlearn.probe import sources

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sources, "hub_reachable", lambda *a: pytest.fail("offline: the hub must not be asked"))
    with pytest.raises(ModelLoadError) as e:
        load_model(name, device="cpu")
    assert str(e.value) == (
        f"model {name!r}: no such local folder, and as a hub name it cannot be downloaded: HF_HUB_OFFLINE=1 keeps "
        f"the Hugging Face hub ({no_hub.ENDPOINT}) out of reach and the local hub cache ({no_hub.HF_HUB_CACHE}) "
        "does not hold it; give an existing checkpoint folder, or set HF_HUB_OFFLINE=0 to download it")
    assert "Retry" not in capfd.readouterr().err


@pytest.mark.parametrize("name", ["tiny-edu2", "some-org/some-model"])
def test_hub_name_without_network_fails_at_once(no_hub, monkeypatch, name, capfd):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(no_hub, "HF_HUB_OFFLINE", False)
    with pytest.raises(ModelLoadError) as e:
        load_model(name, device="cpu")
    assert str(e.value) == (
        f"model {name!r}: no such local folder, and as a hub name it cannot be looked up: the Hugging Face hub "
        f"({no_hub.ENDPOINT}) cannot be reached (no network?) and the local hub cache ({no_hub.HF_HUB_CACHE}) "
        "does not hold it; give an existing checkpoint folder, or connect to the network and retry")
    assert e.value.file == name
    assert "Retry" not in capfd.readouterr().err


def test_cli_mistyped_folder_is_one_json_error(no_hub, monkeypatch, mini_kb_file, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = main(["probe", "--model", "tiny-edu2", "--kb", str(mini_kb_file), "--json"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert json.loads(out)["error"].startswith("model 'tiny-edu2': no such local folder, and as a hub name")
    assert err.startswith("deepunlearn probe: error: model 'tiny-edu2': no such local folder") and err.count("\n") == 1


@pytest.mark.parametrize("offline", ["1", "0"])
def test_a_model_in_the_hub_cache_still_loads_without_network(monkeypatch, tmp_path, mini_model_dir, offline):
    import shutil

    import huggingface_hub.constants as c

    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub-cache" / "models--some-org--mini"
    shutil.copytree(mini_model_dir, repo / "snapshots" / rev)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(c, "ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    bundle = load_model("some-org/mini", device="cpu")
    assert bundle.name == "some-org/mini" and bundle.path is None
    assert bundle.prompt_source == "recorded" and bundle.meta["kb"]["name"] == "mini"


def test_names_that_can_only_be_paths_are_no_such_folder_at_once(monkeypatch):
    from deepunlearn.probe import models

    monkeypatch.setattr(models, "resolve_hub", lambda name: pytest.fail(f"{name} went to the hub"))
    for name in ("./tiny-edu2", "../x", "~/no-such-model", "/no/such", "a/b/c", "my model", "x--y", "out/"):
        assert looks_local(name), name
        with pytest.raises(ModelLoadError, match=f"^no such folder: {name} "):
            load_model(name, device="cpu")
    for name in ("gpt2", "tiny-edu2", "microsoft/phi-1_5", "meta-llama/Meta-Llama-3-8B"):
        assert not looks_local(name), name


# --- --device ----------------------------------------------------------------------


@pytest.mark.parametrize("device, message", [
    ("banana", "--device 'banana': not a device; expected cpu, cuda, cuda:N or mps"),
    ("cuda", "--device 'cuda': CUDA is not available on this machine (use --device cpu)"),
    ("cuda:3", "--device 'cuda:3': CUDA is not available on this machine (use --device cpu)"),
])
def test_bad_device_is_refused_before_anything_loads(monkeypatch, tmp_path, capsys, device, message):
    import torch

    from deepunlearn.probe import models

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded a model"))
    # the KB does not exist either: --device is checked first
    rc = main(["probe", "--model", "m", "--kb", str(tmp_path / "no-kb.json"), "--device", device, "--json"])
    out, err = capsys.readouterr()
    assert rc == 1 and err == f"deepunlearn probe: error: {message}\n"
    assert json.loads(out) == {"error": message, "file": None, "field": "--device"}


def test_device_check_in_the_shared_helper_covers_finetune_and_unlearn(monkeypatch):
    from deepunlearn.cli import build_parser
    from deepunlearn.probe.cli.probe import resolve_format

    parser = build_parser()
    for argv in (["finetune", "--model", "m", "--kb", "k", "-o", "o"],
                 ["unlearn", "--model", "m", "--kb", "k", "--method", "ga", "--target", "0"]):
        with pytest.raises(ModelLoadError, match="^--device 'banana': not a device") as e:
            resolve_format(parser.parse_args([*argv, "--device", "banana"]))
        assert e.value.field == "--device"
    with pytest.raises(ModelLoadError, match="^device 'gpu0': not a device"):
        load_model("m", device="gpu0")


# --- corrupt checkpoint files ------------------------------------------------------


def _corrupt(folder: Path, case: str) -> Path:
    if case == "bin":
        (folder / "model.safetensors").unlink()
        target = folder / "pytorch_model.bin"
        target.write_bytes(b"garbage, not a torch file" * 4)
    elif case == "safetensors":
        target = folder / "model.safetensors"
        target.write_bytes(target.read_bytes()[:1000])
    else:
        target = folder / case.split(":")[0]
        target.write_bytes({"syntax": b'{"model_type": "llama",', "nested": b"[" * 5000 + b"]" * 5000,
                            "utf8": b'{"model_type": "ll\xffama"}', "list": b"[1, 2]"}[case.split(":")[1]])
    return target


@pytest.mark.parametrize("case, problem", [
    ("bin", ": not a weights file PyTorch can read without running code ("),
    ("safetensors", ": not a readable safetensors weights file (SafetensorError: "),
    ("config.json:syntax", ":1:24: not valid JSON ("),
    ("config.json:nested", ": JSON nested deeper than 64 levels"),
    ("config.json:utf8", ": not UTF-8 text (byte 18: b'\\xff')"),
    ("config.json:list", ": expected a JSON object"),
    ("deepunlearn.json:syntax", ":1:24: not valid JSON ("),
    ("deepunlearn.json:nested", ": JSON nested deeper than 64 levels"),
    ("deepunlearn.json:utf8", ": not UTF-8 text (byte 18: b'\\xff')"),
    ("tokenizer_config.json:nested", ": JSON nested deeper than 64 levels"),
])
def test_corrupt_files_are_one_error_naming_the_file(mini_copy, mini_kb_file, capsys, case, problem):
    target = _corrupt(mini_copy, case)
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    assert str(e.value).startswith(f"{target}{problem}") and e.value.file == str(target)
    rc = main(["probe", "--model", str(mini_copy), "--kb", str(mini_kb_file), "--json"])
    out, err = capsys.readouterr()
    assert rc == 1 and err.startswith(f"deepunlearn probe: error: {target}{problem}") and err.count("\n") == 1
    assert json.loads(out)["file"] == str(target)


def test_a_malicious_pickle_as_weights_runs_nothing(mini_copy, tmp_path):
    import pickle

    marker = tmp_path / "PWNED"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (mini_copy / "model.safetensors").unlink()
    (mini_copy / "pytorch_model.bin").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(UserError, match="pytorch_model.bin: not a weights file PyTorch can read without running"):
        load_model(mini_copy, device="cpu")
    assert not marker.exists()


SMALL = {"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


@pytest.mark.parametrize("config, problem", [
    ({"model_type": "bert", **SMALL}, r"\(\d+ parameter\(s\) missing \(e\.g\. bert\.embeddings\.\S+\)\)"),
    ({"model_type": "gpt2", "vocab_size": 40, "n_embd": 16, "n_layer": 1, "n_head": 2}, r"\(.*\)"),
])
def test_weights_that_do_not_fit_the_config_are_refused_not_replaced_by_random_ones(
        mini_copy, config, problem, capfd):
    # Before: a config.json of another architecture loaded a randomly initialised model
    # (bert) or printed a 60-line load report to stderr before a RuntimeError (gpt2).
    (mini_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    assert re.fullmatch(re.escape(f"{mini_copy}: the weights do not fit config.json ") + problem
                        + re.escape(": a corrupt checkpoint, or a config.json from another model"), str(e.value))
    assert "LOAD REPORT" not in capfd.readouterr().err


@pytest.mark.parametrize("config, problem", [
    # no sizes: transformers' defaults, Llama-2-7B (27 GB in fp32) and BERT-base; the fuzz test's
    # random configs once built the first and a 24 GB CI machine killed the test run
    ({"model_type": "llama"}, "config.json describes a model of 6,738,415,616 parameters but its weights files hold"),
    ({"model_type": "bert"}, "config.json describes a model of 109,514,298 parameters but its weights files hold"),
    ({"model_type": "gpt2", "n_layer": 10**9}, "config.json: n_layer = 1,000,000,000 layers; refused"),
])
def test_a_config_far_larger_than_its_weights_is_refused_before_anything_is_allocated(mini_copy, config, problem):
    import resource

    (mini_copy / "config.json").write_text(json.dumps(config))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ModelLoadError, match=re.escape(problem)):
        load_model(mini_copy, device="cpu")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # KiB: nothing near 27 GB
