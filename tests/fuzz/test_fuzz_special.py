"""Every file the tool reads, replaced by something that is not a regular file of that format:
an empty file, a folder, a FIFO (nobody writes to it: a reader that opens it blocks), a symlink
to ``/dev/zero`` (endless), ``/dev/null``, and a symlink loop. The oracle is the harness's:
an answer within the time bound and the memory bound, exit 0/1/2, one error line, no traceback.

The space is small and enumerated (inputs x kinds), so the suite runs all of it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fuzz_harness import Fuzzer, run_cli

#: input -> (the path to replace, relative to the work folder; the command line)
INPUTS = {
    "KB for data show": ("m.json", ["data", "show", "m.json"]),
    "KB for rules closure": ("m.json", ["rules", "closure", "--kb", "m.json", "-q"]),
    "rule file": ("m.dl", ["rules", "closure", "--kb", "kb.json", "--rules", "m.dl", "-q"]),
    "domain folder": ("dom", ["data", "generate", "--domain", "dom", "--people", "3", "-o", "g.json"]),
    "domain.toml": ("dom/domain.toml", ["data", "generate", "--domain", "dom", "--people", "3", "-o", "g.json"]),
    "domain rules.dl": ("dom/rules.dl", ["data", "generate", "--domain", "dom", "--people", "3", "-o", "g.json"]),
    "forms file": ("f.jsonl", ["data", "forms", "--kb", "kb.json", "--add", "f.jsonl"]),
    "sweep config": ("c.toml", ["bench", "--config", "c.toml", "--quiet"]),
    "sweep kb": ("skb.json", ["bench", "--config", "sweep-skb.toml", "--quiet"]),
    "results.sqlite": ("out/results.sqlite", ["bench", "--config", "sweep.toml", "--quiet"]),
    "config.json": ("model/config.json", ["model", "info", "model"]),
    "deepunlearn.json": ("model/deepunlearn.json", ["model", "info", "model"]),
    "GGUF for model info": ("f.gguf", ["model", "info", "f.gguf"]),
    "GGUF for model import": ("f.gguf", ["model", "import", "f.gguf", "-o", "imp"]),
    "release pickle": ("rel/subsample.pt", ["data", "import-edu-relat", "rel", "-o", "r.json"]),
}
KINDS = ["empty file", "folder", "fifo", "/dev/zero", "/dev/null", "symlink loop"]



def _make(path: Path, kind: str) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "empty file":
        path.write_bytes(b"")
    elif kind == "folder":
        path.mkdir()
        (path / "x.txt").write_text("x\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("/dev/zero", "/dev/null"):
        os.symlink(kind, path)
    elif kind == "symlink loop":
        os.symlink(path.name, path)


def _prepare(work: Path, seeds: dict) -> None:
    shutil.copy(seeds["kb"], work / "m.json")
    shutil.copy(work / "org-domain" / "rules.dl", work / "m.dl")
    shutil.copytree(work / "org-domain", work / "dom")
    shutil.copy(seeds["forms"], work / "f.jsonl")
    shutil.copy(seeds["sweep"], work / "c.toml")
    shutil.copy(seeds["kb"], work / "skb.json")
    (work / "sweep-skb.toml").write_text(seeds["sweep"].read_text().replace('"kb.json"', '"skb.json"')
                                         .replace('"out"', '"out-skb"'))
    shutil.copy(seeds["gguf"], work / "f.gguf")


def _cases():
    for name in INPUTS:
        for kind in KINDS:
            yield pytest.param(name, kind, id=f"{name}-{kind}".replace(" ", "_"))


@pytest.mark.parametrize(("name", "kind"), list(_cases()))
def test_special_input(seeds, work, edu_dir, name, kind):
    _prepare(work, seeds)
    if name == "release pickle":
        shutil.copytree(edu_dir, work / "rel")
    rel, argv = INPUTS[name]
    _make(work / rel, kind)
    fz = Fuzzer(f"special {kind}")
    # the folder is the tool's input, never its output
    fz.check(argv, work, protect=work, note=f"{name} is {kind}",
             allow_change=(work / "out", work / "out-skb", work / "imp"))
    fz.finish()


def test_the_subprocess_runner_gives_the_same_answer(seeds, work):
    """The fast forked runner stands for ``python -m deepunlearn``: one input both ways."""
    (work / "bad.json").write_text('{"format": "deepunlearn-kb", "version": "2", "facts": 3}')
    a = run_cli(["data", "show", "bad.json"], work)
    b = run_cli(["data", "show", "bad.json"], work, mode="subprocess", timeout=120)
    assert (a.code, a.stderr) == (b.code, b.stderr) and a.code == 1
