"""The catalogue of unlearning methods: one :class:`~.spec.MethodSpec` per method
(:mod:`.spec`), torch-free (docs/design.md section 2: one source for every list).

Every command-line choice, sweep grid, demo list, memory plan, GPU guard, report label and
colour reads the method's spec here; the method's class (which needs torch) is imported only
when a run needs it, from the spec's ``cls`` (``"module:Class"``), and its parameters' class
(torch-free, what a sweep file's ``[params.<method>]`` is checked against) from the spec's
``params`` (:func:`load_params`).

The built-in methods are declared in :data:`BUILTIN`. Another package adds its own under the
entry-point group ``deepunlearn.methods``: the entry point's name is the method's name and its
object a :class:`MethodSpec`, e.g. in the package's ``pyproject.toml``::

    [project.entry-points."deepunlearn.methods"]
    ga_clip = "my_methods.spec:SPEC"

A spec is checked when it is read (:func:`check_spec`): a missing or empty grid, a missing memory
profile or class path, or a ``params`` path that does not import is refused with one line naming
the entry point and the field.

>>> names()[:4]
['ga', 'npo', 'tv', 'whp']
>>> get_spec("tv").kind, get_spec("du_loop").needs_rules
('strength', True)
>>> get_spec("nope")
Traceback (most recent call last):
...
deepunlearn.unlearn.methods.catalog.CatalogError: unknown unlearning method 'nope'; expected one of du_loop, du_oracle, ga, graddiff, idk, npo, npo_gdr, rmu, simnpo, tv, whp
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import math
import sys
from typing import Any

from ...errors import UserError
from .builtin import BUILTIN
from .spec import GA_RATES, GRADIENT, KINDS, MODEL_COPIES, NPO_RATES, MemoryProfile, MethodSpec, PaperRates  # noqa: F401

ENTRY_POINT_GROUP = "deepunlearn.methods"


class CatalogError(UserError, ValueError):
    """A method name the catalogue does not know, or a plug-in's spec that is incomplete."""


_REQUIRED = ("name", "kind", "grid", "memory", "cls", "params")


def _empty(value: Any) -> bool:
    """A required field left out: None, or an empty name, class path or grid (of any sequence type)."""
    return value is None or (isinstance(value, (str, tuple, list)) and len(value) == 0)


def check_fields(spec: Any, where: str) -> MethodSpec:
    """``spec`` if its fields are complete and valid (every one but the class path's module),
    else :class:`CatalogError` naming ``where`` and the field: a spec without a grid, or with an
    empty one, is refused."""
    if not isinstance(spec, MethodSpec):
        raise CatalogError(f"{where}: expected a deepunlearn MethodSpec, got {type(spec).__name__}")
    missing = [f for f in _REQUIRED if _empty(getattr(spec, f))]
    if missing:
        raise CatalogError(f"{where}: the MethodSpec lacks {', '.join(missing)}", field=missing[0])
    if spec.kind not in KINDS:
        raise CatalogError(f"{where}: kind {spec.kind!r} is not one of {', '.join(KINDS)}", field="kind")
    if not isinstance(spec.memory, MemoryProfile) or spec.memory.model_copy not in MODEL_COPIES \
            or not isinstance(spec.memory.step_copies, int) or spec.memory.step_copies < 0:
        raise CatalogError(f"{where}: memory must be a MemoryProfile with model_copy one of {', '.join(MODEL_COPIES)} "
                           "and step_copies a whole number >= 0", field="memory")
    for name, grid in (("grid", spec.grid), *((f"paper_grids[{k!r}]", g) for k, g in dict(spec.paper_grids).items())):
        bad = isinstance(grid, str) or not hasattr(grid, "__len__") or len(grid) == 0 or any(
            isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g) or g < 0 for g in grid)
        if bad or (spec.kind == "steps" and any(g < 1 or float(g) != int(g) for g in grid)):
            raise CatalogError(f"{where}: {name} {grid!r} is not a non-empty list of {spec.kind} values", field="grid")
    rates = spec.rates
    if rates is not None and not (isinstance(rates, PaperRates) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < float("inf")
            for x in (rates.lr, rates.lr_large, rates.ratio))):
        raise CatalogError(f"{where}: rates must be a PaperRates of positive finite numbers", field="rates")
    return spec


