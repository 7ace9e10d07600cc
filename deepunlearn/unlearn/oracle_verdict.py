"""``deep_oracle``: a verdict relative to exact unlearning (an oracle, :mod:`.oracle`).

The raw verdict calls B's forgetting superficial when the rules derive the target from what B
answers. But a model that was never taught a fact may answer it anyway (from names, genders, the
question's shape): the oracle, trained without the target's minimal set, answers some of that
set too. Relative to exact unlearning, B **holds** a fact only if

- B answers it (raw, the probe mode's rule), and
- for a fact the oracle was *not* trained on (its excluded facts), B's evidence beats the
  oracle's by more than a margin: ``score_B - score_O > max(margin, 0)`` in some mode.

Facts the oracle was trained on count as held whenever B answers them.

Several oracles of one set (the same excluded facts, other seeds: ``evaluate --oracle DIR
--oracle DIR2``) form one reference: per fact and mode its score is the **strongest** of theirs,
on the excluded facts and on the negatives alike, and it answers a fact where one of them does.
Exact unlearning of another seed may infer an excluded fact back more surely than one
reference run does; against several, B holds a fact only where it beats what every one of them
infers (the margin is calibrated on the same maximum over the negatives). With ``spread`` (the
default for several), B must beat them on a fact also by more than they disagree on that fact
(per mode, the largest ``|score_i - score_j|`` over pairs of oracles): how far apart exact
unlearning of two seeds lands on the very fact compared, which new people's facts (the
negatives) do not show. With ``spread = "pooled"`` the bar of every fact is at least the seed
noise of the whole reference (:func:`pooled_noise`): how far one oracle beats the strongest of
the others on any excluded fact it answers, at the verdict's false-positive rate. ``deep_oracle``: the
target is not derivable (rules closure) from B's held facts.

Evidence is the probe mode's continuous per-fact score (:mod:`deepunlearn.probe.calibration`
explains it per mode), kept also where the raw rule fails (:mod:`.oracle_scores`): where the
oracle does not answer a fact, how far it is from answering it still counts. The difference is
``-inf`` where B does not answer (or a mode has no form of the fact), else ``score_B - score_O``.
The margin is calibrated on facts **both** models never saw (negatives: a holdout KB from
``deepunlearn data holdout`` or never-true facts, given; else :func:`default_negatives`, a holdout
drawn on the fly): the threshold
(:func:`~deepunlearn.probe.calibration.threshold`) passing at most ``fpr`` (default 5 %) of the
negatives' differences (``-inf`` where B does not answer the negative), per mode; mode ``any``
tries each of its modes at ``fpr / m`` (Bonferroni, as the calibrated ``any``).

``fpr`` bounds the chance that the verdict is wrong, not each fact's: with ``correction =
"family"`` (the default) the margin of a target is set at ``fpr / k``, ``k`` the excluded facts
of the target's cone (the union of its minimal sets) that B answers, so that all ``k`` exceed it by
seed noise alone with probability at most ``fpr`` (Bonferroni). ``correction = "fact"`` sets it at
``fpr`` for every fact: with a dozen excluded facts B answers, one of them passes by chance about
half the time, and a second oracle of another seed is then judged not deep against the first. A
margin of
``+inf`` (only possible where the oracle has no score) lets no excluded fact count as held in that
mode: the comparison is uninformative there, and the verdict says so.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .evaluate_models import EvaluateError
from .oracle_noise import NOISES, pooled_noise

DEFAULT_FPR = 0.05
#: how the margin's false-positive rate is shared among the facts compared (module docstring)
CORRECTIONS = ("family", "fact")


def differences(b: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Per fact: ``-inf`` where B does not answer, ``+inf`` where only B answers, else B - O."""
    b, o = np.asarray(b, dtype=np.float64), np.asarray(o, dtype=np.float64)
    out = np.where(np.isfinite(o), b - np.where(np.isfinite(o), o, 0.0), math.inf)
    return np.where(np.isfinite(b), out, -math.inf)


