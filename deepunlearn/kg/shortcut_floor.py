"""The shortcut floor's file (``data shortcuts -o FLOOR.json``) as ``data show --shortcuts`` reads
and prints it: per relation, the share of a KB's facts that a baseline trained only on a disjoint
KB of the same generator answers (:mod:`deepunlearn.unlearn.shortcuts` measures it)."""

from __future__ import annotations

from typing import Any

from .kb import KBError, KnowledgeBase


def read_floor(path: str, kb: KnowledgeBase, *, flag: str = "--shortcuts") -> dict[str, Any]:
    """The floor in ``path``, checked: written by ``data shortcuts`` (``relations``, ``modes``,
    ``holdout``) for this very KB (same fingerprint); anything else is one :class:`KBError`
    naming the flag and the file."""
    from ..errors import load_json
    from .fingerprint import kb_fingerprint

    data = load_json(path, flag=flag, error=KBError)
    need = ("relations", "groups", "overall", "modes", "holdout", "kb_fingerprint")
    if not isinstance(data, dict) or any(k not in data for k in need) or not isinstance(data["relations"], dict):
        raise KBError(f"{flag} {path}: not a shortcut floor written by 'deepunlearn data shortcuts' (needs "
                      f"{', '.join(need)})", file=path, field=flag)
    if data["kb_fingerprint"] != kb_fingerprint(kb):
        raise KBError(f"{flag} {path}: measured on KB {data.get('kb')!r} (fingerprint {data['kb_fingerprint']}), "
                      f"not on {kb.name!r} ({kb_fingerprint(kb)})", file=path, field=flag)
    return data


def floor_text(floor: dict) -> str:
    """The floor as a table: relation, n, and the share known under each mode."""
    modes = floor["modes"]
    rows = [(r, v["n"], *(v.get(m) for m in modes)) for r, v in floor["relations"].items()]
    rows += [(f"[{g}]", v["n"], *(v.get(m) for m in modes)) for g, v in floor["groups"].items()]
    rows.append(("[all]", floor["overall"]["n"], *(floor["overall"].get(m) for m in modes)))
    w = max(8, *(len(str(r[0])) for r in rows))
    h = floor["holdout"]
    lines = [f"shortcut floor of {floor.get('kb')} (names {floor.get('names') or '-'}, questions "
             f"{floor.get('questions')}): share of its facts answered by a baseline trained only on a disjoint KB "
             f"of the same generator ({h.get('people')} entities, {h.get('facts')} facts, {h.get('baseline_known')}/"
             f"{h.get('baseline_total')} of them learned)",
             f"  {'relation':<{w}} {'n':>5}  " + "  ".join(f"{m:>6}" for m in modes)]
    for r in rows:
        lines.append(f"  {r[0]:<{w}} {r[1]:>5}  " + "  ".join(
            "     -" if not isinstance(x, (int, float)) else f"{x:>6.2f}" for x in r[2:]))
    return "\n".join(lines)
