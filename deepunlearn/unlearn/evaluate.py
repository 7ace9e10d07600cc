"""Judge a model unlearned anywhere against its original: did it forget the target deeply?

``evaluate(original, unlearned, kb, target)`` probes the original A once (through the probe
cache) and each unlearned model B, and returns a :class:`Verdict` per B: K_A, the forgotten facts
F = K_A \\ K_B, recall and accuracy against the target's minimal deep-unlearning sets (over K_A,
as :class:`~deepunlearn.rules.metrics.Evaluator` computes them), and whether the target is
outside the closure Ω(K_B, R) (``deep``). A target B no longer answers but the rules still derive
from K_B is ``superficial``; the verdict then holds the surviving derivation, rule by rule.

B is probed in A's answer format (a checkpoint saved elsewhere records none, and the family's
format would then probe another question than A was asked). Models load through
:mod:`.evaluate_models` (checkpoint folders, hub names, GGUF files, PEFT adapters). The checks of
a sweep (adversarial probe, relearning and quantisation attacks, scores) run on the same loaded B
(:mod:`.evaluate_checks`) and fill the verdict's ``adversarial``, ``attacks`` and ``scores``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from .evaluate_models import EvaluateError
from .verdict import Step, Verdict  # noqa: F401  (the verdict's types, named where evaluate is)


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
    recall/accuracy over K_A. :meth:`verdict` judges one unlearned model for one target (and runs
    the :class:`~.evaluate_checks.EvalChecks` on it, which read K, the evaluator and
    :meth:`chosen_set` as the attack command reads a TargetRunner's)."""

    #: K is what A answers; the minimal sets are enumerated exactly
    k_mode, sets = "probed", "exact"

    def __init__(self, original: str | os.PathLike, kb, *, rules=None, mode: str | None = None,
                 forms: str | None = None, protocol: str | None = None, device: str | None = None,
                 dtype=None, prompt=None, answer_format: str | None = None, trust_remote_code: bool = False,
                 chance_calibration=None,
                 cache_dir: str | os.PathLike | None = None, batch_size: int = 64, progress: bool = True,
                 grounding_budget: int | None = None, model_derived: bool = False,
                 oracle: str | os.PathLike | None = None, negatives=None, oracle_correction: str = "family",
                 oracle_noise: str = "fact", rule_prob: str | None = None, soft_budget: int | None = None):
        from ..probe.protocol import get_protocol
        from ..rules.budget import DEFAULT_MAX_GROUNDINGS
        from ..rules.load import load_rules
        from .evaluate_models import load_original

        self.kb, self.kb_name = _kb(kb)
        proto = get_protocol(protocol)
        self.mode = mode or proto.probe_mode
        from .chance_verdict import chance_rates

        self.chance = None if chance_calibration is None else chance_rates(chance_calibration, self.mode)
        self.forms = forms
        if forms is not None:
            from ..kg.forms import parse_selection

            parse_selection(self.kb, forms, flag="--forms")
        self.rules = load_rules(rules if rules is not None else self.kb.metadata.get("rules", "family"))
        if rule_prob is not None:  # each mined rule's probability from one of its measures
            from ..rules.soft import with_rule_probs

            self.rules = with_rule_probs(self.rules, rule_prob)
        self.soft_budget = soft_budget
        self.budget = grounding_budget or DEFAULT_MAX_GROUNDINGS
        self.device, self.dtype, self.batch_size, self.progress = device, dtype, batch_size, progress
        self.trust_remote_code = trust_remote_code
        self.model_derived = model_derived  # also ask B the target's compose questions (deep_model)
        self.oracle, self.negatives = oracle, negatives  # deep_oracle relative to an oracle (.oracle_verdict)
        self.oracle_correction, self.oracle_noise = oracle_correction, oracle_noise
        self.original = str(original)
        self.bundle = load_original(self.original, self.kb, device=device, dtype=dtype, prompt=prompt,
                                    answer_format=answer_format or proto.answer_format,
                                    trust_remote_code=trust_remote_code)
        from ..probe.answer_rule import rule_of

        self.bundle.answer_rule = rule_of(proto)  # when a generated answer counts, for A and every B
        from ..probe.cache import cached_probe, default_cache_dir

        res = cached_probe(self.bundle, self.kb, mode=self.mode, forms=forms, batch_size=batch_size,
                           cache_dir=cache_dir if cache_dir is not None else default_cache_dir(), progress=progress)
        self.known = frozenset(int(i) for i in res.known_ids())
        self.rows = int(self.bundle.model.get_input_embeddings().weight.shape[0])
        self.device_type = next(self.bundle.model.parameters()).device.type
        self._collateral = None
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

    def chosen_set(self, target: int) -> list[int]:
        """The target's minimal set to forget (fewest facts, then least collateral), as
        :meth:`~deepunlearn.unlearn.loop.TargetRunner.chosen_set` picks it."""
        from ..rules.choice import Collateral, choose_set

        if self._collateral is None:
            self._collateral = Collateral(self.kb, self.known)
        return sorted(choose_set(self.evaluator.minimal_sets(int(target)).sets, self._collateral, ()))

    def load(self, unlearned: str | os.PathLike, flag: str = "--unlearned"):
        """B (or a retain model), in A's answer format and with A's answer rule. A name that is no
        local folder or file and cannot be loaded from the hub either is one line naming ``flag``."""
        from ..probe.sources import ModelLoadError, looks_local
        from .evaluate_models import load_unlearned

        name = str(unlearned)
        try:
            bundle = load_unlearned(name, self.bundle, original_name=self.original, original_rows=self.rows,
                                    device=self.device, dtype=self.dtype, trust_remote_code=self.trust_remote_code)
        except ModelLoadError:
            if Path(name).expanduser().exists():
                raise
            raise EvaluateError(f"{flag} {name}: no such checkpoint folder or file"
                                + ("" if looks_local(name) else " (and not reachable as a hub name)"),
                                file=name, field=flag) from None
        bundle.answer_rule = self.bundle.answer_rule
        return bundle

    def probe_unlearned(self, unlearned) -> set[int]:
        """K_B: the facts the unlearned model (a name, or a loaded bundle) knows, probed in A's
        answer format and mode."""
        from ..probe.probing import probe

        bundle = self.load(unlearned) if isinstance(unlearned, (str, os.PathLike)) else unlearned
        return probe(bundle, self.kb, mode=self.mode, forms=self.forms, batch_size=self.batch_size,
                     progress=self.progress).known_ids()

    def target_id(self, target) -> int:
        """The fact id of ``target``; one the original does not know is an :class:`EvaluateError`."""
        t = resolve_target_ref(self.kb, target, self.kb_name)
        if t not in self.known:
            s, r, o = self.kb.facts[t]
            raise EvaluateError(f"--target [{t}] ({s}, {r}, {o}): the original model {self.original} does not know "
                                "it, so there is nothing to unlearn", field="--target")
        return t

    def verdict(self, unlearned: str | os.PathLike, target, *, method: str | None = None,
                param: float | str | None = None, checks=None, flag: str = "--unlearned") -> Verdict:
        """The verdict of one B; ``checks`` (:class:`~.evaluate_checks.EvalChecks`) run on the same
        loaded B. ``flag`` names B in a loading error."""
        t = self.target_id(target)
        if checks is not None:
            checks.check_device(self.device_type)
        bundle = self.load(unlearned, flag)
        try:
            return self.judge_bundle(bundle, str(unlearned), t, method=method, param=param, checks=checks)
        finally:
            del bundle

    def judge_bundle(self, bundle, name: str, target: int, *, method=None, param=None, checks=None) -> Verdict:
        """The verdict of a loaded B (``target``: a fact id A knows), its checks run on ``bundle``
        (whose weights are as before afterwards)."""
        known_b = self.probe_unlearned(bundle)
        v = judge_known(self.kb, self.rules, self.evaluator, set(self.known), known_b, target,
                        original=self.original, unlearned=name, kb_name=self.kb_name, mode=self.mode,
                        forms=self.forms, budget=self.budget, method=method, param=param,
                        soft_budget=self.soft_budget)
        from .chance_verdict import attach_chance

        attach_chance(v, self.evaluator, self.kb, self.chance)  # p_chance, with a calibration
        if self.model_derived:
            from .derived import model_derived

            md = model_derived(bundle, self.kb, target, self.rules, direct=target in known_b,
                               graph=self.evaluator.graph, batch_size=self.batch_size)
            v.deep_model = md.pop("deep_model")
            v.model_derived = md
        if self.oracle is not None:
            from .oracle_verdict import judge_oracle

            v.deep_oracle, v.oracle = judge_oracle(self, bundle, known_b, target)
        if checks is None:
            return v
        return Verdict(**{**v.model_dump(), **checks.run(self, bundle, target, v)})


