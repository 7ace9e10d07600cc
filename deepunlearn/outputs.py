"""The output policy every writing command follows, and the atomic writers that carry it out.

* :func:`check_output` runs before any work: an output path that exists and is not what the
  command writes (told by its format or its marker files: ``ours``) is refused without
  ``--force``, in one line naming the flag, the path and the problem. A symbolic link is refused
  without ``--force`` (with it, the link itself is replaced: nothing is written through it); a
  device, FIFO or socket is always refused, as is a path under a regular file.
* :func:`atomic_write_bytes` / :func:`atomic_dir` write a temporary sibling
  ``.NAME.tmp-<pid>-<8 random hex digits>`` (created with ``O_EXCL | O_NOFOLLOW``) and rename it into place;
  a replaced folder is kept as ``.NAME.old-PID-...`` until the new one is in place. Outputs get
  the user's umask mode. Siblings left by a process that no longer runs are removed the next
  time NAME is written; a live process's are left alone.
* A fault of the environment while writing (disk full, read-only or forbidden folder) is a
  :class:`OutputError` (exit code 1) naming the path, never an internal error.

This module imports only :mod:`deepunlearn.user_error` (every layer may import it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import Callable, Iterator, Mapping

from .user_error import UserError

#: errno values that are the environment's fault, not a bug: reported as one line, exit code 1
WRITE_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.ENOTDIR,
                errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP}
_WHY = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.EPERM: "permission denied",
        errno.EFBIG: "file too large", errno.ENOTDIR: "a parent is not a folder", errno.EISDIR: "is a folder",
        errno.ENAMETOOLONG: "name too long", errno.ELOOP: "is a symbolic link"}


class OutputError(UserError):
    """An output path the command must not write, or could not write (exit code 1)."""


def _where(path: str | os.PathLike, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


def why(e: OSError) -> str:
    """A short reason for an OS error, naming the file it concerns when that is known."""
    reason = _WHY.get(e.errno or 0) or e.strerror or type(e).__name__
    return f"{reason} ({e.filename})" if e.filename else reason


def is_write_fault(e: BaseException) -> bool:
    """Whether ``e`` is the environment refusing a write (disk full, read-only, forbidden, ...):
    an OSError with such an errno, or safetensors failing to write a file for that reason."""
    if isinstance(e, OSError):
        return e.errno in WRITE_FAULTS
    return type(e).__name__ == "SafetensorError" and "IoError" in str(e)


@contextlib.contextmanager
def write_faults(path: str | os.PathLike, flag: str | None = None) -> Iterator[None]:
    """Turn a write fault (:func:`is_write_fault`) raised in the block into an :class:`OutputError`
    naming ``path``; every other exception passes unchanged."""
    try:
        yield
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - only write faults are translated, the rest re-raised
        if not is_write_fault(e):
            raise
        reason = why(e) if isinstance(e, OSError) else " ".join(str(e).split())
        raise OutputError(f"{_where(path, flag)}: cannot write: {reason}", file=path, field=flag) from None


# --------------------------------------------------------------------------------------------- modes


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets under the user's umask (what ``open(..., "w")`` gives)."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode a new folder gets under the user's umask."""
    return 0o777 & ~_umask()


# --------------------------------------------------------------------------------------------- checks