def check_spec(spec: Any, where: str) -> MethodSpec:
    """Check that ``spec`` is a complete :class:`MethodSpec`, as a plug-in's spec is when it is read.

    Parameters
    ----------
    spec : MethodSpec
        The spec to check.
    where : str
        What names the spec in a message (a plug-in's entry point).

    Returns
    -------
    MethodSpec
        ``spec`` itself.

    Raises
    ------
    CatalogError
        A field that is missing or bad (an empty grid, a class path that is not ``module:Class``
        or whose module cannot be found, a parameters' class that does not import): one message
        naming ``where`` and the field. The class path is checked without importing the class;
        the parameters' class is imported (:func:`load_params`).

    Examples
    --------
    >>> import dataclasses
    >>> check_spec(get_spec("ga"), "ga").name
    'ga'
    >>> check_spec(dataclasses.replace(get_spec("ga"), grid=()), "method 'mine'")
    Traceback (most recent call last):
    ...
    deepunlearn.unlearn.methods.catalog.CatalogError: method 'mine': the MethodSpec lacks grid
    """
    check_fields(spec, where)
    module, _, attr = spec.cls.partition(":")
    if not module or not attr:
        raise CatalogError(f"{where}: cls {spec.cls!r} is not 'module:Class'", field="cls")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise CatalogError(f"{where}: cls {spec.cls!r}: module {module!r} cannot be found", field="cls")
    load_params(spec, where)
    return spec


#: the built-in specs by name, each checked when this module is imported
_BUILTIN = {s.name: check_fields(s, f"built-in method {s.name!r}") for s in BUILTIN}


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _where(ep: Any) -> str:
    return f"method {ep.name!r} (entry point {ep.value!r} in group {ENTRY_POINT_GROUP})"


#: specs read from entry points, per sys.path (a folder added to sys.path is seen at once)
_LOADED: dict[tuple[str, ...], dict[str, MethodSpec]] = {}


def _plugin(name: str, ep: Any) -> MethodSpec:
    key = tuple(sys.path)
    cache = _LOADED.setdefault(key, {})
    if name not in cache:
        try:
            obj = ep.load()
        except Exception as e:  # an installed plug-in that does not import is the user's setup, not our bug
            raise CatalogError(f"{_where(ep)}: cannot load it ({type(e).__name__}: {e})") from None
        spec = check_spec(obj, _where(ep))
        if spec.name != name:
            raise CatalogError(f"{_where(ep)}: the MethodSpec's name is {spec.name!r}, not the entry point's {name!r}",
                               field="name")
        cache[name] = spec
    return cache[name]


def names() -> list[str]:
    """Every method name: the built-in ones, then the plug-ins' (their specs are not loaded).

    Returns
    -------
    list of str
        The built-in methods in catalogue order, then the plug-ins' names sorted.

    Examples
    --------
    >>> names()[:3], "du_loop" in names()
    (['ga', 'npo', 'tv'], True)
    """
    return list(_BUILTIN) + sorted(n for n in _entry_points() if n not in _BUILTIN)


def find(name: str) -> MethodSpec | None:
    """The spec of a method, or None for a name that is not one.

    Parameters
    ----------
    name : str
        A method name, in any case; a name that is no method (a batch label such as ``ga@b5``)
        gives None.

    Returns
    -------
    MethodSpec or None
        The spec, a plug-in's loaded and checked.

    Raises
    ------
    CatalogError
        A plug-in whose entry point does not load or whose spec is incomplete.

    Examples
    --------
    >>> find("GA").name, find("ga@b5")
    ('ga', None)
    """
    key = str(name).lower()
    if key in _BUILTIN:
        return _BUILTIN[key]
    eps = _entry_points()
    return _plugin(key, eps[key]) if key in eps else None


def get_spec(name: str) -> MethodSpec:
    """The spec of a method.

    Parameters
    ----------
    name : str
        A method name, in any case.

    Returns
    -------
    MethodSpec
        The spec, a plug-in's loaded and checked.

    Raises
    ------
    CatalogError
        An unknown name (the message lists the methods), or a plug-in that does not load or is
        incomplete.

    Examples
    --------
    >>> spec = get_spec("npo")
    >>> spec.kind, tuple(spec.grid)
    ('steps', (1, 2, 4, 8, 16))
    """
    spec = find(name)
    if spec is None:
        raise CatalogError(f"unknown unlearning method {name!r}; expected one of {', '.join(sorted(names()))}",
                           field="method")
    return spec


def specs() -> dict[str, MethodSpec]:
    """Every method's spec, by name.

    Returns
    -------
    dict of str to MethodSpec
        In the order of :func:`names`; plug-ins loaded and checked.

    Raises
    ------
    CatalogError
        A plug-in that does not load or is incomplete.

    Examples
    --------
    >>> all_specs = specs()
    >>> list(all_specs)[:2], all_specs["du_loop"].needs_rules
    (['ga', 'npo'], True)
    """
    return {n: get_spec(n) for n in names()}


