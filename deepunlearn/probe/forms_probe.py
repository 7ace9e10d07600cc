"""Probing over a fact's forms and the probe modes yesno, rank and any.

:func:`~deepunlearn.probe.probing.probe` comes here when it is given a form selection other
than ``default`` (:func:`deepunlearn.kg.forms.select_forms`) or one of the modes below; with
the default selection, ``exact`` and ``generate`` keep today's path. Per mode, which forms are
asked and when a fact is known:

``exact``
    qa and statement forms; teacher-forced, known on a form iff the argmax is the gold token at
    every continuation position (:mod:`~deepunlearn.probe.form_encoding`: answer tag + answer,
    or a statement's whitespace + answer span).
``generate``
    qa and statement forms; greedy :data:`~deepunlearn.probe.probing.MAX_NEW_TOKENS` tokens
    after the form's generate prompt, known on a form iff ``answer.lower()`` is in the output.
``yesno``
    yes/no forms only; on each, ``log P(answer_part(s))`` for the spellings ``yes``, ``Yes`` and
    ``no``, ``No`` under the bundle's answer format, each side the logsumexp of its two
    spellings (``scipy.special.logsumexp``); the form is answered right iff the larger side is
    its answer (a tie is wrong). The true form's answer is yes, the distractor's no.
``rank``
    qa and statement forms whose answer is the fact's primary answer (others are not rankable:
    not known, not counted as probed); the candidates are the answers of the fact's type
    (:func:`deepunlearn.kg.candidates.answer_candidates`), each scored by its length-normalised
    probability ``exp(sum log p / n tokens)`` after the shared prefix, as
    :mod:`deepunlearn.probe.scores` does (one row builder,
    :func:`~deepunlearn.probe.scoring.candidate_rows`); known iff the gold answer's rank
    (``scipy.stats.rankdata``, average ties) is 1, so a tie for first is not known. It catches a
    fact that greedy decoding no longer emits but the model still prefers.
``any``
    the adversarial aggregate: known iff known under any of ``exact``, ``yesno``, ``rank``,
    ``generate`` (or the ``any_modes`` given) on any selected form. Modes run cheapest first
    in that order, each only on the facts still unknown.

A fact is known under exact, generate and rank iff it is known on ANY of its selected forms;
under yesno iff it has at least one selected yes/no form and EVERY one is answered right, so a
model that always says yes (or always no) knows nothing when a distractor is selected. A fact
without a form the mode can use is not known under it. Default selection when ``forms`` is
``None``: ``default`` (the primary form) for exact, generate and rank; ``all`` for yesno and
any (the primary form is no yes/no form).

Cost per fact with ``F`` selected forms of the mode's kinds (batched, never one pass per fact;
``benchmarks/bench_probe_modes.py`` measures it): ``exact`` F teacher-forced rows (the answer
positions' logits only); ``generate`` F prompt rows x 10 decoding steps, plus one teacher-forced
row for the fact's log-probability; ``yesno`` one prefix row per yes/no form (the four
spellings are one token each on the tiny tokenizers, so they come from the prefix's last
logits; a multi-token spelling adds one cached row); ``rank`` one prefix row per rankable form
plus one cached row per candidate of two or more tokens, plus one teacher-forced row; ``any``
the sum of the modes' costs over the facts each one still sees.
"""

from __future__ import annotations

import math
import sys
from typing import Callable, Sequence

import numpy as np

from ..kg.forms import FORM_KINDS, Form, select_forms
from ..kg.kb import KnowledgeBase
from .form_encoding import encode_forms, form_prompt_ids, rank_texts

from .modes import ANY_MODES, DEFAULT_SELECTION, TEXT_KINDS, any_modes as _any_modes, check_mode, probe_mode  # noqa: E402,F401,E501  (re-exported)

YES, NO = ("yes", "Yes"), ("no", "No")


def check_any_modes(any_modes: Sequence[str] | None) -> tuple[str, ...]:
    """The modes of ``any`` in run order; unknown or no modes are a ``ValueError``."""
    members = _any_modes()
    if any_modes is None:
        return members
    modes = [any_modes] if isinstance(any_modes, str) else list(any_modes)
    bad = [m for m in modes if m not in members]
    if bad or not modes:
        raise ValueError(f"any_modes: expected some of {', '.join(members)}, got {any_modes!r}")
    return tuple(m for m in members if m in modes)


