"""The verdict on one unlearned model (:func:`~.evaluate.evaluate`): what it forgot, recall and
accuracy, ``deep`` and, for a superficial forgetting, the surviving derivation rule by rule
(:class:`Step`); beside them the controls and checks that were asked for."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Step(BaseModel):
    """One rule application of a surviving derivation: ``fact`` <= ``body`` by ``rule``."""

    fact: list[str]
    id: int
    rule: str
    where: str
    datalog: str
    body: list[int]


class Verdict(BaseModel):
    """The judgement of one unlearned model (see the module docstring). Fact lists are KB fact
    ids; ``*_facts`` spell them out.

    Attributes
    ----------
    forgotten, gained : list of int
        F = K_A \\ K_B, the facts A knew and B does not; and the facts B knows that A did not.
    recall, accuracy : float
        Against the target's minimal deep-unlearning sets (``minimal_sets`` of them, ``exact`` or
        not); ``best_set`` is the set recall was taken on, ``accuracy_groups`` the accuracy per
        relation group.
    target_forgotten, deep, superficial : bool
        Whether B no longer answers the target; whether the target is outside Ω(K_B, R); a
        forgotten target the rules still derive.
    surviving, surviving_text : list of Step, str
        The surviving derivation, rule by rule, when ``superficial``.
    adversarial, attacks, scores : dict or None
        The checks' results, when they ran.

    Examples
    --------
    :func:`~.evaluate.judge_known` makes one from two known-fact sets, with no model: here B
    lost the target and the facts of the best minimal set, so nothing derives the target back.

    >>> import deepunlearn
    >>> from deepunlearn.unlearn.evaluate import judge_known
    >>> from deepunlearn.rules.metrics import Evaluator
    >>> kb = deepunlearn.generate_family(8, seed=1)
    >>> rules = deepunlearn.load_rules("family")
    >>> t, known_a = kb.targets[0], set(range(len(kb.facts)))
    >>> ev = Evaluator(kb, rules=rules, known=sorted(known_a))
    >>> gone = set(ev.evaluate(t, [t]).set)          # a minimal deep-unlearning set of t
    >>> v = judge_known(kb, rules, ev, known_a, known_a - gone, t, original="A", unlearned="B",
    ...                 kb_name="kb", mode="exact", forms=None, budget=None)
    >>> v.target_forgotten, v.deep, v.superficial, v.recall
    (True, True, False, 1.0)
    >>> print(v.text().splitlines()[-1])
      deep: yes: the target is not derivable from what the model still knows
    """

    model_config = ConfigDict(extra="forbid")

    original: str
    unlearned: str
    kb: str
    rules: str
    mode: str
    forms: str | None = None
    target: list[str]
    target_id: int
    known_original: int
    known_unlearned: int
    forgotten: list[int]
    gained: list[int]
    recall: float
    accuracy: float
    accuracy_groups: dict[str, float]
    accuracy_rule: float
    accuracy_other: float
    exact: bool
    minimal_sets: int
    best_set: list[int]
    target_forgotten: bool
    deep: bool
    superficial: bool
    surviving: list[Step]
    surviving_facts: list[list[str]]
    surviving_ids: list[int]
    surviving_text: str = ""
    method: str | None = None
    param: float | str | None = None
    #: the adversarial probe's keys, as a sweep's point records them (:mod:`.evaluate_checks`)
    adversarial: dict[str, Any] | None = None
    #: the relearning / quantisation attacks, as ``deepunlearn attack`` reports them
    attacks: dict[str, Any] | None = None
    #: how much remains (the measures a sweep records with ``scores = true``)
    scores: dict[str, Any] | None = None
    #: with ``model_derived=True`` (``evaluate --model-derived``): the model-derived verdict of
    #: :func:`deepunlearn.unlearn.derived.model_derived` and its ``deep_model``
    model_derived: dict[str, Any] | None = None
    deep_model: bool | None = None
    #: with a calibration (``evaluate --calibration``), for a verdict that is not deep: the chance
    #: that a model that learned none of the verdict's set, answering it by chance, is judged the same
    #: (:mod:`.chance_verdict`), its standard error, "exact" or "monte-carlo", and the rates used
    p_chance: float | None = None
    p_chance_se: float | None = None
    p_chance_method: str | None = None
    chance: dict[str, Any] | None = None
    #: with an oracle (``evaluate --oracle DIR``): the verdict relative to exact unlearning
    #: (:mod:`.oracle_verdict`) and its details (oracle folder, excluded ids, margins, negatives,
    #: the excluded facts B still holds beyond the oracle)
    deep_oracle: bool | None = None
    oracle: dict[str, Any] | None = None
    #: with soft rules (:mod:`deepunlearn.rules.soft`): the probability that the rules, each grounding
    #: holding with its rule's probability, still derive the target from K_B; None with certain rules
    deep_p: float | None = None

    def text(self) -> str:
        """Readable lines: the counts, the metrics and, for a superficial forgetting, the
        derivation that survives."""
        from .chance_verdict import deep_text

        s, r, o = self.target
        verdict = ("yes: the target is not derivable from what the model still knows" if self.deep else
                   "no: the model still " + ("knows the target" if not self.target_forgotten else
                                              "derives the target (superficial forgetting)"))
        groups = ", ".join(f"{g} {a:.4f}" for g, a in self.accuracy_groups.items())
        lines = [f"{self.unlearned} vs original {self.original}, target [{self.target_id}] ({s}, {r}, {o}):",
                 f"  known before {self.known_original}, after {self.known_unlearned}; forgotten {len(self.forgotten)}"
                 + (f", newly known {len(self.gained)}" if self.gained else ""),
                 f"  recall {self.recall:.4f} over {self.minimal_sets} minimal sets"
                 f" ({'exact' if self.exact else 'approximate'}); accuracy {self.accuracy:.4f}"
                 + (f" ({groups})" if groups else ""),
                 f"  target forgotten: {'yes' if self.target_forgotten else 'no'}",
                 f"  deep: {deep_text(self, verdict)}"]
        if self.deep_p is not None:
            lines.append(f"  deep_p: {self.deep_p:.4g} (the chance that the soft rules still derive the target from what "
                         "the model knows)")
        if self.superficial:
            lines.append("  surviving derivation (K: facts the model still knows), rule by rule:")
            lines.append(self.surviving_text)
        if self.model_derived is not None:
            md = self.model_derived
            lines.append(f"  deep (model-derived): {'yes' if self.deep_model else 'no'} (answered directly: "
                         f"{'yes' if md['direct'] else 'no'}; compose questions answered "
                         f"{md['compose_answered']}/{md['compose_questions']})")
        from .evaluate_checks import check_lines
        from .oracle_verdict import oracle_lines

        return "\n".join(lines + oracle_lines(self) + check_lines(self))
