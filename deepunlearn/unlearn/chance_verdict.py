"""``p_chance`` of a verdict: could a model that learned none of the target's facts be judged the same?

A verdict that is not deep says the unlearned model B still yields the target: it answers it, or
the rules derive it from what B answers. A model can answer a fact it never learned (a surname
shared by father and child, a yes/no question right half the time), so the verdict is only as
strong as B's answers are unlikely under chance. The null model: B learned none of the facts of
the verdict's minimal deep-unlearning set (``best_set``, the target included) and answers each
of them *by chance*, independently, with the raw false-positive rate of the verdict's probe mode
on never-seen facts of its relation, as a calibration measured it (``deepunlearn probe
--calibrate``: per relation with at least 20 never-seen facts, else its group's, said so); its
answers outside that set are B's. Then::

    p_chance = P(a chance-only model answers at least as many of the set's facts as B does
                 and the rules still derive the target from its answers)

(:func:`deepunlearn.rules.chance.p_chance_of`: exact on a set of up to 20 facts, Monte Carlo
with its standard error beyond). Exact unlearning that guesses one fact of the set back gets a
large p_chance; a model that still answers every fact of the set but the target gets about the
product of their rates. A verdict that is not deep with ``p_chance >= 0.05``
(:data:`ESTABLISHED`) is **not established**: chance alone explains it too often. Beside it,
``chance["p_any"]`` is the target's own figure, independent of B: the probability that a model
answering every fact of the target's cone (the union of its minimal sets) by chance is judged not
deep at all (:func:`deepunlearn.rules.chance.p_chance`). The rates come from the calibration's
model and forms; the verdict records both (``chance``), with the rate used for each relation of
the cone and where it came from. With approximate minimal sets (MDUS) the sets may be fewer than
all, and both figures are then upper bounds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: a verdict that is not deep is established when p_chance is below this
ESTABLISHED = 0.05


@dataclass
class ChanceRates:
    """A calibration's raw false-positive rates for one probe mode, and where they came from."""

    calibration: Any
    mode: str
    source: str

    def forms_note(self, forms: str | None) -> str | None:
        """A line saying the calibration was measured on other forms than the verdicts probe
        (``forms``: the verdicts' selection; ``None``: the mode's default), else ``None``."""
        from ..probe.modes import DEFAULT_SELECTION

        mine = forms or DEFAULT_SELECTION.get(self.mode, "default")
        theirs = self.calibration.meta.get("forms")
        if theirs is None or theirs == mine:
            return None
        return (f"note: {self.source} was measured on forms {theirs!r}, the verdicts probe forms {mine!r}: p_chance "
                f"uses the rates of those forms (calibrate with deepunlearn probe --calibrate --forms {mine} to match)")

    def rate(self, kb, fact: int) -> dict[str, Any]:
        """``{"fp", "n_neg", "source", "group", "own_n_neg"}`` of the fact's relation."""
        return self.calibration.raw_rate(self.mode, kb.facts[fact][1], kb.group_of(fact))


def chance_rates(calibration, mode: str, *, flag: str = "--calibration") -> ChanceRates:
    """The rates of ``calibration`` (a file written by ``probe --calibrate -o``, its JSON, or a
    :class:`~deepunlearn.probe.calibration.Calibration`) for probe ``mode``; a file without raw
    rates per relation for the mode is one :class:`~deepunlearn.probe.calibration.CalibrationError`
    naming ``flag`` and the file."""
    from ..probe.calibration import Calibration, CalibrationError, load_calibration

    if isinstance(calibration, Calibration):
        cal, source = calibration, "calibration"
    elif isinstance(calibration, dict):
        cal, source = Calibration.from_json(calibration, source=flag), "calibration"
    else:
        cal, source = load_calibration(calibration, flag=flag), str(os.fspath(calibration))
    key = "any_raw" if mode in ("any", "any_raw") else mode
    if key not in cal.relations:
        have = ", ".join(m for m in cal.relations) or "none"
        raise CalibrationError(f"{flag} {source}: records no raw false-positive rates per relation for probe mode "
                               f"{mode!r} (it has: {have}); calibrate again with deepunlearn probe --calibrate",
                               file=source if source != "calibration" else None, field=flag)
    return ChanceRates(cal, mode, source)


