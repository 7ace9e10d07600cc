"""Judge a model unlearned anywhere against its original: did it forget the target deeply?

``evaluate(original, unlearned, kb, target)`` probes the original A once (through the probe
cache) and each unlearned model B, and returns a :class:`Verdict` per B: K_A, the forgotten facts
F = K_A \\ K_B, recall and accuracy against the target's minimal deep-unlearning sets (over K_A,
as :class:`~deepunlearn.rules.metrics.Evaluator` computes them), and whether the target is
outside the closure Ω(K_B, R) (``deep``). A target B no longer answers but the rules still derive
from K_B is ``superficial``; the verdict then holds the surviving derivation, rule by rule.

B is probed in A's answer format (a checkpoint saved elsewhere records none, and the family's
format would then probe another question than A was asked). Models load through
:mod:`.evaluate_models` (checkpoint folders, hub names, GGUF files, PEFT adapters).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict

from .evaluate_models import EvaluateError


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
    ids; ``*_facts`` spell them out."""

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
    #: with ``model_derived=True`` (``evaluate --model-derived``): the model-derived verdict of
    #: :func:`deepunlearn.unlearn.derived.model_derived` and its ``deep_model``
    model_derived: dict | None = None
    deep_model: bool | None = None

    def text(self) -> str:
        """Readable lines: the counts, the metrics and, for a superficial forgetting, the
        derivation that survives."""
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
                 f"  deep: {verdict}"]
        if self.model_derived is not None:
            md = self.model_derived
            lines.append(f"  deep (model-derived): {'yes' if self.deep_model else 'no'} (answered directly: "
                         f"{'yes' if md['direct'] else 'no'}; compose questions answered "
                         f"{md['compose_answered']}/{md['compose_questions']})")
        if self.superficial:
            lines.append("  surviving derivation (K: facts the model still knows), rule by rule:")
            lines.append(self.surviving_text)
        return "\n".join(lines)


def _kb(kb) -> tuple[Any, str]:
    from ..kg.io import load_kb

    if isinstance(kb, (str, os.PathLike)):
        return load_kb(kb, flag="--kb"), str(kb)
    return kb, getattr(kb, "name", "kb")


def resolve_target_ref(kb, target, kb_file: str | None = None) -> int:
    """A fact id, ``"7"`` or ``"S|r|O"`` -> the fact id (as ``unlearn --target`` reads it)."""
    from ..kg.refs import resolve_target

    if isinstance(target, int) and not isinstance(target, bool):
        target = str(target)
    return resolve_target(kb, str(target), kb_file=kb_file, flag="--target", allow_all=False)[0]


class Judge:
    """The original model's side, computed once: its bundle, its probe K_A and the evaluator of
    recall/accuracy over K_A. :meth:`verdict` judges one unlearned model for one target."""

    def __init__(self, original: str | os.PathLike, kb, *, rules=None, mode: str | None = None,
                 forms: str | None = None, protocol: str | None = None, device: str | None = None,
                 dtype=None, prompt=None, answer_format: str | None = None, trust_remote_code: bool = False,
                 cache_dir: str | os.PathLike | None = None, batch_size: int = 64, progress: bool = True,
                 grounding_budget: int | None = None, model_derived: bool = False):
        from ..probe.protocol import get_protocol
        from ..rules.budget import DEFAULT_MAX_GROUNDINGS
        from ..rules.load import load_rules
        from .evaluate_models import load_original

        self.kb, self.kb_name = _kb(kb)
        proto = get_protocol(protocol)
        self.mode = mode or proto.probe_mode
        self.forms = forms
        if forms is not None:
            from ..kg.forms import parse_selection

            parse_selection(self.kb, forms, flag="--forms")
        self.rules = load_rules(rules if rules is not None else self.kb.metadata.get("rules", "family"))
        self.budget = grounding_budget or DEFAULT_MAX_GROUNDINGS
        self.device, self.dtype, self.batch_size, self.progress = device, dtype, batch_size, progress
        self.trust_remote_code = trust_remote_code
        self.model_derived, self._derived = model_derived, None
        self.original = str(original)
        self.bundle = load_original(self.original, self.kb, device=device, dtype=dtype, prompt=prompt,
                                    answer_format=answer_format or proto.answer_format,
                                    trust_remote_code=trust_remote_code)
        from ..probe.answer_rule import rule_of

        self.bundle.answer_rule = rule_of(proto)  # when a generated answer counts, for A and every B
        from ..probe.cache import cached_probe, default_cache_dir

        res = cached_probe(self.bundle, self.kb, mode=self.mode, forms=forms, batch_size=batch_size,
                           cache_dir=cache_dir if cache_dir is not None else default_cache_dir(), progress=progress)
        self.known = res.known_ids()
        self.rows = int(self.bundle.model.get_input_embeddings().weight.shape[0])
        # B's load one at a time beside A's tokenizer and format; A's weights are not needed again
        # (an adapter B reloads A from its folder), so they are freed here
        self.bundle.model = None
        self._evaluator = None

    @property
    def evaluator(self):
        if self._evaluator is None:
            from ..rules.metrics import Evaluator

            self._evaluator = Evaluator(self.kb, rules=self.rules, known=sorted(self.known),
                                        max_groundings=self.budget)
        return self._evaluator

    def probe_unlearned(self, unlearned: str | os.PathLike, target: int | None = None) -> set[int]:
        """K_B: the facts the unlearned model knows, probed in A's answer format and mode (with
        ``model_derived`` and a ``target``, the target's compose questions are asked too: the
        result waits in ``self._derived``)."""
        from ..probe.probing import probe
        from .evaluate_models import load_unlearned

        bundle = load_unlearned(str(unlearned), self.bundle, original_name=self.original, original_rows=self.rows,
                                device=self.device, dtype=self.dtype, trust_remote_code=self.trust_remote_code)
        bundle.answer_rule = self.bundle.answer_rule
        try:
            known = probe(bundle, self.kb, mode=self.mode, forms=self.forms, batch_size=self.batch_size,
                          progress=self.progress).known_ids()
            self._derived = None
            if self.model_derived and target is not None:
                from .derived import model_derived

                self._derived = model_derived(bundle, self.kb, target, self.rules, direct=target in known,
                                              graph=self.evaluator.graph, batch_size=self.batch_size)
            return known
        finally:
            del bundle

    def verdict(self, unlearned: str | os.PathLike, target, *, method: str | None = None,
                param: float | str | None = None) -> Verdict:
        t = resolve_target_ref(self.kb, target, self.kb_name)
        if t not in self.known:
            s, r, o = self.kb.facts[t]
            raise EvaluateError(f"--target [{t}] ({s}, {r}, {o}): the original model {self.original} does not know "
                                "it, so there is nothing to unlearn", field="--target")
        known_b = self.probe_unlearned(unlearned, t)
        v = judge_known(self.kb, self.rules, self.evaluator, self.known, known_b, t,
                        original=self.original, unlearned=str(unlearned), kb_name=self.kb_name,
                        mode=self.mode, forms=self.forms, budget=self.budget, method=method, param=param)
        if self._derived is not None:
            md = dict(self._derived)
            v.deep_model = md.pop("deep_model")
            v.model_derived = md
        return v


