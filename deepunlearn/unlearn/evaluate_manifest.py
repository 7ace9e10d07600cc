"""``deepunlearn evaluate --manifest FILE -o OUT.jsonl``: judge many unlearned checkpoints.

A manifest is a TOML file of ``[[row]]`` tables or a CSV file (header optional) of rows
``checkpoint, target[, method, param]``; a relative checkpoint is read from the manifest's
folder when it is there. Each row gives one JSON line in the output, appended and flushed as
soon as it is judged: the verdict with ``row`` (the row as written), or ``{"row", "error",
"file", "field"}`` when the row cannot be judged (a missing checkpoint, another tokenizer, ...);
the other rows are still judged. A rerun skips rows with a verdict in the output already and
retries those that failed, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import UserError, describe, dumps, read_text, text_lines

COLUMNS = ("checkpoint", "target", "method", "param")


class ManifestError(UserError, ValueError):
    """A manifest that cannot be read."""


def _row(raw: dict, where: str, path: Path) -> dict:
    extra = sorted(set(raw) - set(COLUMNS))
    if extra:
        raise ManifestError(f"--manifest {path}: {where}: unknown field {extra[0]!r} (expected {', '.join(COLUMNS)})",
                            file=path, field=extra[0])
    ck = raw.get("checkpoint")
    if not isinstance(ck, str) or not ck.strip():
        raise ManifestError(f"--manifest {path}: {where}: field 'checkpoint' must be a non-empty string",
                            file=path, field="checkpoint")
    row = {"checkpoint": ck.strip()}
    for k in ("target", "method", "param"):
        v = raw.get(k)
        if isinstance(v, str):
            v = v.strip() or None
        if v is not None and not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise ManifestError(f"--manifest {path}: {where}: field {k!r} must be a string or a number",
                                file=path, field=k)
        if k == "param" and isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                pass  # a named point ("final") stays a string
        if k == "param" and isinstance(v, float) and not math.isfinite(v):
            # NaN never equals itself: its verdict would never be found again on resume
            raise ManifestError(f"--manifest {path}: {where}: field 'param' is {v}, expected a finite number "
                                "or a name", file=path, field="param")
        row[k] = v
    return row


def read_manifest(path: str | os.PathLike) -> list[dict]:
    """The rows of a manifest (see the module docstring); any problem is one ManifestError
    naming the file, the row and the field."""
    p = Path(path)
    text = read_text(p, flag="--manifest", error=ManifestError)
    if p.suffix.lower() == ".toml":
        import tomllib

        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ManifestError(f"--manifest {p}: not valid TOML ({e})", file=p) from None
        raws = doc.get("row", doc.get("rows"))
        if not isinstance(raws, list) or not all(isinstance(r, dict) for r in raws):
            raise ManifestError(f"--manifest {p}: expected [[row]] tables (checkpoint, target, method, param)",
                                file=p, field="row")
        rows = [_row(r, f"row {i + 1}", p) for i, r in enumerate(raws)]
        starts = [n for n, ln in enumerate(text.splitlines(), start=1) if ln.strip().replace(" ", "") in
                  ("[[row]]", "[[rows]]")]
        for r, n in zip(rows, starts if len(starts) == len(rows) else []):
            r["line"] = n
    else:
        reader = csv.reader(io.StringIO(text))
        numbered = [(reader.line_num, r) for r in reader]  # line_num: the row's last line
        numbered = [(n, r) for n, r in numbered if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
        header = [c.strip().lower() for c in numbered[0][1]] if numbered else []
        if header and header[0] == "checkpoint":
            bad = [c for c in header if c not in COLUMNS]
            if bad:
                raise ManifestError(f"--manifest {p}: header: unknown column {bad[0]!r} (expected "
                                    f"{', '.join(COLUMNS)})", file=p, field=bad[0])
            numbered = numbered[1:]
        else:
            header = list(COLUMNS)
        rows = []
        lines = [r for _, r in numbered]
        for i, cells in enumerate(lines):
            if len(cells) > len(header):
                raise ManifestError(f"--manifest {p}: row {i + 1}: {len(cells)} cells, expected at most "
                                    f"{len(header)} ({', '.join(header)})", file=p, field=f"row {i + 1}")
            rows.append(_row(dict(zip(header, cells)), f"row {i + 1} (line {numbered[i][0]})", p))
            rows[-1]["line"] = numbered[i][0]
    if not rows:
        raise ManifestError(f"--manifest {p}: no rows", file=p)
    base = p.parent
    for r in rows:  # a relative checkpoint is the manifest's neighbour, when it is there
        r["path"] = str(base / r["checkpoint"]) if (base / r["checkpoint"]).exists() else r["checkpoint"]
    return rows


def row_key(row: dict) -> str:
    return json.dumps([row.get(k) for k in COLUMNS], default=str)


def done_rows(out: Path) -> set[str]:
    """Keys of the rows that already have a verdict in the output (torn or foreign lines are
    ignored: their rows are judged again)."""
    if not out.is_file():
        return set()
    done = set()
    for line in text_lines(out.read_text(encoding="utf-8", errors="replace")):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("row"), dict) and "error" not in obj:
            done.add(row_key(obj["row"]))
    return done


def _append(sink, obj: dict) -> None:
    sink.append(dumps(obj, ensure_ascii=False) + "\n")


def open_output(args):
    """``-o`` of ``--manifest``, checked and locked before any model loads
    (:class:`deepunlearn.output_append.AppendFile`): only a verdicts file this command wrote is
    appended to; another file, a link, a FIFO, an input of the command or an output another
    run is appending to is one line."""
    from ..output_append import AppendFile
    from ..output_kinds import verdict_lines

    inputs = {"--kb": args.kb, "--manifest": args.manifest, "--original": args.original,
              "--retain": getattr(args, "retain", None), "--rules": getattr(args, "rules", None)}
    return AppendFile(args.output, ours=verdict_lines, what="a verdicts file of 'deepunlearn evaluate --manifest'",
                      inputs=inputs)


def where(manifest, i: int, row: dict) -> str:
    """``--manifest FILE: row N (line L)``: where a row is, for its error line."""
    return f"--manifest {manifest}: row {i + 1}" + (f" (line {row['line']})" if row.get("line") else "")


def run_manifest(args, rows: list[dict], judge, checks=None, sink=None) -> int:
    """Judge every row not already in ``args.output`` (with ``checks``, the
    :class:`~.evaluate_checks.EvalChecks` of the flags, on every row); exit status 1 when a row
    failed. ``sink``: the output opened by :func:`open_output` (opened here when None)."""
    if sink is None:
        with open_output(args) as sink:
            return run_manifest(args, rows, judge, checks, sink)
    from tqdm import tqdm

    from ..cli import emit

    out = Path(args.output)
    done = done_rows(out)
    todo = [r for r in rows if row_key(r) not in done]
    judged, failed, summary = 0, [], []
    for i, r in enumerate(tqdm(rows, desc="manifest rows", unit=" row", file=sys.stderr, disable=args.json,
                               leave=False)):
        if r not in todo:
            continue
        row = {k: r[k] for k in COLUMNS}
        target = r["target"] if r["target"] is not None else args.target
        try:
            if target is None:
                raise ManifestError(f"{where(args.manifest, i, r)}: no target (give one in the row "
                                    "or --target)", file=args.manifest, field="target")
            v = judge.verdict(r["path"], target, method=r["method"], param=r["param"], checks=checks,
                              flag="checkpoint")
            obj: dict[str, Any] = {"row": row, **v.model_dump()}
            summary.append({"row": i + 1, "checkpoint": r["checkpoint"], "deep": v.deep,
                            "superficial": v.superficial, "recall": v.recall, "accuracy": v.accuracy,
                            "checks": _check_summary(v)})
            judged += 1
        except (UserError, OSError) as e:
            msg = " ".join(str(e).split())
            if not msg.startswith("--manifest "):
                msg = f"{where(args.manifest, i, r)}: {msg}"
            obj = {"row": row, **describe(e), "error": msg}
            failed.append(i + 1)
            tqdm.write(f"deepunlearn evaluate: error: {msg}", file=sys.stderr)  # on its own line, not the bar's
        _append(sink, obj)
    result = {"rows": len(rows), "skipped": len(rows) - len(todo), "judged": judged, "failed": failed,
              "output": str(out), "verdicts": summary}
    emit(args, result, lambda: "\n".join(
        [f"row {s['row']} {s['checkpoint']}: deep {'yes' if s['deep'] else 'no'}"
         + (" (superficial)" if s["superficial"] else "") + f", recall {s['recall']:.4f}, accuracy {s['accuracy']:.4f}"
         + "".join(f"; {k} {x}" for k, x in s["checks"].items())
         for s in summary]
        + [f"{len(rows)} rows: {judged} judged, {len(rows) - len(todo)} already in {out}, {len(failed)} failed"
           + (f" (rows {', '.join(map(str, failed))})" if failed else "")]))
    return 1 if failed else 0


def _check_summary(v) -> dict[str, str]:
    """The checks of a verdict in a few words, for the summary line of its row."""
    out = {}
    if v.adversarial is not None:
        out["adversarial recall"] = f"{v.adversarial['recall_adv']:.4f}"
    a = v.attacks
    if a is not None:
        if a["recall_relearn"]:
            out["relearn recall"] = " ".join(f"{n}:{r:.4f}" for n, r in a["recall_relearn"].items())
        if a["recall_quant"] is not None:
            out[f"{a['quantize']} recall"] = f"{a['recall_quant']:.4f}"
    if v.scores is not None and v.scores.get("model_utility") is not None:
        out["model utility"] = f"{v.scores['model_utility']:.4f}"
    return out
