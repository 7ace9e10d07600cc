"""Print the figures of a fuzz run from its log (``DEEPUNLEARN_FUZZ_LOG``): per format, the
inputs tried, how many ended with exit 0, 1, 2, 70, another code or the time bound, the
longest run in seconds, and then every failing input.

    DEEPUNLEARN_FUZZ_LOG=fuzz.jsonl python -m pytest tests/fuzz/
    python tests/fuzz/summarize.py fuzz.jsonl
"""

from __future__ import annotations

import collections
import json
import sys


def main(paths: list[str]) -> int:
    rows: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    longest: dict[str, float] = collections.defaultdict(float)
    failures = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                fmt = r["format"]
                code = r["code"]
                rows[fmt]["inputs"] += 1
                rows[fmt][str(code) if code in (0, 1, 2, 70, "timeout") else "other"] += 1
                longest[fmt] = max(longest[fmt], r["seconds"])
                if not r["ok"]:
                    rows[fmt]["failing"] += 1
                    failures.append(r)
    cols = ["inputs", "0", "1", "2", "70", "timeout", "other", "failing"]
    width = max([len(k) for k in rows] + [6])
    print(f"{'format':<{width}} " + " ".join(f"{c:>7}" for c in cols) + "   max s")
    for fmt in sorted(rows):
        print(f"{fmt:<{width}} " + " ".join(f"{rows[fmt][c]:>7}" for c in cols) + f" {longest[fmt]:7.2f}")
    total = collections.Counter()
    for c in rows.values():
        total.update(c)
    print(f"{'total':<{width}} " + " ".join(f"{total[c]:>7}" for c in cols)
          + f" {max(longest.values(), default=0):7.2f}")
    if failures:
        print(f"\n{len(failures)} failing inputs:")
        for r in failures:
            print(f"- [{r['format']}] deepunlearn {' '.join(r['argv'])} ({r['note']}): {r['problem']}; "
                  f"exit {r['code']}; last stderr line: {r['last_stderr']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
