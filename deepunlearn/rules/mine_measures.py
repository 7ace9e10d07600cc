"""AMIE's measures of a Horn rule on a KB, and the comment line that carries them in a rule file.

For a rule ``B => r(X, Y)`` (Galárraga et al. 2013, 2015; Lajus et al. 2020), counting distinct
pairs ``(x, y)`` of the head's variables:

* ``support``: pairs for which the body holds and ``r(x, y)`` is a fact of the KB;
* ``head_coverage``: support / the number of facts of ``r``;
* ``std_confidence``: support / ``body_size``, the pairs for which the body holds;
* ``pca_confidence``: support / ``pca_body_size``, the pairs for which the body holds and the
  KB knows some fact ``r(x, y')`` (the partial completeness assumption: what the KB says of x's
  r is all there is). AMIE counts on the more functional side of ``r``: on the subject if ``r``
  has at least as many distinct subjects as distinct objects, else on the object
  (``r(x', y)`` for some x').

A rule file carries them in a comment line right after the rule, which the rule parser reads back
into :attr:`~.language.Rule.measures`::

    husband(X, Y) :- wife(Y, X).
    % support=12 head_coverage=0.3000 std_confidence=0.9231 pca_confidence=0.9231 body_size=13 pca_body_size=13
"""

from __future__ import annotations

import math
import re

import numpy as np

from .mine_index import MineIndex, member

#: The measures a mined rule carries, in the order they are written.
MEASURES = ("support", "head_coverage", "std_confidence", "pca_confidence", "body_size", "pca_body_size")
#: Those that are counts (written as integers).
COUNTS = ("support", "body_size", "pca_body_size")

#: A comment line that holds measures starts with this (after ``%`` and spaces).
MARK = "support="
_PAIR = re.compile(r"([a-z_][a-z0-9_]*)=(\S+)")

Guards = tuple[tuple[str, int], ...]  # attribute atoms: (value, variable)


def facts_among(keys: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Which of the sorted distinct ``pairs`` are among the sorted ``keys`` (searching the
    relation's keys in the pairs: the pairs are often far more)."""
    out = np.zeros(len(pairs), dtype=bool)
    found = member(pairs, keys)
    out[np.searchsorted(pairs, keys[found])] = True
    return out


def measures_of(ix: MineIndex, head: str, pairs: np.ndarray) -> dict[str, float]:
    """The measures of a rule with head relation ``head`` whose body holds for exactly the pairs
    ``pairs`` (sorted distinct keys ``x * n + y``)."""
    rel = ix.rel[head]
    x, y = pairs // ix.n, pairs % ix.n
    support = int(member(pairs, rel.keys).sum())
    body = len(pairs)
    pca_body = int((rel.has_subj[x] if rel.functional else rel.has_obj[y]).sum())
    return make_measures(support, rel.size, body, pca_body)


class guard_categories:
    """The body pairs of a closed rule counted by category (the attribute values of x and of y,
    and whether x != y), so that every set of guards is measured from the counts alone."""

    def __init__(self, ix: MineIndex, head: str, pairs: np.ndarray):
        rel, n = ix.rel[head], ix.n
        x, y = pairs // n, pairs % n
        self.values = ix.values
        bits = np.zeros(n, dtype=np.int64)
        for i, v in enumerate(self.values):
            bits |= ix.attr[v].astype(np.int64) << i
        k = len(self.values)
        code = (bits[x] << (k + 1)) | (bits[y] << 1) | (x != y)
        if 2 * k + 1 <= 16:  # few values: count by code directly
            inverse, size = code, 1 << (2 * k + 1)
            self.codes = np.arange(size, dtype=np.int64)
        else:
            self.codes, inverse = np.unique(code, return_inverse=True)
            size = len(self.codes)
        fact = facts_among(rel.keys, pairs)
        side = rel.has_subj[x] if rel.functional else rel.has_obj[y]
        self.body = np.bincount(inverse, minlength=size)
        self.support = np.bincount(inverse[fact], minlength=size)
        self.pca = np.bincount(inverse[side], minlength=size)
        self.k = k

    def measures(self, attrs: Guards, neq: bool, head_size: int) -> dict[str, float]:
        mask = np.ones(len(self.codes), dtype=bool)
        for value, var in attrs:
            bit = self.values.index(value) + (self.k + 1 if var == 0 else 1)
            mask &= (self.codes >> bit) & 1 == 1
        if neq:
            mask &= self.codes & 1 == 1
        return make_measures(int(self.support[mask].sum()), head_size, int(self.body[mask].sum()),
                             int(self.pca[mask].sum()))


def make_measures(support: int, head_size: int, body: int, pca_body: int) -> dict[str, float]:
    return {"support": support, "head_coverage": support / head_size if head_size else 0.0,
            "std_confidence": support / body if body else 0.0,
            "pca_confidence": support / pca_body if pca_body else 0.0,
            "body_size": body, "pca_body_size": pca_body}


def format_measures(m: dict[str, float]) -> str:
    """The comment line for ``m`` (known measures in :data:`MEASURES` order, then any others)."""
    keys = [k for k in MEASURES if k in m] + sorted(k for k in m if k not in MEASURES)
    parts = [f"{k}={int(m[k])}" if k in COUNTS or (float(m[k]).is_integer() and k not in MEASURES)
             else f"{k}={m[k]:.4f}" for k in keys]
    return "% " + " ".join(parts)


def is_measures_comment(comment: str) -> bool:
    """Whether a comment (``% ...``) is a measures line."""
    return comment.lstrip("%#").lstrip().startswith(MARK)


def parse_measures(comment: str) -> tuple[dict[str, float] | None, str | None]:
    """``(measures, None)`` from a measures comment, or ``(None, problem)``.

    >>> parse_measures("% support=12 head_coverage=0.30 std_confidence=0.92 pca_confidence=0.95")[0]
    {'support': 12.0, 'head_coverage': 0.3, 'std_confidence': 0.92, 'pca_confidence': 0.95}
    >>> parse_measures("% support=12 head_coverage=high")[1]
    "measure 'head_coverage' has value 'high', expected a number >= 0"
    """
    body = comment.lstrip("%#").strip()
    out: dict[str, float] = {}
    for word in body.split():
        m = _PAIR.fullmatch(word)
        if m is None:
            return None, f"expected name=value pairs, found {word!r}"
        key, text = m.groups()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            return None, f"measure {key!r} has value {text!r}, expected a number >= 0"
        if key in out:
            return None, f"measure {key!r} given twice"
        out[key] = value
    return out, None
