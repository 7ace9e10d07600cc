"""Fuzz the inputs that carry bare numbers and verdicts: verdict files (``evaluate-report``),
seeds, thread counts and MDUS seed counts given as flags, a sweep's ``seed``, ``threads`` and
``mdus_seeds``, and ``finetune --config`` YAML files (aliases, repeated keys, numbers). The
oracle is the harness's (fuzz_harness.py): exit 0, 1 or 2, one error line, no file changed."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from fuzz_harness import Fuzzer, fuzz_settings
from fuzz_mutations import byte_mutations, json_mutations, line_mutations

#: numbers as a user may type them: past 64 bits, past every bound, not numbers at all
NUMBERS = ["-1", "0", "1", "2", "9223372036854775807", "9223372036854775808", "18446744073709551616",
           "99999999999999999999999", "1e23", "1e9", "1000000000", "100000", "1025", "nan", "inf", "-inf", "1.5",
           "0x10", "abc", "", " 3", "1_000", "\u0663"]


def _verdict(kb: dict) -> dict:
    """A verdict line as ``evaluate --manifest -o`` writes it, on the seed KB's first fact."""
    return {"row": {"checkpoint": "ul1", "target": "0", "method": "ga", "param": 1}, "original": "model",
            "unlearned": "ul1", "kb": "kb.json", "rules": "family", "mode": "rank", "target": kb["facts"][0],
            "target_id": 0, "known_original": 5, "known_unlearned": 4, "forgotten": [0, 1], "gained": [],
            "recall": 1.0, "accuracy": 0.75, "accuracy_groups": {"family": 0.5, "biography": 1.0},
            "accuracy_rule": 0.5, "accuracy_other": 1.0, "exact": True, "minimal_sets": 1, "best_set": [0],
            "target_forgotten": True, "deep": True, "superficial": False, "method": "ga", "param": 1,
            "adversarial": {"recall_adv": 1.0, "modes": ["rank"]}, "attacks": None, "scores": None}


def test_verdict_files(seeds, work):
    fz = Fuzzer("verdict-jsonl")
    good = _verdict(json.loads(seeds["kb"].read_text()))
    line2 = json.dumps({**good, "param": 2}).encode() + b"\n"
    mutated = st.one_of(json_mutations(good).map(lambda m: (m[0] + b"\n" + line2, "line 1: " + m[1])),
                        json_mutations(good).map(lambda m: (line2 + m[0] + b"\n", "line 2: " + m[1])),
                        byte_mutations(json.dumps(good).encode() + b"\n" + line2))

    @fuzz_settings(1)  # a good file builds the whole report (figures): seconds each
    @given(mutated)
    def run(m):
        data, what = m
        (work / "v.jsonl").write_bytes(data)
        fz.check(["evaluate-report", "v.jsonl", "-o", "rep", "--json"], work, protect=work,
                 allow_change=(work / "v.jsonl", work / "rep"), note=what)

    run()
    fz.finish()


def test_seed_thread_and_seed_count_flags(seeds, work):
    fz = Fuzzer("number-flags")
    cmds = [["data", "generate", "--people", "3", "--seed", "{n}", "-o", "g.json", "--json"],
            ["data", "never-true", "--kb", "kb.json", "--seed", "{n}", "-o", "neg.json", "--json"],
            ["rules", "sets", "--kb", "kb.json", "--target", "0", "--seeds", "{n}", "--time-budget", "1", "--json"],
            ["probe", "--model", "model", "--kb", "kb.json", "--threads", "{n}", "--json"],
            ["unlearn", "--model", "model", "--kb", "kb.json", "--target", "0", "--method", "ga", "--grid", "1",
             "--k-mode", "dataset", "--seed", "{n}", "--threads", "1", "--json"],
            ["finetune", "--kb", "kb.json", "--model", "tiny", "--tiny-hidden", "16", "--tiny-heads", "2",
             "--tiny-layers", "1", "--epochs", "1", "--seed", "{n}", "--threads", "{m}", "-o", "ft", "--json"]]

    @fuzz_settings(2)
    @given(st.sampled_from(cmds), st.sampled_from(NUMBERS), st.sampled_from(["1", "2", "5000", "1e9", "0"]))
    def run(cmd, n, m):
        fz.check([a.format(n=n, m=m) for a in cmd], work, protect=work,
                 allow_change=tuple(work / x for x in ("g.json", "neg.json", "ft")), note=f"{n!r} {m!r}")

    run()
    fz.finish()


SWEEP_NUMBERS = [f"{k} = {v}" for k in ("seed", "threads", "mdus_seeds", "seeds") for v in
                 ("-1", "0", "1e23", "1e9", "1000000000", "9223372036854775808", "nan", "inf", "true", '"3"', "[1]")]
SWEEP_NUMBERS += ["[run]\nseeds = [0, 18446744073709551616]", "[run]\nseeds = [1e23]", "[run]\nseeds = [true]"]


def test_sweep_numbers(seeds, work):
    fz = Fuzzer("sweep-numbers")
    text = seeds["sweep"].read_text().replace("seeds = 1\n", "")

    @fuzz_settings(2)
    @given(st.sampled_from(SWEEP_NUMBERS), line_mutations(text, SWEEP_NUMBERS))
    def run(line, mutated):
        data, what = mutated
        for i, (body, note) in enumerate((((line + "\n" + text).encode(), line), (data, what))):
            (work / f"s{i}.toml").write_bytes(body)
            fz.check(["bench", "--config", f"s{i}.toml", "--quiet", "--json"], work, protect=work,
                     allow_change=(work / f"s{i}.toml", work / "out"), note=note)

    run()
    fz.finish()


YAML_TOKENS = ["&a [x, x, x]", "*a", "<<: *a", "seed: 99999999999999999999999", "seed: -1", "seed: 1e23",
               "epochs: 1", "epochs: 0", "lr: .nan", "lr: .inf", "lr: 1e-3", "batch_size: true", "!!python/name:os.system",
               "[" * 500 + "]" * 500, "? [a]\n: b", "\t", "\x00", "\ufeff", "epochs: 1\nepochs: 2"]


def _bomb(levels: int) -> bytes:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return ("\n".join(lines) + "\nepochs: 1\n").encode()


def test_finetune_yaml_configs(seeds, work):
    fz = Fuzzer("finetune-yaml")
    seed = "epochs: 1\nbatch_size: 8\nlr: 0.001\nseed: 3\n"
    mutated = st.one_of(line_mutations(seed, YAML_TOKENS), line_mutations(seed, YAML_TOKENS),
                        st.integers(3, 12).map(lambda n: (_bomb(n), f"alias bomb of 10**{n} values")))

    @fuzz_settings(2)
    @given(mutated)
    def run(m):
        data, what = m
        (work / "c.yaml").write_bytes(data)
        fz.check(["finetune", "--kb", "kb.json", "--model", "tiny", "--tiny-hidden", "16", "--tiny-heads", "2",
                  "--tiny-layers", "1", "--config", "c.yaml", "-o", "ft", "--json"], work, protect=work,
                 allow_change=(work / "c.yaml", work / "ft"), note=what)

    run()
    fz.finish()
