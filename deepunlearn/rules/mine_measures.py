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


def measures_of(ix: MineIndex, head: str, pairs: np.ndarray) -> dict[str, float]:
    """The measures of a rule with head relation ``head`` whose body holds for exactly the pairs
    ``pairs`` (sorted distinct keys ``x * n + y``)."""
    rel = ix.rel[head]
    x, y = pairs // ix.n, pairs % ix.n
    support = int(member(pairs, rel.keys).sum())
    body = len(pairs)
    pca_body = int((rel.has_subj[x] if rel.functional else rel.has_obj[y]).sum())
    return make_measures(support, rel.size, body, pca_body)


#: Per-entity tables pay off when a body holds for more pairs than this many times the entities
#: times the categories of one side (tests lower it to check both ways of counting).
PER_ENTITY_FACTOR = 1.0


class BodyCounts:
    """The pairs of a closed body counted by category: the attribute values of x (``k`` bits), of
    y, and whether x != y, ``code = xbits << (k + 1) | ybits << 1 | (x != y)``; so every head
    relation and every set of guards is measured from counts. Built once per body, reused for
    every head relation. A body of many pairs also keeps, per entity, its pairs by the other
    side's category, so that a head's PCA counts take time in the entities, not in the pairs."""

    def __init__(self, ix: MineIndex, pairs: np.ndarray):
        n = ix.n
        self.ix, self.pairs, self.values, self.k = ix, pairs, ix.values, len(ix.values)
        k = self.k
        bits = np.zeros(n, dtype=np.int64)
        for i, v in enumerate(self.values):
            bits |= ix.attr[v].astype(np.int64) << i
        self.bits = bits
        x, y = pairs // n, pairs % n
        code = (bits[x] << (k + 1)) | (bits[y] << 1) | (x != y)
        self.half = 1 << (k + 1)
        if 2 * k + 1 <= 16:
            self.codes, self.inverse = np.arange(1 << (2 * k + 1), dtype=np.int64), code
        else:
            self.codes, self.inverse = np.unique(code, return_inverse=True)
        size = len(self.codes)
        self.body = np.bincount(self.inverse, minlength=size)
        self.per_entity = 2 * k + 1 <= 16 and len(pairs) > PER_ENTITY_FACTOR * n * self.half
        if self.per_entity:
            neq = (x != y).astype(np.int64)
            self.by_x = np.bincount(x * self.half + ((bits[y] << 1) | neq), minlength=n * self.half
                                    ).reshape(n, self.half)
            self.by_y = np.bincount(y * self.half + ((bits[x] << 1) | neq), minlength=n * self.half
                                    ).reshape(n, self.half)
        else:
            self.x, self.y = x, y

    @property
    def size(self) -> int:
        """Memory held, in array elements."""
        pairs = 0 if self.pairs is None else len(self.pairs)
        return pairs * 2 + (2 * self.ix.n * self.half if self.per_entity else 2 * pairs)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Which of the pairs ``keys`` (``x * n + y``) the body holds for."""
        return member(self.pairs, keys)

    @classmethod
    def star(cls, ix: MineIndex, atoms) -> "BodyCounts | None":
        """The counts of a body ``a(X, Z), b(Y, Z)`` (either argument order in each atom) in which
        each X has at most one Z through ``a`` (or each Y through ``b``), without building its
        pairs: they are the disjoint union over Z of (X's with that Z) x (Y's with that Z), so
        every count is a sum over Z and over the entities. None if the body is not of that kind."""
        k = len(ix.values)
        if len(atoms) != 2 or 2 * k + 1 > 16:
            return None
        side = {v: a for a in atoms for v in a[1:] if v in (0, 1)}
        if set(side) != {0, 1} or side[0] is side[1] or any(2 not in a[1:] for a in atoms):
            return None
        n = ix.n

        def links(atom):  # (entity, z) pairs of the atom, the entity being its head variable
            r, a, _ = atom
            keys = ix.rel[r].keys
            return (keys // n, keys % n) if a != 2 else (keys % n, keys // n)

        first = next((v for v in (0, 1) if np.bincount(links(side[v])[0], minlength=n).max(initial=0) <= 1), None)
        if first is None:
            return None
        self = cls.__new__(cls)
        self.ix, self.pairs, self.values, self.k = ix, None, ix.values, k
        self.half = 1 << (k + 1)
        self.codes = np.arange(1 << (2 * k + 1), dtype=np.int64)
        self.per_entity = True
        bits = np.zeros(n, dtype=np.int64)
        for i, v in enumerate(ix.values):
            bits |= ix.attr[v].astype(np.int64) << i
        self.bits = bits
        fe, fz = links(side[first])       # each fe once: its only z
        oe, oz = links(side[1 - first])   # the other variable's links, any number per entity
        zof = np.full(n, -1, dtype=np.int64)
        zof[fe] = fz
        nb = 1 << k
        cnt_f = np.bincount(fz * nb + bits[fe], minlength=n * nb).reshape(n, nb)
        cnt_o = np.bincount(oz * nb + bits[oe], minlength=n * nb).reshape(n, nb)
        other = np.unique(oe * n + oz)
        # entities that pair with themselves: e links to its own z through the other atom too
        self_f = fe[member(other, fe * n + fz)]
        by_f = np.zeros((n, self.half), dtype=np.int64)  # per first entity: counts by (other bits, neq)
        by_f[fe[:, None], (np.arange(nb)[None, :] << 1) | 1] = cnt_o[fz]
        by_f[self_f, (bits[self_f] << 1) | 1] -= 1
        by_f[self_f, bits[self_f] << 1] += 1
        by_o = np.zeros((n, self.half), dtype=np.int64)  # per other entity: counts by (first bits, neq)
        np.add.at(by_o, (oe[:, None], (np.arange(nb)[None, :] << 1) | 1), cnt_f[oz])
        self_o = self_f  # the same entities, seen from the other side
        by_o[self_o, (bits[self_o] << 1) | 1] -= 1
        by_o[self_o, bits[self_o] << 1] += 1
        self.by_x, self.by_y = (by_f, by_o) if first == 0 else (by_o, by_f)
        body = np.zeros(len(self.codes), dtype=np.int64)
        cols = np.arange(self.half)
        for b in range(nb):
            rows = self.by_x[bits == b].sum(axis=0)
            body[(b << (k + 1)) | cols] += rows
        self.body = body

        def contains(keys: np.ndarray) -> np.ndarray:
            x, y = keys // n, keys % n
            f, o = (x, y) if first == 0 else (y, x)
            z = zof[f]
            return (z >= 0) & member(other, o * n + np.maximum(z, 0))

        self.contains = contains
        return self

    def head(self, head: str) -> "GuardCounts":
        ix, rel, k, n = self.ix, self.ix.rel[head], self.k, self.ix.n
        size = len(self.codes)
        found = rel.keys[self.contains(rel.keys)]
        fx, fy = found // n, found % n
        fcode = (self.bits[fx] << (k + 1)) | (self.bits[fy] << 1) | (fx != fy)
        if len(self.codes) != 1 << (2 * k + 1):
            fcode = np.searchsorted(self.codes, fcode)
        support = np.bincount(fcode, minlength=size)
        if not self.per_entity:
            side = rel.has_subj[self.x] if rel.functional else rel.has_obj[self.y]
            pca = np.bincount(self.inverse[side], minlength=size)
        else:
            pca = np.zeros(size, dtype=np.int64)
            table, has = (self.by_x, rel.has_subj) if rel.functional else (self.by_y, rel.has_obj)
            rows, own = table[has], self.bits[has]
            cols = np.arange(self.half)
            for b in np.unique(own):
                total = rows[own == b].sum(axis=0)
                if rel.functional:  # columns: ybits << 1 | neq; rows: x of bits b
                    pca[(b << (k + 1)) | cols] += total
                else:  # columns: xbits << 1 | neq; rows: y of bits b
                    pca[((cols >> 1) << (k + 1)) | (b << 1) | (cols & 1)] += total
        return GuardCounts(self.values, self.codes, self.body, support, pca, rel.size)


class GuardCounts:
    """A head relation's counts by category (:class:`BodyCounts`): the measures of the rule
    under any set of guards."""

    def __init__(self, values, codes, body, support, pca, head_size: int):
        self.values, self.codes, self.k = values, codes, len(values)
        self.body, self.support, self.pca, self.head_size = body, support, pca, head_size

    def measures(self, attrs: Guards = (), neq: bool = False) -> dict[str, float]:
        mask = np.ones(len(self.codes), dtype=bool)
        for value, var in attrs:
            bit = self.values.index(value) + (self.k + 1 if var == 0 else 1)
            mask &= (self.codes >> bit) & 1 == 1
        if neq:
            mask &= self.codes & 1 == 1
        return make_measures(int(self.support[mask].sum()), self.head_size, int(self.body[mask].sum()),
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
