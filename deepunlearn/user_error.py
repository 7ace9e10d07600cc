"""The base class of every error that is the user's (exit code 1), apart so that both
:mod:`deepunlearn.errors` and :mod:`deepunlearn.outputs` build on it."""

from __future__ import annotations

import os
from typing import Any


class UserError(Exception):
    """Bad input from the user. ``file`` and ``field`` (the flag, the JSON field, the line) are
    kept apart from the message for ``--json`` error objects; ``str(e)`` is the one-line message.
    """

    def __init__(self, message: str = "", *args: Any, file: str | os.PathLike | None = None,
                 field: str | None = None):
        super().__init__(message, *args)
        self.file = None if file is None else str(file)
        self.field = field
