"""The probe modes: one :class:`ProbeModeSpec` per mode, registered here (torch-free; docs/design.md
section 2). Every command-line choice and help text, config field, default form selection, the
modes ``any`` combines and the probe's dispatch are read from the registry.

>>> MODES
('exact', 'generate', 'yesno', 'rank', 'any', 'compose')
>>> check_mode("rank"), ANY_MODES
('rank', ('exact', 'yesno', 'rank', 'generate'))
>>> FACT_MODES
('exact', 'generate', 'yesno', 'rank', 'any')
>>> probe_mode("yesno").forms, probe_mode("rank").in_any
('all', True)
>>> check_mode("guess")
Traceback (most recent call last):
...
ValueError: unknown probe mode 'guess': expected one of exact, generate, yesno, rank, any, compose

A mode of another package is one spec (its scorer lives wherever it likes, imported only when
the mode probes)::

    register_probe_mode(ProbeModeSpec(
        name="toy", help="the teacher-forced greedy answer is the gold answer on some selected form",
        forms="all", kinds=("qa", "statement"), score="my_package.toy:score"))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal

#: the form kinds the text modes ask (``deepunlearn.kg.forms.FORM_KINDS`` less ``yesno``)
TEXT_KINDS = ("qa", "statement")


@dataclass(frozen=True)
class ProbeModeSpec:
    """One probe mode: what it is called, what "known" means under it, and how the probe asks it.

    ``score``, ``asks`` and ``evidence`` are callables or ``"module:function"`` paths, imported
    when the mode first probes (so a spec stays torch-free).

    Attributes
    ----------
    name : str
        The mode's name (``--mode NAME``, ``probe_mode = "NAME"``).
    help : str
        What "known" means under it, one line (every help text that lists the modes).
    forms : str
        The form selection it probes when none is given (``deepunlearn.kg.forms.select_forms``).
    kinds : tuple of str
        The form kinds it selects (``("qa", "statement")``, ``("yesno",)``).
    score : callable or str, optional
        ``score(run, forms) -> (hits, outputs or None)``: its verdict per asked form, ``run`` the
        probe's passes (:class:`deepunlearn.probe.forms_probe.Runner`: ``teacher_forced``,
        ``generate``, ``yesno``, ``rank``). Required unless ``aggregate`` or ``derived``.
    asks : callable or str, optional
        ``asks(kb, form) -> bool``: which forms of ``kinds`` it asks (default: every one).
    known_when : "any" or "all"
        A fact is known when any of its asked forms hits, or when it has one and all do.
    in_any : bool
        ``any`` combines it.
    cost : int
        Its place in ``any``'s run order (cheapest first; each mode sees the facts still unknown).
    decodes : bool
        It decodes new tokens: its result keeps each fact's output and batches leave room for
        the decoding cache.
    teacher_forced : bool
        Its scorer reads the teacher-forced pass every probe makes for the facts'
        log-probabilities, which then covers every asked form instead of each fact's first.
    plain : bool
        Without a form selection the probe asks it on each fact's primary question (teacher-forced
        argmax, or greedy decoding when it ``decodes``); only such a mode can be a protocol's.
    evidence : callable or str, optional
        ``evidence(run, forms) -> (scores, hits)`` per asked form: the continuous score that
        calibration thresholds (:mod:`deepunlearn.probe.evidence`); none: calibrated verdicts do
        not cover the mode.
    aggregate : bool
        It combines the modes with ``in_any`` over every form kind (the mode ``any``).
    derived : bool
        It asks derived facts through the rules and needs the compose questions (the mode
        ``compose``); the primary probe of unlearning takes every other mode.
    """

    name: str
    help: str
    forms: str
    kinds: tuple[str, ...] = ()
    score: Callable | str | None = None
    asks: Callable | str | None = None
    known_when: Literal["any", "all"] = "any"
    in_any: bool = False
    cost: int = 0
    decodes: bool = False
    teacher_forced: bool = False
    plain: bool = False
    evidence: Callable | str | None = None
    aggregate: bool = False
    derived: bool = False

    def scorer(self) -> Callable:
        """``score`` as a callable."""
        return _load(self.score, self.name, "score")

    def asker(self) -> Callable:
        """``asks`` as a callable (every form when none)."""
        return _every if self.asks is None else _load(self.asks, self.name, "asks")

    def evidence_fn(self) -> Callable | None:
        """``evidence`` as a callable, or None."""
        return None if self.evidence is None else _load(self.evidence, self.name, "evidence")


def _every(kb, form) -> bool:
    return True


def _load(ref: Callable | str, mode: str, field: str) -> Callable:
    if callable(ref):
        return ref
    module, _, attr = str(ref).partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise TypeError(f"probe mode {mode!r}: {field} {ref!r} cannot be imported ({e})") from None


_REGISTRY: dict[str, ProbeModeSpec] = {}


def check_spec(spec: Any) -> ProbeModeSpec:
    """``spec`` if it is a complete :class:`ProbeModeSpec`, else a ``TypeError`` naming it and
    what it lacks (one line)."""
    if not isinstance(spec, ProbeModeSpec):
        raise TypeError(f"register_probe_mode: expected a ProbeModeSpec, got {type(spec).__name__}")
    name = spec.name if isinstance(spec.name, str) else ""
    where = f"probe mode spec {name!r}" if name.strip() else f"probe mode spec {spec!r}"
    if not name.strip() or not name.replace("_", "").isalnum():
        raise TypeError(f"{where}: the name must be a non-empty word (letters, digits, _)")
    lacks = [f.name for f in fields(spec) if f.name in ("help", "forms")
             and (not isinstance(getattr(spec, f.name), str) or not getattr(spec, f.name).strip())]
    if not (spec.aggregate or spec.derived):
        lacks += [k for k in ("kinds", "score") if not getattr(spec, k)]
    if lacks:
        raise TypeError(f"{where}: lacks {', '.join(lacks)}")
    if "\n" in spec.help:
        raise TypeError(f"{where}: help must be one line")
    if spec.known_when not in ("any", "all"):
        raise TypeError(f"{where}: known_when {spec.known_when!r} is not 'any' or 'all'")
    if spec.aggregate and spec.derived:
        raise TypeError(f"{where}: a mode is aggregate or derived, not both")
    if (spec.aggregate or spec.derived) and (spec.in_any or spec.plain):
        raise TypeError(f"{where}: an aggregate or derived mode is neither in_any nor plain")
    return spec


def register_probe_mode(spec: ProbeModeSpec) -> ProbeModeSpec:
    """Register ``spec`` (checked by :func:`check_spec`; a name taken by another spec is refused)."""
    check_spec(spec)
    if _REGISTRY.get(spec.name, spec) != spec:
        raise TypeError(f"probe mode spec {spec.name!r}: a probe mode of that name is registered already")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_probe_mode(name: str) -> None:
    """Take the mode ``name`` out of the registry (a built-in mode is refused)."""
    if name in BUILTIN_NAMES:
        raise TypeError(f"probe mode {name!r} is built in")
    _REGISTRY.pop(name, None)


def probe_modes() -> tuple[ProbeModeSpec, ...]:
    """Every registered mode, in registration order (the built-in modes first)."""
    return tuple(_REGISTRY.values())


def probe_mode(name: str) -> ProbeModeSpec:
    """The spec of the mode ``name``; an unknown one is :func:`check_mode`'s ``ValueError``."""
    return _REGISTRY[check_mode(name)]


