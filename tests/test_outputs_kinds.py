"""What each command's output IS decides what it may replace or append to: a JSON output is told
by its own keys (not by being JSON: a KB or a config.json is another's), a model folder by the
deepunlearn.json the tool writes (not by a config.json), an appended verdicts file by the row
each line carries; an input of the command, a link, a FIFO and a hardlink are never written
through; a results folder's fixed children are never followed; and the writers' own corner
cases (a trailing slash, a long name, a folder left between two renames, weight file modes)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.errors import atomic_dir, atomic_write_text
from deepunlearn.outputs import clean_stale, file_mode

VERDICT = ('{"row": {"checkpoint": "ul", "target": 0, "method": "ga", "param": 1}, "original": "ck", '
           '"target_id": 0, "recall": 1.0, "accuracy": 0.9, "forgotten": [0], "deep": true, "superficial": false}\n')


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def w(tmp_path, monkeypatch):
    """A folder with a KB, a fake checkpoint of this tool (``ck``), a user's app folder holding a
    config.json, a manifest and a verdicts file; the commands run in it."""
    monkeypatch.chdir(tmp_path)
    assert main(["data", "generate", "--people", "4", "-o", "kb.json", "--json"]) == 0
    for name in ("ck", "ck2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text('{"model_type": "llama"}')
        (tmp_path / name / "deepunlearn.json").write_text('{"format": "deepunlearn-model"}')
        (tmp_path / name / "model.safetensors").write_bytes(b"weights" * 100)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "config.json").write_text("{}")
    (tmp_path / "app" / "main.py").write_text("print('mine')\n")
    (tmp_path / "m.csv").write_text("checkpoint,target\nck2,0\n")
    (tmp_path / "v.jsonl").write_text(VERDICT)
    return tmp_path


MANIFEST = ["evaluate", "--original", "ck", "--kb", "kb.json", "--manifest", "m.csv", "--mode", "rank", "-o"]


# ------------------------------------------------------------------------- JSON outputs by their own keys


@pytest.mark.parametrize("argv, out, why", [
    (["rules", "closure", "--kb", "kb.json", "-o"], "kb.json", "is --kb kb.json, an input"),
    (["rules", "closure", "--kb", "kb.json", "-o"], "k2.json", "is not a closure of 'rules closure'"),
    (["rules", "closure", "--kb", "kb.json", "-o"], "app/config.json", "is not a closure"),
    (["probe", "--model", "ck", "--kb", "kb.json", "-o"], "k2.json", "is not an output of 'deepunlearn probe'"),
    (["data", "export", "kb.json", "-o"], "user.jsonl", "is not a probes file of 'data export'"),
    (["unlearn", "--model", "ck", "--kb", "kb.json", "--target", "0", "--method", "ga", "-o"], "k2.json",
     "is not an output of 'deepunlearn unlearn'"),
    (["evaluate", "--original", "ck", "--unlearned", "ck2", "--kb", "kb.json", "--target", "0", "-o"],
     "ck2/model.safetensors", "is inside --unlearned ck2, an input"),
    (["evaluate", "--original", "ck", "--unlearned", "ck2", "--kb", "kb.json", "--target", "0", "-o"], "k2.json",
     "is not a verdict of 'deepunlearn evaluate'"),
])
def test_a_json_writer_refuses_another_json_file_and_its_own_input(w, capsys, argv, out, why):
    (w / "k2.json").write_bytes((w / "kb.json").read_bytes())
    (w / "user.jsonl").write_text('{"note": "mine"}\n')
    before = {p: digest(p) for p in w.rglob("*") if p.is_file()}
    code, _, err = run(capsys, *argv, out)
    assert code == 1 and why in one_line(err) and "--force" in err, err
    assert {p: digest(p) for p in w.rglob("*") if p.is_file()} == before


def test_a_commands_own_json_output_is_still_replaced_without_force(w, capsys):
    for _ in range(2):
        code, _, err = run(capsys, "rules", "closure", "--kb", "kb.json", "-o", "closure.json", "-q")
        assert code == 0, err
    for _ in range(2):
        code, _, err = run(capsys, "data", "export", "kb.json", "-o", "probes.jsonl")
        assert code == 0, err
    assert (w / "closure.json").read_text().startswith("[[")


def test_data_forms_may_still_write_its_kb_in_place(w, capsys):
    code, _, err = run(capsys, "data", "forms", "--kb", "kb.json", "--label", "qa1", "--split", "test", "-o", "kb.json")
    assert code == 0, err


# ------------------------------------------------------------------------- model folders by deepunlearn.json


@pytest.mark.parametrize("out, why", [
    ("app", "is not a model folder of this tool (no deepunlearn.json)"),
    ("ck", "is --model ck, an input"),
    ("ck/sub", "is inside --model ck, an input"),
    (".", "holds --model ck, an input"),
])
def test_finetune_refuses_a_users_folder_and_its_own_input(w, capsys, out, why):
    before = {p: digest(p) for p in w.rglob("*") if p.is_file()}
    code, _, err = run(capsys, "finetune", "--model", "ck", "--kb", "kb.json", "--epochs", "1", "-o", out)
    assert code == 1 and why in one_line(err), err
    assert {p: digest(p) for p in w.rglob("*") if p.is_file()} == before and not (w / "ck" / "sub").exists()


# ------------------------------------------------------------------------- appending: evaluate --manifest -o


def _kind(w: Path, kind: str) -> str:
    if kind == "copy of the KB":
        (w / "k2.json").write_bytes((w / "kb.json").read_bytes())
        return "k2.json"
    if kind == "the manifest":
        return "m.csv"
    if kind == "the KB":
        return "kb.json"
    if kind == "hardlink to the KB":
        os.link(w / "kb.json", w / "h.jsonl")
        return "h.jsonl"
    if kind == "symlink to a verdicts file":
        os.symlink("v.jsonl", w / "l.jsonl")
        return "l.jsonl"
    if kind == "dangling symlink":
        os.symlink("nowhere.jsonl", w / "d.jsonl")
        return "d.jsonl"
    if kind == "fifo":
        os.mkfifo(w / "f.jsonl")
        return "f.jsonl"
    if kind == "folder":
        return "ck"
    if kind == "trailing slash":
        return "new.jsonl/"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["copy of the KB", "the manifest", "the KB", "hardlink to the KB",
                                  "symlink to a verdicts file", "dangling symlink", "fifo", "folder", "trailing slash"])
def test_the_manifest_output_appends_only_to_its_own_verdicts_file(w, capsys, kind):
    out = _kind(w, kind)
    before = {p: digest(p) for p in w.rglob("*") if p.is_file() and not p.is_symlink()}
    code, _, err = run(capsys, *MANIFEST, out)
    assert code == 1 and one_line(err).startswith(f"deepunlearn evaluate: error: -o {out.rstrip('/')}"), err
    assert {p: digest(p) for p in w.rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert not (w / "nowhere.jsonl").exists() and not (w / "new.jsonl").exists()


def test_a_second_run_on_one_manifest_output_is_refused_while_the_first_holds_it(w, capsys):
    fd = os.open(w / "v.jsonl", os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code, _, err = run(capsys, *MANIFEST, "v.jsonl")
    finally:
        os.close(fd)
    assert code == 1 and "another deepunlearn command is appending to it" in one_line(err)
    assert (w / "v.jsonl").read_text() == VERDICT


# ------------------------------------------------------------------------- results folders


@pytest.mark.parametrize("setup, why", [
    (lambda w: None, "-o kb.json: exists and is not a folder"),
    (lambda w: (w / "d").mkdir() or (w / "d" / "report").write_text("x"), "is not a results folder"),
    (lambda w: (w / "d").mkdir() or (w / "d" / "config.yaml").write_text("mine: 1\n"), "is not a results folder"),
    (lambda w: None, "-o ck: a non-empty folder that is not a results folder"),
])
def test_evaluate_report_refuses_what_is_not_a_results_folder(w, capsys, setup, why):
    setup(w)
    out = "kb.json" if "kb.json" in why else "ck" if "-o ck" in why else "d"
    before = {p: digest(p) for p in w.rglob("*") if p.is_file()}
    code, _, err = run(capsys, "evaluate-report", "v.jsonl", "-o", out)
    assert code == 1 and why in one_line(err), err
    assert {p: digest(p) for p in w.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("child", ["report link", "report file", "store link"])
def test_a_results_folders_fixed_children_are_never_followed_or_half_written(w, capsys, child):
    (w / "victim").mkdir()
    (w / "victim" / "summary.json").write_text("x")
    (w / "d").mkdir()
    (w / "d" / "results.sqlite").write_bytes(b"")  # a results folder (its store's marker)
    if child == "report link":
        os.symlink("../victim", w / "d" / "report")
    elif child == "report file":
        (w / "d" / "report").write_text("mine")
    else:
        (w / "d" / "results.sqlite").unlink()
        os.symlink("../victim/summary.json", w / "d" / "results.sqlite")
    before = {p: digest(p) for p in w.rglob("*") if p.is_file() and not p.is_symlink()}
    names = sorted(p.name for p in (w / "d").iterdir())
    for extra in ([], ["--force"]):
        code, _, err = run(capsys, "evaluate-report", "v.jsonl", "-o", "d", *extra)
        assert code == 1 and one_line(err).startswith("deepunlearn evaluate-report: error: -o d"), err
    assert {p: digest(p) for p in w.rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert sorted(p.name for p in (w / "d").iterdir()) == names


SWEEP = """kb = "kb.json"
rules = "family"
output = "{output}"
seeds = 1
{cache}
[[models]]
name = "tiny"
path = "ck"

