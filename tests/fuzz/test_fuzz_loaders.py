"""Fuzz what a model folder carries besides its weights: PEFT adapter folders (``evaluate
--unlearned AD``, one and in a manifest beside a good adapter), tokenizer files (``probe``,
``model info``) and chat templates (``probe --answer-format chat``). Every folder also holds an
``evil.py`` that writes a marker file: whatever names it (``auto_map`` in any JSON file), it must
never run; the marker is checked after every example, as is "no file created outside the output"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz_harness import Fuzzer, fuzz_settings
from fuzz_mutations import byte_mutations, json_mutations

EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nfrom transformers import PreTrainedTokenizerFast as EvilTok\n"
AUTO = {"AutoTokenizer": ["evil.EvilTok", None], "AutoConfig": "evil.EvilTok", "AutoModelForCausalLM": "evil.EvilTok"}


@pytest.fixture(scope="module")
def fixtures(seeds, tmp_path_factory):
    """A real LoRA adapter on the seed model (its base recorded as ``model``, the folder each
    example's working copy has) and a fact that model knows in rank mode."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from deepunlearn.kg import load_kb
    from deepunlearn.probe import load_model, probe

    d = tmp_path_factory.mktemp("fuzz-adapter")
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(str(seeds["model"])),
                          LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for n, w in peft.named_parameters():
            if "lora_B" in n:
                w.normal_(0, 0.5)
    peft.save_pretrained(d / "ad")
    cfg = json.loads((d / "ad" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "model"
    (d / "ad" / "adapter_config.json").write_text(json.dumps(cfg, indent=2))
    known = probe(load_model(seeds["model"], device="cpu"), load_kb(seeds["kb"]), mode="rank", progress=False)
    assert known.known_ids(), "the seed model knows no fact in rank mode"
    return {"adapter": d / "ad", "target": str(min(known.known_ids()))}


@pytest.fixture
def env(work, monkeypatch):
    """Caches inside the example's folder; a short render bound (the forked examples inherit it)."""
    from deepunlearn.probe import chat_render

    monkeypatch.setenv("DEEPUNLEARN_CACHE", str(work / "cache"))
    monkeypatch.setenv("HF_HOME", str(work / "hf"))
    monkeypatch.setattr(chat_render, "RENDER_SECONDS", 1.0)
    return work


def _arm(folder: Path, marker: Path) -> None:
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))


def _with_auto_map(raw: bytes, key: str) -> bytes:
    doc = json.loads(raw) if raw.strip() else {}
    doc["auto_map"] = AUTO if key == "all" else {key: AUTO[key]}
    return json.dumps(doc).encode()


def _outside(work: Path, before: set[str], allowed: tuple[str, ...]) -> list[str]:
    """Files created in ``work`` outside what the example may write."""
    new = {str(p.relative_to(work)) for p in work.rglob("*")} - before
    return sorted(p for p in new if not p.startswith(allowed))


def _adapter_cases(seeds, ad: Path):
    tok_cfg = (seeds["model"] / "tokenizer_config.json").read_bytes()
    tok = (seeds["model"] / "tokenizer.json").read_bytes()
    adapter_cfg = (ad / "adapter_config.json").read_bytes()
    weights = (ad / "adapter_model.safetensors").read_bytes()
    named = lambda fname, s: s.map(lambda t: (fname, t[0], t[1]))  # noqa: E731
    return st.one_of(
        named("adapter_config.json", json_mutations(json.loads(adapter_cfg), indent=2)),
        named("tokenizer_config.json", json_mutations(json.loads(tok_cfg))),
        named("tokenizer.json", byte_mutations(tok)),
        named("adapter_model.safetensors", byte_mutations(weights)),
        st.sampled_from(["tokenizer_config.json", "config.json", "adapter_config.json"]).flatmap(
            lambda f: st.sampled_from(["AutoTokenizer", "AutoConfig", "all"]).map(
                lambda k: (f, _with_auto_map(adapter_cfg if f == "adapter_config.json" else
                                             tok_cfg if f == "tokenizer_config.json" else b'{"model_type": "llama"}',
                                             k), f"auto_map {k}"))))


def test_adapter_folders(seeds, fixtures, env):
    fz = Fuzzer("adapter")
    work, target = env, fixtures["target"]
    marker = work.parent / f"{work.name}-MARKER"
    single = ["evaluate", "--original", "model", "--unlearned", "ad", "--kb", "kb.json", "--target", target,
              "--mode", "rank", "--device", "cpu", "--json"]
    manifest = ["evaluate", "--original", "model", "--kb", "kb.json", "--manifest", "m.csv", "--mode", "rank",
                "--device", "cpu", "-o", "v.jsonl", "--json"]

    @fuzz_settings(1)
    @given(_adapter_cases(seeds, fixtures["adapter"]), st.sampled_from(["single", "single", "manifest"]))
    def run(case, how):
        fname, data, what = case
        for name in ("ad", "good", "v.jsonl", "m.csv"):
            shutil.rmtree(work / name, ignore_errors=True) if (work / name).is_dir() else (work / name).unlink(
                missing_ok=True)
        shutil.copytree(fixtures["adapter"], work / "ad")
        shutil.copytree(fixtures["adapter"], work / "good")
        _arm(work / "ad", marker)
        (work / "ad" / fname).write_bytes(data)
        (work / "m.csv").write_text(f"checkpoint,target\nad,{target}\ngood,{target}\n")
        before = {str(p.relative_to(work)) for p in work.rglob("*")}
        o = fz.check(single if how == "single" else manifest, work, protect=work / "model", extra=(work / "kb.json",),
                     note=f"{fname}: {what}")
        if o is None:
            return
        bad = [f"created {p}" for p in _outside(work, before, ("cache", "hf", "v.jsonl"))]
        bad += ["evil.py ran"] if marker.exists() else []
        if how == "manifest" and o.code in (0, 1):  # the good row is judged whatever the bad one did
            rows = [json.loads(ln) for ln in (work / "v.jsonl").read_text().splitlines()]
            if [r["row"]["checkpoint"] for r in rows] != ["ad", "good"] or "error" in rows[1]:
                bad.append(f"manifest rows {[(r['row']['checkpoint'], r.get('error')) for r in rows]}")
        if bad:
            fz.failures.append(f"{' '.join(o.argv)} [{fname}: {what}]: {'; '.join(bad)}")

    run()
    fz.finish()


def test_tokenizer_folders(seeds, env):
    fz = Fuzzer("tokenizer-folder")
    work = env
    marker = work.parent / f"{work.name}-MARKER"
    tok_cfg = (seeds["model"] / "tokenizer_config.json").read_bytes()
    tok = (seeds["model"] / "tokenizer.json").read_bytes()
    cases = st.one_of(
        json_mutations(json.loads(tok_cfg)).map(lambda t: ("tokenizer_config.json", *t)),
        byte_mutations(tok).map(lambda t: ("tokenizer.json", *t)),
        json_mutations(json.loads(tok)).map(lambda t: ("tokenizer.json", *t)),
        st.sampled_from(["AutoTokenizer", "all"]).map(lambda k: ("tokenizer_config.json", _with_auto_map(tok_cfg, k),
                                                                 f"auto_map {k}")))
    cmds = st.sampled_from([["probe", "--model", "m", "--kb", "kb.json", "--json", "--threads", "1"],
                            ["model", "info", "m", "--json"]])

    @fuzz_settings(1)
    @given(cases, cmds)
    def run(case, cmd):
        fname, data, what = case
        m = work / "m"
        shutil.rmtree(m, ignore_errors=True)
        shutil.copytree(seeds["model"], m)
        _arm(m, marker)
        (m / fname).write_bytes(data)
        before = {str(p.relative_to(work)) for p in work.rglob("*")}
        o = fz.check(cmd, work, protect=work, allow_change=(m / fname, work / "cache", work / "hf"), note=f"{fname}: {what}")
        if o is not None:
            bad = [f"created {p}" for p in _outside(work, before, ("cache", "hf"))]
            bad += ["evil.py ran"] if marker.exists() else []
            if bad:
                fz.failures.append(f"{' '.join(o.argv)} [{fname}: {what}]: {'; '.join(bad)}")

    run()
    fz.finish()


#: Pieces of chat templates: ordinary ones, and ones that loop, allocate, recurse, fail or escape.
MESSAGE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
PIECES = [
    MESSAGE, MESSAGE, "<|user|>" + MESSAGE + "<|assistant|>", "{{ bos_token }}", "{{ eos_token }}",
    "{% if add_generation_prompt %}A:{% endif %}", "{{ 'x' * 1000000000 }}", "{{ 'ab' * 70000 }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{{ '%2000000000s'|format('x') }}", "{{ 'x'|center(2000000000) }}", "{{ lipsum(100000) }}",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{{ raise_exception('no') }}",
    "{{ messages.__class__.__mro__ }}", "{{ cycler.__init__.__globals__ }}", "{% include 'x' %}", "{% for %}",
    "{{ messages[5]['content'] }}", "{{ 1 / 0 }}", "{{ 10 ** 10 ** 10 }}", "{{ (messages * 100000000)|length }}",
    "</s>", "<s>", "{{ '\\ud800' }}", "\x00", "{# unclosed",
]


def test_chat_templates(seeds, env):
    fz = Fuzzer("chat-template")
    work = env
    cases = st.tuples(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4),
                      st.sampled_from(["tokenizer_config.json", "tokenizer_config.json", "chat_template.jinja"]))

    @fuzz_settings(1)
    @given(cases)
    def run(case):
        pieces, where = case
        template = "".join(pieces)
        m = work / "m"
        shutil.rmtree(m, ignore_errors=True)
        shutil.copytree(seeds["model"], m)
        if where == "chat_template.jinja":
            (m / where).write_text(template, encoding="utf-8", errors="surrogatepass")
        else:
            cfg = json.loads((m / where).read_text())
            cfg["chat_template"] = template
            (m / where).write_text(json.dumps(cfg))
        before = {str(p.relative_to(work)) for p in work.rglob("*")}
        o = fz.check(["probe", "--model", "m", "--kb", "kb.json", "--answer-format", "chat", "--json", "--threads", "1"],
                     work, protect=work, allow_change=(work / "cache", work / "hf"), note=f"{where}: {template[:100]!r}")
        if o is not None:
            bad = [f"created {p}" for p in _outside(work, before, ("cache", "hf"))]
            if bad:
                fz.failures.append(f"chat template {template[:80]!r}: {'; '.join(bad)}")

    run()
    fz.finish()