def margins(neg_b: dict[str, np.ndarray], neg_o: dict[str, np.ndarray], fpr: float = DEFAULT_FPR,
            answered: np.ndarray | None = None) -> dict[str, float]:
    """The margin per mode: the threshold at ``fpr / m`` (``m`` modes) of B - O over the negatives
    (``answered``: whether B answers each negative, raw; the others cannot pass)."""
    from ..probe.calibration import threshold

    modes = list(neg_b)
    out = {}
    for m in modes:
        d = differences(neg_b[m], neg_o[m])
        if answered is not None:
            d = np.where(np.asarray(answered, dtype=bool), d, -math.inf)
        out[m] = threshold(d, fpr / len(modes))
    return out


def held_facts(known_b: set[int], excluded: Sequence[int], ev_b: dict[str, np.ndarray], ev_o: dict[str, np.ndarray],
               margin: dict[str, float], o_answers: np.ndarray | None = None,
               spread: dict[str, np.ndarray] | None = None) -> tuple[set[int], list[dict]]:
    """(B's held facts, the excluded facts among them with their scores). ``ev_b`` / ``ev_o``:
    scores per mode over ``excluded`` (in its order); ``o_answers``: whether the oracle answers
    each (raw), recorded with a held fact; ``spread``: per mode and fact, a bar of its own (the
    oracles' disagreement on it) that the difference must exceed too."""
    excluded = [int(i) for i in excluded]
    ex = set(excluded)
    held = {int(i) for i in known_b if int(i) not in ex}
    beyond = []
    for j, f in enumerate(excluded):
        if f not in known_b:
            continue
        best = None
        for m in ev_b:
            d = float(differences(ev_b[m][j:j + 1], ev_o[m][j:j + 1])[0])
            bar = max(margin[m], 0.0, 0.0 if spread is None else float(spread[m][j]))
            if d > bar and (best is None or d - bar > best["excess"]):
                best = {"id": f, "mode": m, "score": _num(ev_b[m][j]), "oracle_score": _num(ev_o[m][j]),
                        "oracle_answers": None if o_answers is None else bool(o_answers[j]),
                        "difference": _num(d), "margin": _num(bar), "excess": d - bar}
        if best is not None:
            held.add(f)
            best.pop("excess")
            beyond.append(best)
    return held, beyond


def _num(x: float) -> float | str | None:
    """JSON-safe: ``-inf`` (not answered) -> None, ``+inf`` -> "inf"."""
    x = float(x)
    return None if x == -math.inf else "inf" if x == math.inf else round(x, 6)


def deep_relative(kb, rules, held: set[int], target: int, budget: int | None = None) -> tuple[bool, list[int]]:
    """(the target is outside the closure of ``held``, the held facts a surviving derivation rests on)."""
    from ..rules.graph import derivation_graph
    from ..rules.survive import is_deep, leaves, surviving_derivation

    graph = derivation_graph(kb, rules, known=sorted(held), max_groundings=budget)
    deep = is_deep(graph, target)
    return deep, [] if deep else leaves(surviving_derivation(graph, target))


