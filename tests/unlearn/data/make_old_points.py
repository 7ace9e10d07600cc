"""Golden points of the methods that existed before the method API changed (GA, NPO, TV,
WHP), so a test can check that today's code gives exactly the same points.

Runnable against any checkout (the package is imported from ``--checkout``, default: this one)::

    git -C /work/main worktree add /tmp/old14 5d1e2a4       # the commit before the API change
    python tests/unlearn/data/make_old_points.py --checkout /tmp/old14 \\
        --out tests/unlearn/data/old_points.json

What it runs: a tiny Llama-style model (64 wide, 2 layers, seed 0) built and finetuned from
scratch on the 5 EDU-RELAT people around Zoey Jenkins (25 facts, the ``five_people_kb``
fixture), then, on the KB's first target the model knows, GA and NPO (steps 1, 2, 4) and TV and
WHP (alpha 1 and 5 / 1 and 100) with seed 0, full mode, the ``family`` rules. It records per
point the method, param, recall, accuracy, forgotten and target_forgotten.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
#: method -> grid (short grids keep the test fast)
GRIDS = {"ga": [1, 2, 4], "npo": [1, 2, 4], "tv": [1.0, 5.0], "whp": [1.0, 100.0]}
PEOPLE, START = 5, "Zoey Jenkins"


def edu_dir(root: Path) -> Path:
    """The release copy shipped with deepunlearn (the ``root`` argument is kept for callers)."""
    from deepunlearn.kg.edu_relat import SHIPPED_DIR

    return SHIPPED_DIR


def old_points(work: Path, edu: Path) -> dict:
    """Build, finetune and unlearn as the module docstring says; the points as a JSON object."""
    import torch

    torch.set_num_threads(1)
    from deepunlearn.kg.edu_relat import import_edu_relat
    from deepunlearn.kg.graph import nearest_people
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune
    from deepunlearn.unlearn.loop import TargetRunner

    full = import_edu_relat(edu)
    kb = full.subset(nearest_people(full, START, PEOPLE), name="edu-relat-5")
    folder = work / "model"
    # forms=False: the questions-only vocabulary of the tiny models of 5d1e2a4 (the probe forms'
    # words, added since, which gives a different model for the same seed)
    build_tiny_model(kb, folder, seed=0, hidden=64, layers=2, heads=4, forms=False)
    finetune(load_model(folder, device="cpu"), kb, FinetuneConfig.tiny(lr=3e-3, epochs=100), out_dir=folder,
             progress=False)
    runner = TargetRunner(load_model(folder, device="cpu"), kb, rules="family", cache_dir=work / "cache",
                          progress=False)
    target = next(int(t) for t in kb.targets if int(t) in runner.known)
    points = []
    for method, grid in GRIDS.items():
        for p in runner.run(target, method, grid=grid, seed=0):
            points.append({"method": method, "param": p.param, "recall": p.recall, "accuracy": p.accuracy,
                           "forgotten": list(p.forgotten), "target_forgotten": bool(p.target_forgotten)})
    return {"target": target, "known": len(runner.known), "facts": len(kb), "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose deepunlearn runs")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON here (default: stdout)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.checkout.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        data = old_points(Path(tmp), edu_dir(ROOT))
    text = json.dumps(data, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
