"""Sanity figures of the membership and forget-quality measures, as TOFU and Min-K% Prob report
them, on a finetuned model.

1. Membership: the Min-K% (and PPL, zlib) ROC-AUC of the KB's facts (members) against holdout facts
   (``deepunlearn data holdout``) on the finetuned model (expected high) and on the same
   architecture freshly initialised (expected about 0.5).
2. Forget quality: a seeded forget set F (``--forget-share`` of the KB's facts); retain models
   trained from the same base with the same recipe on K \\ F with the recipe's seed and with another
   seed (``deepunlearn.unlearn.retrain``); TOFU's KS-test p-value on F's truth ratios, finetuned vs
   retain model (expected about 0: the finetuned model has seen F) and retain vs retain (expected
   >= 0.05).

Run::

    python benchmarks/measures_sanity.py --kb edu.json --model tiny-edu-llama --holdout hold.json -o sanity.json

Prints a table and writes every figure as JSON. CPU, one torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--model", required=True, help="a model finetuned on the KB by deepunlearn finetune")
    ap.add_argument("--holdout", required=True, help="deepunlearn data holdout output for the KB")
    ap.add_argument("--forget-share", type=float, default=0.1, help="share of the KB's facts in F (TOFU: 1, 5, 10 %%)")
    ap.add_argument("--seed", type=int, default=0, help="seed of F")
    ap.add_argument("--other-seed", type=int, default=1, help="seed of the second retain model")
    ap.add_argument("--cache", default="retain-cache", help="folder of the retain models")
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from deepunlearn.kg.holdout import check_disjoint
    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.probe.measures import forget_quality
    from deepunlearn.probe.mia import mia_report
    from deepunlearn.probe.scores import score_facts
    from deepunlearn.unlearn.retrain import retrain

    t0 = time.perf_counter()
    kb, hold = load_kb(args.kb), load_kb(args.holdout)
    check_disjoint(kb, hold, args.holdout)
    ft = load_model(args.model, device="cpu")
    out: dict = {"kb": args.kb, "model": args.model, "holdout": args.holdout, "facts": len(kb), "holdout_facts": len(hold)}

    def mia(bundle) -> dict:
        kw = dict(generate=False, candidates=False, progress=False)
        return mia_report(score_facts(bundle, kb, None, **kw), score_facts(bundle, hold, None, **kw))

    out["mia_finetuned"] = mia(ft)
    tiny = ft.meta.get("tiny")
    if tiny:  # the same architecture, freshly initialised (what the finetuned model started from)
        with tempfile.TemporaryDirectory() as d:
            build_tiny_model(kb, d, seed=tiny["seed"], hidden=tiny["hidden"], layers=tiny["layers"],
                             heads=tiny["heads"], arch=tiny["arch"], prompt=ft.prompt)
            out["mia_fresh"] = mia(load_model(d, device="cpu"))

    rng = np.random.default_rng(args.seed)
    F = sorted(int(i) for i in rng.choice(len(kb), size=max(2, round(args.forget_share * len(kb))), replace=False))
    out["forget_set"] = F
    kw = dict(generate=False, progress=False)
    tr = {"finetuned": score_facts(ft, kb, F, **kw).truth_ratio}
    for name, seed in (("retain", None), ("retain_other_seed", args.other_seed)):
        t1 = time.perf_counter()
        path = retrain(ft, kb, F, cache_dir=args.cache, seed=seed, progress=False)
        out[f"{name}_seconds"] = round(time.perf_counter() - t1, 1)
        tr[name] = score_facts(load_model(path, device="cpu"), kb, F, **kw).truth_ratio
    out["truth_ratio_median"] = {k: float(np.median(v)) for k, v in tr.items()}
    out["forget_quality"] = {
        "finetuned_vs_retain": forget_quality(tr["finetuned"], tr["retain"]),
        "retain_other_seed_vs_retain": forget_quality(tr["retain_other_seed"], tr["retain"]),
        "finetuned_vs_retain_other_seed": forget_quality(tr["finetuned"], tr["retain_other_seed"]),
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)

    print(f"{'measure':45} value")
    for name in ("mia_finetuned", "mia_fresh"):
        for score in ("min_k", "ppl", "zlib"):
            if name in out:
                r = out[name][score]
                print(f"{name + ' ' + score + ' AUC / TPR@5%FPR':45} {r['auc']:.3f} / {r['tpr_at_5_fpr']:.3f}")
    for k, v in out["forget_quality"].items():
        print(f"{'forget quality ' + k:45} {v:.3g}")
    print(f"|F| = {len(F)}, {out['seconds']} s", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
