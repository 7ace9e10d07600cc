"""Valid seed files for the fuzz suite, made once per session with the tool itself: a 5-person
family KB, an org KB, a forms file, a minimal checkpoint, a GGUF file, a sweep config and the
results store its (failing, model-less) run leaves behind."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest

from fuzz_harness import run_cli
from fuzz_seeds import write_gguf

# Examples run in forked children of this process: what is imported here once is not imported
# again by every example (model info drops from ~3.5 s to ~0.2 s).
for _m in ("deepunlearn.cli", "deepunlearn.kg.cli", "deepunlearn.rules.cli", "deepunlearn.probe.cli",
           "deepunlearn.probe.cli.model", "deepunlearn.probe.model_import", "deepunlearn.probe.gguf", "deepunlearn.unlearn.cli.finetune",
           "deepunlearn.bench.cli", "deepunlearn.bench.config", "deepunlearn.bench.runner", "deepunlearn.kg.edu_relat",
           "transformers", "gguf"):
    importlib.import_module(_m)
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: E402,F401 - lazy modules

ORG_DOMAIN = Path(__file__).resolve().parents[2] / "deepunlearn" / "kg" / "domains" / "org"

SWEEP = """\
kb = "kb.json"
rules = "family"
output = "out"
seeds = 1

[[models]]
name = "tiny"
path = "tiny"

[methods]
ga = [1, 2]

[targets]
stratified = 1
"""


@pytest.fixture(scope="session")
def seeds(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fuzz-seeds")
    for argv in (["data", "generate", "--people", "5", "-o", "kb.json"],
                 ["data", "generate", "--domain", "org", "--people", "6", "-o", "org.json"]):
        o = run_cli(argv, d)
        assert o.code == 0, o.stderr
    kb = json.loads((d / "kb.json").read_text())
    facts = kb["facts"][:4]
    lines = [{"fact": f if isinstance(f, list) else [f.get("s"), f.get("r"), f.get("o")],
              "question": f"Question {i}?", "answer": "x"} for i, f in enumerate(facts)]
    (d / "forms.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    o = run_cli(["data", "forms", "--kb", "kb.json", "--add", "forms.jsonl"], d)
    assert o.code == 0, (o.stderr, (d / "forms.jsonl").read_text())

    from deepunlearn.kg import load_kb
    from deepunlearn.probe import build_tiny_model

    build_tiny_model(load_kb(d / "kb.json"), d / "model", hidden=16, heads=2, layers=1)
    write_gguf(d / "model.gguf")
    (d / "tiny").mkdir()
    (d / "sweep.toml").write_text(SWEEP)
    o = run_cli(["bench", "--config", "sweep.toml", "--quiet"], d, timeout=120)
    assert o.code == 1 and (d / "out" / "results.sqlite").is_file(), o.stderr
    shutil.copytree(ORG_DOMAIN, d / "org-domain")
    return {"dir": d, "kb": d / "kb.json", "org": d / "org.json", "forms": d / "forms.jsonl", "model": d / "model",
            "gguf": d / "model.gguf", "sweep": d / "sweep.toml", "store": d / "out" / "results.sqlite",
            "domain": d / "org-domain"}


@pytest.fixture
def work(seeds, tmp_path) -> Path:
    """A fresh folder holding copies of the seeds (examples change their copies, never the seeds)."""
    for name in ("kb.json", "org.json", "forms.jsonl", "model.gguf", "sweep.toml"):
        shutil.copy(seeds["dir"] / name, tmp_path / name)
    for name in ("model", "tiny", "out", "org-domain"):
        shutil.copytree(seeds["dir"] / name, tmp_path / name, symlinks=True)
    return tmp_path
