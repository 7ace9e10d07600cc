"""The verdict checked against exact unlearning (docs/trust.md).

    python benchmarks/verdict_check.py --kb kb.json --model A --negatives hold.json -o check/ \
        [--targets 20] [--batch 4] [--seeds a,7] [--true-positives]

Exact unlearning is the ground truth of a deep verdict: A's own recipe retrained on the KB minus a
minimal deep-unlearning set of the target cannot derive the target from what it was taught, so
a valid verdict calls it deep. For ``--targets`` targets A knows (round robin over relations, in
the KB's target order) the script takes each one's chosen minimal set (fewest facts, then least
collateral, as sweeps choose it), groups the targets ``--batch`` at a time and retrains A once per
group and seed on the KB minus the union of the group's sets (exact unlearning for every target
of the group), through :func:`deepunlearn.unlearn.retrain.retrain` and its cache. Oracles of
the second seed are judged against A: the raw verdict, and, where the tool has them, the verdict
relative to the first seed's oracle (``deep_oracle``) and the chance of each verdict
(``p_chance``, rates from ``--negatives``). With three seeds or more (``--seeds a,11,7``) every
seed but the last forms the reference (``deep_oracle`` against the strongest of them, as
``evaluate --oracle DIR --oracle DIR2``; ``deep_oracle_first`` against the first alone;
``deep_oracle_pooled`` with the reference's pooled seed noise, ``evaluate --oracle-noise pooled``).

``--true-positives`` adds the case a valid verdict must call superficial: per group, A's recipe
retrained on the KB minus the group's **targets alone** (the target's set facts still taught, so
the rules derive it from what that model was taught), judged the same three ways
(``true_positives.jsonl``; a target that another target of its group is needed to derive is
recorded and left out of the shares).

Each oracle and verdict is written to ``-o`` as it is made (``verdicts.jsonl``); a rerun reuses both.

``--table DIR`` prints the summary of a finished run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pick_targets(kb, known, n: int) -> list[int]:
    """``n`` targets A knows, round robin over relations in the KB's target order."""
    by_rel: dict[str, list[int]] = {}
    for t in kb.targets:
        if t in known:
            by_rel.setdefault(kb.facts[t][1], []).append(t)
    out: list[int] = []
    while len(out) < n and any(by_rel.values()):
        for rel in list(by_rel):
            if by_rel[rel] and len(out) < n:
                out.append(by_rel[rel].pop(0))
    return out


