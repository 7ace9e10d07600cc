"""The outcome of probing (:class:`ProbeResult`) and its JSON form."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError, parse_json

#: The probe modes (:mod:`deepunlearn.probe.modes`).
from .modes import MODES, Mode  # noqa: E402,F401  (re-exported)
#: New tokens decoded in ``generate`` mode (the reference release's setting).
MAX_NEW_TOKENS = 10


@dataclass
class ProbeResult:
    """Per-fact outcome of probing: ``known[i]`` and ``logprob[i]`` belong to ``fact_ids[i]``;
    ``outputs[i]`` is the decoded generation (``generate`` mode only; over forms, the first
    selected form's).

    Probing over forms (:mod:`deepunlearn.probe.forms_probe`) also fills ``per_form`` =
    ``{form name: {mode: [known, probed]}}`` (the per-form verdicts over the distinct facts
    probed; for ``yesno`` per yes/no form, "known" = answered right), ``fallback`` (facts that
    got their primary form because the selection picked none of theirs) and ``forms`` (the
    selection); today's path leaves them ``None``, 0, ``None``. ``compose`` mode
    (:mod:`deepunlearn.probe.compose_probe`) also fills ``compose``: one record per compose
    question (its fact, rule, body facts, question, answer, output and whether it was answered)."""

    fact_ids: np.ndarray
    known: np.ndarray
    logprob: np.ndarray
    outputs: list[str] | None = None
    mode: str = "exact"
    per_form: dict[str, dict[str, list[int]]] | None = None
    fallback: int = 0
    forms: str | None = None
    compose: list[dict] | None = None

    def __post_init__(self) -> None:
        self.fact_ids = np.asarray(self.fact_ids, dtype=np.int64)
        self.known = np.asarray(self.known, dtype=bool)
        self.logprob = np.asarray(self.logprob, dtype=np.float64)
        n = len(self.fact_ids)
        if len(self.known) != n or len(self.logprob) != n or (self.outputs is not None and len(self.outputs) != n):
            raise ValueError("ProbeResult: fact_ids, known, logprob (and outputs) must have the same length")

    def __len__(self) -> int:
        return len(self.fact_ids)

    @property
    def total(self) -> int:
        return len(self.fact_ids)

    @property
    def n_known(self) -> int:
        return int(self.known.sum())

    @property
    def share(self) -> float:
        """Share of the probed facts that are known (0 when nothing was probed)."""
        return self.n_known / self.total if self.total else 0.0

    def known_ids(self) -> set[int]:
        """Fact ids the model knows: the model's estimated knowledge base."""
        return {int(i) for i in self.fact_ids[self.known]}

    def to_json(self) -> dict:
        """A JSON-ready dict (see :meth:`from_json`); a non-finite log-probability is ``None``."""
        return {
            "mode": self.mode,
            "fact_ids": [int(i) for i in self.fact_ids],
            "known": [bool(k) for k in self.known],
            "logprob": [float(x) if np.isfinite(x) else None for x in self.logprob],  # JSON has no NaN/inf
            "outputs": None if self.outputs is None else list(self.outputs),
            **({} if self.per_form is None and self.forms is None else {
                "forms": self.forms, "fallback": int(self.fallback),
                "per_form": None if self.per_form is None else
                {name: {m: [int(k), int(n)] for m, (k, n) in modes.items()} for name, modes in self.per_form.items()},
            }),
            **({} if self.compose is None else {"compose": list(self.compose)}),
        }

    @classmethod
    def from_json(cls, obj: dict | str, *, source: str = "probe result") -> "ProbeResult":
        """Read what :meth:`to_json` wrote (the dict or its JSON text). Anything else (not JSON,
        nested too deep, a missing or mistyped field, lists of different lengths) is a
        :class:`ProbeResultError` naming ``source`` and the field; ``null`` log-probabilities
        (a non-finite value written as JSON) read back as NaN."""
        if isinstance(obj, (str, bytes)):
            if isinstance(obj, bytes):
                try:
                    obj = obj.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ProbeResultError(f"{source}: not UTF-8 text (byte {e.start})") from None
            obj = parse_json(obj, source=source, error=ProbeResultError)
        if not isinstance(obj, dict):
            raise ProbeResultError(f"{source}: expected a JSON object, got {type(obj).__name__}")

        def field(name: str, ok, what: str, *, optional: bool = False) -> list | None:
            if name not in obj:
                if optional:
                    return None
                raise ProbeResultError(f"{source}: missing field {name!r}", field=name)
            v = obj[name]
            if optional and v is None:
                return None
            if not isinstance(v, list) or not all(ok(x) for x in v):
                raise ProbeResultError(f"{source}: field {name!r} must be a list of {what}", field=name)
            return v

        ids = field("fact_ids", lambda x: isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**62,
                    "fact ids (integers >= 0)")
        known = field("known", lambda x: isinstance(x, bool), "true/false")
        logprob = field("logprob", lambda x: x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)),
                        "numbers (or null)")
        outputs = field("outputs", lambda x: isinstance(x, str), "strings", optional=True)
        mode = obj.get("mode", "exact")
        if mode not in MODES:
            raise ProbeResultError(f"{source}: field 'mode' must be one of {MODES}, got {mode!r}", field="mode")
        n = len(ids)
        if len(known) != n or len(logprob) != n or (outputs is not None and len(outputs) != n):
            raise ProbeResultError(f"{source}: fact_ids, known, logprob (and outputs) must have the same length")
        per_form, fallback, forms = _form_fields(obj, source)
        compose = obj.get("compose")
        if compose is not None and not (isinstance(compose, list) and all(
                isinstance(r, dict) and isinstance(r.get("fact_id"), int) and isinstance(r.get("known"), bool)
                for r in compose)):
            raise ProbeResultError(f"{source}: field 'compose' must be a list of records with 'fact_id' and 'known'",
                                   field="compose")
        return cls(fact_ids=np.asarray(ids, dtype=np.int64), known=np.asarray(known, dtype=bool),
                   logprob=np.asarray([np.nan if x is None else float(x) for x in logprob], dtype=np.float64),
                   outputs=outputs, mode=mode, per_form=per_form, fallback=fallback, forms=forms, compose=compose)


class ProbeResultError(UserError, ValueError):
    """A stored probe result (a cache entry, a file) that cannot be read back."""




def _form_fields(obj: dict, source: str) -> tuple[dict | None, int, str | None]:
    """``per_form``, ``fallback`` and ``forms`` of a stored result (absent in older ones)."""
    count = lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0  # noqa: E731
    per_form = obj.get("per_form")
    if per_form is not None:
        ok = isinstance(per_form, dict) and all(
            isinstance(name, str) and isinstance(modes, dict) and all(
                m in MODES and isinstance(v, list) and len(v) == 2 and all(count(x) for x in v) and v[0] <= v[1]
                for m, v in modes.items())
            for name, modes in per_form.items())
        if not ok:
            raise ProbeResultError(f"{source}: field 'per_form' must map form names to {{mode: [known, probed]}} "
                                   "with 0 <= known <= probed", field="per_form")
        per_form = {name: {m: list(v) for m, v in modes.items()} for name, modes in per_form.items()}
    fallback = obj.get("fallback", 0)
    if not count(fallback):
        raise ProbeResultError(f"{source}: field 'fallback' must be an integer >= 0", field="fallback")
    forms = obj.get("forms")
    if forms is not None and not isinstance(forms, str):
        raise ProbeResultError(f"{source}: field 'forms' must be a string", field="forms")
    return per_form, fallback, forms