def chance_fields(evaluator, kb, target: int, rates: ChanceRates, *, verdict=None, seed: int = 0) -> dict[str, Any]:
    """The verdict fields ``p_chance``, ``p_chance_se``, ``p_chance_method`` and ``chance`` of
    ``target`` (module docstring): of ``verdict``'s answers when given, else the target's own
    figure (``p_any``) in ``p_chance``."""
    from ..rules.chance import p_chance, p_chance_of

    ms = evaluator.minimal_sets(int(target))
    cone = sorted({f for s in ms.sets for f in s})
    used = {f: rates.rate(kb, f) for f in cone}
    probs = {f: r["fp"] / r["n_neg"] for f, r in used.items()}
    prior = p_chance(ms.sets, probs, seed=seed)
    res = prior
    if verdict is not None:
        chosen = [int(f) for f in verdict.best_set] or [int(target)]  # one of the minimal sets: inside the cone
        gone = set(verdict.forgotten)
        res = p_chance_of(ms.sets, probs, chosen, [f for f in cone if f not in gone], seed=seed)
    by_rel: dict[str, dict[str, Any]] = {}
    for f, r in used.items():
        rel = kb.facts[f][1]
        by_rel.setdefault(rel, {**r, "fpr": round(r["fp"] / r["n_neg"], 6), "facts": 0})["facts"] += 1
    meta = rates.calibration.meta
    chance = {"calibration": rates.source, "mode": rates.mode, "calibration_model": meta.get("model"),
              "calibration_forms": meta.get("forms"), "negatives": meta.get("negatives"),
              "rates": by_rel, "fallbacks": sorted(r for r, x in by_rel.items() if x["source"] == "group"),
              "cone": res.cone, "enumerated": res.enumerated, "samples": res.samples,
              "minimal_sets": len(ms.sets), "sets_exact": ms.exact, "threshold": ESTABLISHED,
              "established": res.value < ESTABLISHED, "p_any": prior.value, "p_any_se": prior.se,
              "statistic": None if verdict is None else {
                  "set": [int(f) for f in verdict.best_set],
                  "answered": sum(f not in set(verdict.forgotten) for f in verdict.best_set)}}
    return {"p_chance": res.value, "p_chance_se": res.se, "p_chance_method": res.method, "chance": chance}


def attach_chance(verdict, evaluator, kb, rates: ChanceRates | None):
    """``verdict`` with its chance fields set when it is not deep (a deep one is left as is)."""
    if rates is None or verdict.deep:
        return verdict
    for k, v in chance_fields(evaluator, kb, verdict.target_id, rates, verdict=verdict).items():
        setattr(verdict, k, v)
    return verdict


def not_established(verdict) -> bool:
    """A verdict that is not deep whose p_chance is at least :data:`ESTABLISHED`."""
    return verdict.p_chance is not None and not verdict.deep and verdict.p_chance >= ESTABLISHED


def deep_text(verdict, text: str) -> str:
    """The verdict's ``deep:`` words with its p_chance beside them (``text``: the words without)."""
    p = verdict.p_chance
    if p is None:
        return text
    se = f" +/- {verdict.p_chance_se:.2g}" if verdict.p_chance_method == "monte-carlo" else ""
    if not_established(verdict):
        return (f"not established (p_chance {p:.2f} >= {ESTABLISHED}){se}: {text.removeprefix('no: ')}, but a model "
                f"that learned none of its set's facts, answering them by chance, would answer as many and be judged so "
                f"with probability {p:.2f}")
    return f"{text} (p_chance {p:.2g}{se} < {ESTABLISHED})"


def target_chance(evaluator, kb, target: int, rates: ChanceRates | None) -> dict[str, Any]:
    """A target's chance fields for ``deepunlearn unlearn`` (``{}`` without rates): the target's
    own figure (``p_any``, independent of the unlearned model: a model answering the target's
    whole cone by chance), one figure for every grid point judged not deep; ``evaluate`` gives
    each model's own p_chance."""
    return {} if rates is None else chance_fields(evaluator, kb, target, rates)


def chance_line(result: dict[str, Any]) -> str:
    """The line ``deepunlearn unlearn`` prints under a target's table (the target's own figure)."""
    p, se = result["p_chance"], result.get("p_chance_se") or 0.0
    fig = f"p_chance {p:.2g}" + (f" +/- {se:.2g}" if result.get("p_chance_method") == "monte-carlo" else "")
    return (f"  {fig}: a model answering the target's facts only by chance is judged not deep with probability "
            f"{p:.2f}" + (" (a point judged not deep here may be chance: deepunlearn evaluate --calibration gives a "
                          "saved model's own p_chance)" if p >= ESTABLISHED else ""))
