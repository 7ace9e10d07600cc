"""Hyper-parameter grids: the paper's, its per-model presets, the GPT-2 family test, job seeds.

The reference (wrh14/deep_unlearning) runs the same grids for Phi-1.5, Llama2-7b and Llama3-8b
and larger ones for GPT2-XL: 32 GA/NPO epochs instead of 16 (``config/model_config.yaml``
``ga_num_epochs``/``npo_num_epochs``; the Table-3 notebook's ``num_epochs = 32``) and TV's
``tv_alpha_list`` "0.2 1.0 5.0 10.0 30.0 60.0 80.0". WHP's grid is the notebook's
``alpha_list`` for every model (the yaml's ``whp_alpha_list`` is not what Table 3 used). GA and
NPO evaluate the step counts 1, 2, 4, ... of one trajectory (the paper's appendix D; the
notebook reads every checkpoint from 1 to ``num_epochs`` and the paper reports powers of two).

>>> GRID_PRESETS["gpt2-xl"]["tv"]
(0.2, 1, 5, 10, 30, 60, 80)
>>> GRID_PRESETS["llama3-8b"] == PAPER_GRIDS
True
>>> job_seed(0, "tiny", 272, "ga") == job_seed(0, "tiny", 272, "ga") != job_seed(1, "tiny", 272, "ga")
True
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping

from ..limits import MAX_STEPS, bound_message, too_large
from ..unlearn.methods import catalog

#: The paper's grids (appendix D; the reference's Phi/Llama settings). Used where a method's
#: grid is left empty and no preset applies.
PAPER_GRIDS: dict[str, tuple[float, ...]] = catalog.paper_grids("paper")

#: The default grids of the built-in methods beyond the paper's four (the catalogue's); a plug-in's
#: default grid is read from its spec (:func:`family_default`).
METHOD_GRIDS: dict[str, tuple[float, ...]] = {s.name: tuple(s.grid) for s in catalog.BUILTIN
                                              if s.name not in PAPER_GRIDS}

#: every built-in method's grid when none is given: the paper's, else the method's own default
DEFAULT_GRIDS: dict[str, tuple[float, ...]] = {**METHOD_GRIDS, **PAPER_GRIDS}

#: GPT2-XL's grids in the reference. TV: the paper's appendix also lists alpha 0.5, but the
#: reference's code never ran it (model_config.yaml's tv_alpha_list and the notebook's
#: alpha_list for gpt2-xl both lack it), so neither does this preset.
GPT2_XL_GRIDS: dict[str, tuple[float, ...]] = catalog.paper_grids("gpt2-xl")

#: Per-model presets, named as in the reference's ``config/model_config.yaml``; a model's
#: ``grids = "NAME"`` in a sweep config picks one.
GRID_PRESETS: dict[str, dict[str, tuple[float, ...]]] = {
    "phi": dict(PAPER_GRIDS),
    "llama2-7b": dict(PAPER_GRIDS),
    "llama3-8b": dict(PAPER_GRIDS),
    "gpt2-xl": GPT2_XL_GRIDS,
}

#: ``model_type`` values (config.json) of GPT-2-family architectures.
GPT2_MODEL_TYPES = ("gpt2", "gpt_neo", "gptj", "gpt_neox")


def is_gpt2_family(path: str) -> bool:
    """Whether a model is of the GPT-2 family: a local folder by its config.json ``model_type``
    (nothing is loaded), a hub name by containing "gpt2".

    >>> is_gpt2_family("openai-community/gpt2-xl"), is_gpt2_family("microsoft/phi-1_5")
    (True, False)
    """
    p = Path(path).expanduser()
    if p.is_dir():
        cfg = p / "config.json"
        try:
            model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):
            return False
        return model_type in GPT2_MODEL_TYPES
    return "gpt2" in path.lower()


def family_default(method: str, gpt2: bool) -> tuple[float, ...] | None:
    """The grid a method gets when none is given: GPT2-XL's for a GPT-2 model (when the
    protocol's ``family_grids`` is on; the caller decides), else the paper's; None if neither has one."""
    spec = catalog.find(method)
    if spec is None:
        return None
    if gpt2 and "gpt2-xl" in spec.paper_grids:
        return tuple(spec.paper_grids["gpt2-xl"])
    return tuple(spec.grid)


def resolve_grids(methods: Mapping[str, list[int | float]], unset: frozenset[str] | set[str],
                  model_grids: str | Mapping[str, list[int | float]] | None,
                  gpt2: bool) -> dict[str, tuple[list[int | float], str]]:
    """One model's grid of every method, with where it comes from.

    ``methods``: the sweep's grids (already the paper's where ``unset``, i.e. left empty);
    ``model_grids``: the model's preset name or table; ``gpt2``: the model is of the GPT-2
    family and the protocol's ``family_grids`` is on. In order: the model's table (an empty
    entry: the model's default), its preset, the model's default for an unset method (GPT2-XL's
    grid for ``gpt2``, else the paper's), the sweep's grid.

    >>> resolve_grids({"ga": [1, 2, 4, 8, 16], "tv": [1, 5]}, {"ga"}, None, True)
    {'ga': ([1, 2, 4, 8, 16, 32], 'auto gpt2-xl'), 'tv': ([1, 5], 'methods')}
    >>> resolve_grids({"ga": [1, 2], "tv": [1, 5]}, set(), {"tv": [3]}, False)
    {'ga': ([1, 2], 'methods'), 'tv': ([3], 'models.grids')}
    """
    preset = GRID_PRESETS[model_grids] if isinstance(model_grids, str) else {}
    table = model_grids if isinstance(model_grids, Mapping) else {}
    out: dict[str, tuple[list[int | float], str]] = {}
    for method, grid in methods.items():
        if table.get(method):
            out[method] = (list(table[method]), "models.grids")
        elif method not in table and method in preset:
            out[method] = ([num(x) for x in preset[method]], f"preset {model_grids}")
        elif method in table or method in unset:
            default = family_default(method, gpt2)
            if default is None:
                raise ValueError(f"method {method!r} has no default grid: give its parameters")
            src = ("auto gpt2-xl" if gpt2 and default != catalog.default_grid(method)
                   else "paper" if method in PAPER_GRIDS else "default")
            out[method] = ([num(x) for x in default], src)
        else:
            out[method] = (list(grid), "methods")
    return out


#: built-in methods whose grid values are step counts (positive integers) and those whose are
#: strengths (>= 0); :func:`check_grid` reads any method's kind from the catalogue
STEP_METHODS = tuple(s.name for s in catalog.BUILTIN if s.kind == "steps")
STRENGTH_METHODS = tuple(s.name for s in catalog.BUILTIN if s.kind == "strength")


def check_grid(name: str, grid: list[int | float]) -> list[int | float]:
    """A grid of finite values without repeats, integral values kept integral (GA steps read
    better as 1, 2, 4). A steps method's values (the catalogue's kind: GA, NPO, ...) are step counts
    (positive integers), a strength method's (TV, WHP) are
    strengths alpha >= 0 (0 is the unchanged model, a control; a negative alpha would move towards
the model reinforced on the target), as the ``unlearn`` command checks them; a NaN grid value once reached a results file as ``"param": NaN``.

    >>> check_grid("ga", [1, 2.0, 4])
    [1, 2, 4]
    >>> check_grid("tv", [0.5, -1])
    Traceback (most recent call last):
    ...
    ValueError: method 'tv': grid value -1 is negative (alpha is a strength, >= 0)
    """
    key = name.lower()
    kind = catalog.kind_of(key)
    for x in grid:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"method {name!r}: grid value {x!r} is not a number")
        if not math.isfinite(x):
            raise ValueError(f"method {name!r}: grid value {x} is not a finite number")
        if kind == "steps" and (x < 1 or not (isinstance(x, int) or float(x).is_integer())):
            raise ValueError(f"method {name!r}: grid value {x} is not a positive whole number of steps")
        if kind == "steps" and too_large(x, MAX_STEPS):  # 1e21 steps would run for ever
            raise ValueError(bound_message(f"method {name!r}: grid value", x, MAX_STEPS, "steps"))
        if kind == "strength" and x < 0:
            raise ValueError(f"method {name!r}: grid value {x:g} is negative (alpha is a strength, >= 0)")
    if len(set(grid)) != len(grid):
        raise ValueError(f"method {name!r}: grid {grid} repeats a value")
    return [int(x) if kind == "steps" else num(x) for x in grid]


def refuse_bools(grids: object) -> None:
    """Raise ValueError for a ``true``/``false`` or text grid value (pydantic would read them as
    1/0 and as numbers) and for one method named twice in different cases (``ga`` and ``GA``
    would be merged, one grid lost)."""
    if isinstance(grids, dict):
        seen: dict[str, str] = {}
        for name, grid in grids.items():
            key = str(name).lower()
            if key in seen:
                raise ValueError(f"method {name!r} is also given as {seen[key]!r} (method names ignore case): "
                                 "keep one")
            seen[key] = str(name)
            if isinstance(grid, (list, tuple)) and any(isinstance(x, bool) for x in grid):
                raise ValueError(f"method {name!r}: grid {list(grid)} holds a true/false value, expected numbers")
            if isinstance(grid, (list, tuple)) and any(isinstance(x, str) for x in grid):
                raise ValueError(f"method {name!r}: grid {list(grid)} holds text, expected numbers")


def num(x: float) -> float | int:
    """Keep integral grid values integral (GA steps read better as 1, 2, 4 than 1.0, 2.0)."""
    f = float(x)
    return int(f) if f.is_integer() and abs(f) < 2**53 and not isinstance(x, float) else f


def unset_methods(data: dict) -> frozenset[str]:
    """Methods whose grid a raw config leaves empty (all of the paper's when it names none)."""
    methods = data.get("methods")
    if methods is None:
        return frozenset(PAPER_GRIDS)
    if isinstance(methods, (list, tuple)):
        return frozenset(str(m).lower() for m in methods)
    if isinstance(methods, dict):
        return frozenset(str(m).lower() for m, g in methods.items() if not g)
    return frozenset()


def job_seed(seed: int, model: str, target: int, method: str) -> int:
    """The seed of one (model, target, method) trajectory: the first 4 bytes (big-endian) of
    sha256 over ``[seed, model, target, method]`` as JSON. Stable across processes, machines
    and Python versions (unlike ``hash``), and below 2**32 (numpy's limit)."""
    blob = json.dumps([int(seed), str(model), int(target), str(method)])
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:4], "big")


def folder_digest(folder: str | Path) -> str:
    """sha256 over a folder's files (relative names and bytes, in sorted order): a sets folder
    that changes makes another sweep."""
    root = Path(folder)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(f.read_bytes())
    return "sha256:" + h.hexdigest()


def grids_text(grids: Mapping[str, list[float] | tuple[float, ...]]) -> str:
    """``GA [1, 2, 4]; TV [0.2, 1e5]`` (for reports)."""
    return "; ".join(f"{catalog.title(m)} [{', '.join(param_label(x) for x in g)}]" for m, g in grids.items())


def param_label(x: float) -> str:
    """``16`` -> "16", ``0.2`` -> "0.2", ``1e5`` -> "1e5"."""
    x = float(x)
    if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3):
        return f"{x:.0e}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
    return f"{x:g}"
