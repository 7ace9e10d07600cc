"""What every figure of the report shares (matplotlib, Agg): the pyplot set-up, each method's
colour, the panel grid, the legend under the panels, tick labels and titles that fit, bars
placed in groups with their values, and saving.

The figures themselves are drawn by each section's module: :mod:`.headline_plots` (the paper's
figures), :mod:`.deep_plots`, :mod:`.forms_plots` and :mod:`.measures_plots`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from ...unlearn.methods import catalog

#: Stable colours per method: the catalogue's (the paper's four have one); any other name, e.g.
#: ``graddiff``, ``du_loop`` or a batch label ``ga@b5``, takes the next colour of :data:`_CYCLE` in
#: the order of ``methods``.
_CYCLE = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
          "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"]


def method_color(method: str, methods: Sequence[str]) -> str:
    if catalog.colour(method):
        return catalog.colour(method)
    others = [m for m in methods if not catalog.colour(m)]
    return _CYCLE[others.index(method) % len(_CYCLE)] if method in others else "#333333"


def load_pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.spines.top": False,
                         "axes.spines.right": False, "savefig.dpi": 130})
    return plt


def is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


#: the most panels a figure puts side by side (more wrap onto further rows), so the image stays
#: readable at 100 % zoom
MAX_COLS = 4


def panel_grid(plt, n: int, panel_w: float, panel_h: float, min_w: float = 4.5, **kw):
    """A constrained-layout figure of ``n`` panels, at most :data:`MAX_COLS` a row; the unused
    ones hidden. Returns the figure and the ``n`` axes in order."""
    cols = max(1, min(n, MAX_COLS))
    rows = math.ceil(max(n, 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(min_w, panel_w * cols), panel_h * rows), squeeze=False,
                             layout="constrained", **kw)
    flat = list(axes.flat)
    for ax in flat[max(n, 1):]:
        ax.set_visible(False)
    return fig, flat[:max(n, 1)]


def label_rows(axes: Sequence[Any], ylabel: str) -> None:
    """Name the y axis of the first panel of each row of a :func:`panel_grid`."""
    for ax in axes[::MAX_COLS]:
        ax.set_ylabel(ylabel)


def legend_below(fig, handles: Sequence[Any], **kw) -> None:
    """A figure legend under the panels (the constrained layout makes room for it) in as many
    columns as fit the figure's width."""
    renderer = fig.canvas.get_renderer()
    ncol = max(1, len(handles))
    while True:
        legend = fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False, **kw)
        width = legend.get_window_extent(renderer).width
        if ncol == 1 or width <= 0.96 * fig.bbox.width:
            return
        legend.remove()
        ncol = max(1, min(ncol - 1, int(ncol * 0.96 * fig.bbox.width / width)))


def tick_style(labels: Sequence[str], width: float, size: float = 10) -> dict[str, Any]:
    """``set_xticklabels`` keywords that keep neighbouring labels apart on an axis ``width``
    inches wide: level when the longest fits its slot, tilted by 30 degrees when tilted it
    does, else upright (a capital is taken as 0.7 of the font size wide)."""
    slot = width * 72 / max(1, len(labels))
    longest = max((len(str(t)) for t in labels), default=0) * 0.7 * size
    if longest <= 0.9 * slot:
        return {"rotation": 0, "ha": "center"}
    if longest * 0.87 + size * 0.5 <= 0.9 * slot:
        return {"rotation": 30, "ha": "right"}
    return {"rotation": 90, "ha": "center"}


def group_ticks(ax, labels: Sequence[str], width: float) -> None:
    """One x tick per group of bars (at 0, 1, ...), labelled so that the labels fit an axis
    ``width`` inches wide (:func:`tick_style`)."""
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, **tick_style(labels, width))


def wrap_title(title: str, width: float, size: float = 10) -> str:
    """``title`` broken into lines that fit ``width`` inches at ``size`` points (a character is
    about 0.55 of the font size wide)."""
    import textwrap

    chars = width * 72 / (0.55 * size)
    return "\n".join(textwrap.wrap(title, width=max(20, int(chars * 0.92))))


def bar_x(group: int, k: int, n: int, width: float) -> float:
    """The centre of bar ``k`` of the ``n`` bars, each ``width`` wide, of group ``group`` (whose
    tick is at x = ``group``).

    >>> [bar_x(1, k, 2, 0.4) for k in range(2)]
    [0.8, 1.2]
    """
    return group + (k - (n - 1) / 2) * width


def bar_value(ax, x: float, y: float) -> None:
    """The value of a bar, two decimals, just above it."""
    ax.text(x, y + 0.015, f"{y:.2f}", ha="center", va="bottom", fontsize=7)


def save(fig, path: Path, title: str | None = None) -> Path:
    """Put ``title`` (wrapped to the figure's width) above the panels, write the figure to
    ``path`` and close it; returns ``path``."""
    import matplotlib.pyplot as plt

    if title is not None:
        fig.suptitle(wrap_title(title, fig.get_figwidth()), fontsize=10)
    fig.savefig(path)
    plt.close(fig)
    return path
