"""Every tokenizer, config and PEFT adapter goes through one guarded loader: a folder that asks
to run its own code (``auto_map``) is refused without --trust-remote-code, naming the file and
the key, and nothing ever prompts; a corrupt tokenizer file is one line naming it. The adapter
cases use a real LoRA adapter (peft) on the minimal checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.probe import ModelLoadError, load_model

ROOT = Path(__file__).resolve().parents[2]
EVIL = ("import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast as EvilTok\n")


@pytest.fixture(scope="module")
def lora(mini_model_dir, tmp_path_factory) -> Path:
    """A real PEFT LoRA adapter on the minimal checkpoint (read-only: copy it with ``adapter``)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(mini_model_dir))
    peft = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for n, w in peft.named_parameters():
            if "lora_B" in n:
                w.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("lora") / "ad"
    peft.save_pretrained(out)
    return out


@pytest.fixture
def adapter(lora, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(lora, tmp_path / "ad"))


def _make_evil(adapter: Path, fname: str, marker: Path) -> None:
    """``fname`` in the adapter folder asks for ``evil.py``, which writes ``marker``."""
    (adapter / "evil.py").write_text(EVIL.format(marker=str(marker)))
    auto = {"auto_map": {"AutoTokenizer": ["evil.EvilTok", None]}}
    path = adapter / fname
    doc = json.loads(path.read_text()) if path.is_file() else ({"model_type": "llama"} if fname == "config.json" else {})
    doc.update(auto)
    path.write_text(json.dumps(doc))


def _evaluate_argv(original, unlearned, kb, *extra):
    return ["evaluate", "--original", str(original), "--unlearned", str(unlearned), "--kb", str(kb), "--target", "0",
            "--mode", "rank", "--device", "cpu", *extra]


def test_an_adapter_tokenizer_asking_for_its_own_code_is_refused_and_nothing_prompts(
        adapter, mini_model_dir, mini_kb_file, tmp_path):
    # The process boundary matters (stdin holds "y", stdout must hold one JSON object): a subprocess.
    marker = tmp_path / "MARKER"
    _make_evil(adapter, "tokenizer_config.json", marker)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPUNLEARN_CACHE": str(tmp_path / "cache"),
           "HF_HOME": str(tmp_path / "hf")}
    r = subprocess.run([sys.executable, "-m", "deepunlearn", *_evaluate_argv(mini_model_dir, adapter, mini_kb_file,
                                                                              "--json")],
                       input="y\n", capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert not marker.exists()
    assert r.returncode == 1, r.stderr
    assert "[y/N]" not in r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    err = json.loads(lines[0])
    assert err == {"error": f"{adapter}: tokenizer_config.json asks to run the folder's own code (auto_map "
                            "['evil.EvilTok', None]); refused; pass --trust-remote-code (trust_remote_code=True) to "
                            "allow it", "file": str(adapter / "tokenizer_config.json"), "field": "auto_map"}
    assert r.stderr.strip().splitlines() == [f"deepunlearn evaluate: error: {err['error']}"]


@pytest.mark.parametrize("fname", ["tokenizer_config.json", "config.json", "adapter_config.json"])
def test_auto_map_in_any_file_of_an_adapter_is_refused_before_anything_loads(adapter, mini_model_dir, fname, tmp_path,
                                                                              monkeypatch):
    from deepunlearn.unlearn import evaluate_models

    marker = tmp_path / "MARKER"
    _make_evil(adapter, fname, marker)
    monkeypatch.setattr(evaluate_models, "load_model", lambda *a, **k: pytest.fail("the base was loaded first"))
    with pytest.raises(ModelLoadError) as e:
        evaluate_models.load_unlearned(str(adapter), None, original_name=str(mini_model_dir), original_rows=0)
    assert e.value.file == str(adapter / fname) and e.value.field == "auto_map"
    assert str(e.value).startswith(f"{adapter}: {fname} asks to run the folder's own code (auto_map ")
    assert not marker.exists()


def test_trust_remote_code_reaches_the_adapter_tokenizer(adapter, mini_model_dir, mini_kb_file, monkeypatch):
    import transformers

    from deepunlearn.unlearn.evaluate import Judge

    judge = Judge(mini_model_dir, mini_kb_file, mode="rank", device="cpu", progress=False, trust_remote_code=True,
                  cache_dir=adapter.parent / "cache")
    seen = []
    real = transformers.AutoTokenizer.from_pretrained

    def spy(source, **kw):
        seen.append((Path(source).name, kw.get("trust_remote_code", "missing")))
        return real(source, **kw)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", spy)
    (adapter / "tokenizer_config.json").write_text((mini_model_dir / "tokenizer_config.json").read_text())
    (adapter / "tokenizer.json").write_text((mini_model_dir / "tokenizer.json").read_text())
    judge.load(adapter)
    assert ("ad", True) in seen and all(t is True for _, t in seen)


def test_a_corrupt_adapter_tokenizer_is_one_line_naming_the_file(adapter, mini_model_dir, mini_kb_file, tmp_path,
                                                                  capsys, monkeypatch):
    monkeypatch.setenv("DEEPUNLEARN_CACHE", str(tmp_path / "cache"))
    (adapter / "tokenizer_config.json").write_text((mini_model_dir / "tokenizer_config.json").read_text())
    (adapter / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": 5}}')
    code = main(_evaluate_argv(mini_model_dir, adapter, mini_kb_file))
    err = capsys.readouterr().err
    assert code == 1, err
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.startswith("deepunlearn")]  # no progress bars
    assert len(lines) == 1 and lines[0].startswith(f"deepunlearn evaluate: error: {adapter / 'tokenizer.json'}: not "
                                                   "a tokenizer file the tokenizers library can read ("), err


def test_a_manifest_row_with_a_bad_adapter_fails_alone(adapter, lora, mini_model_dir, mini_kb_file, tmp_path, capsys,
                                                       monkeypatch):
    import shutil

    monkeypatch.setenv("DEEPUNLEARN_CACHE", str(tmp_path / "cache"))
    corrupt = adapter
    (corrupt / "tokenizer_config.json").write_text((mini_model_dir / "tokenizer_config.json").read_text())
    (corrupt / "tokenizer.json").write_text("{not json")
    evil = Path(shutil.copytree(lora, tmp_path / "evil"))
    _make_evil(evil, "tokenizer_config.json", tmp_path / "MARKER")
    good = Path(shutil.copytree(lora, tmp_path / "good"))
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"checkpoint,target\n{corrupt},0\n{evil},0\n{good},0\n")
    out = tmp_path / "v.jsonl"
    code = main(["evaluate", "--original", str(mini_model_dir), "--kb", str(mini_kb_file), "--manifest", str(manifest),
                 "--mode", "rank", "--device", "cpu", "-o", str(out), "--json"])
    capsys.readouterr()
    assert code == 1
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [r["row"]["checkpoint"] for r in rows] == [str(corrupt), str(evil), str(good)]
    assert rows[0]["file"] == str(corrupt / "tokenizer.json") and "not a tokenizer file" in rows[0]["error"]
    assert rows[1]["field"] == "auto_map" and "asks to run the folder's own code" in rows[1]["error"]
    assert "error" not in rows[2] and rows[2]["target_id"] == 0
    assert not (tmp_path / "MARKER").exists()