def mode_names(*, fact: bool = False, protocol: bool = False) -> tuple[str, ...]:
    """The registered modes' names: all, those a fact is asked under (``fact``: every mode but a
    derived one), or those a protocol may name (``protocol``)."""
    return tuple(s.name for s in _REGISTRY.values()
                 if not (fact and s.derived) and not (protocol and not s.plain))


def any_modes() -> tuple[str, ...]:
    """The modes ``any`` combines, in its run order (cheapest first)."""
    members = [s for s in _REGISTRY.values() if s.in_any]
    return tuple(s.name for s in sorted(members, key=lambda s: s.cost))


def check_fact_mode(mode: Any) -> str:
    """``mode`` if a fact can be asked under it (a registered mode that is not derived: a
    plug-in's mode is one), else a ``ValueError`` in the wording of a choice, what every entry
    that takes a probe mode (a sweep file, ``TargetRunner``) says.

    >>> check_fact_mode("rank")
    'rank'
    >>> check_fact_mode("compose")
    Traceback (most recent call last):
    ...
    ValueError: Input should be 'exact', 'generate', ... or 'any'
    """
    names = mode_names(fact=True)
    if mode not in names:
        raise ValueError("Input should be " + ", ".join(repr(n) for n in names[:-1]) + f" or {names[-1]!r}")
    return mode


