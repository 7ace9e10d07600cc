"""The "Setup" and "Protocol" sections of ``report.md``: what ran (KB, rules, models, grids,
learning rates) and under which protocol.

The protocol section lists, per model, the protocol preset it ran and the fields where its
resolved protocol differs from the ``default`` preset (``deepunlearn.probe.protocol``), read
from the sweep's ``manifest.json``; a report without a manifest (points only) has none.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..grids import grids_text
from ..metrics import value_of


def learning_rates(points: Sequence[Any]) -> dict[tuple[str, str], set[float]]:
    """The learning rates the points were unlearned with (the unlearn layer records them)."""
    out: dict[tuple[str, str], set[float]] = {}
    for p in points:
        extra = p.get("extra", p) if isinstance(p, Mapping) else p.extra
        lr = extra.get("lr") if isinstance(extra, Mapping) else None
        if isinstance(lr, (int, float)):
            out.setdefault((value_of(p, "model"), value_of(p, "method")), set()).add(float(lr))
    return out


def _value(v: Any) -> str:
    return f"`{v}`" if not isinstance(v, bool) else ("on" if v else "off")


def setup_lines(config: Mapping[str, Any], manifest: Mapping[str, Any] | None, kb: Any, points: Sequence[Any]) -> list[str]:
    """The Setup section (without the trailing target/points line)."""
    models = (manifest or {}).get("models", {})
    first = next(iter(models.values()), {}) if models else {}
    proto = first.get("protocol", {})
    rules = config.get("rules") or (kb.metadata.get("rules", "family") if kb is not None else "family")
    md = ["", "## Setup", ""]
    md += [f"- **KB**: `{config.get('kb')}`" + (f" ({len(kb)} facts, {len(kb.entities)} entities)" if kb is not None else ""),
           f"- **rules**: `{rules}`" + (f"; **K**: {proto.get('k_mode')} (probe mode "
                                       f"`{first.get('probe_mode', proto.get('probe_mode'))}`)"
                                       if proto and len(models) == 1 else ""),
           "- **models**: " + ", ".join(f"`{m['name']}`" + (f" (lr {m['lr']:g})" if m.get("lr") else "")
                                        for m in config.get("models", []))]
    if kb is not None:  # a family KB: how its people are named and its questions asked (shortcuts)
        from ...kg.domains.family.questions import describe_data

        data = describe_data(kb)
        if data:
            md.insert(4, f"- **data**: {data}")
    grids = {name: m.get("grids") for name, m in models.items() if m.get("grids")}
    if grids and len({repr(g) for g in grids.values()}) == 1:
        md.append("- **methods and grids**: " + grids_text(next(iter(grids.values()))))
    elif grids:
        md += [f"- **methods and grids** of `{name}`: " + grids_text(g) for name, g in grids.items()]
    else:
        md.append("- **methods and grids**: " + grids_text(config.get("methods", {})))
    if config.get("oracle"):
        md.append("- **oracle** (exact unlearning): per target, the model's own finetune recipe retrained on the KB minus "
                  "the target's smallest minimal set, probed and judged like a grid point (the `oracle` rows: the "
                  "ceiling a method can reach under this probe, and the accuracy exact unlearning keeps)"
                  + (f"; `deep_oracle` against the strongest of the oracles of seeds {config['oracle_seeds']} and "
                     "the model's own" if config.get("oracle_seeds") else ""))
    checks = probe_checks_text(config)
    if checks:
        md.append("- **has it really forgotten?**: " + checks)
    for name, m in models.items():
        if m.get("note"):
            md.append(f"- `{name}`: {m['note']}")
    if manifest and "seed" in manifest:
        md.append(f"- **seed**: {manifest['seed']} (each job seeded with {manifest.get('job_seed', 'a seed derived from it')})")
    lrs = learning_rates(points)
    if lrs:
        md.append("- **unlearning learning rates**: " + "; ".join(
            f"{model}/{m.upper()} {', '.join(f'{x:g}' for x in sorted(v))}" for (model, m), v in lrs.items()))
    return md


def probe_checks_text(config: Mapping[str, Any]) -> str:
    """The options a sweep set to check that a fact is really forgotten (forms, unlearn_forms,
    adversarial, attacks), as one phrase; empty when it set none (the Setup section of any other
    sweep has no such line).

    >>> probe_checks_text({"forms": "test", "adversarial": True, "attacks": {"relearn": [1, 2], "quantize": "int8",
    ...                    "relearn_size": 16, "relearn_lr": None, "at": "last"}})
    'probe forms `test`; adversarial aggregate on; attacks: relearn after 1, 2 steps on 16 facts, int8 quantisation, at the last grid point'
    >>> probe_checks_text({})
    ''
    """
    parts = []
    if config.get("forms"):
        parts.append(f"probe forms `{config['forms']}`")
    if config.get("unlearn_forms"):
        parts.append(f"unlearning forms `{config['unlearn_forms']}`")
    if config.get("adversarial"):
        modes = config.get("adversarial_modes")
        parts.append("adversarial aggregate on" + (f" ({', '.join(modes)})" if modes else ""))
    a = config.get("attacks")
    if isinstance(a, Mapping):
        what = []
        if a.get("relearn"):
            lr = f", lr {a['relearn_lr']:g}" if isinstance(a.get("relearn_lr"), (int, float)) else ""
            what.append(f"relearn after {', '.join(str(n) for n in a['relearn'])} steps on {a.get('relearn_size')} "
                        f"facts{lr}")
        if a.get("quantize"):
            what.append(f"{a['quantize']} quantisation")
        at = "every grid point" if a.get("at") == "all" else "the last grid point"
        parts.append("attacks: " + ", ".join(what) + f", at {at}")
    return "; ".join(parts)


def protocol_lines(manifest: Mapping[str, Any] | None) -> list[str]:
    """The Protocol section: each model's preset and the fields that differ from ``default``."""
    models = (manifest or {}).get("models", {})
    if not models or not all("protocol" in m for m in models.values()):
        return []
    md = ["## Protocol", "",
          "Protocol presets are defined in `deepunlearn.probe.protocol` (`default`; `reference` = the paper's public "
          "code). Fields that differ from the `default` preset:", ""]
    for name, m in models.items():
        diff = dict(m.get("protocol_differs", {}))
        sets = m.get("sets")
        if sets not in (None, "exact", "mdus", "release"):
            diff["sets"] = f"{diff.get('sets', 'release')} (folder {sets})"
        text = ", ".join(f"{k} = {_value(v)}" for k, v in diff.items()) or "none"
        md.append(f"- `{name}`: protocol `{m['protocol'].get('name')}`; differs: {text}")
    return md + [""]