def judge_known(kb, rules, evaluator, known_a: set[int], known_b: set[int], target: int, *, original: str,
                unlearned: str, kb_name: str, mode: str, forms: str | None, budget: int | None,
                method: str | None = None, param=None) -> Verdict:
    """The verdict from two probes (K_A, K_B): no model involved (``rules recall`` and the tests
    use it on probe files)."""
    from ..rules.graph import derivation_graph
    from ..rules.survive import derivation_text, is_deep, leaves, steps, surviving_derivation

    forgotten = sorted(known_a - known_b)
    e = evaluator.evaluate(target, forgotten)
    graph_b = derivation_graph(kb, rules, known=sorted(known_b), max_groundings=budget)
    deep = is_deep(graph_b, target)
    forgot = target not in known_b
    tree = surviving_derivation(graph_b, target) if forgot and not deep else None
    ids = leaves(tree)
    return Verdict(
        original=original, unlearned=unlearned, kb=kb_name, rules=rules.name, mode=mode, forms=forms,
        target=list(kb.facts[target]), target_id=target, known_original=len(known_a), known_unlearned=len(known_b),
        forgotten=forgotten, gained=sorted(known_b - known_a), recall=e.recall, accuracy=e.accuracy,
        accuracy_groups=dict(e.accuracy_groups), accuracy_rule=e.accuracy_rule, accuracy_other=e.accuracy_other,
        exact=e.exact, minimal_sets=e.n_sets, best_set=list(e.set), target_forgotten=forgot, deep=deep,
        superficial=forgot and not deep, surviving=[Step(**s) for s in steps(graph_b, tree)],
        surviving_ids=ids, surviving_facts=[list(kb.facts[i]) for i in ids],
        surviving_text=derivation_text(graph_b, tree, indent="    ") if tree is not None else "",
        method=method, param=param)


def evaluate(original: str | os.PathLike, unlearned: str | os.PathLike | Sequence[str | os.PathLike], kb,
             target, *, rules=None, mode: str | None = None, forms: str | None = None, **kw) -> Verdict | list[Verdict]:
    """Judge ``unlearned`` (one model, or a list: A is probed once) against ``original`` for
    ``target`` (a fact id or ``"S|r|O"``) on ``kb`` (a KnowledgeBase or a KB file). Keywords:
    ``protocol``, ``device``, ``dtype``, ``prompt``, ``answer_format``, ``trust_remote_code``,
    ``cache_dir`` (the probe cache of A), ``batch_size``, ``progress``, ``grounding_budget``.
    Returns a :class:`Verdict` (a list of them for a list)."""
    judge = Judge(original, kb, rules=rules, mode=mode, forms=forms, **kw)
    if isinstance(unlearned, (str, os.PathLike)):
        return judge.verdict(unlearned, target)
    return [judge.verdict(u, target) for u in unlearned]