class Runner:
    """One probe call's state: the bundle, the model callable, the device and the batch size."""

    def __init__(self, bundle, kb: KnowledgeBase, model_fn, device, batch_size: int, bar):
        from .passes import logits_fn

        self.bundle, self.kb, self.model_fn, self.device = bundle, kb, model_fn, device
        self.batch_size, self.bar = batch_size, bar
        self.default_fn = logits_fn(bundle.model)
        self.cache = _form_cache(bundle, kb)
        self.tf_done: dict[Form, tuple[float, bool]] = {}

    def encoded(self, purpose: str, forms: list[Form], compute: Callable[[list[Form]], list]) -> list:
        todo = [f for f in dict.fromkeys(forms) if (purpose, f) not in self.cache]
        if todo:
            for f, v in zip(todo, compute(todo)):
                self.cache[(purpose, f)] = v
        return [self.cache[(purpose, f)] for f in forms]

    def _order(self, lengths: list[int]) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda j: (-lengths[j], j))
        return [order[s:s + self.batch_size] for s in range(0, len(order), self.batch_size)]

    def teacher_forced(self, forms: list[Form]) -> tuple[np.ndarray, np.ndarray]:
        """Continuation log-probability and "argmax is gold everywhere" per form (each form's
        pass runs once per probe call: the modes reading it share it)."""
        from .passes import teacher_forced

        b = self.bundle
        todo = [f for f in dict.fromkeys(forms) if f not in self.tf_done]
        rows = self.encoded("tf", todo, lambda fs: encode_forms(b.tokenizer, b.prompt, fs))
        blocks = self.blocks(todo, rows)
        lp, hit = np.zeros(len(rows)), np.zeros(len(rows), dtype=bool)
        for batch in self._order([len(p) + len(a) for p, a in rows]):
            got_lp, got_hit = teacher_forced([rows[j] for j in batch], self.model_fn, self.default_fn, b.pad_id,
                                              self.device, None if blocks is None else [blocks[j] for j in batch])
            lp[batch], hit[batch] = got_lp, got_hit
        self.tf_done.update((f, (float(v), bool(h))) for f, v, h in zip(todo, lp, hit))
        got = [self.tf_done[f] for f in forms]
        return np.array([v for v, _ in got], dtype=float), np.array([h for _, h in got], dtype=bool)

    def blocks(self, forms: list[Form], rows: list) -> list | None:
        """Per form: the tokens its other right answers continue with, set aside by the exact
        rule (:func:`~deepunlearn.probe.passes.answer_blocks`); ``None`` when the KB judges
        another right answer wrong."""
        from ..kg.other_answers import other_answers_rule, other_forms
        from .passes import answer_blocks

        if other_answers_rule(self.kb) != "aside":
            return None
        b = self.bundle

        def build(fs):
            out = []
            for f, row in zip(fs, self.encoded("tf", fs, None)):
                others = other_forms(self.kb, f)
                out.append(answer_blocks(row, encode_forms(b.tokenizer, b.prompt, others)) if others else [])
            return out

        return self.encoded("tf-blocks", forms, build)

    def generate(self, forms: list[Form]) -> tuple[list[str], np.ndarray]:
        """Greedy output and "answer in output" per form."""
        from .passes import generate_answers

        b = self.bundle
        prompts = self.encoded("gen", forms, lambda fs: form_prompt_ids(b.tokenizer, b.prompt, fs))
        texts = [""] * len(forms)
        for batch in self._order([len(p) for p in prompts]):
            for j, t in zip(batch, generate_answers(b, [prompts[j] for j in batch], self.model_fn, self.device)):
                texts[j] = t
        from .answer_rule import rule_of_bundle

        rule = rule_of_bundle(b)
        return texts, np.array([rule.matches(f.answer, t, self.kb.facts[f.fact_id][0])
                                     for f, t in zip(forms, texts)], dtype=bool)

    def candidate_logprobs(self, rows) -> list:
        """Summed log-probability of each candidate of each row (after its shared prefix)."""
        from .scoring import full_sequence_logprobs, shared_prefix_logprobs

        out: list = [None] * len(rows)
        for batch in self._order([len(r.prefix) for r in rows]):
            b_rows = [rows[j] for j in batch]
            if self.model_fn is None:
                got = shared_prefix_logprobs(b_rows, self.bundle.model, self.bundle.pad_id, self.device,
                                             row_budget=4 * self.batch_size)
            else:
                got = full_sequence_logprobs(b_rows, self.model_fn, self.bundle.pad_id, self.device,
                                             row_budget=4 * self.batch_size)
            for j, g in zip(batch, got):
                out[j] = (np.array([a.sum() for a in g.answers]), np.array([len(a) for a in g.answers], dtype=float))
        return out

    def yesno(self, forms: list[Form]) -> np.ndarray:
        """Per yes/no form: answered right (module docstring)."""
        from scipy.special import logsumexp

        from .scoring import candidate_rows

        b = self.bundle
        rows = self.encoded("yn", forms, lambda fs: candidate_rows(
            b.tokenizer, [([b.prompt.text(f.text, s) for s in YES + NO], b.prompt.text(f.text, "")) for f in fs],
            what=[f"form {f.name!r} of fact {f.fact_id}" for f in fs]))
        right = np.zeros(len(forms), dtype=bool)
        for j, (f, (sums, _)) in enumerate(zip(forms, self.candidate_logprobs(rows))):
            yes, no = logsumexp(sums[:len(YES)]), logsumexp(sums[len(YES):])
            right[j] = yes != no and (yes > no) == (f.answer == "yes")
        return right

    def rank(self, forms: list[Form]) -> np.ndarray:
        """Per rankable form: the gold answer ranks first among its type's candidates (less the
        other right answers the KB sets aside)."""
        from .scores import candidate_stats

        built = self.encoded("rank", forms, lambda fs: rank_rows(self.bundle, self.kb, fs))
        known = np.zeros(len(forms), dtype=bool)
        for j, ((sums, lens), (_, gold)) in enumerate(zip(self.candidate_logprobs([r for r, _ in built]), built)):
            rank = candidate_stats(np.exp(sums / lens), gold, [])[0]
            known[j] = rank == 1.0
        return known


