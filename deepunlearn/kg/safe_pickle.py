"""Read the reference release's torch zip pickles without running arbitrary code.

The release stores plain data plus two ``__main__`` classes (``Person``, ``Rule``). A normal
``pickle.load`` or ``torch.load(weights_only=False)`` would construct whatever class a file
names, which is how a malicious pickle runs code. This unpickler resolves only an allow-list
of globals; ``__main__.Person``/``__main__.Rule`` become inert :class:`Record` objects that
accept nothing but a state dict. Anything else is refused before it is imported or called.
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError


class UnsafePickleError(UserError, pickle.UnpicklingError):
    """The file asks for a class or function outside the allow-list."""


class Record:
    """Inert stand-in for the release's ``__main__`` classes: only holds attributes."""

    __slots__ = ("kind", "__dict__")

    def __init__(self, kind: str = "") -> None:
        self.kind = kind

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise UnsafePickleError(f"{self.kind}: expected a dict of attributes, got {type(state).__name__}")
        self.__dict__.update(state)

    def __repr__(self) -> str:
        keys = ", ".join(sorted(self.__dict__))
        return f"<{self.kind} record: {keys}>"


def _record_class(kind: str) -> type:
    return type(kind, (Record,), {"__init__": lambda self, *a: Record.__init__(self, kind)})


_Person = _record_class("Person")
_Rule = _record_class("Rule")


def _numpy_global(name: str):
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray  # type: ignore[no-redef]
    return getattr(multiarray, name)


_ALLOWED: dict[tuple[str, str], Any] = {
    ("__main__", "Person"): _Person,
    ("__main__", "Rule"): _Rule,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("_codecs", "encode"): codecs.encode,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}
for _mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
    _ALLOWED[(_mod, "_reconstruct")] = _numpy_global("_reconstruct")
    _ALLOWED[(_mod, "scalar")] = _numpy_global("scalar")


class AllowListUnpickler(pickle.Unpickler):
    def __init__(self, file, source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self.source}: refused to load {module}.{name}: only the release's plain data "
                "(numbers, strings, lists, sets, numpy arrays, Person/Rule records) is allowed"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{self.source}: refused a persistent object {pid!r} (tensor storage is not expected here)")


def safe_load(path: str | os.PathLike) -> Any:
    """Load a torch zip pickle (or a raw pickle) with the allow-list unpickler.

    >>> import pickle, tempfile, os
    >>> class Evil:
    ...     def __reduce__(self):
    ...         return (os.system, ("echo pwned",))
    >>> with tempfile.NamedTemporaryFile(suffix=".pt", delete=False) as f:
    ...     pickle.dump(Evil(), f)
    >>> safe_load(f.name)
    Traceback (most recent call last):
    ...
    deepunlearn.kg.safe_pickle.UnsafePickleError: ...refused to load posix.system...
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file")
    data: bytes
    if zipfile.is_zipfile(p):
        with zipfile.ZipFile(p) as z:
            names = [n for n in z.namelist() if n.endswith("data.pkl")]
            if len(names) != 1:
                raise UnsafePickleError(f"{p}: expected one data.pkl in the torch archive, found {len(names)}")
            data = z.read(names[0])
    else:
        data = p.read_bytes()
    try:
        return AllowListUnpickler(io.BytesIO(data), str(p)).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # truncated or corrupt file
        raise UnsafePickleError(f"{p}: cannot unpickle: {type(e).__name__}: {e}") from None
