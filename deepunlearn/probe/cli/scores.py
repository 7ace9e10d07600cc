"""``deepunlearn probe --scores`` and ``deepunlearn probe --mia --holdout HOLD.json``.

``--scores [-o FILE]``: every fact's likelihood scores (:func:`~deepunlearn.probe.scores.score_facts`)
and their means; ``-o`` writes :meth:`FactScores.to_json` plus the means.
``--mia --holdout HOLD.json [--min-k K]``: Min-K% Prob, PPL and zlib of the KB's facts (members)
and of the holdout KB's facts (non-members, which must share no fact and no person with the KB),
each as ROC-AUC and TPR at 5 % FPR (:func:`~deepunlearn.probe.mia.mia_report`). Candidates and
decoding are off there: the three scores need one teacher-forced pass per fact.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def add_args(p: argparse.ArgumentParser) -> None:
    """The scoring flags of ``deepunlearn probe``."""
    from ...cli import number_in

    what = p.add_mutually_exclusive_group()
    what.add_argument("--scores", action="store_true",
                      help="per-fact likelihood scores (prob, rank, exposure, mc_prob, truth_ratio, rouge_l, "
                           "min_k, ppl, zlib) and their means; -o writes every fact's")
    what.add_argument("--mia", action="store_true",
                      help="membership inference: ROC-AUC and TPR@5%%FPR of min_k, ppl and zlib separating the "
                           "KB's facts from --holdout's")
    p.add_argument("--holdout", default=None, metavar="HOLD.json",
                   help="with --mia: a KB of facts the model never saw (deepunlearn data holdout)")
    p.add_argument("--min-k", type=number_in(0, 100, lo_open=True), default=20.0, metavar="K",
                   help="Min-K%% Prob's percentage of least likely tokens, in (0, 100] (default: 20)")
    p.add_argument("--facts", default=None, metavar="F.json",
                   help="with --scores/--mia: only these facts of the KB (a JSON list of indices or [s, r, o])")


def _facts(args, kb) -> list[int] | None:
    if not args.facts:
        return None
    from ...kg.refs import read_fact_list

    return read_fact_list(kb, args.facts, flag="--facts", key="fact_ids")


def _holdout(args, kb):
    from ...cli import CLIError
    from ...errors import UserError
    from ...kg.io import load_kb
    from ...kg.holdout import check_disjoint

    path = args.holdout
    if not path:
        raise CLIError("--mia needs --holdout HOLD.json (a KB of facts the model never saw)", field="--holdout")
    try:
        hold = load_kb(path, flag="--holdout")
        check_disjoint(kb, hold, path)
    except UserError as e:
        msg = str(e)
        if not msg.startswith("--holdout"):
            msg = f"--holdout {msg}" if msg.startswith(str(path)) else f"--holdout {path}: {msg}"
        raise CLIError(msg, file=str(path), field="--holdout") from None
    if not hold.facts:
        raise CLIError(f"--holdout {path}: the holdout KB has no facts", file=str(path), field="--holdout")
    return hold


def run(args: argparse.Namespace, kb, load_bundle) -> int:
    """The ``--scores`` / ``--mia`` branch of ``deepunlearn probe``; ``load_bundle()`` loads the
    model (after the cheap checks of the flags' files)."""
    from ...cli import emit
    from ...errors import atomic_write_text, dumps
    from ..mia import mia_report
    from ..scores import score_facts

    ids = _facts(args, kb)
    hold = _holdout(args, kb) if args.mia else None
    bundle = load_bundle()
    t0 = time.perf_counter()
    kw = dict(k=args.min_k, batch_size=args.batch_size, progress=False)
    if args.mia:
        member = score_facts(bundle, kb, ids, generate=False, candidates=False, **kw)
        nonmember = score_facts(bundle, hold, None, generate=False, candidates=False, **kw)
        out = {"mia": mia_report(member, nonmember), "model": bundle.name, "kb": str(args.kb),
               "holdout": str(args.holdout), "seconds": round(time.perf_counter() - t0, 3)}
        doc = out
        text = lambda: "\n".join(  # noqa: E731
            [f"{bundle.name}: {len(member)} KB facts vs {len(nonmember)} holdout facts (k = {args.min_k:g} %)",
             f"{'score':8} {'ROC-AUC':>8} {'TPR@5%FPR':>10}"]
            + [f"{n:8} {_fmt(out['mia'][n]['auc']):>8} {_fmt(out['mia'][n]['tpr_at_5_fpr']):>10}"
               for n in ("min_k", "ppl", "zlib")])
    else:
        scores = score_facts(bundle, kb, ids, **kw)
        means = scores.means()
        out = {"facts": len(scores), "means": means, "k": args.min_k, "model": bundle.name, "kb": str(args.kb),
               "seconds": round(time.perf_counter() - t0, 3)}
        doc = {**out, "scores": scores.to_json()}
        text = lambda: f"{bundle.name}: scores of {len(scores)} facts (means)\n" + "\n".join(  # noqa: E731
            f"  {n:13} {_fmt(v)}" for n, v in means.items())
    if args.output:
        atomic_write_text(Path(args.output), dumps(doc, ensure_ascii=False, indent=1) + "\n")
        out["output"] = str(args.output)
    emit(args, out, text)
    return 0


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4g}"