def rank_rows(bundle, kb: KnowledgeBase, forms: list[Form]) -> list:
    """Per rankable form: its candidate row and the gold answer's place among the candidates,
    the answers of its type less the other right answers the KB sets aside
    (:func:`deepunlearn.kg.other_answers.form_others`). The rows of ``rank`` and of its evidence."""
    from ..kg.candidates import answer_candidates
    from ..kg.other_answers import form_others
    from .scoring import candidate_rows

    cands = []
    for f in forms:
        others = form_others(kb, f)
        cands.append([c for c in answer_candidates(kb, f.fact_id) if c not in others])
    rows = candidate_rows(bundle.tokenizer, [rank_texts(bundle.prompt, f, c) for f, c in zip(forms, cands)],
                          what=[f"form {f.name!r} of fact {f.fact_id}" for f in forms])
    return [(r, c.index(f.answer)) for f, r, c in zip(forms, rows, cands)]


def _form_cache(bundle, kb: KnowledgeBase) -> dict:
    """Encoded forms per (bundle, KB content, answer format): a sweep probes the same forms at
    every grid point."""
    from .fingerprint import kb_fingerprint

    caches = bundle.__dict__.setdefault("_form_cache", {})
    key = (kb_fingerprint(kb), bundle.prompt.model_dump_json(), id(bundle.tokenizer))
    if key not in caches:
        if len(caches) > 8:
            caches.clear()
        caches[key] = {}
    return caches[key]


def rankable(kb: KnowledgeBase, form: Form) -> bool:
    """A qa/statement form whose answer is its fact's primary answer (``rank`` mode)."""
    return form.kind != "yesno" and form.answer == kb.probe(form.fact_id).answer


#: the form kinds ``exact`` asks (every probe computes it, with the facts' log-probabilities)
EXACT_KINDS = TEXT_KINDS


# The scorers of the built-in modes (``ProbeModeSpec.score``): ``(hits, outputs or None)`` per form.
def score_exact(run: Runner, forms: list[Form]) -> tuple[np.ndarray, None]:
    """``exact``: the argmax is the gold token at every continuation position."""
    return run.teacher_forced(forms)[1], None


def score_generate(run: Runner, forms: list[Form]) -> tuple[np.ndarray, list[str]]:
    """``generate``: the answer is in the greedy output (the outputs are kept)."""
    texts, hits = run.generate(forms)
    return hits, texts


def score_yesno(run: Runner, forms: list[Form]) -> tuple[np.ndarray, None]:
    """``yesno``: the yes/no form is answered right."""
    return run.yesno(forms), None