[methods]
ga = [1]

[targets]
stratified = 1
"""


@pytest.mark.parametrize("output, cache, why", [
    ("ck/out", "", "field output: {w}/ck/out lies inside the folder of model 'tiny'"),
    ("res", 'cache_dir = "ck/cache"', "field cache_dir: {w}/ck/cache lies inside the folder of model 'tiny'"),
])
def test_a_sweep_writing_inside_its_model_folder_is_refused_up_front(w, capsys, output, cache, why):
    (w / "sweep.toml").write_text(SWEEP.format(output=output, cache=cache))
    code, _, err = run(capsys, "bench", "--config", "sweep.toml", "--quiet")
    assert code == 1 and why.format(w=w) in one_line(err), err
    assert sorted(p.name for p in (w / "ck").iterdir()) == ["config.json", "deepunlearn.json", "model.safetensors"]


def test_bench_never_follows_a_report_link_in_its_results_folder(w, capsys):
    (w / "sweep.toml").write_text(SWEEP.format(output="res", cache=""))
    (w / "victim").mkdir()
    (w / "res").mkdir()
    (w / "res" / "results.sqlite").write_bytes(b"")
    os.symlink("../victim", w / "res" / "report")
    code, _, err = run(capsys, "bench", "--config", "sweep.toml", "--quiet")
    assert code == 1 and "res/report is a symbolic link" in one_line(err), err
    assert list((w / "victim").iterdir()) == []


# ------------------------------------------------------------------------- the writers' corner cases


def test_a_trailing_slash_on_a_file_output_is_refused(w, capsys):
    code, _, err = run(capsys, "data", "generate", "--people", "3", "-o", "out/x.json/")
    assert code == 1 and "ends with '/'" in one_line(err)
    assert not (w / "out").exists()


def test_a_legal_long_name_gets_a_legal_temporary_name(tmp_path):
    name = "a" * 240 + ".json"
    p = atomic_write_text(tmp_path / name, "{}")
    assert p.read_text() == "{}" and sorted(x.name for x in tmp_path.iterdir()) == [name]
    with atomic_dir(tmp_path / ("b" * 250)) as d:
        (d / "x").write_text("1")
    assert (tmp_path / ("b" * 250) / "x").read_text() == "1"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_folder_left_between_the_two_renames_is_restored_not_deleted(tmp_path):
    old = tmp_path / f".ckpt.old-{_dead_pid()}-deadbeef"
    old.mkdir()
    (old / "model.safetensors").write_text("the only whole copy")
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "ckpt"):
            raise RuntimeError("killed again")
    assert (tmp_path / "ckpt" / "model.safetensors").read_text() == "the only whole copy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert clean_stale(tmp_path / "ckpt", restore=True) == []


def test_weight_files_get_the_umask_mode_like_every_other_output(tmp_path):
    import torch
    from safetensors.torch import save_file

    with atomic_dir(tmp_path / "m") as d:
        save_file({"w": torch.zeros(2)}, str(d / "model.safetensors"))
        (d / "config.json").write_text("{}")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "m").iterdir()}
    assert modes == {"model.safetensors": file_mode(), "config.json": file_mode()}


def test_an_appended_line_completes_a_torn_last_line_first(tmp_path):
    from deepunlearn.output_append import AppendFile
    from deepunlearn.output_kinds import verdict_lines

    out = tmp_path / "v.jsonl"
    out.write_text(VERDICT + '{"row": {"checkpoint": "u')  # killed mid-line
    with AppendFile(out, ours=verdict_lines, what="verdicts") as f:
        f.append('{"row": {"checkpoint": "x"}}\n')
    assert out.read_text().splitlines()[-1] == '{"row": {"checkpoint": "x"}}'
    torn = tmp_path / "t.jsonl"
    torn.write_text('{"row": {"checkpoint": "u')  # the only line, torn: still the command's own
    assert verdict_lines(torn) and not verdict_lines(tmp_path / "missing")
    (tmp_path / "n.jsonl").write_text('{"row": 1}\n')
    assert not verdict_lines(tmp_path / "n.jsonl")


@pytest.mark.parametrize("out", ["", "dangling"])
def test_bench_checks_its_output_as_given_not_as_resolved(w, capsys, out):
    (w / "sweep.toml").write_text(SWEEP.format(output="res", cache=""))
    os.symlink(w / "nowhere", w / "dangling")
    code, _, err = run(capsys, "bench", "--config", "sweep.toml", "--quiet", "-o", out)
    assert code == 1 and one_line(err).startswith("deepunlearn bench: error: -o"), err
    assert not (w / "nowhere").exists() and not (w / ".lock").exists() and not (w / "results.sqlite").exists()


def test_a_figure_writer_replaces_its_own_figure_not_a_users_image(w, capsys):
    (w / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"my holiday" * 50)
    before = digest(w / "photo.png")
    code, _, err = run(capsys, "data", "draw", "kb.json", "-o", "photo.png")
    assert code == 1 and "is not a figure this tool drew" in one_line(err) and digest(w / "photo.png") == before
    for _ in range(2):
        code, _, err = run(capsys, "data", "draw", "kb.json", "-o", "fig.png")
        assert code == 0, err