def file_kind(mode: int) -> str:
    """The kind of a file that is not a regular file or a folder, by its ``st_mode``, for a message."""
    return ("character device" if stat.S_ISCHR(mode) else "block device" if stat.S_ISBLK(mode)
            else "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "special file")


def check_parent(p: Path, where: str, flag: str | None) -> None:
    """Refuse an output whose nearest existing ancestor is a file, not a folder."""
    anc = p.parent
    while not os.path.lexists(anc) and anc != anc.parent:
        anc = anc.parent
    if os.path.lexists(anc) and not anc.is_dir():
        raise OutputError(f"{where}: {anc} is a file, not a folder", file=p, field=flag)


def _real(p: Path) -> Path:
    try:
        return Path(os.path.realpath(p))
    except (OSError, ValueError):
        return p.absolute()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # a hardlink or a link to the input is the input
    except (OSError, ValueError):
        return False


def input_clash(path: str | os.PathLike, inputs: Mapping[str, object] | None) -> str | None:
    """How the output ``path`` overlaps one of the command's ``inputs`` (flag -> path; a value
    that is no existing path, a model name such as ``tiny``, is skipped): ``"is --kb kb.json"``
    (the same file, by link or hardlink too), ``"is inside --model ck"``, ``"holds --model ck"``;
    None when it overlaps none."""
    out = Path(os.fspath(path)).expanduser()
    real_out = _real(out)
    for flag, value in (inputs or {}).items():
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if v is None or not str(v).strip():
                continue
            q = Path(os.fspath(v)).expanduser()  # type: ignore[arg-type]
            if not os.path.exists(q):
                continue
            real_in = _real(q)
            if _same_file(out, q) or real_out == real_in:
                return f"is {flag} {v}"
            if real_in.is_dir() and real_in in real_out.parents:
                return f"is inside {flag} {v}"
            if real_out in real_in.parents:
                return f"holds {flag} {v}"
    return None


def check_output(path: str | os.PathLike, *, flag: str | None = "-o", force: bool = False, folder: bool = False,
                 ours: Callable[[Path], bool] | None = None, what: str = "an output of this command",
                 inputs: Mapping[str, object] | None = None) -> Path:
    """Check an output path before any work (see the module docstring); returns it as a Path.

    ``folder``: the output is a folder (else a file). ``ours(path)``: whether an existing path is
    one this command writes (its format or marker files); None accepts any of the right type.
    ``what`` names what ``ours`` looks for in the refusal. ``inputs`` (flag -> path or paths):
    the command's inputs; an output that is one of them, lies inside one or holds one is
    refused without ``force`` (:func:`input_clash`)."""
    text = os.fspath(path)
    if not str(text).strip():
        raise OutputError(f"{flag or 'output'}: empty path", field=flag)
    p = Path(text).expanduser()
    where = _where(p, flag)
    if not folder and str(text).endswith(("/", os.sep)):
        raise OutputError(f"{where}: ends with '/' (names a folder); expected a file name", file=p, field=flag)
    check_parent(p, where, flag)
    clash = None if force else input_clash(p, inputs)
    if clash is not None:
        raise OutputError(f"{where}: {clash}, an input of this command; refusing to write over it (pass --force to "
                          "replace it)", file=p, field=flag)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise OutputError(f"{where}: cannot check it ({why(e)})", file=p, field=flag) from None
    if stat.S_ISLNK(st.st_mode):
        if not force:
            raise OutputError(f"{where}: is a symbolic link; refusing to write through it or replace it (pass --force "
                              "to replace the link itself)", file=p, field=flag)
        return p
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise OutputError(f"{where}: is a {file_kind(st.st_mode)}, not a regular file; refusing to replace it", file=p,
                          field=flag)
    if folder and not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{where}: exists and is not a folder", file=p, field=flag)
    if not folder and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{where}: is a folder, expected a file", file=p, field=flag)
    if not force and ours is not None and not ours(p):
        found = "a non-empty folder" if folder else "exists and"
        raise OutputError(f"{where}: {found} {'that ' if folder else ''}is not {what}; refusing to replace it (pass "
                          "--force to replace it)", file=p, field=flag)
    return p


# the recognisers of what a command writes (its "ours" tests) live in output_kinds: re-exported here
from .output_kinds import (FIGURE_MAGIC, MODEL_MARKERS, figure_file, graphml_file, json_file, kb_file,  # noqa: E402,F401
                           model_dir)


# --------------------------------------------------------------------------------------------- writers


#: bytes a file name may have (NAME_MAX of the common file systems)
NAME_MAX = 255


def _stem(name: str) -> str:
    """The part of a temporary sibling's name that stands for ``name``: ``name`` itself, or (a
    name too long to take ``.``, ``.tmp-<pid>-<8 random characters>`` beside it) its first bytes and a hash, so
    a legal long name still gets a legal temporary name."""
    if len(name.encode("utf-8", "surrogateescape")) <= NAME_MAX - 40:
        return name
    import hashlib

    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    head = name.encode("utf-8", "surrogateescape")[:NAME_MAX - 60].decode("utf-8", "ignore")
    return f"{head}~{digest}"


def tmp_sibling(path: Path, kind: str) -> Path:
    return path.with_name(f".{_stem(path.name)}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, another user's
        return True
    return True


def clean_stale(path: str | os.PathLike, *, restore: bool = False) -> list[Path]:
    """Remove the temporary siblings of ``path`` (``.NAME.tmp-PID-*``, ``.NAME.old-PID-*``) whose
    process no longer runs; returns what was removed. Never follows a link. ``restore`` (folder
    outputs, :func:`atomic_dir`): a ``.NAME.old-PID-*`` folder left while ``path`` itself is
    missing (a writer killed between its two renames) is the only whole copy: it is renamed back
    to ``path``, not removed."""
    p = Path(path)
    removed = []
    try:
        entries = list(os.scandir(p.parent))
    except OSError:
        return removed
    for kind in ("tmp", "old"):
        prefix = f".{_stem(p.name)}.{kind}-"
        for e in entries:
            if not e.name.startswith(prefix):
                continue
            pid = e.name[len(prefix):].split("-", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if restore and kind == "old" and not os.path.lexists(p) and e.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.replace(e.path, p)  # the previous output, whole: restored (kept if that fails)
                continue
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)
                removed.append(Path(e.path))
    return removed


def _refuse_special(p: Path, *, folder: bool) -> bool:
    """Whether ``p`` exists (as itself, not through a link); refuses what must never be replaced."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        if stat.S_ISDIR(st.st_mode) and not folder:
            raise OutputError(f"{p}: is a folder, expected a file", file=p)
        if stat.S_ISREG(st.st_mode) and folder:
            raise OutputError(f"{p}: exists and is not a folder", file=p)
        return True
    raise OutputError(f"{p}: is a {file_kind(st.st_mode)}, not a regular file; refusing to replace it", file=p)


def _make_parent(p: Path) -> None:
    if str(p) in ("", "."):
        raise OutputError("output: empty path")
    check_parent(p, str(p), None)
    p.parent.mkdir(parents=True, exist_ok=True)


def _create_tmp(p: Path) -> tuple[Path, int]:
    """A new temporary sibling file of ``p``: ``O_EXCL | O_NOFOLLOW``, so whatever already has the
    name (a link planted there included) is never opened; the mode is the umask's."""
    for _ in range(16):
        tmp = tmp_sibling(p, "tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except FileExistsError:
            continue
    raise OutputError(f"{p}: cannot create a temporary file beside it (every name tried exists)", file=p)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling renamed into place, so ``path`` is
    either its old content or the whole new one; missing parent folders are created. A link at
    ``path`` is replaced, never written through; a device, FIFO or socket is refused."""
    if not os.fspath(path):
        raise OutputError("output: empty path")
    p = Path(path)
    with write_faults(p):
        _make_parent(p)
        _refuse_special(p, folder=False)
        clean_stale(p)
        tmp, fd = _create_tmp(p)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            _refuse_special(p, folder=False)  # made a FIFO while we wrote: still never renamed over
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return p


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _umask_weights(folder: Path) -> None:
    """Give the weight files in ``folder`` the umask's mode: safetensors writes them 0600, unlike
    every other file of a model folder."""
    mode = file_mode()
    for f in folder.rglob("*.safetensors"):
        with contextlib.suppress(OSError):
            st = os.lstat(f)
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                os.chmod(f, mode)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary sibling folder of ``path``; when the block completes, it replaces
    ``path`` (an existing folder is removed only after the new one is in place); when the block
    raises, it is removed and ``path`` is untouched. A write fault in the block (disk full,
    read-only) is an :class:`OutputError` naming ``path``.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "ckpt"
    >>> with atomic_dir(d) as tmp:
    ...     _ = (tmp / "w.txt").write_text("new")
    >>> (d / "w.txt").read_text()
    'new'
    """
    if not os.fspath(path):
        raise OutputError("output: empty path")
    p = Path(path)
    with write_faults(p):
        _make_parent(p)
        if _refuse_special(p, folder=True) and not p.is_dir() and not p.is_symlink():
            raise OutputError(f"{p}: exists and is not a folder", file=p)
        clean_stale(p, restore=True)
        tmp = tmp_sibling(p, "tmp")
        tmp.mkdir(mode=0o777)  # mkdir applies the umask
    try:
        with write_faults(p):
            yield tmp
            _umask_weights(tmp)
            old = None
            if os.path.lexists(p):
                old = tmp_sibling(p, "old")
                os.replace(p, old)
            os.replace(tmp, p)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(old)
