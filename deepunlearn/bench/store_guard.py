"""What the results store's SQLite errors mean to the user: one line naming the store file.

sqlite3 says "file is not a database" for a damaged or truncated store and "database or disk is
full", "disk I/O error" or "attempt to write a readonly database" when the folder cannot take
more; raised as they are they named no file and the CLI took them for bugs. :func:`guard` wraps
the store's methods so that each of them becomes the store's error class (a UserError) saying
which file, what happened and what to do; ``sqlite3.IntegrityError`` (a point stored twice: a
bug, never the user's) passes through.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from pathlib import Path
from typing import Callable

#: Words of sqlite3's messages for a file that is not (or no longer) a readable database.
_CORRUPT = ("not a database", "malformed", "encrypted", "corrupt")
#: Words of its messages for a folder or disk that refuses writes.
_UNWRITABLE = ("readonly", "read-only", "disk is full", "disk i/o", "unable to open", "no space")


def is_corrupt(e: BaseException) -> bool:
    """Whether a sqlite3 error says the file is damaged (truncated, overwritten, not SQLite)."""
    return isinstance(e, sqlite3.DatabaseError) and any(w in str(e).lower() for w in _CORRUPT)


def store_message(path: Path, e: sqlite3.DatabaseError) -> str:
    """The one line for a sqlite3 error on the store ``path``."""
    text = str(e) or type(e).__name__
    if is_corrupt(e):
        return (f"{path}: not a readable results store ({text}: a damaged or truncated file); pass --overwrite to "
                "start the sweep over in this folder (its stored results are lost), or choose another output folder")
    if any(w in text.lower() for w in _UNWRITABLE):
        return (f"{path}: cannot write the results store ({text}): a read-only folder or a full disk? every point "
                "stored before is kept; make room or choose another output folder, then run again to resume")
    return f"{path}: cannot use the results store ({text})"


def discard(path: Path) -> None:
    """Remove a damaged store and its WAL side files (``--overwrite`` starts over)."""
    for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass


def guarded_names(cls: type, private: tuple[str, ...] = ()) -> list[str]:
    """The methods :func:`guard` wraps: ``__init__``, every public method ``cls`` defines itself,
    and the private ones named in ``private`` (those that run SQL for the others)."""
    public = [n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)
              and not isinstance(v, (staticmethod, classmethod, type))]
    return ["__init__", *public, *private]


def guard(cls: type, error: type[Exception], private: tuple[str, ...] = ()) -> type:
    """Wrap the methods of :func:`guarded_names` of ``cls`` (instances have ``path``) so that a
    sqlite3 error other than IntegrityError becomes ``error(store_message(...), file=path)`` (an
    error a wrapped method gets from another wrapped one is already that error and passes on)."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def method(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as e:  # OperationalError included
                raise error(store_message(self.path, e), file=self.path) from None
        return method

    for name in guarded_names(cls, private):
        setattr(cls, name, wrap(getattr(cls, name)))
    return cls
