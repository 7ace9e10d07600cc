"""Recall and precision of ``rules mine`` against the hand-written rule sets.

    python benchmarks/mine_recall.py [--people 1000] [--max-body 2] [--out mine-recall.json]

Mines (default options: AMIE's thresholds, skyline, up to 2 guards) the release (EDU-RELAT, 400
relation facts; compared with ``family.dl``, the release's rules corrected), a generated family
KB, and the generated org and geo KBs, and also each KB's closure under its hand-written rules
(every fact the rules make true, so a sound rule has no counter-example there). A hand rule is
*recalled* when a mined rule has the same head and relation atoms up to renaming variables
(attribute atoms and ``!=`` are guards, compared apart); recall counts the hand rules with
support in the KB. Precision is the share of mined rules that are hand rules, over all mined
rules and over those of PCA confidence 1; a mined rule of PCA confidence 1 is *sound* when it has
no counter-example in the closure (standard confidence 1 there). Each miss is explained: its measures against the
thresholds, or a more general rule of at least its PCA confidence (the skyline), or outside the
search's language.
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import permutations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepunlearn.kg.kb import KnowledgeBase  # noqa: E402
from deepunlearn.rules import closure, load_rules  # noqa: E402
from deepunlearn.rules.mine import mine_rules  # noqa: E402


def skeleton(rule) -> tuple:
    """(head relation, relation atoms with variables renamed canonically) and the guards
    (attribute atoms and != on the renamed variables)."""
    x, y = (a.name for a in rule.head.args)
    others = sorted({v.name for a in rule.relation_atoms for v in a.args} - {x, y})
    best = None
    for perm in permutations(range(2, 2 + len(others))):
        m = {x: 0, y: 1, **dict(zip(others, perm))}
        atoms = tuple(sorted((a.relation, m[a.args[0].name], m[a.args[1].name]) for a in rule.relation_atoms))
        guards = frozenset([(a.relation, m[a.args[0].name]) for a in rule.attribute_atoms]
                           + [("!=", *sorted((m[c.left.name], m[c.right.name]))) for c in rule.neq])
        if best is None or atoms < best[0]:
            best = (atoms, guards)
    return (rule.head.relation, best[0]), best[1]


def measure(kb, rule) -> dict:
    """AMIE's measures of any rule on ``kb``, by mining with no threshold and finding it."""
    from deepunlearn.rules.mine_index import MineIndex, bindings
    from deepunlearn.rules.mine_measures import measures_of
    import numpy as np

    ix = MineIndex(kb)
    if rule.head.relation not in ix.rel or any(a.relation not in ix.rel for a in rule.relation_atoms):
        return {"support": 0}
    names = {rule.head.args[0].name: 0, rule.head.args[1].name: 1}
    for a in rule.relation_atoms:
        for v in a.args:
            names.setdefault(v.name, len(names))
    atoms = tuple((a.relation, names[a.args[0].name], names[a.args[1].name]) for a in rule.relation_atoms)
    t = bindings(ix, atoms, None, set(names.values()), None)
    keep = np.ones(len(t[0]), dtype=bool)
    for a in rule.attribute_atoms:
        keep &= ix.attr[a.relation][t[names[a.args[0].name]]] if a.relation in ix.attr else False
    for c in rule.neq:
        keep &= t[names[c.left.name]] != t[names[c.right.name]]
    pairs = np.unique(t[0][keep] * ix.n + t[1][keep])
    return measures_of(ix, rule.head.relation, pairs)


