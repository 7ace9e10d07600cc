"""Every command that writes (``-o``) against every kind of target a user may name by mistake:
an existing file the tool did not write, a non-empty folder of user files, a FIFO, a symlink
to a user file, a dangling symlink, a path under a regular file, an empty string, another KB,
a model folder, a user's folder holding a ``config.json`` (an app, not a model), an input of the
same command, a hardlink to that input, and (``bench``) a results folder whose ``.lock`` or
``report`` is a symlink. The oracle is the harness's plus: no byte of any pre-existing file
changed (every file under the test folder is hashed before and after, and a symlink's target),
a FIFO stays a FIFO, and no file is created outside the output. A symlink named by ``-o`` may
itself be replaced by the output; the file it points to may not. Where the target is the
command's own kind of output (a KB for a KB writer, the tool's model folder for ``model
import``), replacing it is the expected outcome.

The space is small and enumerated, so the suite runs all of it (commands x targets) rather
than a sample: every target is refused before any work, so each case costs a fork."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fuzz_harness import Fuzzer, snapshot

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
    "unlearn": ["unlearn", "--model", "model", "--kb", "kb.json", "--target", "0", "--method", "ga", "-o", "{out}",
                "--threads", "1"],
    "evaluate": ["evaluate", "--original", "model", "--unlearned", "model", "--kb", "kb.json", "--target", "0",
                 "-o", "{out}", "--threads", "1"],
    "evaluate --manifest": ["evaluate", "--original", "model", "--kb", "kb.json", "--manifest", "m.csv", "-o", "{out}",
                            "--threads", "1"],
    "evaluate-report": ["evaluate-report", "v.jsonl", "-o", "{out}"],
}
#: each command's input file that a target may name (data forms may write its --kb in place: its input here
#: is the forms file it reads)
INPUTS = {"data forms": "forms.jsonl", "model import": "model.gguf", "bench": "sweep.toml",
          "evaluate --manifest": "m.csv", "evaluate-report": "v.jsonl"}
#: commands whose own output is a KB file (another KB is theirs to replace)
KB_WRITERS = {"data generate", "data import-edu-relat", "data forms"}
TARGETS = ["user file", "user folder", "fifo", "symlink to user file", "dangling symlink", "under a file",
           "empty string", "a KB", "model folder", "config.json folder", "input", "hardlink to input",
           "lock symlink", "report symlink"]

USER_TEXT = b"my notes: not written by deepunlearn\n"


VERDICT = ('{"row": {"checkpoint": "model", "target": 0, "method": "ga", "param": 1}, "original": "model", '
           '"target_id": 0, "recall": 1.0, "accuracy": 1.0, "forgotten": [0], "deep": true, "superficial": false}\n')


def _target(work: Path, kind: str, cmd: str = "") -> tuple[str, tuple[Path, ...]]:
    """Make the target; returns the -o argument and paths outside ``work`` to protect too."""
    victim = work.parent / f"{work.name}-victim.txt"  # a user file outside the folder the tool was pointed at
    victim.write_bytes(USER_TEXT)
    (work / "notes.txt").write_bytes(USER_TEXT)
    (work / "m.csv").write_text("checkpoint,target\nmodel,0\n")
    (work / "v.jsonl").write_text(VERDICT)
    if kind == "dangling symlink":
        os.symlink(work.parent / f"{work.name}-nowhere.json", work / "dangling.json")
        return "dangling.json", (victim, work.parent / f"{work.name}-nowhere.json")
    if kind == "a KB":
        shutil.copy(work / "kb.json", work / "other.json")
        return "other.json", (victim,)
    if kind == "model folder":
        return "model", (victim,)
    if kind == "config.json folder":
        (work / "app").mkdir()
        (work / "app" / "config.json").write_text("{}")
        (work / "app" / "main.py").write_text("print('mine')\n")
        return "app", (victim,)
    if kind == "input":
        return INPUTS.get(cmd, "kb.json"), (victim,)
    if kind == "hardlink to input":
        os.link(work / INPUTS.get(cmd, "kb.json"), work / "hard.json")
        return "hard.json", (victim,)
    if kind == "report symlink":
        shutil.copytree(work / "out", work / "res", symlinks=True)  # a sweep's results folder
        (work / "victim-folder").mkdir()
        (work / "victim-folder" / "summary.json").write_bytes(USER_TEXT)
        os.symlink("../victim-folder", work / "res" / "report")
        return "res", (victim,)
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
            if kind in ("lock symlink", "report symlink") and cmd not in ("bench", "evaluate-report"):
                continue
            if kind in ("input", "hardlink to input") and cmd in ("data generate", "data import-edu-relat"):
                continue  # no input file
            yield pytest.param(cmd, kind, id=f"{cmd}-{kind}".replace(" ", "_"))


def _allowed(work: Path, cmd: str, kind: str) -> tuple[Path, ...]:
    """What the example may change: the sweep's own results folder is the tool's; a symlink the
    user named may be replaced by the output (as a rename does), never its target; a KB writer
    may replace another KB, ``model import`` the tool's model folder."""
    allowed = (work / "out",) + ((work / "link.json",) if kind == "symlink to user file" else ())
    if kind == "a KB" and cmd in KB_WRITERS:
        allowed += (work / "other.json",)
    if kind == "model folder" and cmd == "model import":
        allowed += (work / "model",)
    return allowed


def _created(before: dict[str, str], after: dict[str, str], allowed: tuple[Path, ...]) -> list[str]:
    ok = tuple(str(a) for a in allowed)
    return [f"{p} created" for p in sorted(set(after) - set(before))
            if not any(p == a or p.startswith(a + os.sep) for a in ok)]


@pytest.mark.parametrize(("cmd", "kind"), list(_cases()))
def test_output_target(work, cmd, kind):
    fz = Fuzzer(f"-o {kind}")
    out, extra = _target(work, kind, cmd)
    argv = [out if a == "{out}" else a for a in COMMANDS[cmd]]
    allowed = _allowed(work, cmd, kind)
    before = snapshot(work)
    o = fz.check(argv, work, protect=work, extra=extra, note=f"{cmd} -o {kind}", allow_change=allowed, timeout=30)
    if o is not None:  # no file created outside the output
        inside = (work / out,) if out.strip() else ()
        fz.failures += [f"{cmd} -o {kind}: {c}" for c in _created(before, snapshot(work), allowed + inside)]
    if kind not in ("a KB", "model folder") or (kind == "a KB" and cmd not in KB_WRITERS) or (
            kind == "model folder" and cmd != "model import"):
        assert o is None or o.code in (1, 2), (cmd, kind, o and o.code, o and o.last_line)  # refused
    fz.finish()
