"""The sweep's progress bar on stderr, and keeping other libraries' bars out of it.

Two frictions it avoids: the final ``100%`` line printed twice (tqdm redraws the
bar after every ``write`` and once more on ``close``; on a log file or a captured stderr both
land), and a stray ``ESC[A`` (cursor up) when a second bar (transformers' weight loading while
the sweep's bar was open) took position 1 and closed. :class:`SweepBar` never shows the
complete state before :meth:`SweepBar.close` shows it, once; :func:`quiet_library_bars` turns
transformers' and huggingface_hub's bars off while a worker loads a model.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator


class SweepBar:
    """A tqdm bar of ``total`` points (``initial`` already stored) that prints its 100 % line once."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = True, file=None):
        from tqdm import tqdm

        self.file = file if file is not None else sys.stderr
        self._bar = tqdm(total=total, initial=initial, unit="pt", desc="sweep", file=self.file, disable=not enabled,
                         dynamic_ncols=True, smoothing=0.1)
        self.total = total

    @property
    def n(self) -> int:
        return self._bar.n

    def _complete(self) -> bool:
        return self.total > 0 and self._bar.n >= self.total

    def advance(self, k: int = 1) -> None:
        """Count ``k`` more points; the step that completes the sweep is left for :meth:`close` to show."""
        if self.total > 0 and self._bar.n + k >= self.total:
            self._bar.n += k  # no redraw: close() draws the final state
        else:
            self._bar.update(k)

    def message(self, text: str) -> None:
        """A line above the bar (a warning, a model loaded)."""
        if self._bar.disable:
            print(text, file=self.file, flush=True)
        elif self._complete():
            self._bar.clear()  # no redraw of the complete bar: close() draws it
            print(text, file=self.file, flush=True)
        else:
            self._bar.write(text, file=self.file)

    def postfix(self, text: str) -> None:
        self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        self._bar.close()


@contextlib.contextmanager
def quiet_library_bars() -> Iterator[None]:
    """Turn transformers' and huggingface_hub's progress bars off for the block, then restore them
    (a bar of theirs inside the sweep's bar is what wrote ``ESC[A``)."""
    undo = []
    try:
        from transformers.utils import logging as tlog

        if tlog.is_progress_bar_enabled():
            tlog.disable_progress_bar()
            undo.append(tlog.enable_progress_bar)
    except ImportError:  # pragma: no cover
        pass
    try:
        from huggingface_hub import utils as hub

        if not hub.are_progress_bars_disabled():
            hub.disable_progress_bars()
            undo.append(hub.enable_progress_bars)
    except ImportError:  # pragma: no cover
        pass
    try:
        yield
    finally:
        for fn in undo:
            fn()