def run(args) -> dict:
    import torch

    from deepunlearn.kg.io import load_kb
    from deepunlearn.unlearn.evaluate import Judge
    from deepunlearn.unlearn.retrain import retrain

    torch.set_num_threads(1)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    kb = load_kb(args.kb)
    judge = Judge(args.model, args.kb, mode=args.mode, progress=False, cache_dir=out / "probe-cache",
                  device=args.device)
    targets = pick_targets(kb, judge.known, args.targets)
    sets = {t: judge.chosen_set(t) for t in targets}
    groups = [targets[i:i + args.batch] for i in range(0, len(targets), args.batch)]
    exact_sets(kb, judge, args.model, groups, sets)
    seeds = [None if s == "a" else int(s) for s in args.seeds.split(",")]
    judged, refs = seeds[-1], seeds[:-1] or seeds
    log = out / "verdicts.jsonl"
    done = {}
    if log.exists():
        for line in log.read_text().splitlines():
            r = json.loads(line)
            done[(r["target"], r["seed"])] = r
    rates = negatives = None
    if args.calibration:
        from deepunlearn.unlearn.chance_verdict import chance_rates

        rates = chance_rates(args.calibration, judge.mode)
    if args.negatives and len(seeds) > 1:
        negatives = load_kb(args.negatives)
    for gi, group in enumerate(groups):  # each group's oracles, then its verdicts, written as they come
        removed = sorted(set().union(*(sets[t] for t in group)))
        folders = {}
        for seed in seeds:
            t0 = time.perf_counter()
            folders[seed] = retrain(args.model, kb, removed, cache_dir=out / "oracles", seed=seed, progress=False,
                                    device=args.device)
            print(f"group {gi + 1}/{len(groups)} seed {seed}: {len(removed)} facts removed, oracle "
                  f"{folders[seed].name[:12]} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        rows = []
        for t in group:
            row = done.get((t, judged))
            references = [str(folders[r]) for r in refs]
            if row is not None and row.get("references") != references:  # judged against other references
                row["references"] = references
                for k in ("deep_oracle", "deep_oracle_fact", "deep_oracle_first", "oracle_check"):
                    row.pop(k, None)
            if row is None or row["oracle"] != str(folders[judged]):
                v = judge.verdict(folders[judged], t)
                row = done[(t, judged)] = {
                    "target": t, "seed": judged, "relation": kb.facts[t][1], "set": sets[t],
                    "oracle": str(folders[judged]), "reference": str(folders[seeds[0]]),
                    "references": [str(folders[r]) for r in refs], "raw_deep": v.deep,
                    "target_forgotten": v.target_forgotten, "still_known_of_set": sorted(f for f in sets[t] if (f in judge.known and f not in
                                                                          set(v.forgotten)) or f in v.gained),
                    "accuracy": v.accuracy, "verdict": v.model_dump(mode="json")}
            rows.append(row)
        if rates is not None:
            enrich_chance(judge, kb, rates, rows)
        if negatives is not None:
            enrich_oracle(judge, kb, negatives, rows)
        log.write_text("".join(json.dumps(done[(t, judged)]) + "\n" for t in targets if (t, judged) in done))
        if args.true_positives:
            true_positives(args, judge, kb, group, [str(folders[r]) for r in refs], rates, negatives, out)
    return summary(out)


def true_positives(args, judge, kb, group, refs, rates, negatives, out: Path) -> None:
    """The group's targets alone left out of A's recipe: each target's set is still taught, so a
    valid verdict calls the model superficial (module docstring). Rows go to true_positives.jsonl."""
    from deepunlearn.probe.models import read_meta
    from deepunlearn.rules.graph import derivation_graph
    from deepunlearn.unlearn.oracle import taught_facts
    from deepunlearn.unlearn.retrain import retrain

    log = out / "true_positives.jsonl"
    done = {json.loads(x)["target"]: json.loads(x) for x in log.read_text().splitlines()} if log.exists() else {}
    t0 = time.perf_counter()
    folder = retrain(args.model, kb, sorted(group), cache_dir=out / "oracles", seed=None, progress=False,
                     device=args.device)
    print(f"true positives of {sorted(group)}: {folder.name[:12]} ({time.perf_counter() - t0:.0f} s)",
          file=sys.stderr, flush=True)
    taught = sorted(set(taught_facts(kb, read_meta(Path(args.model)))) - set(group))
    g = derivation_graph(kb, judge.rules, known=taught, max_groundings=judge.budget)
    rows = []
    for t in group:
        row = done.get(t)
        if row is None or row["model"] != str(folder):
            v = judge.verdict(folder, t)
            row = {"target": t, "relation": kb.facts[t][1], "model": str(folder), "references": refs,
                   "derivable_from_taught": bool(g.in_closure[t]), "raw_deep": v.deep,
                   "target_forgotten": v.target_forgotten, "accuracy": v.accuracy,
                   "verdict": v.model_dump(mode="json")}
        rows.append(row)
    if rates is not None:
        enrich_chance(judge, kb, rates, rows)
    if negatives is not None:
        enrich_oracle(judge, kb, negatives, rows, model_key="model")
    done.update({r["target"]: r for r in rows})
    log.write_text("".join(json.dumps(r) + "\n" for r in done.values()))


def exact_sets(kb, judge, model, groups, sets) -> None:
    """A set chosen over K_A (what A answers) may leave the target derivable from a fact A was
    taught but does not answer: such a target gets a minimal set over the facts A was taught
    (:func:`deepunlearn.unlearn.oracle.choose_sets`), so every oracle is exact unlearning."""
    from deepunlearn.probe.models import read_meta
    from deepunlearn.rules.graph import derivation_graph
    from deepunlearn.unlearn.oracle import choose_sets, taught_facts

    taught = taught_facts(kb, read_meta(Path(model)))
    for group in groups:
        removed = set().union(*(sets[t] for t in group))
        g = derivation_graph(kb, judge.rules, known=sorted(set(taught) - removed), max_groundings=judge.budget)
        for t in group:
            if g.in_closure[t]:
                sets[t] = sorted(choose_sets(kb, judge.rules, taught, [t], budget=judge.budget)[0][t])
                print(f"target {t}: its set over K_A leaves it derivable from a taught fact; set over the taught "
                      f"facts: {sets[t]}", file=sys.stderr)


def enrich_oracle(judge, kb, negatives, rows, model_key: str = "oracle") -> None:
    """Each row's deep_oracle: the judged model (``row[model_key]``) against the reference oracles
    (other seeds; the strongest of them), and, with several, ``deep_oracle_first`` against the first alone."""
    from deepunlearn.unlearn.oracle_verdict import OracleReference

    refs: dict[tuple, OracleReference] = {}

    def reference(folders) -> OracleReference:
        key = tuple(folders)
        if key not in refs:
            refs[key] = OracleReference(judge, list(folders), negatives)
        return refs[key]

    for row in rows:
        several = len(row.get("references") or []) > 1
        if "deep_oracle" in row and "deep_oracle_fact" in row and (not several or "deep_oracle_pooled" in row):
            continue
        ref = reference(row.get("references") or [row["reference"]])
        bundle = judge.load(row[model_key])
        known_b = set(judge.probe_unlearned(bundle))
        ref.correction = "fact"
        row["deep_oracle_fact"] = ref.judge_b(bundle, known_b, row["target"])[0]
        ref.correction = "family"
        deep, info = ref.judge_b(bundle, known_b, row["target"])
        row["deep_oracle"] = deep
        row["oracle_check"] = {k: info[k] for k in ("answered_excluded", "oracle_answered_excluded", "held_excluded",
                                                    "margins", "n_negatives", "informative", "compared",
                                                    "fpr_per_fact", "folders")}
        if several:
            row["deep_oracle_first"] = reference(row["references"][:1]).judge_b(bundle, known_b, row["target"])[0]
            ref.spread = False  # the strongest of the oracles, margin from the negatives alone
            row["deep_oracle_max"] = ref.judge_b(bundle, known_b, row["target"])[0]
            ref.spread = "pooled"  # and the reference's seed noise over all its excluded facts
            row["deep_oracle_pooled"], pooled = ref.judge_b(bundle, known_b, row["target"])
            row["oracle_check_pooled"] = {k: pooled[k] for k in ("held_excluded", "margins")}
            ref.spread = True
        del bundle


def enrich_chance(judge, kb, rates, rows) -> None:
    """Each row's p_chance (of its verdict) and p_any (of its target), from the calibration."""
    from deepunlearn.unlearn.chance_verdict import attach_chance
    from deepunlearn.unlearn.evaluate import Verdict

    for row in rows:
        v = Verdict(**row["verdict"])
        if v.deep:
            row["p_chance"] = row["p_any"] = None
            continue
        v = attach_chance(v, judge.evaluator, kb, rates)
        row["p_chance"], row["p_any"] = v.p_chance, v.chance["p_any"]


def summary(out: Path) -> dict:
    log = Path(out) / "verdicts.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    n = len(rows)
    deep = sum(r["raw_deep"] for r in rows)
    known_t = sum(not r["target_forgotten"] for r in rows)
    notdeep = [r for r in rows if not r["raw_deep"] and r.get("p_chance") is not None]
    chance = {} if not notdeep else {
        "not_deep_with_p_chance": len(notdeep),
        "p_chance_at_least_0.05": sum(r["p_chance"] >= 0.05 for r in notdeep),
        "p_chance": sorted(round(r["p_chance"], 3) for r in notdeep)}
    ro = [r for r in rows if "deep_oracle" in r]
    rel = {} if not ro else {"deep_oracle": sum(r["deep_oracle"] for r in ro), "deep_oracle_of": len(ro),
                             "deep_oracle_rate": sum(r["deep_oracle"] for r in ro) / len(ro),
                             "deep_oracle_fact": sum(r.get("deep_oracle_fact", r["deep_oracle"]) for r in ro)}
    for k in ("deep_oracle_first", "deep_oracle_max", "deep_oracle_pooled"):
        if any(k in r for r in ro):
            rel[k] = sum(r[k] for r in ro if k in r)
    return {"targets": n, "raw_deep": deep, "raw_deep_rate": deep / n if n else None, **chance, **rel,
            "target_still_answered": known_t,
            "set_facts_still_answered": sum(len(r["still_known_of_set"]) for r in rows),
            "set_facts": sum(len(r["set"]) for r in rows), **tp_summary(out)}


def tp_summary(out: Path) -> dict:
    """The true positives' shares: superficial raw, not deep relative to the oracle(s), and
    superficial with p_chance < 0.05 (targets derivable from what the model was taught)."""
    log = Path(out) / "true_positives.jsonl"
    if not log.exists():
        return {}
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    ok = [r for r in rows if r["derivable_from_taught"]]
    res = {"tp_models_targets": len(rows), "tp_derivable": len(ok),
           "tp_raw_superficial": sum(not r["raw_deep"] for r in ok),
           "tp_target_answered": sum(not r["target_forgotten"] for r in ok)}
    if any("deep_oracle" in r for r in ok):
        res["tp_not_deep_oracle"] = sum(r.get("deep_oracle") is False for r in ok)
        res["tp_not_deep_oracle_first"] = sum(r.get("deep_oracle_first", r.get("deep_oracle")) is False for r in ok)
        res["tp_not_deep_oracle_max"] = sum(r.get("deep_oracle_max", r.get("deep_oracle")) is False for r in ok)
        if any("deep_oracle_pooled" in r for r in ok):
            res["tp_not_deep_oracle_pooled"] = sum(r.get("deep_oracle_pooled") is False for r in ok)
    if any("p_chance" in r for r in ok):
        res["tp_established"] = sum(r.get("p_chance") is not None and r["p_chance"] < 0.05 for r in ok)
        res["tp_p_chance"] = sorted(round(r["p_chance"], 3) for r in ok if r.get("p_chance") is not None)
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kb")
    p.add_argument("--model", help="A: a checkpoint deepunlearn finetune wrote")
    p.add_argument("--negatives", default=None, help="a holdout KB (data holdout): never-seen facts")
    p.add_argument("--targets", type=int, default=20)
    p.add_argument("--batch", type=int, default=4, help="targets per oracle (their sets' union is removed)")
    p.add_argument("--seeds", default="a,7", help="oracle seeds: the reference's, then the judged one's ('a': A's "
                   "own seed, the exact recipe)")
    p.add_argument("--true-positives", action="store_true", help="also retrain without each group's targets "
                   "alone (their sets still taught) and judge it: the verdict must be superficial")
    p.add_argument("--calibration", default=None, help="probe --calibrate's file on --negatives: p_chance")
    p.add_argument("--mode", default=None, help="probe mode (default: the protocol's)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    p.add_argument("-o", "--output")
    p.add_argument("--table", default=None, help="print the summary of a finished run's folder")
    args = p.parse_args(argv)
    if args.table:
        print(json.dumps(summary(Path(args.table)), indent=1))
        return
    print(json.dumps(run(args), indent=1))


if __name__ == "__main__":
    main()
