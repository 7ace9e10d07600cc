"""The order of a family drawing's units within their rows (:func:`.layout.family_layout`,
step 2): the one with the fewest crossings between neighbouring rows' parent-child links."""

from __future__ import annotations

from collections import defaultdict


def _crossings(rows: dict[int, list[int]], nrows: int, level: list[int], downs: list[set[int]]) -> int:
    """How many parent-child links cross between neighbouring rows."""
    pos = {u: i for r in rows.values() for i, u in enumerate(r)}
    total = 0
    for lv in range(nrows - 1):
        edges = sorted((pos[u], pos[d]) for u in rows[lv] for d in downs[u] if level[d] == lv + 1)
        for i, (a, b) in enumerate(edges):
            for c, d in edges[i + 1:]:
                if c > a and d < b:
                    total += 1
    return total


def order_rows(n: int, level: list[int], ups: list[set[int]], downs: list[set[int]],
                key) -> tuple[dict[int, list[int]], int]:
    """The units of each row in order: depth-first from the oldest founders, then barycentre
    sweeps, keeping the order with the fewest crossings between neighbouring rows, then swaps of
    neighbours while that removes crossings with the rows above and below."""
    rows: dict[int, list[int]] = defaultdict(list)
    seen: set[int] = set()
    for start in sorted(range(n), key=lambda u: (level[u],) + key(u)):
        stack = [start]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            rows[level[v]].append(v)
            stack.extend(sorted((w for w in downs[v] | ups[v] if w not in seen), key=key, reverse=True))
    nrows = max(rows) + 1 if rows else 0
    best = (_crossings(rows, nrows, level, downs), {lv: list(r) for lv, r in rows.items()})
    for _ in range(12):
        for sweep, nbrs in ((range(1, nrows), ups), (range(nrows - 2, -1, -1), downs)):
            for lv in sweep:
                pos = {u: i for r in rows.values() for i, u in enumerate(r)}

                def bary(u: int) -> tuple:
                    ns = [pos[v] for v in nbrs[u]]
                    return (sum(ns) / len(ns) if ns else pos[u], key(u))

                rows[lv].sort(key=bary)
            c = _crossings(rows, nrows, level, downs)
            if c < best[0]:
                best = (c, {lv: list(r) for lv, r in rows.items()})
    rows = defaultdict(list, best[1])
    _swap_neighbours(rows, nrows, ups, downs)
    return rows, nrows


def _swap_neighbours(rows: dict[int, list[int]], nrows: int, ups: list[set[int]], downs: list[set[int]]) -> None:
    """Swap neighbours in their rows while that removes crossings with the rows above and below."""
    for _ in range(10):
        swapped = False
        pos = {u: i for r in rows.values() for i, u in enumerate(r)}
        for lv in range(nrows):
            row = rows[lv]
            for i in range(len(row) - 1):
                a, b = row[i], row[i + 1]
                here = there = 0
                for nb in (ups, downs):
                    for p in nb[a]:
                        for q in nb[b]:
                            here += pos[p] > pos[q]
                            there += pos[p] < pos[q]
                if there < here:
                    row[i], row[i + 1] = b, a
                    pos[a], pos[b] = i + 1, i
                    swapped = True
        if not swapped:
            break