def score_rank(run: Runner, forms: list[Form]) -> tuple[np.ndarray, None]:
    """``rank``: the gold answer ranks first among its type's candidates."""
    return run.rank(forms), None


def probe_forms(bundle, kb: KnowledgeBase, ids: np.ndarray, *, mode: str, forms: str | None,
                any_modes: Sequence[str] | None, batch_size, model_fn, progress: bool):
    """:func:`~deepunlearn.probe.probing.probe` over forms (module docstring); ``ids`` checked."""
    import torch
    from tqdm.auto import tqdm

    from .batching import resolve_batch_size
    from .passes import model_device
    from .result import MAX_NEW_TOKENS, ProbeResult

    spec = probe_mode(mode)
    modes = check_any_modes(any_modes) if spec.aggregate else (mode,)
    specs = [probe_mode(m) for m in modes]
    if any(s.aggregate or s.derived for s in specs):  # the entries check the mode: reaching here is a bug
        raise ValueError(f"probe_forms: no dispatch for probe mode {mode!r}")
    kinds = FORM_KINDS if spec.aggregate else spec.kinds
    uniq = list(dict.fromkeys(int(i) for i in ids))
    sel = select_forms(kb, spec.forms if forms is None else forms, uniq, kinds=kinds)
    text = {i: [f for f in sel.forms[i] if f.kind in TEXT_KINDS] for i in uniq}
    known = dict.fromkeys(uniq, False)
    logprob = dict.fromkeys(uniq, math.nan)
    outputs = dict.fromkeys(uniq, "") if spec.decodes else None
    per_form: dict[str, dict[str, list[int]]] = {}

    def count(forms_: list[Form], mode_: str, hits) -> None:
        for f, h in zip(forms_, hits):
            c = per_form.setdefault(f.name, {}).setdefault(mode_, [0, 0])
            c[0] += int(h)
            c[1] += 1

    model = bundle.model
    was_training = model.training
    model.eval()
    device = model_device(bundle)
    all_forms = [f for i in uniq for f in sel.forms[i]]
    # Characters bound tokens from above: batches sized on them are never too large.
    longest = max((len(bundle.prompt.text(f.text, f.answer)) for f in all_forms), default=1) + MAX_NEW_TOKENS
    batch_size = resolve_batch_size(batch_size, model, device, positions=longest, seq=longest,
                                    mode="generate" if any(s.decodes for s in specs) else "exact",
                                    model_fn=model_fn is not None)
    bar = tqdm(total=len(modes), desc=f"probe ({mode}, forms {sel.spec})", unit="mode", file=sys.stderr,
               disable=not progress, leave=False)
    run = Runner(bundle, kb, model_fn, device, batch_size, bar)
    try:
        with torch.inference_mode():
            # The log-probability of each fact's first text form (of every one when a mode reads the pass).
            every = any(s.teacher_forced for s in specs)
            tf_forms = [f for i in uniq for f in (text[i] if every else text[i][:1])]
            if tf_forms:
                for f, v in zip(tf_forms, run.teacher_forced(tf_forms)[0]):
                    if text[f.fact_id][0] is f:
                        logprob[f.fact_id] = float(v)
            for s in specs:
                todo = [i for i in uniq if not known[i]] if spec.aggregate else uniq
                asks = s.asker()
                fs = [f for i in todo for f in sel.forms[i] if f.kind in s.kinds and asks(kb, f)]
                hit, outs = s.scorer()(run, fs) if fs else (np.zeros(0, dtype=bool), None)
                count(fs, s.name, hit)
                if s.known_when == "all":  # known iff it has a form of the mode and every one hits
                    asked, missed = {f.fact_id for f in fs}, {f.fact_id for f, h in zip(fs, hit) if not h}
                    for i in todo:
                        known[i] = i in asked and i not in missed
                else:
                    for f, h in zip(fs, hit):
                        known[f.fact_id] |= bool(h)
                if outs is not None and outputs is not None:
                    for f, o in zip(fs, outs):
                        if text[f.fact_id][0] is f:
                            outputs[f.fact_id] = o
                bar.update(1)
    finally:
        bar.close()
        if was_training:
            model.train()
    return ProbeResult(fact_ids=ids, known=[known[int(i)] for i in ids], logprob=[logprob[int(i)] for i in ids],
                       outputs=None if outputs is None else [outputs[int(i)] for i in ids], mode=mode,
                       per_form=per_form, fallback=len(sel.fallback), forms=sel.spec)

