"""Every command that writes (``-o``) against every kind of target a user may name by mistake:
an existing file the tool did not write, a non-empty folder of user files, a FIFO, a symlink
to a user file, a path under a regular file, an empty string, and (``bench``) a results folder
whose ``.lock`` is a symlink to a user file. The oracle is the harness's plus: no byte of any
pre-existing file changed (every file under the test folder is hashed before and after, and a
symlink's target), and a FIFO stays a FIFO. A symlink named by ``-o`` may itself be replaced by
the output; the file it points to may not.

The space is small and enumerated, so the suite runs all of it (commands x targets) rather
than a sample."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzz_harness import Fuzzer

#: command -> its argv with "{out}" where the target goes (run in a copy of the seeds)
COMMANDS = {
    "data generate": ["data", "generate", "--people", "3", "-o", "{out}"],
    "data import-edu-relat": ["data", "import-edu-relat", "-o", "{out}"],
    "data forms": ["data", "forms", "--kb", "kb.json", "--add", "forms.jsonl", "-o", "{out}"],
    "data export": ["data", "export", "kb.json", "-o", "{out}"],
    "rules closure": ["rules", "closure", "--kb", "kb.json", "-o", "{out}", "-q"],
    "probe": ["probe", "--model", "model", "--kb", "kb.json", "-o", "{out}", "--threads", "1"],
    "finetune": ["finetune", "--model", "model", "--kb", "kb.json", "--preset", "tiny", "--epochs", "1",
                 "-o", "{out}", "--threads", "1"],
    "model import": ["model", "import", "model.gguf", "-o", "{out}"],
    "bench": ["bench", "--config", "sweep.toml", "--quiet", "-o", "{out}"],
}
TARGETS = ["user file", "user folder", "fifo", "symlink to user file", "under a file", "empty string", "lock symlink"]

USER_TEXT = b"my notes: not written by deepunlearn\n"


def _target(work: Path, kind: str) -> tuple[str, tuple[Path, ...]]:
    """Make the target; returns the -o argument and paths outside ``work`` to protect too."""
    victim = work.parent / f"{work.name}-victim.txt"  # a user file outside the folder the tool was pointed at
    victim.write_bytes(USER_TEXT)
    (work / "notes.txt").write_bytes(USER_TEXT)
    if kind == "user file":
        return "notes.txt", (victim,)
    if kind == "user folder":
        (work / "mine" / "sub").mkdir(parents=True)
        (work / "mine" / "a.txt").write_bytes(USER_TEXT)
        (work / "mine" / "sub" / "b.json").write_bytes(b'{"mine": true}\n')
        return "mine", (victim,)
    if kind == "fifo":
        os.mkfifo(work / "pipe")
        return "pipe", (victim,)
    if kind == "symlink to user file":
        os.symlink(victim, work / "link.json")
        return "link.json", (victim,)
    if kind == "under a file":
        return "notes.txt/x.json", (victim,)
    if kind == "empty string":
        return "", (victim,)
    if kind == "lock symlink":
        (work / "res").mkdir()
        os.symlink(victim, work / "res" / ".lock")
        return "res", (victim,)
    raise ValueError(kind)




def _cases():
    for cmd in COMMANDS:
        for kind in TARGETS:
            if kind == "lock symlink" and cmd != "bench":
                continue
            yield pytest.param(cmd, kind, id=f"{cmd}-{kind}".replace(" ", "_"))


@pytest.mark.parametrize(("cmd", "kind"), list(_cases()))
def test_output_target(work, cmd, kind):
    fz = Fuzzer(f"-o {kind}")
    out, extra = _target(work, kind)
    argv = [out if a == "{out}" else a for a in COMMANDS[cmd]]
    # the sweep's own results folder is the tool's; a symlink the user named may be replaced by
    # the output (as a rename does), but its target is the user's file and must stay as it was
    allowed = (work / "out",) + ((work / "link.json",) if kind == "symlink to user file" else ())
    fz.check(argv, work, protect=work, extra=extra, note=f"{cmd} -o {kind}", allow_change=allowed,
             timeout=30)
    fz.finish()
