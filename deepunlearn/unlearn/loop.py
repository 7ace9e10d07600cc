"""The per-target loop: probe once (cached) -> unlearn -> probe at every grid point -> recall and
accuracy -> restore the original weights in memory (docs/concepts.md, docs/unlearning.md)::

    runner = TargetRunner(bundle, kb)               # probes the model once (cached)
    for point in runner.run(target=12, method="ga"):
        print(point.param, point.recall, point.accuracy, point.target_forgotten)

``K`` (``runner.known``) is what the model knew before: the facts the baseline probe answers
(``k_mode="probed"``, the default) or every fact of the KB (``k_mode="dataset"``, as the paper's
code does). A point's ``forgotten`` facts are those of ``K`` the model no longer answers, and the
rules layer's :class:`~deepunlearn.rules.Evaluator`, built once on ``K``, turns them into recall
(against the target's minimal deep-unlearning sets) and accuracy. In ``dataset`` mode a fact the
model never answered counts as forgotten at every point, as in the reference code.

The runner snapshots the model's weights when it is made and puts them back after every run, so
it owns the weights while it is used: change the model through it only. What the rule-aware
methods and the checks read of it (the chosen set, ``deep``, the narrow views) is
:mod:`.runner_views`.
"""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, Sequence

from .check_spec import CheckSpec
from .lr import OptimiserConfig, optimiser_config
from .methods import MethodParams, Session, Unlearner, UnlearnError, get_method
from .points import (  # noqa: F401  (Point, TargetNotKnownError, seed_everything: re-exported)
    Point, TargetNotKnownError, evaluator, lora_methods, number, opt, seed_everything,
)
from .run_session import forget_batch, retain_sampler
from .runner_options import (CheckOptions, MeasureOptions, ProbeOptions, SetOptions, TrainOptions,
                             group_options)
from .runner_views import RunnerViews
from .sampled import AccuracySampler
from .snapshot import LoraAdapter, LoraParams, WeightSnapshot