def judge_known(kb, rules, evaluator, known_a: set[int], known_b: set[int], target: int, *, original: str,
                unlearned: str, kb_name: str, mode: str, forms: str | None, budget: int | None,
                method: str | None = None, param=None, soft_budget: int | None = None) -> Verdict:
    """The verdict from two probes (K_A, K_B): no model involved (``rules recall`` and the tests
    use it on probe files); ``deep_p`` with soft rules (``soft_budget``: :func:`~deepunlearn.rules.soft.soft_deep_p`)."""
    from ..rules.graph import derivation_graph
    from ..rules.soft import soft_deep_p
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
        method=method, param=param,
        deep_p=soft_deep_p(graph_b, target, max_nodes=soft_budget))


def evaluate(original: str | os.PathLike, unlearned: str | os.PathLike | Sequence[str | os.PathLike], kb,
             target, *, rules=None, mode: str | None = None, forms: str | None = None, adversarial: bool = False,
             adversarial_modes: Sequence[str] | None = None, adversarial_calibration=None,
             relearn: Sequence[int] | None = None, relearn_size: int = 16, relearn_lr: float | None = None,
             quantize: str | None = None, seed: int = 0, scores: bool = False, retain: str | os.PathLike | None = None,
             probing=None, checks=None, measures=None, **kw) -> Verdict | list[Verdict]:
    """Judge a model unlearned anywhere against its original: did it forget the target deeply?

    Parameters
    ----------
    original : str or os.PathLike
        A, the model before unlearning: a checkpoint folder, a hub name or a GGUF file.
    unlearned : str, os.PathLike or a sequence of them
        B, one unlearned model or a list (A is probed once): a checkpoint folder, a hub name, a
        GGUF file or a PEFT adapter on A.
    kb : KnowledgeBase, str or os.PathLike
        The knowledge base, or a KB file.
    target : int or str
        A fact id or ``"S|r|O"``.
    rules : str or RuleSet, optional
        Anything :func:`~deepunlearn.rules.load.load_rules` takes; default: the KB's own.
    mode, forms : str, optional
        The probe mode and the question forms asked (default: the protocol's).
    adversarial, adversarial_modes, adversarial_calibration : optional
        The adversarial probe check (see Notes).
    relearn, relearn_size, relearn_lr, quantize, seed : optional
        The relearning and quantisation attacks (see Notes).
    scores, retain : optional
        The likelihood scores, against a retain model's checkpoint (see Notes).
    probing, checks, measures : optional
        The probe, check and measure options as TargetRunner's groups instead of keywords
        (:mod:`.evaluate_options`); an option given both ways is a ``TypeError``.
    **kw
        The other keywords (see Notes).

    Returns
    -------
    Verdict or list of Verdict
        One verdict, or one per model of a list.

    Raises
    ------
    EvaluateError
        A model that does not exist, a B whose tokenizer or base is not A's, or a target A does
        not know: one message naming it.

    Notes
    -----
    Keywords: ``protocol``, ``device``, ``dtype``, ``prompt``, ``answer_format``, ``trust_remote_code``,
    ``cache_dir`` (the probe cache of A), ``batch_size``, ``progress``, ``grounding_budget``,
    ``chance_calibration`` (a calibration file: p_chance of a verdict that is not deep),
    ``oracle`` (an oracle folder: ``deep_oracle``, :mod:`.oracle_verdict`) with ``negatives``.
    The checks (:mod:`.evaluate_checks`): ``adversarial`` (with ``adversarial_modes``,
    ``adversarial_calibration``), the attacks ``relearn`` (a grid of step counts, e.g. ``[1, 2, 4]``),
    ``relearn_size``, ``relearn_lr``, ``quantize`` (``"int8"``, ``"int4"``, ``"nf4"``), ``seed``,
    and ``scores`` (with ``retain``, a retain model's checkpoint). The probe, check and measure
    options may be given as TargetRunner's groups instead (``probing``, ``checks``, ``measures``:
    :mod:`.evaluate_options`). Returns a :class:`Verdict` (a list of them for a list).

    Examples
    --------
    A model judged against itself has forgotten nothing (here A is the tiny model finetuned on
    a four-person family; ``examples/evaluate_own_model.py`` judges a model unlearned by plain
    torch code):

    >>> import tempfile, pathlib, deepunlearn
    >>> from deepunlearn.probe.tiny import build_tiny_model
    >>> from deepunlearn.unlearn.finetune import FinetuneConfig, finetune
    >>> work = pathlib.Path(tempfile.mkdtemp())
    >>> kb = deepunlearn.generate_family(4, seed=0)
    >>> a = deepunlearn.load_model(build_tiny_model(kb, work / "tiny"), device="cpu")
    >>> _ = finetune(a, kb, FinetuneConfig.tiny(), out_dir=work / "A", progress=False)
    >>> kb_file = deepunlearn.save_kb(kb, work / "kb.json")
    >>> v = evaluate(work / "A", work / "A", kb_file, kb.targets[0], progress=False)
    >>> v.forgotten, v.target_forgotten, v.deep, v.recall
    ([], False, False, 0.0)
    """
    if probing is not None or checks is not None or measures is not None:  # the groups, by their keywords
        from .evaluate_options import by_keywords

        return evaluate(original, unlearned, kb, target, **by_keywords(evaluate, locals()))
    from .evaluate_checks import EvalChecks

    checks = EvalChecks.build(adversarial=adversarial, adversarial_modes=adversarial_modes,
                              adversarial_calibration=adversarial_calibration, relearn=relearn,
                              relearn_size=relearn_size, relearn_lr=relearn_lr, quantize=quantize, seed=seed,
                              scores=scores, retain=None if retain is None else str(retain))
    judge = Judge(original, kb, rules=rules, mode=mode, forms=forms, **kw)
    if isinstance(unlearned, (str, os.PathLike)):
        return judge.verdict(unlearned, target, checks=checks)
    return [judge.verdict(u, target, checks=checks) for u in unlearned]

