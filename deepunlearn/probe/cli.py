"""``deepunlearn probe``: which facts of a KB does a model know?

``deepunlearn probe --model DIR --kb KB.json [-o KNOWN.json] [--mode exact|generate] --json``
prints ``{"known": int, "total": int, ...}``; KNOWN.json lists the known fact ids and facts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json

    p = sub.add_parser("probe", help="probe a causal LM on a KB's questions: which facts does it know?")
    p.add_argument("--model", required=True,
                   help="checkpoint folder, hub name, or 'tiny' (an untrained tiny model for the KB)")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("-o", "--output", default=None, help="write the known fact ids and facts to this JSON file")
    p.add_argument("--mode", choices=("exact", "generate"), default="exact",
                   help="exact: argmax equals the gold answer at every answer token (one pass, default); "
                        "generate: greedy 10 tokens contain the answer (the reference's rule)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    p.add_argument("--cache-dir", default=None,
                   help="keep the result in this folder, keyed on the model's weights and the KB (default: no cache)")
    add_json(p)
    p.set_defaults(handler=_probe)


def resolve_model(name: str, kb, kb_path: str | Path | None = None) -> str:
    """A model argument -> what :func:`load_model` takes; ``tiny`` builds (once) an untrained
    tiny model for the KB under the cache folder."""
    if name != "tiny":
        return name
    from .cache import default_cache_dir
    from .fingerprint import kb_fingerprint
    from .models import META_FILE
    from .tiny import build_tiny_model

    folder = default_cache_dir().parent / "tiny" / kb_fingerprint(kb)
    if not (folder / META_FILE).is_file():
        build_tiny_model(kb, folder)
    return str(folder)


def load_for_cli(name: str, kb, device=None, dtype=None):
    """:func:`load_model` with its errors turned into CLI errors."""
    from ..cli import CLIError
    from .models import ModelLoadError, load_model

    try:
        return load_model(resolve_model(name, kb), device=device, dtype=dtype)
    except (ModelLoadError, ValueError) as e:
        raise CLIError(str(e)) from None


def _probe(args: argparse.Namespace) -> int:
    from ..cli import CLIError, emit
    from ..kg.io import load_kb

    if args.batch_size < 1:
        raise CLIError(f"--batch-size must be at least 1, got {args.batch_size}")
    kb = load_kb(args.kb)
    bundle = load_for_cli(args.model, kb, args.device, args.dtype)
    from .cache import cached_probe
    from .probing import probe

    t0 = time.perf_counter()
    if args.cache_dir:
        res = cached_probe(bundle, kb, mode=args.mode, cache_dir=args.cache_dir, batch_size=args.batch_size)
    else:
        res = probe(bundle, kb, mode=args.mode, batch_size=args.batch_size)
    seconds = time.perf_counter() - t0
    fam = kb.family_mask[res.fact_ids]
    out = {
        "known": res.n_known,
        "total": res.total,
        "known_share": round(res.share, 6),
        "family_known": int(res.known[fam].sum()),
        "family_total": int(fam.sum()),
        "biography_known": int(res.known[~fam].sum()),
        "biography_total": int((~fam).sum()),
        "mode": args.mode,
        "model": bundle.name,
        "kb": str(args.kb),
        "seconds": round(seconds, 3),
    }
    if args.output:
        ids = sorted(res.known_ids())
        doc = {**out, "fact_ids": ids, "facts": [list(kb.facts[i]) for i in ids]}
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        out["output"] = str(path)
    emit(args, out, lambda: (
        f"{bundle.name} knows {res.n_known} of {res.total} facts ({res.share:.1%}; "
        f"family {out['family_known']}/{out['family_total']}, "
        f"biography {out['biography_known']}/{out['biography_total']}) [{args.mode}, {seconds:.1f}s]"
    ))
    return 0
