"""Saving matplotlib figures where the user asked (``data draw -o``, ``rules explain -o``).

What goes wrong naively: ``-o /tmp`` writes ``/tmp.png`` but reports ``/tmp``; ``-o fig.txt`` gives a
traceback from matplotlib; a crash mid-save leaves half a file. Here the format comes from the suffix (no
suffix: PNG, and the ``.png`` is added to the path we report), an unknown suffix or a folder is a
clear error naming the flag, checked *before* any drawing, and the bytes are rendered in memory
and written atomically (missing parent folders created).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from ..errors import UserError, atomic_write_bytes


class FigurePathError(UserError):
    """A figure's output path is a folder or has a suffix matplotlib cannot write."""


def figure_formats() -> dict[str, str]:
    """The formats matplotlib writes: ``{"png": "Portable Network Graphics", ...}``."""
    from matplotlib.backend_bases import FigureCanvasBase

    return dict(FigureCanvasBase.get_supported_filetypes())


def figure_path(path: str | os.PathLike, *, flag: str = "-o") -> tuple[Path, str]:
    """The path a figure will really be written to and its format, or :class:`FigurePathError`.

    >>> figure_path("out/fig")
    (PosixPath('out/fig.png'), 'png')
    >>> figure_path("fig.SVG")
    (PosixPath('fig.SVG'), 'svg')
    """
    p = Path(path)
    if p.is_dir() or str(path).endswith(("/", os.sep)):
        raise FigurePathError(f"{flag} {path}: is a folder; give a file name such as {p / 'figure.png'}",
                              file=p, field=flag)
    if not p.suffix:
        return p.with_name(p.name + ".png"), "png"
    fmt = p.suffix[1:].lower()
    formats = figure_formats()
    if fmt not in formats:
        raise FigurePathError(f"{flag} {path}: cannot draw a figure as {p.suffix!r}; use one of "
                              + ", ".join("." + f for f in sorted(formats)), file=p, field=flag)
    return p, fmt


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 110, flag: str = "-o") -> Path:
    """Render ``fig`` in memory in the format of ``path``'s suffix and write it atomically;
    returns the path written (see :func:`figure_path`)."""
    out, fmt = figure_path(path, flag=flag)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    return atomic_write_bytes(out, buf.getvalue())