class OracleReference:
    """One oracle, as a :class:`~.evaluate.Judge` uses it: its record, its evidence on its
    excluded facts and on the negatives (computed once), against which each B is judged."""

    def __init__(self, judge, folder: str | os.PathLike, negatives=None, *, fpr: float = DEFAULT_FPR,
                 bundle=None, model_fn=None, correction: str = "family", spread: bool = True):
        from ..probe.calibration import check_rate

        folders = [folder] if isinstance(folder, (str, os.PathLike)) else list(folder)
        if not folders:
            raise EvaluateError("--oracle: no oracle folder given", field="--oracle")
        bundles = None if bundle is None else list(bundle) if isinstance(bundle, (list, tuple)) else [bundle]
        if bundles is not None and len(bundles) != len(folders):
            raise ValueError("OracleReference: one loaded bundle per oracle folder")
        self.judge, self.fpr = judge, check_rate(fpr, "oracle fpr")
        self.folders = [str(f) for f in folders]
        self.folder = self.folders[0]
        if correction not in CORRECTIONS:
            raise EvaluateError(f"oracle margin correction must be one of {', '.join(CORRECTIONS)}, got "
                                f"{correction!r}", field="--oracle-correction")
        self.correction, self.spread = correction, spread
        self.records = [self._record(f) for f in self.folders]
        self.record = self.records[0]
        self.excluded = _excluded(self.record)
        for f, r in zip(self.folders[1:], self.records[1:]):
            if _excluded(r) != self.excluded:
                raise EvaluateError(f"--oracle {f}: leaves out {len(_excluded(r))} facts, --oracle {self.folder} "
                                    f"{len(self.excluded)}: the oracles of one reference leave out the same set "
                                    "(other seeds of one oracle)", file=f, field="--oracle")
        self.neg_kb, self.neg_name = self._negatives(negatives)
        from ..probe.modes import any_modes, probe_mode

        spec = probe_mode(judge.mode)
        self.modes = list(any_modes()) if spec.aggregate else [judge.mode]
        self.forms = judge.forms or spec.forms
        self.ev_o = self.answers_o = self.neg_o = None
        self.ev_each: list[dict[str, np.ndarray]] = []
        self.answers_each: list[np.ndarray] = []
        for i, f in enumerate(self.folders):
            o = bundles[i] if bundles is not None else judge.load(f, "--oracle")
            ev, answers = self.evidence(o, judge.kb, self.excluded, model_fn)
            neg, _ = self.evidence(o, self.neg_kb, range(len(self.neg_kb.facts)), model_fn)
            del o
            self.ev_each.append(ev)
            self.answers_each.append(answers)
            if self.ev_o is None:
                self.ev_o, self.answers_o, self.neg_o = ev, answers, neg
            else:  # the strongest of the oracles, per fact and mode
                self.ev_o = {m: np.maximum(self.ev_o[m], ev[m]) for m in self.modes}
                self.neg_o = {m: np.maximum(self.neg_o[m], neg[m]) for m in self.modes}
                self.answers_o = self.answers_o | answers
        self._taught = None

    def _record(self, folder: str) -> dict:
        """An oracle folder's record, checked to be of the judge's KB."""
        from ..kg.fingerprint import kb_fingerprint
        from .oracle import read_record

        record, kb = read_record(folder), self.judge.kb
        fp = (record.get("kb") or {}).get("fingerprint")
        if fp is not None and fp != kb_fingerprint(kb):
            raise EvaluateError(f"--oracle {folder}: trained on KB {(record['kb'] or {}).get('name')!r}, not on "
                                f"{kb.name!r}: an oracle is the original's recipe on the same KB", file=folder,
                                field="--oracle")
        return record

    def _negatives(self, negatives):
        from ..kg.io import load_kb

        if negatives is None:
            return default_negatives(self.judge.kb, self.judge.rules)
        if isinstance(negatives, (str, os.PathLike)):
            return load_kb(negatives, flag="--negatives"), str(negatives)
        return negatives, getattr(negatives, "name", "negatives")

    def evidence(self, bundle, kb, ids, model_fn=None) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(scores per mode, the raw rule of the judge's mode holds) over ``ids``."""
        from .oracle_scores import fact_scores

        ids = list(ids)
        scores, hits = fact_scores(bundle, kb, ids, self.modes, forms=self.forms, batch_size=self.judge.batch_size,
                                   model_fn=model_fn)
        answered = np.zeros(len(ids), dtype=bool)
        for h in hits.values():
            answered |= h
        return scores, answered

    def check_target(self, target: int) -> None:
        """A target the oracle's training set still derives is one error naming ``--oracle``."""
        from .oracle import surviving_line

        if self._taught is None:
            from ..rules.graph import derivation_graph

            kb = self.judge.kb
            taught = sorted(set(range(len(kb.facts))) - set(self.excluded))
            self._taught = derivation_graph(kb, self.judge.rules, known=taught, max_groundings=self.judge.budget)
        if self._taught.in_closure[int(target)]:
            s, r, o = self.judge.kb.facts[target]
            how = surviving_line(self.judge.kb, self._taught, target)
            raise EvaluateError(f"--oracle {self.folder}: not an oracle of target [{target}] ({s}, {r}, {o}): the "
                                f"rules derive it from what it was trained on ({how}); train one with deepunlearn "
                                "oracle --target", file=self.folder, field="--oracle")

    def relevant(self, target: int, known_b) -> list[int]:
        """The excluded facts that can matter to ``target``: those of its cone (over K_A) B answers."""
        ms = self.judge.evaluator.minimal_sets(int(target))
        cone = {f for s in ms.sets for f in s}
        return sorted(f for f in self.excluded if f in cone and f in known_b)

    def seed_spread(self) -> dict[str, np.ndarray]:
        """Per mode and excluded fact, the oracles' largest disagreement on it (``|score_i -
        score_j|`` over pairs where both score it; 0 with one oracle, or without ``spread``)."""
        out = {m: np.zeros(len(self.excluded)) for m in self.modes}
        if not self.spread or len(self.ev_each) < 2:
            return out
        for m in self.modes:
            for a in range(len(self.ev_each)):
                for b in range(a + 1, len(self.ev_each)):
                    x, y = self.ev_each[a][m], self.ev_each[b][m]
                    ok = np.isfinite(x) & np.isfinite(y)
                    out[m] = np.where(ok, np.maximum(out[m], np.abs(np.where(ok, x - y, 0.0))), out[m])
        return out

    def judge_b(self, bundle, known_b: set[int], target: int, model_fn=None) -> tuple[bool, dict[str, Any]]:
        """(deep_oracle, the verdict's ``oracle`` entry) of B (``bundle``, whose raw K is ``known_b``)."""
        self.check_target(target)
        kb = self.judge.kb
        ev_b, _ = self.evidence(bundle, kb, self.excluded, model_fn)
        neg_b, neg_answered = self.evidence(bundle, self.neg_kb, range(len(self.neg_kb.facts)), model_fn)
        relevant = self.relevant(target, known_b)
        per_fact = self.fpr / max(1, len(relevant)) if self.correction == "family" else self.fpr
        margin = margins(neg_b, self.neg_o, per_fact, answered=neg_answered)
        if self.spread == "pooled":
            noise = pooled_noise(self.ev_each, self.answers_each, per_fact)
            margin = {m: max(v, noise[m]) for m, v in margin.items()}
        spread = self.seed_spread()
        held, beyond = held_facts(set(known_b), self.excluded, ev_b, self.ev_o, margin, self.answers_o, spread)
        deep, rest = deep_relative(kb, self.judge.rules, held, target, self.judge.budget)
        for b in beyond:
            b["fact"] = list(kb.facts[b["id"]])
        answered = sorted(set(self.excluded) & set(known_b))
        return deep, {
            "folder": self.folder, "folders": self.folders, "of": self.record.get("of"),
            "targets": self.record.get("targets"), "seed": self.record.get("seed"),
            "seeds": [r.get("seed") for r in self.records], "excluded": self.excluded, "answered_excluded": answered,
            "oracle_answered_excluded": [f for f, a in zip(self.excluded, self.answers_o) if a],
            "negatives_answered": int(neg_answered.sum()),
            "held_excluded": beyond, "held": len(held), "target_held": target in held,
            "surviving_ids": rest, "negatives": self.neg_name, "n_negatives": len(self.neg_kb.facts),
            "fpr": self.fpr, "correction": self.correction, "compared": relevant, "fpr_per_fact": per_fact,
            "margins": {m: _num(v) for m, v in margin.items()}, "seed_spread": {m: _num(float(np.max(v[[self.excluded.index(f) for f in relevant]], initial=0.0)))
                            for m, v in spread.items()},
            "informative": any(math.isfinite(v) for v in margin.values()),
            **({"noise": "pooled"} if self.spread == "pooled" else {})}


def _excluded(record: dict) -> list[int]:
    """The facts an oracle was not taught, sorted."""
    return sorted(int(i) for i in record.get("removed") or record["excluded"])


#: the default holdout has at least this many facts (more people than the KB where it is small)
MIN_HOLDOUT_FACTS = 200


def default_negatives(kb, rules) -> tuple[Any, str]:
    """(negatives, how they were made) without ``--negatives``: a holdout drawn on the fly (seed
    0, as many people as the KB, more where that gives fewer than :data:`MIN_HOLDOUT_FACTS`
    facts); the KB's never-true facts (seed 0) where the KB gets no holdout."""
    from ..kg.holdout import make_holdout
    from ..user_error import UserError

    try:
        hold = make_holdout(kb, 0)
        if len(hold.facts) < MIN_HOLDOUT_FACTS:
            n = int(hold.metadata["holdout"]["people"])
            hold = make_holdout(kb, 0, people=math.ceil(n * MIN_HOLDOUT_FACTS / max(1, len(hold.facts))))
        return hold, f"holdout of {hold.metadata['holdout']['people']} new people (seed 0)"
    except (UserError, ValueError, KeyError):
        from ..rules.never_true import make_never_true

        return make_never_true(kb, seed=0, rules=rules), "never-true facts of the KB (seed 0)"


def judge_oracle(judge, bundle, known_b: set[int], target: int) -> tuple[bool, dict[str, Any]]:
    """``deep_oracle`` and the ``oracle`` entry of a verdict, for a :class:`~.evaluate.Judge` made
    with ``oracle=DIR`` (the reference is loaded once per judge)."""
    ref = judge.__dict__.get("_oracle_ref")
    if ref is None:
        noise = getattr(judge, "oracle_noise", "fact")
        if noise not in NOISES:
            raise EvaluateError(f"oracle noise must be one of {', '.join(NOISES)}, got {noise!r}", field="--oracle-noise")
        ref = judge._oracle_ref = OracleReference(judge, judge.oracle, judge.negatives,
                                                  correction=getattr(judge, "oracle_correction", "family"),
                                                  spread=True if noise == "fact" else noise)
    return ref.judge_b(bundle, known_b, target)


def _rate(o: dict) -> str:
    """The margin's false-positive rate as the text says it: per verdict (family) or per fact."""
    if o.get("correction", "fact") == "family":
        k = max(1, len(o.get("compared") or []))
        return f"{o['fpr']:.0%} FPR for the verdict ({o['fpr'] / k:.2%} per fact, {k} compared)"
    return f"{o['fpr']:.0%} FPR per fact"


def oracle_lines(v) -> list[str]:
    """The verdict's lines relative to exact unlearning (none without an oracle)."""
    if v.deep_oracle is None or v.oracle is None:
        return []
    o = v.oracle
    marg = ", ".join(f"{m} {'+inf' if x == 'inf' else '-inf' if x is None else f'{x:.3f}'}"
                     for m, x in o["margins"].items())
    folders = o.get("folders") or [o["folder"]]
    who = (f"oracle {o['folder']}" if len(folders) == 1 else
           f"the strongest of {len(folders)} oracles {', '.join(folders)}")
    lines = [f"  deep (relative to exact unlearning): {'yes' if v.deep_oracle else 'no'} ({who}, "
             f"{len(o['excluded'])} excluded facts; B answers {len(o['answered_excluded'])} of them, the oracle "
             f"{len(o['oracle_answered_excluded'])}; margin at {_rate(o)} over {o['n_negatives']} negatives, "
             f"{o['negatives']}, B answers {o['negatives_answered']}: {marg})"]
    for h in o["held_excluded"]:
        s, r, ob = h["fact"]
        sc = lambda x: "not answered" if x is None else "inf" if x == "inf" else f"{x:.3f}"  # noqa: E731
        lines.append(f"    still held beyond the oracle: [{h['id']}] ({s}, {r}, {ob}) {h['mode']}: B {sc(h['score'])} "
                     f"vs oracle {sc(h['oracle_score'])}{'' if h['oracle_answers'] else ' (not answered)'} "
                     f"(difference {sc(h['difference'])} > margin {sc(h['margin'])})")
    if not o["informative"]:
        lines.append("    note: the margin is +inf in every mode (B answers never-seen facts the oracle has no score "
                     "on): no excluded fact can count as held, so this verdict is uninformative")
    return lines


def oracle_folder(path) -> Path | list[Path]:
    """``--oracle DIR`` checked before any model loads (a folder with an oracle record); a list of
    folders (one reference of several seeds) checks each and returns the list."""
    from .oracle import read_record

    if not isinstance(path, (str, os.PathLike)):
        return [oracle_folder(p) for p in path]
    p = Path(path)
    if not p.is_dir():
        raise EvaluateError(f"--oracle {path}: no such folder (make one with deepunlearn oracle)", file=path,
                            field="--oracle")
    read_record(p)
    return p