def test_a_corrupt_model_tokenizer_json_names_the_file(mini_copy):
    (mini_copy / "tokenizer.json").write_text('{"model": 3}')
    with pytest.raises(ModelLoadError) as e:
        load_model(mini_copy, device="cpu")
    assert e.value.file == str(mini_copy / "tokenizer.json")
    assert str(e.value).startswith(f"{mini_copy / 'tokenizer.json'}: not a tokenizer file the tokenizers library can "
                                   "read (")


def test_the_guarded_loader_is_the_only_way_to_a_tokenizer_or_config():
    """No module but the loader calls AutoTokenizer/AutoConfig.from_pretrained, and none but the
    bounded renderer renders a chat template (lm-eval's model and the plan's hub lookup included)."""
    import ast

    owners = {"from_pretrained": {"deepunlearn/probe/hf_load.py"},
              "apply_chat_template": set(), "render_jinja_template": {"deepunlearn/probe/chat_render.py"}}
    offenders = []
    for f in sorted((ROOT / "deepunlearn").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name == "from_pretrained" and isinstance(fn, ast.Attribute) and \
                    getattr(fn.value, "id", getattr(fn.value, "attr", "")) not in ("AutoTokenizer", "AutoConfig"):
                continue  # a model class (AutoModelForCausalLM, PeftModel in hf_load)
            if name in owners and rel not in owners[name]:
                offenders.append(f"{rel}:{node.lineno} {name}")
    assert offenders == []


def test_lm_eval_model_goes_through_the_guarded_loader_and_bounded_render(mini_copy, monkeypatch):
    pytest.importorskip("lm_eval")
    from deepunlearn.probe import chat_render
    from deepunlearn.probe.lmeval_model import DeepunlearnHFLM

    cfg = json.loads((mini_copy / "tokenizer_config.json").read_text())
    (mini_copy / "tokenizer_config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoTokenizer": ["e.T", None]}}))
    with pytest.raises(ModelLoadError, match="tokenizer_config.json asks to run the folder's own code") as e:
        DeepunlearnHFLM(pretrained=str(mini_copy), device="cpu")
    assert e.value.field == "auto_map"
    (mini_copy / "tokenizer_config.json").write_text(json.dumps(cfg))
    lm = DeepunlearnHFLM(pretrained=str(mini_copy), device="cpu", batch_size=1)
    lm.tokenizer.chat_template = "{% for m in messages %}<s> Q: {{ m['content'] }}{% endfor %} A:"
    assert lm.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s> Q: hi A:"
    monkeypatch.setattr(chat_render, "RENDER_SECONDS", 1.0)
    lm.tokenizer.chat_template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(ModelLoadError, match="exceeds the bound of a render"):
        lm.apply_chat_template([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("change, field", [({"r": 5000}, "r"), ({"r": "2"}, "r"), ({"r": 0}, "r"),
                                           ({"rank_pattern": {"q_proj": 10**8}}, "rank_pattern.q_proj")])
def test_adapter_sizes_its_weights_do_not_back_are_refused_before_peft_allocates(adapter, mini_model_dir, change,
                                                                                 field, monkeypatch):
    from deepunlearn.unlearn import evaluate_models

    cfg = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**cfg, **change}))
    monkeypatch.setattr(evaluate_models, "load_model", lambda *a, **k: pytest.fail("the base was loaded first"))
    with pytest.raises(ModelLoadError) as e:
        evaluate_models.load_unlearned(str(adapter), None, original_name=str(mini_model_dir), original_rows=0)
    assert e.value.file == str(adapter / "adapter_config.json") and e.value.field == field
    assert "no larger than the largest dimension of adapter_model.safetensors (" in str(e.value)


def test_an_adapter_without_weights_is_refused_before_peft_allocates(adapter, mini_model_dir, monkeypatch):
    from deepunlearn.unlearn import evaluate_models

    (adapter / "adapter_model.safetensors").unlink()
    monkeypatch.setattr(evaluate_models, "load_model", lambda *a, **k: pytest.fail("the base was loaded first"))
    with pytest.raises(ModelLoadError, match="a PEFT adapter without weights"):
        evaluate_models.load_unlearned(str(adapter), None, original_name=str(mini_model_dir), original_rows=0)
