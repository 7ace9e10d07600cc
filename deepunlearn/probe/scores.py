"""Per-fact likelihood scores: how much of a fact remains in a model, not just yes/no.

For each fact, from teacher-forced passes (:mod:`deepunlearn.probe.scoring`) and one greedy
decoding:

``logprob``, ``n_tokens``, ``prob``
    the summed log-probability of the answer's own tokens, their number ``|a|`` and TOFU's
    length-normalised probability ``P(a|q)^(1/|a|) = exp(logprob / |a|)``. The answer's tokens
    are the fact's full text (:func:`~deepunlearn.probe.prompts.encode_pairs`: question part +
    answer tag + answer, EOS not included) after its *prefix*: the longest common token prefix
    of that text, the text with the answer tag alone (``PromptFormat.text(q, "")``) and, with
    ``candidates``, every candidate's text; at most all but one token of each. For a tokenizer
    that splits at the question/tag/answer boundaries (all the reference's formats with the tiny
    word-level tokenizer, GPT-2 and Llama-3 BPE) the prefix is the question part plus the answer
    tag, so ``P(a|q)`` covers exactly the answer's tokens and does not depend on ``candidates``.
``rank``, ``n_candidates``, ``exposure``, ``mc_prob``
    among the answers of the fact's type (:func:`deepunlearn.kg.candidates.answer_candidates`,
    gold included): the gold answer's rank by normalised probability, 1 = most likely, ties
    sharing the average rank (``scipy.stats.rankdata(method="average")``); Baluta et al.'s
    exposure ``log2(n_candidates) - log2(rank)``; TOFU's multiple-choice probability
    ``prob / sum(prob of every candidate)`` (normalised probabilities).
``truth_ratio``
    TOFU's ``R = mean over perturbed â of P(â|q)^(1/|â|) / P(a|q)^(1/|a|)`` (the equation's
    arithmetic mean) over ``n_perturbed`` seeded wrong candidates
    (:func:`deepunlearn.kg.candidates.perturbed`), with the gold answer in the place of TOFU's
    paraphrase ã. Low = the model prefers the truth.
``rouge_l``, ``outputs``
    ROUGE-L recall (``rouge_score``, ``use_stemmer=True`` as TOFU) of the greedy output
    (:data:`~deepunlearn.probe.probing.MAX_NEW_TOKENS` new tokens after the question part, as
    generate-mode probing) against the gold answer.
``min_k``, ``ppl``, ``zlib``
    over every token of the fact's full text that has a prediction (all but the first):
    Min-K% Prob = the mean of the lowest ``k`` % token log-probabilities, ``int(n * k / 100)``
    of them as in the Min-K% code (``int(len(all_prob) * ratio)``) but at least one; ``ppl`` =
    ``exp(-mean token log-prob)``; ``zlib`` = ``ln(ppl) / len(zlib.compress(text))`` as in the
    Min-K% code, ``text`` = question part + answer part in UTF-8.
``nll_candidates``
    per fact the per-token NLL (``-logprob / n_tokens``) of the gold answer, then of every other
    candidate in sorted order (Baluta et al.'s generalised exposure); ``None`` without candidates.

Fields a run did not compute are NaN (``null`` in JSON): the candidate ones without
``candidates``, ``rouge_l`` without ``generate``.

Cost per fact (shared-prefix path): one row of a batched prefix pass, plus one row of a batched
candidate pass per candidate of two or more tokens, plus 10 decoding steps with ``generate``.
``benchmarks/bench_scores.py`` measures it.
"""

from __future__ import annotations

import math
import sys
import zlib as _zlib
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from ..errors import UserError, parse_json
from ..kg.kb import KBError, KnowledgeBase
from .models import ModelBundle

#: the per-fact numeric fields of :class:`FactScores`, in JSON order
NUMERIC = ("logprob", "n_tokens", "prob", "rank", "n_candidates", "exposure", "mc_prob", "truth_ratio",
           "rouge_l", "min_k", "ppl", "zlib")


class ScoresError(UserError, ValueError):
    """A bad scoring argument (``k``) or a stored score file that cannot be read back."""


def check_k(k) -> float:
    """Min-K%'s ``k`` in percent: a finite number in (0, 100], else :class:`ScoresError` naming ``k``."""
    ok = not isinstance(k, bool) and isinstance(k, (int, float, np.integer, np.floating)) \
        and math.isfinite(float(k)) and 0 < float(k) <= 100
    if not ok:
        raise ScoresError(f"k (Min-K% Prob's percentage of tokens) must be a number in (0, 100], got {k!r}",
                          field="k")
    return float(k)


