"""An output a command appends to (``evaluate --manifest -o OUT.jsonl``): checked, opened and
locked before any work, so that appending never touches a file the tool did not write.

* What exists at the path must be the command's own output (``ours``: a verdicts file it wrote,
  told by the marker in its lines) or an empty file; anything else is refused, ``--force`` or
  not: appending to another file only ever damages it.
* A symbolic link (a dangling one too), a FIFO, a device or socket, a folder, a file with other
  hard links and any input of the command (by path, link or hardlink) are refused. Nothing is
  opened before the path is checked with ``lstat``, and the open itself follows no link and
  does not block (``O_NOFOLLOW | O_NONBLOCK``), so a FIFO planted in between never hangs it.
* The open file is locked (``flock``) for the whole run: a second command appending to the same
  output is refused in one line instead of judging every row again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, Mapping

from .outputs import OutputError, check_parent, file_kind, input_clash, why, write_faults


class AppendFile:
    """``with AppendFile(path, ours=..., what=..., inputs=...) as f: f.append(line)``; see the
    module docstring. Every refusal is an :class:`~deepunlearn.outputs.OutputError` naming ``flag``."""

    def __init__(self, path: str | os.PathLike, *, flag: str = "-o", ours: Callable[[Path], bool], what: str,
                 inputs: Mapping[str, object] | None = None) -> None:
        text = os.fspath(path)
        if not str(text).strip():
            raise OutputError(f"{flag}: empty path", field=flag)
        self.path = p = Path(text).expanduser()
        self.flag = flag
        where = f"{flag} {p}"
        if str(text).endswith(("/", os.sep)):
            raise OutputError(f"{where}: ends with '/' (names a folder); expected a file name", file=p, field=flag)
        check_parent(p, where, flag)
        clash = input_clash(p, inputs)
        if clash is not None:
            raise OutputError(f"{where}: {clash}, an input of this command; refusing to append to it", file=p,
                              field=flag)
        self._before = self._check(p, where, ours, what)
        self.fd: int | None = None
        self._where = where

    @staticmethod
    def _check(p: Path, where: str, ours: Callable[[Path], bool], what: str) -> os.stat_result | None:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise OutputError(f"{where}: cannot check it ({why(e)})", file=p, field=where.split()[0]) from None
        flag = where.split()[0]
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{where}: is a symbolic link; refusing to append through it (give the file itself or "
                              "a new path)", file=p, field=flag)
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{where}: is a folder, expected a file", file=p, field=flag)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{where}: is a {file_kind(st.st_mode)}, not a regular file; refusing to append to it",
                              file=p, field=flag)
        if st.st_nlink > 1:
            raise OutputError(f"{where}: has {st.st_nlink - 1} other hard link(s); refusing to append to a file that "
                              "other names share (give a new path)", file=p, field=flag)
        if not ours(p):
            raise OutputError(f"{where}: exists and is not {what}; refusing to append to it (give a new path)",
                              file=p, field=flag)
        return st

    def __enter__(self) -> "AppendFile":
        p, flag = self.path, self.flag
        flags = (os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        with write_faults(p, flag):
            p.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(p, flags, 0o666)  # a link planted since the check: ELOOP, one line naming the path
        st = os.fstat(fd)
        b = self._before
        if not stat.S_ISREG(st.st_mode) or (b is not None and (st.st_dev, st.st_ino) != (b.st_dev, b.st_ino)):
            os.close(fd)  # swapped since it was checked
            raise OutputError(f"{self._where}: changed while it was being opened; refusing to append to it", file=p,
                              field=flag)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - no flock on this platform: no lock
            pass
        except OSError:
            os.close(fd)
            raise OutputError(f"{self._where}: another deepunlearn command is appending to it; wait for it to finish "
                              "(or give another -o)", file=p, field=flag) from None
        self.fd = fd
        return self

    def torn(self) -> bool:
        """Whether the file ends inside a line (a run killed mid-write)."""
        assert self.fd is not None
        size = os.fstat(self.fd).st_size
        return size > 0 and os.pread(self.fd, 1, size - 1) != b"\n"

    def append(self, text: str) -> None:
        """Append ``text`` (completing a torn last line first), flushed to the disk."""
        assert self.fd is not None
        data = (("\n" if self.torn() else "") + text).encode("utf-8")
        with write_faults(self.path, self.flag):
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fsync(self.fd)

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None
