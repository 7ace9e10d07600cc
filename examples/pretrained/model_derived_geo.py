"""Model-derived vs rule-derived deep unlearning of SmolLM2 as shipped on the geo KB.

    python model_derived_geo.py GEO.json MODEL OUT.jsonl [CACHE]

K is what the model completes on the statement form (``The capital of France is`` + `` Paris``,
teacher-forced, under the ``pretrained`` protocol's answer rule), as in ``geo-smollm2.toml``. Every
derived fact of K that a chain rule derives from stored facts is unlearned with GA and NPO for 3
steps (lr 2e-5 and 4e-5) on its statement form; at that point the script records the rules' verdict
(``deep``) and the model's: its compose questions asked in the chat template (greedy, whole words
within 32 tokens) before and after unlearning, and ``deep_model``. Unlike ``unlearn --model-derived``,
which asks only the groundings whose body facts are all in K, it asks every grounding of the KB: with
this K (completions) no compose question of a geo target has its whole body in K. One JSON line per
(target, method) goes to OUT.jsonl as it is measured.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from deepunlearn.kg.io import load_kb
from deepunlearn.probe import get_protocol, load_model
from deepunlearn.probe.answer_rule import rule_of
from deepunlearn.rules.compose import compose_set
from deepunlearn.unlearn import TargetRunner
from deepunlearn.unlearn.derived import model_derived


def main(kb_file: str, model: str, out_file: str, cache: str | None = None) -> None:
    torch.set_num_threads(1)
    proto = get_protocol("pretrained")
    kb = load_kb(kb_file)
    bundle = load_model(model, device="cpu", answer_format=proto.answer_format)
    bundle.answer_rule = rule_of(proto)
    runner = TargetRunner(bundle, kb, protocol="pretrained", probe_mode="exact", forms="st1", unlearn_forms="st1",
                          cache_dir=cache, progress=False)
    cs = compose_set(kb, "geo")
    targets = [t for t in cs.fact_ids() if t in runner.known]
    print(f"K = {len(runner.known)} facts; {len(targets)} derived facts of K with a compose question", flush=True)
    with open(out_file, "a") as out:
        for t in targets:
            qs = [q for q in cs.questions if q.fact_id == t]
            before = model_derived(bundle, kb, t, "geo", direct=True, questions=qs)
            for method in ("ga", "npo"):
                t0 = time.time()
                for p in runner.run(t, method, grid=[3]):  # the weights are at the point while it is yielded
                    md = model_derived(bundle, kb, t, "geo", direct=not p.target_forgotten, questions=qs)
                d = p.to_dict()
                rec = {"target": t, "fact": kb.facts[t], "method": method, "recall": d["recall"],
                       "accuracy": d["accuracy"], "deep": d.get("deep"), "target_forgotten": d["target_forgotten"],
                       "questions": len(qs), "body_in_k": sum(all(int(b) in runner.known for b in q.body) for q in qs),
                       "compose_before": before["compose_answered"], "compose_answered": md["compose_answered"],
                       "deep_model": md["deep_model"], "answered": md["answered"],
                       "seconds": round(time.time() - t0, 1)}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(rec, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