def min_k_prob(token_logprobs, k: float = 20.0) -> float:
    """Mean of the lowest ``k`` % of ``token_logprobs``: ``max(1, int(n * k / 100))`` of them.

    >>> min_k_prob([-1.0, -5.0, -2.0, -0.5, -3.0], 40)
    -4.0
    """
    x = np.sort(np.asarray(token_logprobs, dtype=np.float64))
    if not len(x):
        return math.nan
    n = max(1, int(len(x) * check_k(k) / 100))
    return float(x[:n].mean())


@dataclass
class FactScores:
    """Per-fact scores (module docstring); every array is aligned with ``fact_ids``."""

    fact_ids: np.ndarray
    logprob: np.ndarray
    n_tokens: np.ndarray
    prob: np.ndarray
    rank: np.ndarray
    n_candidates: np.ndarray
    exposure: np.ndarray
    mc_prob: np.ndarray
    truth_ratio: np.ndarray
    rouge_l: np.ndarray
    min_k: np.ndarray
    ppl: np.ndarray
    zlib: np.ndarray
    outputs: list[str] | None = None
    nll_candidates: list | None = None
    k: float = 20.0

    def __post_init__(self) -> None:
        self.fact_ids = np.asarray(self.fact_ids, dtype=np.int64)
        n = len(self.fact_ids)
        for name in NUMERIC:
            v = np.asarray(getattr(self, name), dtype=np.float64)
            if v.shape != (n,):
                raise ValueError(f"FactScores: field {name} has shape {v.shape}, expected ({n},)")
            setattr(self, name, v)
        if self.outputs is not None and len(self.outputs) != n:
            raise ValueError("FactScores: outputs must align with fact_ids")
        if self.nll_candidates is None:
            self.nll_candidates = [None] * n
        if len(self.nll_candidates) != n:
            raise ValueError("FactScores: nll_candidates must align with fact_ids")
        self.nll_candidates = [None if x is None else np.asarray(x, dtype=np.float64) for x in self.nll_candidates]

    def __len__(self) -> int:
        return len(self.fact_ids)

    def subset(self, ids: Iterable[int]) -> "FactScores":
        """The scores of ``ids`` (in that order); an id not scored is a :class:`KBError`."""
        pos = {int(f): i for i, f in enumerate(self.fact_ids)}
        rows = []
        for f in ids:
            if int(f) not in pos:
                raise KBError(f"fact {int(f)} was not scored")
            rows.append(pos[int(f)])
        return FactScores(fact_ids=self.fact_ids[rows], **{n: getattr(self, n)[rows] for n in NUMERIC},
                          outputs=None if self.outputs is None else [self.outputs[i] for i in rows],
                          nll_candidates=[self.nll_candidates[i] for i in rows], k=self.k)

    def means(self) -> dict[str, float | None]:
        """The mean of each numeric field over the facts where it is finite (``None`` if none)."""
        out = {}
        for name in NUMERIC:
            v = getattr(self, name)
            v = v[np.isfinite(v)]
            out[name] = float(v.mean()) if len(v) else None
        return out

    def to_json(self) -> dict:
        """A JSON-ready dict (see :meth:`from_json`); non-finite numbers are ``None``."""
        fin = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "format": "deepunlearn-fact-scores", "k": self.k,
            "fact_ids": [int(i) for i in self.fact_ids],
            **{n: [fin(x) for x in getattr(self, n)] for n in NUMERIC},
            "outputs": None if self.outputs is None else list(self.outputs),
            "nll_candidates": [None if x is None else [fin(v) for v in x] for x in self.nll_candidates],
        }

    @classmethod
    def from_json(cls, obj: dict | str, *, source: str = "fact scores") -> "FactScores":
        """Read what :meth:`to_json` wrote; anything else is a :class:`ScoresError` naming
        ``source`` and the field. ``null`` numbers read back as NaN."""
        if isinstance(obj, str):
            obj = parse_json(obj, source=source, error=ScoresError)
        if not isinstance(obj, dict):
            raise ScoresError(f"{source}: expected a JSON object, got {type(obj).__name__}")
        num = lambda x: x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))  # noqa: E731

        def field(name, ok, what, optional=False):
            v = obj.get(name)
            if v is None and optional:
                return None
            if not isinstance(v, list) or not all(ok(x) for x in v):
                raise ScoresError(f"{source}: field {name!r} must be a list of {what}", field=name)
            return v

        ids = field("fact_ids", lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0, "fact ids")
        cols = {n: field(n, num, "numbers (or null)") for n in NUMERIC}
        outputs = field("outputs", lambda x: isinstance(x, str), "strings", optional=True)
        nll = field("nll_candidates", lambda x: x is None or (isinstance(x, list) and all(num(v) for v in x)),
                    "lists of numbers (or null)", optional=True)
        k = obj.get("k", 20.0)
        if any(len(c) != len(ids) for c in cols.values()) or (outputs is not None and len(outputs) != len(ids)) \
                or (nll is not None and len(nll) != len(ids)):
            raise ScoresError(f"{source}: every field must have one entry per fact id")
        f = lambda xs: np.array([np.nan if x is None else float(x) for x in xs], dtype=np.float64)  # noqa: E731
        return cls(fact_ids=np.asarray(ids, dtype=np.int64), **{n: f(c) for n, c in cols.items()}, outputs=outputs,
                   nll_candidates=None if nll is None else [None if x is None else f(x) for x in nll],
                   k=check_k(k))


