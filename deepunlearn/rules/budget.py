"""The grounding budget: a bound on the memory rule evaluation may take.

One badly written rule (a cartesian product of body atoms, a 12-atom star) can ask the engine
for billions of groundings; numpy then allocates until the machine runs out of memory. The
native engine (:mod:`.engine`) therefore keeps count of what it **holds**: the groundings
recorded so far (earlier rounds, earlier rules of this round), the facts derived so far, and,
*before* a join step allocates its rows, the rows it is about to build, each row of a wide join
(more than :data:`COLUMNS_PER_GROUNDING` columns: variables and matched atoms) counting
``ceil(columns / COLUMNS_PER_GROUNDING)`` times, as it takes that much memory. The facts a
round derives are counted before the fact tables grow.

Past the budget evaluation stops with :class:`RuleBudgetError`, one line naming the rule
(``file:line``), the count it would reach and the budget, and how to raise it. The least budget
that a rule set needs on a KB is ``derivation_graph(...).peak_groundings``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .errors import RulesError
from .language import RuleSet

#: Default bound on the groundings and derived facts held at once. Measured on a generated
#: 2,000-person KB through ``rules closure`` (which also builds a Python tuple per closure fact):
#: 9.8 million groundings deriving 9.5 million new facts peak at 2.4 GB, 10.0 million
#: groundings deriving 4.9 million at 1.6 GB; so a budget of 10 million on their sum stays well
#: under 2 GB. The 100,000-person generated family KB peaks at 2.2 million (2.1 million
#: groundings; its largest join step builds 0.1 million rows).
DEFAULT_MAX_GROUNDINGS = 10_000_000

#: A join row of up to this many columns counts as one grounding; a wider one proportionally more.
COLUMNS_PER_GROUNDING = 8

#: The command-line flag that sets the budget (named in the error message).
FLAG = "--grounding-budget"


#: The command-line flag that bounds the seconds of rule evaluation (``rules closure``), and its
#: default there: ten minutes, far more than the 100,000-person generated KB needs.
TIME_FLAG = "--time-budget"
DEFAULT_CLOSURE_SECONDS = 600.0


class RuleTimeError(RulesError):
    """Evaluating the rules took longer than the time budget (seconds of wall-clock time).

    >>> str(RuleTimeError("chain.dl", 0.5, 7, "rule 3"))
    'chain.dl: evaluating the rules passed the time budget of 0.5 s (round 7, at rule 3); raise it with --time-budget S (time_budget=S in Python), or simplify the rules'
    """

    def __init__(self, source: str, seconds: float, round_: int, label: str):
        self.source, self.seconds, self.round = source, seconds, round_
        super().__init__(f"{source}: evaluating the rules passed the time budget of {seconds:g} s (round {round_}, "
                         f"at {label}); raise it with {TIME_FLAG} S (time_budget=S in Python), or simplify the rules",
                         file=source, field=TIME_FLAG)


def check_time_budget(seconds: float | None) -> float | None:
    """The time budget as given, after checking it: ``None`` (no bound) or finite seconds > 0."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise RulesError(f"time_budget must be a finite number of seconds > 0 or None, got {seconds!r}", field=TIME_FLAG)
    return float(seconds)


class RuleBudgetError(RulesError):
    """Evaluating a rule would pass the grounding budget; raised before the memory is taken.

    ``source``/``line``: where the rule was read; ``count``: the groundings and derived facts it
    would bring the evaluation to; ``before``: those held before; ``budget``: the bound.

    >>> str(RuleBudgetError("bad.dl", 3, "rule 2", "r(X, Y) :- child(X, A), child(Y, B).", 12, 10, 4))
    'bad.dl:3: rule 2 would bring evaluation to 12 groundings and derived facts (4 held before), over the budget of 10: r(X, Y) :- child(X, A), child(Y, B). Raise the budget with --grounding-budget N (max_groundings=N in Python), or rewrite the rule'
    """

    def __init__(self, source: str, line: int, label: str, rule: str, count: int, budget: int, before: int = 0):
        self.source, self.line, self.label, self.rule = source, line, label, rule
        self.count, self.budget, self.before = count, budget, before
        where = f"{source}:{line}" if line else source
        super().__init__(
            f"{where}: {label} would bring evaluation to {count:,} groundings and derived facts "
            f"({before:,} held before), over the budget of {budget:,}: {rule} Raise the budget with {FLAG} N (max_groundings=N in Python), "
            "or rewrite the rule", file=source, field=FLAG)


def check_budget(max_groundings: int | None) -> int | None:
    """The budget as given, after checking it: ``None`` (no bound) or an integer >= 1."""
    if max_groundings is None:
        return None
    if isinstance(max_groundings, bool) or not isinstance(max_groundings, int) or max_groundings < 1:
        raise RulesError(f"max_groundings must be an integer >= 1 or None, got {max_groundings!r}", field=FLAG)
    return max_groundings


def row_weight(columns: int) -> int:
    """How many groundings one join row of ``columns`` columns counts as."""
    return max(1, math.ceil(columns / COLUMNS_PER_GROUNDING))


class Guard:
    """Counts the groundings and derived facts held (plus the rows a join step is about to
    build) and stops before the budget is passed (see the module docstring)."""

    def __init__(self, rules: RuleSet, budget: int | None, time_budget: float | None = None):
        self.rules, self.budget, self.held = rules, budget, 0
        self.peak = 0  # the most groundings held at once (what a budget must allow)
        self.seconds = check_time_budget(time_budget)
        self.deadline = None if self.seconds is None else time.perf_counter() + self.seconds
        self.round = 0

    def clock(self, index: int) -> None:
        """Raise :class:`RuleTimeError` if the time budget is spent (``index``: the rule at work).
        Checked before each rule's join and each join step, so no step runs long past it."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            rule = self.rules.rules[index]
            where = f"{rule.label or f'rule {index + 1}'}" + (f", line {rule.line}" if rule.line else "")
            raise RuleTimeError(self.rules.source or f"<{self.rules.name}>", self.seconds, self.round, where)

    def room(self, cr, rows: int) -> None:
        """Raise :class:`RuleBudgetError` if ``rows`` join rows of the compiled rule ``cr`` (its
        ``index`` into the rule set and row ``weight``) do not fit."""
        self.clock(cr.index)
        count = self.held + rows * cr.weight
        if count > self.peak:
            self.peak = count
            if self.budget is not None and count > self.budget:
                self._fail(cr.index, count)

    def derive(self, count: int, entering, keys, blocks: list[tuple[int, int]]) -> None:
        """Count ``count`` facts entering the closure this round, or raise naming the rule that
        derived most of them. ``entering()``: bool mask over the round's head ``keys``, which
        ``blocks`` split into ``(rule index, groundings)`` parts in order."""
        if self.budget is not None and self.held + count > self.budget:
            mask, at, best = entering(), 0, (-1, 0)
            for q, n in blocks:
                new = len(np.unique(keys[at:at + n][mask[at:at + n]]))
                at += n
                if new > best[1]:
                    best = (q, new)
            self._fail(best[0], self.held + count)
        self.record(count)

    def _fail(self, index: int, count: int):
        rule = self.rules.rules[index]
        raise RuleBudgetError(self.rules.source or f"<{self.rules.name}>", rule.line, rule.label or f"rule {index + 1}",
                              rule.to_datalog(), count, self.budget, self.held)

    def record(self, groundings: int) -> None:
        self.held += groundings
        self.peak = max(self.peak, self.held)