class TargetRunner(RunnerViews):
    """Unlearn one target at a time from one model and measure every grid point.

    Parameters
    ----------
    bundle : ModelBundle
        the model (a :class:`~deepunlearn.probe.ModelBundle`), as
        :func:`~deepunlearn.probe.models.load_model` returns it.
    kb : KnowledgeBase
        its knowledge base.
    rules : str, RuleSet or None
        rule set for the minimal sets: ``"family"``, ``"edu-relat"``, a rule file or a RuleSet;
        ``None`` (default): the KB's own (``metadata["rules"]``, ``edu-relat`` for the imported
        release), else ``family``.
    protocol : Protocol, str or None
        a :class:`~deepunlearn.probe.protocol.Protocol` or preset name (``"default"``,
        ``"reference"``); ``None``: ``default``. It supplies every choice left at ``None`` in the
        options and the optimisation settings of the methods (schedule, warm-up, weight decay,
        clipping, reinforcement) that a method's own params do not set.
    probing, minimal_sets, training, measures, checks : option groups, optional
        the option groups (:mod:`deepunlearn.unlearn.runner_options`): how K is probed
        (:class:`ProbeOptions`), where the minimal sets come from (:class:`SetOptions`), how the
        methods train (:class:`TrainOptions`, LoRA included), what is measured at every point
        (:class:`MeasureOptions`: accuracy sampling, scores, the retrain reference) and the
        checks after unlearning (:class:`CheckOptions`: adversarial probe, attacks).
    seed : int
        the seed of the accuracy sample and the methods' data order.
    progress : bool
        progress bars on stderr.
    **flat
        any option by its flat keyword (``probe_mode="generate"``, ``lr=1e-4``, ...: the
        spelling of configs and command lines, :data:`~deepunlearn.unlearn.runner_options.FLAT`),
        applied on top of the groups.

    Raises
    ------
    UnlearnError
        An unknown protocol.
    TypeError
        An unknown keyword in ``**flat``.

    Examples
    --------
    An untrained model with K = the whole KB (``k_mode="dataset"``) has forgotten everything
    after one step of gradient ascent: recall 1, accuracy 0, the target gone deeply.

    >>> import tempfile
    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> from deepunlearn.probe.models import load_model
    >>> from deepunlearn.probe.tiny import build_tiny_model
    >>> kb = generate_family(5, seed=0)
    >>> bundle = load_model(build_tiny_model(kb, tempfile.mkdtemp(), hidden=32, layers=1, heads=2), device="cpu")
    >>> runner = TargetRunner(bundle, kb, probing=ProbeOptions(k_mode="dataset"), progress=False)
    >>> p, = runner.run(kb.targets[0], "ga", grid=[1])
    >>> p.param, p.recall, p.accuracy, p.target_forgotten, p.notes["deep"]
    (1, 1.0, 0.0, True, True)
    """

    def __init__(
        self,
        bundle,
        kb,
        *,
        rules=None,
        protocol=None,
        probing: ProbeOptions | None = None,
        minimal_sets: SetOptions | None = None,
        training: TrainOptions | None = None,
        measures: MeasureOptions | None = None,
        checks: CheckOptions | None = None,
        seed: int = 0,
        progress: bool = True,
        **flat,
    ):
        self.options = group_options({"probing": probing, "minimal_sets": minimal_sets, "training": training,
                                      "measures": measures, "checks": checks}, **flat)
        po, so, to, mo, co = (self.options[g] for g in ("probing", "minimal_sets", "training", "measures", "checks"))
        from ..probe import cached_probe, get_protocol
        from ..probe.answer_rule import rule_of

        try:
            self.protocol = get_protocol(protocol)
        except ValueError as e:
            raise UnlearnError(str(e)) from None
        probe_mode = po.mode or self.protocol.probe_mode
        k_mode = po.k_mode or self.protocol.k_mode
        sets = so.sets
        if sets is None:
            sets = "mdus" if so.exact is False else self.protocol.sets
        self.sets, self.tie = str(sets), so.tie or self.protocol.tie
        from ..probe.modes import check_fact_mode

        try:  # the registry's modes (a plug-in's is one), as a sweep file checks them
            check_fact_mode(probe_mode)
        except ValueError as e:
            raise UnlearnError(f"probe_mode: {e}, got {probe_mode!r}", field="probe_mode") from None
        if k_mode not in ("probed", "dataset"):
            raise UnlearnError(f"k_mode must be 'probed' or 'dataset', got {k_mode!r}")
        lr, forms, unlearn_forms = to.lr, po.forms, to.unlearn_forms
        self.bundle, self.kb = bundle, kb
        self.probe_mode, self.k_mode = probe_mode, k_mode
        #: how the methods train (``training.lr``: the explicit rate, checked by the rule, :mod:`.lr`)
        self.training = to
        self.lr, self.lora, self.lora_params = lr, to.lora, to.lora_params or LoraParams()
        self.batch_size, self.seed, self.progress = po.batch_size, seed, progress
        from ..kg.forms import parse_selection

        for name, sel in (("forms", forms), ("unlearn_forms", unlearn_forms)):
            if sel is not None:
                parse_selection(kb, sel, flag=name)
        self.forms, self.unlearn_forms = forms, unlearn_forms
        #: what every probe of the primary kind passes: the forms, when not the primary question
        self._probe_kw = {} if forms in (None, "default") else {"forms": forms}
        #: the checks after unlearning, checked before any work (:attr:`checks` runs them)
        self.check_spec = CheckSpec.build(probe_mode, adversarial=co.adversarial, attacks=co.attacks,
                                          modes=co.modes, calibration=co.calibration)
        bundle.model.eval()
        bundle.answer_rule = rule_of(self.protocol)  # when a generated answer counts (the protocol's)
        #: called at every point as ``hook(points, step, forgotten)``, the weights at the point (a
        #: sweep's per-point controls, :mod:`deepunlearn.bench.point_controls`)
        self.point_hooks: list = []
        self.baseline = cached_probe(bundle, kb, mode=probe_mode, cache_dir=po.cache_dir, batch_size=po.batch_size,
                                     progress=progress, **self._probe_kw)
        self.known: frozenset[int] = (
            frozenset(int(i) for i in self.baseline.known_ids()) if k_mode == "probed" else frozenset(range(len(kb)))
        )
        self._probe_ids = sorted(self.known)
        self.evaluator = evaluator(kb, rules, self._probe_ids if k_mode == "probed" else None, self.sets,
                                    self.tie, so.seeds)
        # LoRA mode never changes the base weights: the adapter is removed instead.
        self.snapshot = None if to.lora else WeightSnapshot(bundle.model, device=to.snapshot_device)
        self._collateral = None
        #: facts no run's retain term or healing trains on (sequential requests: the earlier targets' sets)
        self.protected: frozenset[int] = frozenset()
        from .baselines import Baselines

        self.baselines = Baselines(bundle, kb, self.known, self.evaluator, self.point_for, probe_mode=probe_mode,
                                   batch_size=po.batch_size, seed=seed, progress=progress, measures=mo)
        self.sampler = AccuracySampler(kb, self.known, self.evaluator, self.point_for, mo.accuracy, mo.accuracy_sample,
                                       seed, protocol=self.protocol.name, full_only=(
            "scores" if self.baselines.on else "the adversarial and attack checks" if self.check_spec.active else None))

    # ------------------------------------------------------------------ pieces
    def unlearner(self, method: str | Unlearner, grid: Sequence[float] | None = None,
                  params: MethodParams | None = None) -> Unlearner:
        """A method instance with its grid (default: the paper's) and ``params`` (a method's
        typed ``Params``, as a sweep file's ``[params.METHOD]`` gives them; None: its defaults)."""
        if isinstance(method, Unlearner):
            return method if grid is None else type(method)(method.params, grid=list(grid))
        return get_method(method)(params, **({"grid": list(grid)} if grid is not None else {}))

    def known_among(self, ids: Sequence[int], model_fn=None) -> set[int]:
        """Which of ``ids`` the model answers now."""
        from ..probe import probe

        ids = sorted({int(i) for i in ids})
        if not ids:
            return set()
        result = probe(self.bundle, self.kb, ids, mode=self.probe_mode, batch_size=self.batch_size,
                       model_fn=model_fn, progress=False, **self._probe_kw)
        return {int(i) for i in result.known_ids()}

    def known_after(self, model_fn=None) -> set[int]:
        """The facts of K the model answers now (``model_fn`` replaces its forward, as for WHP)."""
        return self.known_among(self._probe_ids, model_fn)

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        target: int | str,
        method: str | Unlearner,
        grid: Sequence[float] | None = None,
        skip_params: Iterable[float] = (),
        params: MethodParams | None = None,
        seed: int | None = None,
    ) -> Iterator[Point]:
        """Unlearn ``target`` with ``method`` and yield one :class:`Point` per grid value.

        ``seed`` seeds torch, numpy and ``random`` right before the trajectory (dropout in
        GPT-2-style models, any sampling), so the same seed gives the same points.

        The trajectory passes through every grid value; those in ``skip_params`` (already
        measured elsewhere) are neither probed nor evaluated, and the run stops after the last
        point still wanted. The original weights are back when the iterator finishes or is closed.
        Checks happen at the call, before any work: :class:`TargetNotKnownError` if the target is
        not in K, :class:`UnlearnError` for an unknown method, a bad grid or a method without
        LoRA support in LoRA mode.
        """
        t = self.known_target(target)
        u, values, skip, n_todo = self.prepare(method, grid, params, skip_params)
        return self._run(t, u, values, skip, n_todo, seed)

    def known_target(self, target: int | str, field: str | None = None) -> int:
        """The fact id of ``target``; :class:`TargetNotKnownError` if it is not in K."""
        t = self.kb.resolve(target)
        if t not in self.known:
            raise TargetNotKnownError(
                f"target {t} {list(self.kb.facts[t])} is not known by the model before unlearning "
                f"(K holds {len(self.known)} of {len(self.kb)} facts, k_mode={self.k_mode!r}): nothing to unlearn",
                field=field)
        return t

    def prepare(self, method, grid=None, params=None, skip_params=()) -> tuple[Unlearner, list[float], set[float], int]:
        """The method instance, its grid values, the values to skip and how many points remain;
        refuses a method without LoRA support in LoRA mode."""
        u = self.unlearner(method, grid, params)
        if self.lora and not u.supports_lora:
            raise UnlearnError(f"LoRA mode supports {', '.join(lora_methods())}, not {u.name!r}")
        values = u.check_grid(u.params.grid)
        skip = {float(s) for s in skip_params}
        return u, values, skip, sum(1 for v in values if float(v) not in skip)

    def optimiser(self, u: Unlearner) -> OptimiserConfig:
        """The optimiser settings of a run of ``u``: its rate by the rule of :mod:`.lr` (the
        method's own ``lr``, else ``TrainOptions.lr``, as given), the method's own optimisation
        settings where it sets them, else the protocol's."""
        return optimiser_config(u, lr=self.training.lr, lora=self.lora, bundle=self.bundle, protocol=self.protocol)

    def session(self, u: Unlearner, target: int | Sequence[int], forget: Sequence[int] | None = None) -> Session:
        """The :class:`Session` a run of ``u`` works in: :meth:`optimiser`'s settings, the forget
        set (``forget``, default the target(s)) as its batch, a seeded retain sampler when the
        method uses a retain term (:func:`~.run_session.retain_sampler`) and the rules context
        (:class:`~.deep.DeepContext`) for rule-aware methods."""
        from .data import row_keys

        targets, forget_ids = forget_batch(target, forget)
        kb, forms = self.kb, self.unlearn_forms
        session = Session(self.bundle.model, self.encode(forget_ids), optimiser=self.optimiser(u),
                          snapshot=self.snapshot, forget_ids=forget_ids, targets=targets, encode=self.encode,
                          encode_pairs=self.encode_pairs, row_keys=lambda ids: row_keys(kb, ids, forms),
                          qa=lambda ids: [(p.question, p.answer) for p in (kb.probe(int(i)) for i in ids)])
        if u.needs_rules:
            session.rules = self.deep_context(targets, choice=getattr(u.params, "choice", "fewest"))
        if u.uses_retain:
            avoid = [f for t in targets for f in self.chosen_set(t)] + sorted(self.protected)
            session.retain = retain_sampler(self.encode, self.known, forget_ids, avoid, u.params.retain_size,
                                            self.seed, targets)
        return session

    def encode(self, ids: Sequence[int]) -> dict:
        """The facts encoded as in finetuning (answer-only labels), collated on the model's device:
        one row per fact, or with ``unlearn_forms`` one row per selected form."""
        from .data import encode_facts

        return encode_facts(self.bundle, self.kb, ids, self.unlearn_forms)

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> dict:
        """(question, answer) pairs encoded as in finetuning, collated on the model's device."""
        from .data import encode_pair_batch

        return encode_pair_batch(self.bundle, pairs)

    def _run(self, t: int, u: Unlearner, values: list[float], skip: set[float], n_todo: int,
             seed: int | None = None) -> Iterator[Point]:
        for points in self.steps([t], u, values, skip, n_todo, seed, sample=self.sampler.sampled):
            yield points[0]

    def steps(self, targets: Sequence[int], u: Unlearner, values: list[float], skip: set[float], n_todo: int,
              seed: int | None = None, restore: bool = True, sample: bool = False) -> Iterator[list[Point]]:
        """The trajectory of ``u`` forgetting ``targets`` together: per grid value not in
        ``skip``, one :class:`Point` per target (a single target also gets its measures). With
        ``restore=False`` the weights stay unlearned afterwards (sequential requests); ``sample``: one
        target's points probe what ``self.sampler`` plans."""
        from tqdm.auto import tqdm

        if n_todo == 0:
            return
        session = self.session(u, targets)
        lr = session.optimiser.lr
        # before the weights change (a retain model is trained once)
        reference = self.baselines.reference(targets[0]) if len(targets) == 1 else None
        if seed is not None:
            seed_everything(seed)
        label = f"target {targets[0]}" if len(targets) == 1 else f"{len(targets)} targets"
        bar = tqdm(total=n_todo, desc=f"{u.name} {label}", file=sys.stderr, disable=not self.progress, leave=False)
        steps = None
        t0 = time.perf_counter()
        try:
            if self.lora:
                session.lora = LoraAdapter(self.bundle.model, self.lora_params, seed=self.seed)
            steps = u.trajectory(session, values)
            left = n_todo
            for step in steps:
                if float(step.param) in skip:
                    continue
                yield self._points(targets, u, step, lr, reference, t0, last=left == 1, sample=sample)
                bar.update()
                left -= 1
                if left == 0:
                    break
        finally:
            if steps is not None:
                steps.close()  # run the method's own clean-up (WHP frees its reinforced copy)
            if restore:
                session.restore()
            bar.close()

    def original_point(self, target: int | str) -> Point:
        """The ``original`` baseline row: the model before unlearning, with its measures."""
        return self.baselines.original_point(self.kb.resolve(target))

    def retrain_point(self, target: int | str) -> Point:
        """The ``retrain`` baseline row: the retain model trained without the target's reference
        set, evaluated like a grid point (needs ``reference="retrain"``)."""
        return self.baselines.retrain_point(self.kb.resolve(target))

    def _points(self, targets: Sequence[int], u: Unlearner | str, step, lr: float | None, reference,
                t0: float, last: bool = False, sample: bool = False) -> list[Point]:
        if sample:  # one target: what the sampler plans for it
            probed = self.sampler.plan(targets[0])["probe"]
            forgotten = sorted(set(probed) - self.known_among(probed, step.model_fn))
        else:
            forgotten = sorted(self.known - self.known_after(step.model_fn))
        name, param = getattr(u, "name", u), number(step.param)
        if sample:
            points = [self.sampler.point(targets[0], name, param, forgotten, lr)]
        elif len(targets) == 1:
            points = [self.point_for(targets[0], name, param, forgotten, lr,
                                     self.baselines.measure(targets[0], step.model_fn, forgotten, reference))]
        else:
            points = [self.point_for(t, name, param, forgotten, lr) for t in targets]
            union = {f for p in points for f in p.set}
            parts = self.evaluator.accuracies(union, forgotten)
            for p in points:  # the batch's accuracy: K minus every target's set
                p.accuracy, p.accuracy_rule, p.accuracy_other = float(parts.overall), opt(parts.rule), opt(parts.other)
                p.accuracy_groups = {g: opt(a) for g, a in parts.groups.items()}
        seconds = round(time.perf_counter() - t0, 3)
        for p in points:
            p.notes.update(deep=self.deep(p.target, forgotten), seconds=seconds, **getattr(step, "info", {}),
                           **self.soft(p.target, forgotten))
        for hook in self.point_hooks:
            hook(points, step, forgotten)
        self.checks.annotate(points, targets, step, forgotten, last=last, lr=lr)
        return points

    def point_for(self, target: int, method: str, param, forgotten: list[int], lr: float | None,
                  measure=None, weights=None) -> Point:
        """A :class:`Point` from the facts of K lost; ``measure(set_ids)`` gives its measures
        (``weights``: a sample's, :mod:`.sampled`)."""
        ev = self.evaluator.evaluate(target, forgotten, weights=weights)
        return Point.from_evaluation(ev, method, param, forgotten, lr, None if measure is None else measure(ev.set))