_SCORER = None


def rouge_l_recall(output: str, answer: str) -> float:
    """ROUGE-L recall of ``output`` against the gold ``answer`` (``rouge_score``, stemming on)."""
    global _SCORER
    if _SCORER is None:
        from rouge_score import rouge_scorer

        _SCORER = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return float(_SCORER.score(answer, output)["rougeL"].recall)


def candidate_stats(probs: np.ndarray, gold: int, pert: list[int]) -> tuple[float, float, float, float]:
    """rank, exposure, mc_prob, truth_ratio of the gold answer among normalised ``probs``."""
    from scipy.stats import rankdata

    rank = float(rankdata(-probs, method="average")[gold])
    exposure = math.log2(len(probs)) - math.log2(rank)
    total = probs.sum()
    mc = float(probs[gold] / total) if total > 0 else math.nan
    tr = float(probs[pert].mean() / probs[gold]) if pert and probs[gold] > 0 else math.nan
    return rank, exposure, mc, tr


def score_facts(bundle: ModelBundle, kb: KnowledgeBase, fact_ids: Iterable[int] | None = None, *,
                model_fn: Callable | None = None, k: float = 20.0, n_perturbed: int = 5, seed: int = 0,
                generate: bool = True, candidates: bool = True, batch_size: int | str | None = None,
                progress: bool = True) -> FactScores:
    """Score the facts ``fact_ids`` of ``kb`` (all by default) under ``bundle`` (module docstring).

    ``model_fn(input_ids, attention_mask) -> logits`` replaces the model as in
    :func:`~deepunlearn.probe.probing.probe` (right-padded full sequences, no cache).
    ``candidates=False`` scores the gold answer only (the Min-K%/PPL/zlib and probability
    fields; what membership inference needs); ``generate=False`` skips decoding (no ROUGE-L).
    ``batch_size``: facts per prefix pass (``None``/``"auto"`` as :func:`probe`); candidate rows
    go in chunks of ``4 * batch_size``. Eval mode and inference mode; train mode is restored.
    """
    from .passes import checked_ids

    k = check_k(k)
    if isinstance(n_perturbed, bool) or not isinstance(n_perturbed, int) or n_perturbed < 0:
        raise ScoresError(f"n_perturbed must be an integer >= 0, got {n_perturbed!r}", field="n_perturbed")
    ids = checked_ids(kb, fact_ids, batch_size)

    probes = [kb.probe(int(i)) for i in ids]
    rows, cands, gold_at = zip(*_fact_rows(bundle, kb, ids, candidates)) if len(ids) else ((), (), ())
    lps, outputs = _score_passes(bundle, kb, ids, rows, model_fn, batch_size, generate, progress)
    cols, nll = _columns(kb, ids, probes, lps, cands if candidates else None, gold_at, outputs, bundle.prompt,
                         k=k, perturb=(n_perturbed, seed))
    return FactScores(fact_ids=ids, **cols, outputs=outputs, nll_candidates=nll, k=k)


def _score_passes(bundle: ModelBundle, kb: KnowledgeBase, ids, rows, model_fn: Callable | None,
                  batch_size: int | str | None, generate: bool, progress: bool) -> tuple[list, list[str] | None]:
    """The forward passes: each fact's log-probabilities (prefix and every candidate answer) and,
    with ``generate``, its greedy output; longest prefixes first, in eval and inference mode."""
    import torch

    from .batching import resolve_batch_size
    from .passes import encoded, generate_answers, model_device
    from .scoring import full_sequence_logprobs, shared_prefix_logprobs

    model = bundle.model
    was_training = model.training
    model.eval()
    device = model_device(bundle)
    longest = max((len(r.prefix) + max(len(a) for a in r.answers) for r in rows), default=1)
    batch_size = resolve_batch_size(batch_size, model, device, positions=longest, seq=longest + 10,
                                    mode="generate" if generate else "exact", model_fn=model_fn is not None)
    order = sorted(range(len(rows)), key=lambda j: (-len(rows[j].prefix), j))
    lps: list = [None] * len(rows)
    outputs = [""] * len(rows) if generate else None
    q_alone = encoded(bundle, kb)[1] if generate else None
    from tqdm.auto import tqdm

    bar = tqdm(total=len(rows), desc="score", unit="fact", file=sys.stderr, disable=not progress, leave=False)
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                b_rows = [rows[j] for j in batch]
                if model_fn is None:
                    got = shared_prefix_logprobs(b_rows, model, bundle.pad_id, device, row_budget=4 * batch_size)
                else:
                    got = full_sequence_logprobs(b_rows, model_fn, bundle.pad_id, device, row_budget=4 * batch_size)
                for j, g in zip(batch, got):
                    lps[j] = g
                if generate:
                    texts_out = generate_answers(bundle, [q_alone[int(ids[j])] for j in batch], model_fn, device)
                    for j, t in zip(batch, texts_out):
                        outputs[j] = t
                bar.update(len(batch))
    finally:
        bar.close()
        if was_training:
            model.train()
    return lps, outputs