def kind_of(name: str) -> str | None:
    spec = find(name)
    return spec.kind if spec else None


def default_grid(name: str) -> tuple[float, ...] | None:
    spec = find(name)
    return tuple(spec.grid) if spec else None


def title(name: str) -> str:
    """A method's label in reports (its spec's, else the name in capitals, e.g. ``GA@B5``)."""
    spec = find(name)
    return spec.title if spec else str(name).upper()


def titles(kind: str) -> str:
    """The labels of every method of one kind (:data:`KINDS`), for messages.

    >>> titles("strength")
    'TV or WHP'
    """
    got = [title(n) for n in names() if kind_of(n) == kind]
    return " or ".join([", ".join(got[:-1]), got[-1]] if len(got) > 1 else got)


def colour(name: str) -> str | None:
    spec = find(name)
    return spec.colour if spec else None


def bases() -> tuple[str, ...]:
    """The built-in methods a rule-aware method may take as its base forget loss."""
    return tuple(s.name for s in BUILTIN if s.base)


def demo_methods() -> tuple[str, ...]:
    return tuple(s.name for s in BUILTIN if s.demo)


def paper_grids(preset: str = "paper") -> dict[str, tuple[float, ...]]:
    """The built-in methods' grids of one preset family: ``"paper"`` (the paper's methods' own
    grids) or one of their ``paper_grids`` (``"gpt2-xl"``).

    >>> paper_grids()["tv"], paper_grids("gpt2-xl")["tv"]
    ((0.2, 0.5, 1, 5, 10), (0.2, 1, 5, 10, 30, 60, 80))
    """
    grids = {}
    for s in BUILTIN:
        grid = s.grid if preset == "paper" and s.paper else s.paper_grids.get(preset)
        if grid is not None:
            grids[s.name] = tuple(grid)
    return grids


def load_class(spec: MethodSpec) -> type:
    """The method's class (imports its module, and torch with it)."""
    module, _, attr = str(spec.cls).partition(":")
    where = f"method {spec.name!r}: cls {spec.cls!r}"
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise CatalogError(f"{where}: cannot import it ({type(e).__name__}: {e})", field="cls") from None
    if getattr(cls, "name", None) != spec.name:
        raise CatalogError(f"{where}: the class's name is {getattr(cls, 'name', None)!r}, not {spec.name!r}",
                           field="cls")
    params = load_params(spec)
    if getattr(cls, "Params", None) is not params:
        raise CatalogError(f"method {spec.name!r}: the class's Params is {getattr(cls, 'Params', None)!r}, not the "
                           f"spec's params {spec.params!r}", field="params")
    return cls


def load_params(spec: MethodSpec, where: str | None = None) -> type:
    """The method's parameters' class, from the spec's ``params`` (torch-free: a sweep file's
    ``[params.<method>]`` is checked against it without the method's class); :class:`CatalogError`
    naming the spec (``where``) if it does not import or is not a ``MethodParams`` subclass.

    >>> load_params(get_spec("npo")).__name__
    'NPOParams'
    """
    from .params import MethodParams

    where = where or f"method {spec.name!r}"
    module, _, attr = str(spec.params).partition(":")
    if not module or not attr:
        raise CatalogError(f"{where}: params {spec.params!r} is not 'module:Class'", field="params")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except Exception as e:  # a plug-in's module that fails to import is its setup, not our bug
        raise CatalogError(f"{where}: params {spec.params!r}: cannot import it ({type(e).__name__}: {e})",
                           field="params") from None
    if not (isinstance(cls, type) and issubclass(cls, MethodParams)):
        raise CatalogError(f"{where}: params {spec.params!r} is not a MethodParams subclass", field="params")
    return cls


def help_names() -> str:
    """``ga, npo, tv, ...`` for help texts."""
    return ", ".join(names())


__all__ = ["BUILTIN", "CatalogError", "ENTRY_POINT_GROUP", "GA_RATES", "GRADIENT", "KINDS", "MODEL_COPIES",
           "MemoryProfile", "MethodSpec", "NPO_RATES", "PaperRates", "bases", "check_fields", "check_spec", "colour", "default_grid", "demo_methods", "find", "get_spec",
           "help_names", "kind_of", "load_class", "load_params", "names", "paper_grids", "specs", "title"]
