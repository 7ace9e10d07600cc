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

from ..errors import INPUT_BYTES_ENV, UserError, max_input_bytes, read_bytes


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


#: Most elements a release pickle may expand to, counting an object once for every reference to
#: it: a 72 KB pickle of ``x = [x, x]`` nested 64 times (memo reuse) expands to 2**64 elements,
#: which any code that walks it (``str``, a loop over a flattened list) never finishes. The
#: release's largest file expands to 3,619. Monkeypatch or pass ``max_elements`` to change it.
MAX_ELEMENTS = 10_000_000


def _children(x: Any) -> Any:
    if isinstance(x, dict):
        return [*x.keys(), *x.values()]
    if isinstance(x, (list, tuple, set, frozenset)):
        return x
    if isinstance(x, np.ndarray) and x.dtype == object:
        return x.ravel().tolist()
    return ()


def expanded_size(obj: Any, limit: int) -> int:
    """How many elements ``obj`` holds when every reference is followed (an object shared ``n``
    times counts ``n`` times), stopping as soon as the count passes ``limit``. Linear in the
    distinct objects: each one's size is computed once. A record's attributes are measured on
    their own (a record counts 1 where it is referenced), as the release's Person records
    reference each other in cycles; a reference back to an object being measured counts 1.

    >>> x = []
    >>> for _ in range(64):
    ...     x = [x, x]
    >>> expanded_size(x, 1000) > 1000
    True
    """
    sizes: dict[int, int] = {}
    keep: list[Any] = []  # ids stay valid while their objects live
    pending: list[Any] = [obj]
    total = 0
    while pending:
        root = pending.pop()
        if id(root) in sizes:
            continue
        stack: list[tuple[Any, bool]] = [(root, False)]
        open_: set[int] = set()
        while stack:
            x, done = stack.pop()
            k = id(x)
            if done:
                n = 1 + sum(sizes.get(id(c), 1) for c in _children(x))
                sizes[k] = min(n, limit + 1)
                open_.discard(k)
                continue
            if k in sizes or k in open_:
                continue
            if isinstance(x, Record):
                sizes[k] = 1
                keep.append(x)
                pending.extend(x.__dict__.values())
                continue
            kids = _children(x)
            if not len(kids):
                sizes[k] = 1
                keep.append(x)
                continue
            open_.add(k)
            keep.append(x)
            stack.append((x, True))
            stack.extend((c, False) for c in kids if id(c) not in sizes)
        total += sizes[id(root)]
        if total > limit:
            return total
    return total


def safe_load(path: str | os.PathLike, max_elements: int | None = None) -> Any:
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
    cap = max_input_bytes()
    data = read_bytes(p, error=UnsafePickleError, limit=cap)
    if zipfile.is_zipfile(io.BytesIO(data)):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                infos = [i for i in z.infolist() if i.filename.endswith("data.pkl")]
                if len(infos) != 1:
                    raise UnsafePickleError(f"{p}: expected one data.pkl in the torch archive, found {len(infos)}")
                if infos[0].file_size > cap:  # a small archive may inflate to gigabytes
                    raise UnsafePickleError(f"{p}: data.pkl would inflate to {infos[0].file_size:,} bytes, over the "
                                            f"limit of {cap:,} (set {INPUT_BYTES_ENV} to raise it)")
                data = z.read(infos[0])
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
            raise UnsafePickleError(f"{p}: cannot read the torch archive ({e})") from None
    try:
        obj = AllowListUnpickler(io.BytesIO(data), str(p)).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # truncated or corrupt file
        raise UnsafePickleError(f"{p}: cannot unpickle: {type(e).__name__}: {e}") from None
    limit = MAX_ELEMENTS if max_elements is None else max_elements
    if expanded_size(obj, limit) > limit:
        raise UnsafePickleError(f"{p}: refused: its shared references expand to over {limit:,} elements "
                                "(the release's files hold far fewer)")
    return obj