def compare(kb, hand, max_body: int, truth=None) -> dict:
    mined = mine_rules(kb, max_body=max_body, time_budget=None)
    loose = mine_rules(kb, max_body=max_body, min_head_coverage=0.0, min_pca_confidence=0.0, skyline=False,
                       time_budget=None)
    by_skel: dict = {}
    for r in mined.rules:
        by_skel.setdefault(skeleton(r)[0], []).append(r)
    loose_skel = {skeleton(r)[0] for r in loose.rules}
    hand_skel, rows, misses = set(), [], []
    for h in hand:
        sk, guards = skeleton(h)
        hand_skel.add(sk)
        m = measure(kb, h)
        if m.get("support", 0) == 0:
            rows.append({"rule": str(h), "support": 0})
            continue
        hit = by_skel.get(sk)
        row = {"rule": str(h), "support": m["support"], "pca_confidence": round(m["pca_confidence"], 4),
               "std_confidence": round(m["std_confidence"], 4), "recalled": bool(hit)}
        if hit:
            implied = [r for r in hit if skeleton(r)[1] <= guards]
            row["mined_as"] = str((implied or hit)[0])
            row["mined_pca_confidence"] = round((implied or hit)[0].measures["pca_confidence"], 4)
            row["guards_implied"] = bool(implied)
        else:
            skel_m = measure(kb, type(h)(h.head, h.relation_atoms))
            if m["head_coverage"] < 0.01:
                why = f"head coverage {m['head_coverage']:.4f} < 0.01"
            elif len(h.relation_atoms) > max_body:
                why = f"{len(h.relation_atoms)} body atoms > --max-body {max_body}"
            elif sk in loose_skel:
                why = (f"skyline: a more general mined rule has PCA confidence >= its {m['pca_confidence']:.3f} "
                       f"(without guards {skel_m['pca_confidence']:.3f})")
            else:
                why = "outside the search (guards the miner does not add, or below the thresholds)"
            row["why"] = why
            misses.append(row)
        rows.append(row)
    supported = [r for r in rows if r["support"]]
    recalled = [r for r in supported if r["recalled"]]
    perfect = [r for r in mined.rules if r.measures["pca_confidence"] >= 1.0]
    truth = truth if truth is not None else kb
    sound = [r for r in perfect if measure(truth, r).get("std_confidence", 0) >= 1.0]
    return {"facts": len(kb.facts), "hand_rules": len(hand), "with_support": len(supported),
            "recalled": len(recalled), "guards_implied": sum(r.get("guards_implied", False) for r in recalled),
            "hand_pca1": sum(r["pca_confidence"] >= 1.0 for r in supported), "recall": len(recalled) / max(len(supported), 1),
            "mined": len(mined.rules), "mined_hand": sum(skeleton(r)[0] in hand_skel for r in mined.rules),
            "mined_pca1": len(perfect), "mined_pca1_hand": sum(skeleton(r)[0] in hand_skel for r in perfect),
            "mined_pca1_sound": len(sound),
            "seconds": round(mined.seconds, 2), "misses": misses, "rows": rows}


def closed_kb(kb: KnowledgeBase, rules) -> KnowledgeBase:
    facts = sorted(set(kb.facts) | set(closure(kb, rules).facts))
    return KnowledgeBase.build(kb.entities, facts, name=kb.name + "-closure")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--people", type=int, default=1000)
    ap.add_argument("--max-body", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import deepunlearn
    from deepunlearn.kg.edu_relat import import_edu_relat
    from deepunlearn.rules.generate import generate_domain

    cases = [("release", import_edu_relat(), "family"),
             (f"family {a.people}", deepunlearn.generate_family(a.people, seed=1), "family"),
             ("org", generate_domain("org", seed=1), "org"), ("geo", generate_domain("geo", seed=1), "geo")]
    out = {}
    print("| KB | facts | hand rules with support | of them at PCA 1 | recalled | recall | with guards the hand rule's | "
          "mined | of them hand | mined at PCA 1 | of them hand | of them sound | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, kb, rs in cases:
        hand = load_rules(rs)
        full = closed_kb(kb, hand)
        for label, k in ((name, kb), (name + " closure", full)):
            c = compare(k, hand, a.max_body, truth=full)
            out[label] = c
            print(f"| {label} | {c['facts']} | {c['with_support']} | {c['hand_pca1']} | {c['recalled']} | "
                  f"{c['recall']:.2f} | {c['guards_implied']} | "
                  f"{c['mined']} | {c['mined_hand']} ({c['mined_hand'] / max(c['mined'], 1):.2f}) | {c['mined_pca1']} | "
                  f"{c['mined_pca1_hand']} ({c['mined_pca1_hand'] / max(c['mined_pca1'], 1):.2f}) | "
                  f"{c['mined_pca1_sound']} ({c['mined_pca1_sound'] / max(c['mined_pca1'], 1):.2f}) | {c['seconds']} |")
    for label, c in out.items():
        for m in c["rows"]:
            if not m["support"]:
                print(f"no support [{label}] {m['rule']}")
        for m in c["misses"]:
            print(f"miss [{label}] {m['rule']}  support={m['support']} pca={m['pca_confidence']} "
                  f"std={m['std_confidence']}: {m['why']}")
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