def check_mode(mode: str) -> str:
    """``mode`` if it is a registered mode, else a ``ValueError`` naming the choices (the
    entries check the user's mode first; one reaching the probe unchecked is a bug)."""
    if mode not in _REGISTRY:
        raise ValueError(f"unknown probe mode {mode!r}: expected one of {', '.join(_REGISTRY)}")
    return mode


def modes_help(modes: tuple[str, ...] | None = None) -> str:
    """``exact: ...; generate: ...`` for help texts: what "known" means under each of ``modes``
    (default: every registered mode).

    >>> modes_help(("exact", "rank"))
    'exact: the greedy (teacher-forced) answer is the gold answer; rank: the answer ranks first among the answers of its type'
    """
    return "; ".join(f"{m}: {probe_mode(m).help}" for m in (mode_names() if modes is None else modes))


BUILTIN: tuple[ProbeModeSpec, ...] = (
    ProbeModeSpec("exact", "the greedy (teacher-forced) answer is the gold answer", "default", TEXT_KINDS,
                  score="deepunlearn.probe.forms_probe:score_exact", in_any=True, cost=0, teacher_forced=True,
                  plain=True, evidence="deepunlearn.probe.evidence:logprob_evidence"),
    ProbeModeSpec("generate", "the answer appears in the generated tokens", "default", TEXT_KINDS,
                  score="deepunlearn.probe.forms_probe:score_generate", in_any=True, cost=3, decodes=True,
                  plain=True, evidence="deepunlearn.probe.evidence:generate_evidence"),
    ProbeModeSpec("yesno", "the yes/no forms are answered right", "all", ("yesno",),
                  score="deepunlearn.probe.forms_probe:score_yesno", known_when="all", in_any=True, cost=1,
                  evidence="deepunlearn.probe.evidence:yesno_evidence"),
    ProbeModeSpec("rank", "the answer ranks first among the answers of its type", "default", TEXT_KINDS,
                  score="deepunlearn.probe.forms_probe:score_rank", asks="deepunlearn.probe.forms_probe:rankable",
                  in_any=True, cost=2, evidence="deepunlearn.probe.evidence:rank_evidence"),
    ProbeModeSpec("any", "known under any mode on any form", "all", aggregate=True),
    ProbeModeSpec("compose", "a derived fact is answered (generated, as in generate) through a multi-hop question "
                  "that composes the body of a rule deriving it (deepunlearn.kg.compose)", "default",
                  decodes=True, derived=True),
)
for _spec in BUILTIN:
    register_probe_mode(_spec)
BUILTIN_NAMES = tuple(s.name for s in BUILTIN)

# The built-in modes as tables (values derived from the specs above, kept for their importers).
#: every built-in mode, with what "known" means under it
DESCRIPTIONS = {s.name: s.help for s in BUILTIN}
MODES: tuple[str, ...] = mode_names()
Mode = Literal[MODES]  # type: ignore[valid-type]
#: the modes that ask a fact through its own forms: every mode but ``compose``, which asks derived
#: facts through the rules (``probe --mode compose --compose FILE``; after unlearning, the
#: model-derived recall of :mod:`deepunlearn.unlearn.derived`). The primary probe of unlearning,
#: attacks and sweeps takes one of these.
FACT_MODES: tuple[str, ...] = mode_names(fact=True)
FactMode = Literal[FACT_MODES]  # type: ignore[valid-type]
#: the modes ``any`` combines, in the order it runs them (cheapest first)
ANY_MODES: tuple[str, ...] = any_modes()
AnyMode = Literal[ANY_MODES]  # type: ignore[valid-type]
#: the form selection each mode probes when none is given (``deepunlearn.kg.forms``)
DEFAULT_SELECTION = {s.name: s.forms for s in BUILTIN}
#: the modes a protocol may name (the others probe over forms)
PROTOCOL_MODES: tuple[str, ...] = mode_names(protocol=True)
