"""What a report figure must satisfy to be readable at 100 % zoom, measured with matplotlib's own
renderer on the drawn figure (the tests import these by name; see test_bench_figures.py).

* every legend and every label lies inside the saved image (``fig.bbox``: the report saves
  without ``bbox_inches``, so the image is exactly the figure's box);
* no two labels overlap: titles, the figure's title, axis labels, tick labels and legends,
  compared pairwise by their window extents;
* the image is of a sensible size (:data:`MAX_PIXELS` on a side) and no label is smaller than
  :data:`MIN_POINTS`.

Text drawn inside the plotting area (a bar's value, a grid point's parameter) is data, not a
label: it must lie inside the image and no legend may cover it, but it is not compared with the
labels (a value may sit on a grid line's tick label's row, say).
"""

from __future__ import annotations

from typing import Any

#: the longest side of a report image, in pixels: it fits a laptop screen at 100 % zoom
MAX_PIXELS = 2000
#: the smallest font a label may use, in points
MIN_POINTS = 6.0
#: pixels two boxes may share (anti-aliasing) before they count as overlapping
SLACK = 1.0


def _visible_ticklabels(axis) -> list[Any]:
    """The tick labels the axis draws: non-empty, visible and at a tick inside the view."""
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) or 1.0
    out = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        loc = tick.get_loc()
        if loc is None or not (lo - 1e-9 * span <= loc <= hi + 1e-9 * span):
            continue
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                out.append(label)
    return out


def labels_of(fig) -> list[tuple[str, Any]]:
    """(name, artist) of every label of the figure: titles, axis labels, tick labels, legends."""
    out: list[tuple[str, Any]] = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_visible() and suptitle.get_text().strip():
        out.append(("figure title", suptitle))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {i}"
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if t is not None and t.get_visible() and t.get_text().strip():
                out.append((f"{where} title {t.get_text()!r}", t))
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            label = axis.label
            if label.get_visible() and label.get_text().strip():
                out.append((f"{where} {name} label {label.get_text()!r}", label))
            out += [(f"{where} {name} tick {t.get_text()!r}", t) for t in _visible_ticklabels(axis)]
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            out.append((f"{where} legend", legend))
    out += [(f"figure legend {k}", lg) for k, lg in enumerate(fig.legends) if lg.get_visible()]
    return out


def data_texts_of(fig) -> list[tuple[str, Any]]:
    """(name, artist) of the text drawn in the panels (values, parameters, notes)."""
    out = []
    for i, ax in enumerate(fig.axes):
        if ax.get_visible():
            out += [(f"axes {i} text {t.get_text()!r}", t) for t in ax.texts
                    if t.get_visible() and t.get_text().strip()]
    return out


def _overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK) and (min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK)


def _saved_pixels(fig) -> tuple[float, float]:
    """The saved image's width and height in pixels (``savefig.dpi``, else the figure's dpi)."""
    import matplotlib

    dpi = matplotlib.rcParams["savefig.dpi"]
    dpi = fig.dpi if dpi == "figure" else float(dpi)
    w, h = fig.get_size_inches()
    return w * dpi, h * dpi


def layout_problems(fig) -> list[str]:
    """Every way ``fig`` breaks the rules above, as readable lines (empty: none)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    problems: list[str] = []
    w, h = box.width, box.height
    saved = _saved_pixels(fig)
    if max(saved) > MAX_PIXELS:
        problems.append(f"the image is {saved[0]:.0f} x {saved[1]:.0f} px, more than {MAX_PIXELS} px on a side")
    boxes = []
    for name, artist in labels_of(fig):
        bb = artist.get_window_extent(renderer)
        boxes.append((name, bb))
        if bb.x0 < box.x0 - SLACK or bb.y0 < box.y0 - SLACK or bb.x1 > box.x1 + SLACK or bb.y1 > box.y1 + SLACK:
            problems.append(f"{name} reaches outside the image: [{bb.x0:.0f}, {bb.x1:.0f}] x [{bb.y0:.0f}, "
                            f"{bb.y1:.0f}] px, the image is {w:.0f} x {h:.0f}")
        size = artist.get_fontsize() if hasattr(artist, "get_fontsize") else None
        if size is not None and size < MIN_POINTS:
            problems.append(f"{name} is {size:g} pt, under {MIN_POINTS:g}")
        if hasattr(artist, "get_texts"):  # a legend: its entries' size
            small = [t.get_text() for t in artist.get_texts() if t.get_fontsize() < MIN_POINTS]
            if small:
                problems.append(f"{name} has entries under {MIN_POINTS:g} pt: {small}")
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if _overlap(ba, bb):
                problems.append(f"{a} overlaps {b}")
    legends = [(name, bb) for name, bb in boxes if name.endswith("legend") or "legend " in name]
    for name, artist in data_texts_of(fig):
        bb = artist.get_window_extent(renderer)
        if bb.width == 0 and bb.height == 0:  # not drawn (an annotation of a point outside its panel)
            continue
        if bb.x0 < box.x0 - SLACK or bb.y0 < box.y0 - SLACK or bb.x1 > box.x1 + SLACK or bb.y1 > box.y1 + SLACK:
            problems.append(f"{name} reaches outside the image")
        problems += [f"{lg} covers {name}" for lg, lb in legends if _overlap(lb, bb)]
    return problems
