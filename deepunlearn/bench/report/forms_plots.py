"""The figure of the "Has it really forgotten?" section: ``adversarial.png``.

One panel per model; per method a group of bars at each target's last grid point: mean recall
under the primary probe, under the adversarial aggregate (recall_adv), after each relearning
step count N and after quantisation. Bars of values a sweep did not record are left out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...unlearn.methods import catalog
from .plots import bar_value, bar_x, group_ticks, load_pyplot, save, wrap_title
from .tables import in_order

#: colours of the bar kinds (primary, adversarial, quantised; relearning bars share a blue ramp)
_PRIMARY, _ADV, _QUANT = "#4c72b0", "#c44e52", "#8172b3"
_RELEARN = ("#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")


def _ok(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def _bars(s: Mapping[str, Any], steps: Sequence[str]) -> list[tuple[str, str, Any]]:
    """(label, colour, value) of every bar kind of the section, in drawing order."""
    out = [("primary", _PRIMARY, s.get("recall")), ("adversarial", _ADV, s.get("recall_adv"))]
    out += [(f"relearn@{n}", _RELEARN[min(i, len(_RELEARN) - 1)], (s.get("recall_relearn") or {}).get(n))
            for i, n in enumerate(steps)]
    out.append(("quantised", _QUANT, s.get("recall_quant")))
    return out


def plot_adversarial(table: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]], path: Path,
                     methods: Sequence[str]) -> Path:
    """Draw ``adversarial.png`` from :func:`.forms.forgetting_table`'s table."""
    plt = load_pyplot()
    models = list(table) or ["(none)"]
    n_methods = max([len(per) for per in table.values()] or [1])
    fig_w = min(15.0, max(6.5, 1.6 * n_methods + 2.5))
    fig, axes = plt.subplots(len(models), 1, figsize=(fig_w, 3.8 * len(models)), squeeze=False, layout="constrained")
    for ax, model in zip(axes[:, 0], models):
        per = table.get(model, {})
        shown = in_order(per, methods)
        steps: list[str] = []
        for m in shown:
            steps += [n for n in (per[m]["last"].get("recall_relearn") or {}) if n not in steps]
        kinds = [(label, colour) for label, colour, _ in _bars({}, steps)]
        present = [k for k, (label, _c) in enumerate(kinds)
                   if any(_ok(_bars(per[m]["last"], steps)[k][2]) for m in shown)]
        width = 0.8 / max(1, len(present))
        labelled: set[str] = set()
        for i, m in enumerate(shown):
            bars = _bars(per[m]["last"], steps)
            for j, k in enumerate(present):
                label, colour, y = bars[k]
                if not _ok(y):
                    continue
                x = bar_x(i, j, len(present), width)
                ax.bar(x, y, width * 0.92, color=colour, label=None if label in labelled else label)
                labelled.add(label)
                bar_value(ax, x, y)
        group_ticks(ax, [catalog.title(m) for m in shown], fig_w - 1.0)
        ax.set_ylim(0, 1.32)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_ylabel("mean recall (last grid point)")
        ax.set_title(wrap_title(f"{model}: has it really forgotten? primary vs adversarial probe and attacks", fig_w, 11))
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, fontsize=7, ncol=min(len(handles), 6), loc="upper center", frameon=False)
        ax.grid(axis="y", alpha=0.25)
    return save(fig, path)