def _columns(kb: KnowledgeBase, ids, probes: list, lps: list, cands, gold_at, outputs: list[str] | None,
             prompt, *, k: float, perturb: tuple[int, int]) -> tuple[dict[str, np.ndarray], list]:
    """The score columns of :data:`NUMERIC` and each fact's candidate NLLs (gold first), from the
    passes' log-probabilities and outputs. ``cands`` None: the gold answer only; ``outputs`` None:
    nothing was generated; ``perturb``: how many perturbed answers the truth ratio takes, and their seed."""
    from ..kg.candidates import perturbed

    n_perturbed, seed = perturb
    candidates = cands is not None
    generate = outputs is not None
    n = len(lps)
    cols = {name: np.full(n, np.nan) for name in NUMERIC}
    nll: list = [None] * n
    for j in range(n):
        g, gi = lps[j], gold_at[j]
        sums = np.array([a.sum() for a in g.answers])
        lens = np.array([len(a) for a in g.answers], dtype=np.float64)
        norm = np.exp(sums / lens)
        cols["logprob"][j], cols["n_tokens"][j], cols["prob"][j] = sums[gi], lens[gi], norm[gi]
        if candidates:
            c = cands[j]
            index = {a: i for i, a in enumerate(c)}
            pert = [index[a] for a in perturbed(kb, int(ids[j]), n_perturbed, seed)]
            r, e, mc, tr = candidate_stats(norm, gi, pert)
            cols["rank"][j], cols["exposure"][j], cols["mc_prob"][j], cols["truth_ratio"][j] = r, e, mc, tr
            cols["n_candidates"][j] = len(c)
            per_tok = -sums / lens
            nll[j] = np.concatenate([[per_tok[gi]], np.delete(per_tok, gi)])
        tokens = np.concatenate([g.prefix, g.answers[gi]])
        cols["min_k"][j] = min_k_prob(tokens, k)
        mean_nll = float(-tokens.mean()) if len(tokens) else math.nan
        cols["ppl"][j] = math.exp(mean_nll) if mean_nll < 700 else math.inf
        text = prompt.text(probes[j].question, probes[j].answer)
        cols["zlib"][j] = mean_nll / len(_zlib.compress(text.encode("utf-8")))
        if generate:
            cols["rouge_l"][j] = rouge_l_recall(outputs[j], probes[j].answer)
    return cols, nll


def _fact_rows(bundle: ModelBundle, kb: KnowledgeBase, ids, candidates: bool) -> list[tuple]:
    """Per fact id: its :class:`~deepunlearn.probe.scoring.FactRows` (shared prefix and each
    candidate's answer tokens), its candidates and the gold answer's index among them. Tokenised
    once per (bundle, KB content, format, ``candidates``) and fact: a sweep scores the same facts
    at every grid point."""
    from ..kg.candidates import answer_candidates
    from ..kg.fingerprint import kb_fingerprint
    from .scoring import candidate_rows

    caches = bundle.__dict__.setdefault("_fact_rows_cache", {})
    key = (kb_fingerprint(kb), bundle.prompt.model_dump_json(), id(bundle.tokenizer), bool(candidates))
    if key not in caches:
        if len(caches) > 8:
            caches.clear()
        caches[key] = {}
    cache = caches[key]
    todo = [int(i) for i in dict.fromkeys(int(i) for i in ids) if int(i) not in cache]
    if todo:
        prompt = bundle.prompt
        probes = [kb.probe(i) for i in todo]
        cands = [answer_candidates(kb, i) if candidates else [p.answer] for i, p in zip(todo, probes)]
        items = [([prompt.text(p.question, a) for a in c], prompt.text(p.question, "")) for p, c in zip(probes, cands)]
        rows = candidate_rows(bundle.tokenizer, items, what=[f"fact {i}" for i in todo])
        for i, p, c, r in zip(todo, probes, cands, rows):
            cache[i] = (r, c, c.index(p.answer))
    return [cache[int(i)] for i in ids]
