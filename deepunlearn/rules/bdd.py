"""A small reduced ordered binary decision diagram (BDD) with a node budget.

:mod:`.soft` compiles "the target is derivable" into a BDD over the uncertain rule groundings of
the target's cone and reads its probability off the diagram; nothing else uses it. Nodes are
integers: ``0`` is false, ``1`` is true, and a node's children always have smaller ids, so the
probability of every node is one pass over the ids in order. :meth:`BDD.apply` is iterative
(no recursion limit on deep diagrams) and memoised; the nodes and memo entries together may not
pass ``budget`` (:class:`BudgetExceeded`).

>>> b = BDD(budget=100)
>>> x, y = b.var(0), b.var(1)
>>> f = b.apply(OR, x, y)
>>> round(b.probability(f, [0.5, 0.25]), 6)  # 1 - 0.5 * 0.75
0.625
>>> b.apply(AND, f, b.apply(AND, x, y)) == b.apply(AND, x, y)
True
"""

from __future__ import annotations

AND, OR = 0, 1
FALSE, TRUE = 0, 1
_LEAF = 1 << 62  # the level of the two terminals: below every variable


class BudgetExceeded(Exception):
    """The diagram would pass its budget of nodes and memo entries."""


class BDD:
    """A shared BDD whose variables are levels ``0, 1, ...`` (level 0 at the root)."""

    def __init__(self, budget: int | None = None):
        self.level = [_LEAF, _LEAF]
        self.low = [FALSE, TRUE]
        self.high = [FALSE, TRUE]
        self.unique: dict[tuple[int, int, int], int] = {}
        self.memo: dict[tuple[int, int, int], int] = {}
        self.budget = budget

    def __len__(self) -> int:
        return len(self.level)

    @property
    def size(self) -> int:
        """Nodes and memo entries held (what the budget bounds)."""
        return len(self.level) + len(self.memo)

    def _check(self) -> None:
        if self.budget is not None and len(self.level) + len(self.memo) > self.budget:
            raise BudgetExceeded(self.size)

    def mk(self, level: int, low: int, high: int) -> int:
        if low == high:
            return low
        key = (level, low, high)
        node = self.unique.get(key)
        if node is None:
            node = self.unique[key] = len(self.level)
            self.level.append(level)
            self.low.append(low)
            self.high.append(high)
            self._check()
        return node

    def var(self, level: int) -> int:
        """The diagram of the variable at ``level`` alone."""
        return self.mk(level, FALSE, TRUE)

    @staticmethod
    def _terminal(op: int, a: int, b: int) -> int | None:
        if a == b:
            return a
        if op == AND:
            if a == FALSE or b == FALSE:
                return FALSE
            if a == TRUE:
                return b
            if b == TRUE:
                return a
        else:
            if a == TRUE or b == TRUE:
                return TRUE
            if a == FALSE:
                return b
            if b == FALSE:
                return a
        return None

    def apply(self, op: int, a: int, b: int) -> int:
        """``a AND b`` or ``a OR b`` (``op``: :data:`AND` or :data:`OR`)."""
        done = self._terminal(op, a, b)
        if done is not None:
            return done
        level, low, high, memo = self.level, self.low, self.high, self.memo
        results: list[int] = []
        # frames: (a, b, False) asks for a op b; (a, b, True) combines the two results on top
        stack: list[tuple[int, int, bool]] = [(a, b, False)]
        while stack:
            x, y, combine = stack.pop()
            if x > y:
                x, y = y, x
            key = (op, x, y)
            if combine:
                hi = results.pop()
                lo = results.pop()
                top = min(level[x], level[y])
                r = self.mk(top, lo, hi)
                memo[key] = r
                self._check()
                results.append(r)
                continue
            r = self._terminal(op, x, y)
            if r is None:
                r = memo.get(key)
            if r is not None:
                results.append(r)
                continue
            top = min(level[x], level[y])
            x0, x1 = (low[x], high[x]) if level[x] == top else (x, x)
            y0, y1 = (low[y], high[y]) if level[y] == top else (y, y)
            stack.append((x, y, True))
            stack.append((x1, y1, False))  # popped second: the high result lands on top
            stack.append((x0, y0, False))
        return results[-1]

    def conjoin(self, nodes) -> int:
        out = TRUE
        for n in nodes:
            out = self.apply(AND, out, n)
            if out == FALSE:
                break
        return out

    def probability(self, root: int, probs) -> float:
        """The probability that ``root`` is true when the variable at level ``i`` is true with
        probability ``probs[i]``, independently of the others."""
        if root <= TRUE:
            return float(root)
        p = [0.0] * (root + 1)
        p[TRUE] = 1.0
        level, low, high = self.level, self.low, self.high
        for n in range(2, root + 1):
            q = probs[level[n]]
            p[n] = q * p[high[n]] + (1.0 - q) * p[low[n]]
        return p[root]
