"""The output policy (deepunlearn.outputs) on the commands that write files: what exists and is
not the command's own output is refused without --force, in one line naming the path; special
files never; links without --force; outputs get the umask mode; dead processes' temporaries
are cleaned; disk full and read-only folders are exit code 1 naming the path."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys

import pytest

from deepunlearn.cli import main
from deepunlearn.errors import atomic_dir, atomic_write_text
from deepunlearn.outputs import OutputError, check_output, clean_stale, kb_file


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err


@pytest.fixture
def kb_path(tmp_path):
    code = main(["data", "generate", "--people", "5", "-o", str(tmp_path / "kb.json"), "--json"])
    assert code == 0
    return tmp_path / "kb.json"


def gen(capsys, out, *extra):
    return run(capsys, "data", "generate", "--people", "5", "-o", str(out), *extra)


# ------------------------------------------------------------------------------------ refuse, --force


def test_a_foreign_file_is_refused_without_force_and_replaced_with_it(tmp_path, capsys):
    notes = tmp_path / "notes.json"
    notes.write_bytes(b"my notes\n")
    code, _, err = gen(capsys, notes)
    assert code == 1 and notes.read_bytes() == b"my notes\n"
    assert one_line(err) == (f"deepunlearn data: error: -o {notes}: exists and is not a KB file; refusing to "
                             "replace it (pass --force to replace it)\n")
    code, _, err = gen(capsys, notes, "--force")
    assert code == 0, err and kb_file(notes)


def test_the_commands_own_output_is_replaced_without_force(kb_path, capsys):
    before = kb_path.read_bytes()
    code, _, err = gen(capsys, kb_path, "--seed", "1")
    assert code == 0, err
    assert kb_path.read_bytes() != before and kb_file(kb_path)


@pytest.mark.parametrize("argv, name", [
    (["data", "holdout", "--kb", "{kb}", "-o", "{out}"], "x.json"),
    (["data", "forms", "--kb", "{kb}", "--label", "qa1", "--split", "test", "-o", "{out}"], "x.json"),
    (["data", "export", "{kb}", "-o", "{out}"], "x.graphml"),
    (["data", "export", "{kb}", "-o", "{out}"], "x.jsonl"),
    (["data", "draw", "{kb}", "-o", "{out}"], "x.png"),
    (["rules", "closure", "--kb", "{kb}", "-o", "{out}"], "x.json"),
    (["rules", "explain", "--kb", "{kb}", "--target", "0", "-o", "{out}"], "x.svg"),
    (["probe", "--model", "tiny", "--kb", "{kb}", "-o", "{out}"], "x.json"),
    (["unlearn", "--model", "tiny", "--kb", "{kb}", "--target", "0", "--method", "ga", "-o", "{out}"], "x.json"),
])
def test_every_file_writer_refuses_a_foreign_file_before_any_work(kb_path, tmp_path, capsys, argv, name):
    out = tmp_path / name
    out.write_bytes(b"thesis\n")
    code, _, err = run(capsys, *[a.format(kb=kb_path, out=out) for a in argv])
    assert code == 1 and out.read_bytes() == b"thesis\n"
    assert f"-o {out}: exists and is not" in one_line(err) and "--force" in err


# ------------------------------------------------------------------------------------ special files, links


def test_a_fifo_is_never_replaced(tmp_path, capsys):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for extra in ((), ("--force",)):
        code, _, err = gen(capsys, fifo, *extra)
        assert code == 1 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
        assert one_line(err) == (f"deepunlearn data: error: -o {fifo}: is a FIFO, not a regular file; refusing to "
                                 "replace it\n")


def test_the_writer_itself_never_renames_onto_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="is a FIFO"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_symlink_is_refused_without_force_and_replaced_itself_with_it(tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_bytes(b"precious\n")
    link = tmp_path / "kb.json"
    link.symlink_to(target)
    code, _, err = gen(capsys, link)
    assert code == 1 and "is a symbolic link" in one_line(err) and "--force" in err
    assert link.is_symlink() and target.read_bytes() == b"precious\n"
    code, _, err = gen(capsys, link, "--force")
    assert code == 0, err
    assert not link.is_symlink() and kb_file(link) and target.read_bytes() == b"precious\n"


@pytest.mark.parametrize("make, want", [
    (lambda d: "", "-o: empty path"),
    (lambda d: (d / "file.txt").write_text("x") and str(d / "file.txt" / "x.json"),
     "-o {d}/file.txt/x.json: {d}/file.txt is a file, not a folder"),
    (lambda d: (d / "sub").mkdir() or str(d / "sub"), "-o {d}/sub: is a folder, expected a file"),
])
def test_impossible_output_paths_are_one_line(tmp_path, capsys, make, want):
    code, _, err = gen(capsys, make(tmp_path))
    assert code == 1 and one_line(err) == f"deepunlearn data: error: {want.format(d=tmp_path)}\n"


# ------------------------------------------------------------------------------------ modes, temporaries


def test_outputs_get_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        f = atomic_write_text(tmp_path / "a.json", "{}")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o750


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_dead_processes_temporaries_are_cleaned_live_ones_kept(tmp_path):
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / f".out.json.tmp-{dead}-deadbeef").write_text("half")
        (tmp_path / f".out.json.old-{dead}-deadbeef").mkdir()
        (tmp_path / f".out.json.tmp-{live.pid}-cafecafe").write_text("in progress")
        (tmp_path / f".other.json.tmp-{dead}-deadbeef").write_text("not ours to clean now")
        atomic_write_text(tmp_path / "out.json", "{}")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [f".out.json.tmp-{live.pid}-cafecafe", f".other.json.tmp-{dead}-deadbeef", "out.json"])
        assert clean_stale(tmp_path / "other.json") == [tmp_path / f".other.json.tmp-{dead}-deadbeef"]
    finally:
        live.kill()
        live.wait()


def test_a_temporary_name_taken_by_a_link_is_never_followed(tmp_path, monkeypatch):
    import deepunlearn.outputs as outputs

    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ".out.tmp-1-x").symlink_to(victim)
    monkeypatch.setattr(outputs, "tmp_sibling", lambda p, kind: tmp_path / ".out.tmp-1-x")
    with pytest.raises(OutputError):
        atomic_write_text(tmp_path / "out", "new")
    assert victim.read_text() == "keep" and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ faults of the environment


def test_disk_full_is_exit_1_naming_the_file_and_keeps_the_old_one(kb_path, capsys, monkeypatch):
    before = kb_path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = gen(capsys, kb_path, "--seed", "3")
    assert code == 1 and one_line(err) == f"deepunlearn data: error: {kb_path}: cannot write: no space left on the device\n"
    assert kb_path.read_bytes() == before
    assert sorted(p.name for p in kb_path.parent.iterdir()) == ["kb.json"]


@pytest.mark.parametrize("fault", [OSError(errno.EROFS, "Read-only file system"),
                                   PermissionError(errno.EACCES, "Permission denied")])
def test_a_read_only_or_forbidden_folder_is_exit_1_naming_the_file(tmp_path, capsys, monkeypatch, fault):
    real = os.open

    def refuse(path, *a, **k):
        if ".tmp-" in os.fspath(path):
            raise fault
        return real(path, *a, **k)

    monkeypatch.setattr(os, "open", refuse)
    out = tmp_path / "kb.json"
    code, _, err = gen(capsys, out)
    assert code == 1 and f"error: {out}: cannot write: " in one_line(err) and not out.exists()


def test_a_write_fault_inside_a_folder_write_names_the_folder(tmp_path):
    class SafetensorError(Exception):  # as safetensors raises it when the disk is full
        pass

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    with pytest.raises(OutputError) as e:
        with atomic_dir(tmp_path / "ckpt"):
            raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")
    assert str(e.value).startswith(f"{tmp_path / 'ckpt'}: cannot write: Error while serializing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"] and (tmp_path / "ckpt" / "config.json").exists()


def test_an_environment_fault_anywhere_in_a_command_is_not_an_internal_error(kb_path, capsys, monkeypatch):
    import deepunlearn.kg.cli as kg_cli

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/somewhere/file")

    monkeypatch.setattr(kg_cli, "_show", full)
    code, _, err = run(capsys, "data", "show", str(kb_path))
    assert code == 1 and one_line(err) == ("deepunlearn data: error: cannot write: no space left on the device "
                                           "(/somewhere/file)\n")


def test_check_output_accepts_a_missing_path_and_refuses_a_file_for_a_folder(tmp_path):
    assert check_output(tmp_path / "new" / "x", folder=True) == tmp_path / "new" / "x"
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="exists and is not a folder"):
        check_output(tmp_path / "f", folder=True, force=True)
