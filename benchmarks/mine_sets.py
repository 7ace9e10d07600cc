"""How the release's minimal deep-unlearning sets change between the hand-written rules
(``family.dl``) and rules mined from the release itself.

    python benchmarks/mine_sets.py [--min-std-confidence 1] [--min-support 1] [--time-budget 20]

Mines the release (``rules mine`` with the given thresholds), enumerates the exact minimal sets
of each of the 55 targets under both rule sets (clingo; ``--time-budget`` seconds per target)
and prints how many targets' sets differ, with examples (number of sets and mean set size under
each rule set), and how a perfect deep unlearning under ``family.dl`` (forgetting a smallest
minimal set of it) fares when judged under the mined rules: deep or not, and its recall.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-std-confidence", type=float, default=1.0)
    ap.add_argument("--min-pca-confidence", type=float, default=0.1)
    ap.add_argument("--min-support", type=int, default=1)
    ap.add_argument("--time-budget", type=float, default=20.0)
    ap.add_argument("--examples", type=int, default=6)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from deepunlearn.kg.edu_relat import import_edu_relat
    from deepunlearn.rules import derivation_graph, load_rules, minimal_sets
    from deepunlearn.rules.mine import mine_rules

    kb = import_edu_relat()
    hand = load_rules("family")
    mined = mine_rules(kb, min_std_confidence=a.min_std_confidence, min_pca_confidence=a.min_pca_confidence,
                       min_support=a.min_support).rules
    g_hand, g_mined = derivation_graph(kb, hand), derivation_graph(kb, mined)
    from deepunlearn.rules import is_deep_unlearning_set
    from deepunlearn.rules.metrics import Evaluator

    ev_mined = Evaluator(kb, rules=mined, time_budget=a.time_budget)
    rows = []
    for t in kb.targets:
        sh, sm = minimal_sets(g_hand, t, time_budget=a.time_budget), minimal_sets(g_mined, t, time_budget=a.time_budget)
        a_sets, b_sets = set(sh.sets), set(sm.sets)

        def mean(sets):
            return sum(map(len, sets)) / len(sets) if sets else 0.0
        # forgetting the smallest minimal set under family.dl, judged under the mined rules
        best = min(a_sets, key=lambda u: (len(u), sorted(u)))
        still = not is_deep_unlearning_set(g_mined, t, best)
        recall = ev_mined.evaluate(t, sorted(best)).recall
        rows.append({"target": list(kb.facts[t]), "target_id": t, "changed": a_sets != b_sets,
                     "hand_set_deep_under_mined": not still, "hand_set_recall_under_mined": round(recall, 4),
                     "hand_sets": len(a_sets), "mined_sets": len(b_sets), "hand_mean_size": round(mean(a_sets), 2),
                     "mined_mean_size": round(mean(b_sets), 2), "exact": sh.exact and sm.exact,
                     "shared_sets": len(a_sets & b_sets)})
    changed = [r for r in rows if r["changed"]]
    print(f"mined rules: {len(mined)} (min std confidence {a.min_std_confidence:g}, min PCA confidence "
          f"{a.min_pca_confidence:g}, min support {a.min_support}); hand rules: {len(hand)}")
    print(f"targets whose minimal sets differ: {len(changed)} of {len(rows)} "
          f"(all exact: {all(r['exact'] for r in rows)})")
    print(f"targets with more sets under the mined rules: {sum(r['mined_sets'] > r['hand_sets'] for r in rows)}, "
          f"fewer: {sum(r['mined_sets'] < r['hand_sets'] for r in rows)}")
    deep = sum(r["hand_set_deep_under_mined"] for r in rows)
    mean_recall = sum(r["hand_set_recall_under_mined"] for r in rows) / len(rows)
    print(f"forgetting the smallest minimal set under family.dl: deep under the mined rules for {deep} of "
          f"{len(rows)} targets; mean recall under the mined rules {mean_recall:.3f} (1.000 under family.dl)")
    for r in changed[:a.examples]:
        s, rel, o = r["target"]
        print(f"  ({s}, {rel}, {o}): {r['hand_sets']} sets of mean size {r['hand_mean_size']} -> "
              f"{r['mined_sets']} of mean size {r['mined_mean_size']} ({r['shared_sets']} shared)")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
