"""Errors of the rules layer. The CLI dispatcher reports :class:`RulesError` as a user error
(one line on stderr, exit code 1)."""

from __future__ import annotations

from ..errors import UserError


class RulesError(UserError, ValueError):
    """A rule file, a rule set name or a request to the rules layer is wrong."""


class RuleSyntaxError(RulesError):
    """A rule file cannot be parsed; the message names the file, the line and the column.

    >>> str(RuleSyntaxError("family.dl", 3, 14, "expected ')'"))
    "family.dl:3:14: expected ')'"
    """

    def __init__(self, source: str, line: int, column: int, message: str):
        self.source, self.line, self.column, self.message = source, line, column, message
        super().__init__(f"{source}:{line}:{column}: {message}")
