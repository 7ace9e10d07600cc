"""The report's "Deep unlearning" section: the Success-DU table of every method with
its bar chart, and, only when the sweep has such rows, the batch and sequential tables with their
figures. :func:`du_section` draws the figures into the report folder and returns the markdown and
the ``summary.json`` additions (``batch``, ``sequential``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from .deep_plots import plot_batch, plot_sequential, plot_success_du
from .deep_tables import batch_table, has_batch, has_sequential, sequential_table
from ..metrics import format_du_table
from .tables import number, record_table

#: the columns of the batch and sequential tables: (header, key of a row, format)
_BATCH_COLUMNS = (("model", "model", str), ("method", "method", str), ("batch size", "batch_size", str),
                  ("batches", "n_batches", str), ("targets", "n_targets", str), ("accuracy", "accuracy", number),
                  ("recall", "recall", number), ("deep", "deep", number), ("Success-DU@0.8", "success_du_0.8", number))
_SEQUENTIAL_COLUMNS = (("model", "model", str), ("method", "method", str), ("requests", "requests", str),
                       ("target", "target", str), ("accuracy", "accuracy", number),
                       ("mean recall so far", "mean_recall_earlier", number), ("deep so far", "deep_earlier", number),
                       ("came back", "came_back", lambda ts: ", ".join(map(str, ts)) or "–"))


def du_section(points: Sequence[Any], summary: Mapping, methods: Sequence[str], out: Path,
               threshold: float = 0.8) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines of the "Deep unlearning" section and ``{"batch": rows, "sequential": rows}``
    for summary.json (a key only when the sweep has those rows). Writes ``success_du.png`` when
    there is any point, and ``batch.png`` / ``sequential.png`` when there are such rows."""
    md = ["## Deep unlearning", "",
          "A point is *deep* when the target is no longer derivable from what the model still knows "
          "(t ∉ Ω(K_after, R), i.e. recall 1; points stored without the flag count as deep at recall 1). "
          "*Success-DU@a*: the share of targets with some grid point that is deep with accuracy ≥ a "
          "(end points never count); *deep rate*: the share with any deep point; *s/target*: wall seconds "
          "per target (a batch's seconds divided by its size). Means over targets; [low, high]: the 95 % "
          "bootstrap interval over targets (scipy, percentile, 9,999 resamples, seed 0), ', n=K' where it rests "
          "on K targets other than the row's (one target: no interval).", "",
          format_du_table(summary, methods, threshold), ""]
    if any(k.endswith("_low") for per in summary.values() for s in per.values() for k in s):
        md += ["Accuracy was measured on a sample (sweep option `accuracy = \"sampled\"`: each point probes the "
               "target's derivation cone, so recall and deep are exact, plus a stratified sample of the rest of K); "
               "`[low, high]` after a value: its bounds when every point's accuracy lies in its 95 % interval "
               "(means over targets of each target's bounds).", ""]
    extra: dict[str, Any] = {}
    if points:
        plot_success_du(summary, out / "success_du.png", methods)
        md += ["![success_du](success_du.png)", "",
               "*Success-DU per method: plain bars at accuracy ≥ 0.8, hatched at ≥ 0.9; the dashed line is the "
               "goal 0.9.*", ""]
    if has_batch(points):
        rows = batch_table(points)
        extra["batch"] = rows
        plot_batch(rows, out / "batch.png")
        md += ["### Batch requests", "",
               "Several targets forgotten in one run (`METHOD@bN`, N = batch size; batch size 1 = the method's "
               "single-target rows). Accuracy, recall and the deep share at each batch's last grid point, "
               "means over its targets.", "",
               *record_table(rows, _BATCH_COLUMNS),
               "", "![batch](batch.png)", "", "*Accuracy, recall and the share of deep targets against batch size.*",
               ""]
    if has_sequential(points):
        rows = sequential_table(points)
        extra["sequential"] = rows
        if rows:
            plot_sequential(rows, out / "sequential.png")
        md += ["### Sequential requests", "",
               "Requests served one after another without restoring the weights (`METHOD@seq`). After each "
               "request: accuracy, and over every target served so far its mean recall, the share still deep, "
               "and those that came back (deep after their own request, not any more).", "",
               *record_table(rows, _SEQUENTIAL_COLUMNS), ""]
        if rows:
            md += ["![sequential](sequential.png)", "",
                   "*Accuracy and the served targets' mean recall and deep share against requests served.*", ""]
    return md, extra
