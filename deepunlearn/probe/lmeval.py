"""lm-evaluation-harness as a client: a KB's probes as an lm-eval task folder, and lm-eval's
per-sample log read back as the facts a model knows.

**Export** (:func:`export_tasks`, ``deepunlearn data export --format lm-eval``). One task per
relation group (``{prefix}_family``, ``{prefix}_biography``, ...) and a group task ``{prefix}``
over all of them, each a YAML config beside a JSON-lines file with one document per fact. A
document's ``context`` is the fact's question part in the model's answer format
(:meth:`~deepunlearn.probe.prompts.PromptFormat.question_part`) and its ``target`` the answer
part (answer tag + answer); the tasks are ``output_type: loglikelihood`` with
``target_delimiter: ""``, so lm-eval scores exactly the text deepunlearn's exact probe scores,
and its ``acc`` (``is_greedy``: the argmax is the gold token at every continuation position) is
the exact probe's verdict. The configs read the local files (``dataset_path: json``,
``dataset_kwargs.data_files``, absolute paths), so nothing is fetched from a hub:
``lm_eval --include_path DIR --tasks PREFIX``. Every document carries its ``fact_id``.

Where lm-eval splits context and continuation differently from deepunlearn: lm-eval's
``_encode_pair`` moves whitespace that ends the context into the continuation (``"Question:
q\\n"`` + ``"Answer:x"`` is scored as ``"Question: q"`` + ``"\\nAnswer:x"``), and it tokenises
the context alone to find the cut, as deepunlearn does. For the answer formats whose question
part ends in whitespace (``llama``, ``phi``, ``bare``: a newline) its continuation therefore
holds one more token than deepunlearn's, the newline, which the exact probe teacher-forces.
:data:`WHITESPACE_NOTE` says so in the export's answer; :func:`trailing_whitespace` tells.

**Import** (:func:`known_from_samples`, ``deepunlearn data import-lm-eval-samples``): the
``samples_*.jsonl`` files of ``lm_eval --log_samples`` become the document ``probe -o`` writes
(known/total counts, per group, the sorted known ``fact_ids`` and their facts); a fact is known
when its sample's ``acc`` is 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError, atomic_write_text, parse_json, read_text
from ..kg.kb import KnowledgeBase
from .prompts import PromptFormat

#: The file that marks a folder as written by :func:`export_tasks` (it may then be rewritten).
MARKER = ".deepunlearn-lmeval.json"
TASK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
WHITESPACE_NOTE = ("the answer format's question part ends in whitespace; lm-eval's hf model moves it into the "
                   "continuation, so lm-eval also requires the model to predict that whitespace token, which "
                   "deepunlearn's exact probe gives the model")


class LmEvalError(UserError, ValueError):
    """A bad lm-eval export request or samples file."""


def trailing_whitespace(prompt: PromptFormat) -> str:
    """The whitespace that ends ``prompt``'s question part (lm-eval moves it to the continuation)."""
    part = prompt.question_part("q")
    return part[len(part.rstrip()):]


def resolve_prompt(model: str | None, spec: str | None) -> tuple[PromptFormat, str]:
    """The answer format of an export and where it came from: ``--prompt-format`` when given,
    else the ``deepunlearn.json`` of ``--model DIR`` (a checkpoint finetuned here), else the
    family format of its ``config.json`` model type."""
    from .models import META_FILE, read_meta

    if spec is not None:
        try:
            return PromptFormat.parse(spec), "--prompt-format"
        except ValueError as e:
            raise LmEvalError(f"--prompt-format: {e}", field="--prompt-format") from None
    if model is None:
        raise LmEvalError("--format lm-eval: give --model DIR (its deepunlearn.json names the answer format) or "
                          "--prompt-format NAME|TEMPLATE", field="--model")
    folder = Path(model)
    if not folder.is_dir():
        raise LmEvalError(f"--model {model}: no such folder (give a checkpoint folder)", file=model, field="--model")
    meta = read_meta(folder)
    if "prompt" in meta:
        try:
            return PromptFormat.parse(meta["prompt"]), str(folder / META_FILE)
        except ValueError as e:
            raise LmEvalError(f"{folder / META_FILE}: field prompt: {e}", file=folder / META_FILE,
                              field="prompt") from None
    config = folder / "config.json"
    if not config.is_file():
        raise LmEvalError(f"--model {model}: neither {META_FILE} nor config.json (give --prompt-format)",
                          file=model, field="--model")
    cfg = parse_json(read_text(config, error=LmEvalError), source=config, error=LmEvalError)
    model_type = cfg.get("model_type", "") if isinstance(cfg, dict) else ""
    return PromptFormat.for_model(str(model_type or "")), f"{config} (model type {model_type!r})"


def documents(kb: KnowledgeBase, prompt: PromptFormat) -> dict[str, list[dict[str, Any]]]:
    """Per relation group, one document per fact (in fact-id order)."""
    docs: dict[str, list[dict[str, Any]]] = {g: [] for g in kb.groups}
    for p in kb.probes():
        s, r, o = kb.facts[p.fact_id]
        group = kb.group_of(p.fact_id)
        docs[group].append({"fact_id": p.fact_id, "group": group, "subject": s, "relation": r, "object": o,
                            "question": p.question, "answer": p.answer, "context": prompt.question_part(p.question),
                            "target": prompt.answer_part(p.answer), "prompt_format": prompt.spec})
    return docs


def _task_config(name: str, data: Path) -> dict[str, Any]:
    return {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "loglikelihood",
        "doc_to_text": "context",
        "doc_to_target": "target",
        "target_delimiter": "",
        "num_fewshot": 0,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }


def _group_name(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", group)


def check_folder(out: Path, force: bool) -> list[str]:
    """Refuse a non-empty ``out`` that holds no :data:`MARKER` (unless ``force``); the files an
    earlier export listed in its marker (to remove before writing)."""
    if out.exists() and not out.is_dir():
        raise LmEvalError(f"-o {out}: is a file, expected a folder for the lm-eval tasks", file=out, field="-o")
    marker = out / MARKER
    if not out.is_dir() or not any(out.iterdir()):
        return []
    if marker.is_file():
        try:
            old = json.loads(marker.read_text(encoding="utf-8"))
            return [f for f in old.get("files", []) if isinstance(f, str) and "/" not in f and f != MARKER]
        except (ValueError, OSError, AttributeError):
            return []
    if force:
        return []
    raise LmEvalError(f"-o {out}: folder is not empty and was not written by 'data export --format lm-eval' "
                      f"(no {MARKER}); give an empty or new folder, or --force", file=out, field="-o")


def export_tasks(kb: KnowledgeBase, out: str | Path, prompt: PromptFormat, *, prefix: str = "deepunlearn",
                 force: bool = False, kb_file: str | None = None, prompt_source: str = "") -> dict[str, Any]:
    """Write the task folder (module docstring); the JSON answer of the export."""
    if not TASK_NAME.match(prefix):
        raise LmEvalError(f"--task-prefix {prefix!r}: a letter, then letters, digits or '_' (at most 64)",
                          field="--task-prefix")
    if prompt.pending:
        raise LmEvalError("--prompt-format chat: the chat format comes from a tokenizer's chat template; give the "
                          "resolved template (see 'deepunlearn probe --json' prompt_format.spec)",
                          field="--prompt-format")
    out = Path(out).resolve()
    stale = check_folder(out, force)
    docs = documents(kb, prompt)
    files: list[str] = []
    tasks: dict[str, int] = {}
    for group, rows in docs.items():
        if not rows:
            continue
        name = f"{prefix}_{_group_name(group)}"
        data = out / f"{name}.jsonl"
        atomic_write_text(data, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in rows))
        atomic_write_text(out / f"{name}.yaml", json.dumps(_task_config(name, data), indent=2, ensure_ascii=False)
                          + "\n")  # JSON is YAML: no escaping surprises in the texts
        files += [data.name, f"{name}.yaml"]
        tasks[name] = len(rows)
    group_cfg = {"group": prefix, "task": list(tasks),
                 "aggregate_metric_list": [{"metric": "acc", "aggregation": "mean", "weight_by_size": True}],
                 "metadata": {"version": 1.0}}
    atomic_write_text(out / f"{prefix}.yaml", json.dumps(group_cfg, indent=2) + "\n")
    files.append(f"{prefix}.yaml")
    for f in set(stale) - set(files):
        (out / f).unlink(missing_ok=True)
    notes = [WHITESPACE_NOTE] if trailing_whitespace(prompt) else []
    # the plain hf model agrees with the exact probe only where the question part ends in no whitespace
    runner = "python -m deepunlearn.probe.lmeval_model --model deepunlearn-hf" if notes else "lm_eval --model hf"
    answer = {"output": str(out), "format": "lm-eval", "group": prefix, "tasks": tasks, "facts": len(kb.facts),
              "prompt_format": prompt.describe(), "format_source": prompt_source, "kb": kb_file, "notes": notes,
              "run": f"{runner} --model_args pretrained=MODEL,dtype=float32 --include_path {out} --tasks {prefix} "
                     "--log_samples --output_path OUT"}
    atomic_write_text(out / MARKER, json.dumps({**answer, "files": files}, indent=1, ensure_ascii=False) + "\n")
    return answer


def _sample_verdict(obj: Any, where: str, path: Any) -> tuple[int, bool]:
    if not isinstance(obj, dict) or not isinstance(obj.get("doc"), dict):
        raise LmEvalError(f"{where}: not an lm-eval sample (an object with a 'doc')", file=path, field="doc")
    fid = obj["doc"].get("fact_id")
    if not isinstance(fid, int) or isinstance(fid, bool) or fid < 0:
        raise LmEvalError(f"{where}: doc has no fact_id (was the task exported by 'data export --format lm-eval'?)",
                          file=path, field="doc.fact_id")
    acc = obj.get("acc")
    if acc is None:  # fall back on the raw (loglikelihood, is_greedy) response
        resp = obj.get("filtered_resps") or obj.get("resps")
        try:
            while isinstance(resp, list) and resp and isinstance(resp[0], list):
                resp = resp[0]
            acc = resp[1]
        except (TypeError, IndexError, KeyError):
            acc = None
    if isinstance(acc, str) and acc.strip().lower() in ("true", "false"):
        acc = acc.strip().lower() == "true"
    if not isinstance(acc, (int, float, bool)) or float(acc) not in (0.0, 1.0):
        raise LmEvalError(f"{where}: field 'acc' must be 0 or 1 (an lm-eval loglikelihood task's is_greedy), "
                          f"got {acc!r}", file=path, field="acc")
    return fid, bool(acc)


def read_samples(kb: KnowledgeBase, paths: Iterable[str | Path], *, flag: str = "FILE") -> dict[int, bool]:
    """``{fact_id: known}`` from lm-eval ``samples_*.jsonl`` files; a fact id outside the KB, a
    line that is not a sample, or one fact given two verdicts is an error naming file and line."""
    verdicts: dict[int, bool] = {}
    for path in paths:
        text = read_text(path, flag=flag, error=LmEvalError)
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise LmEvalError(f"{where}: not a JSON line of an lm-eval samples file ({e})", file=path,
                                  field=flag) from None
            fid, known = _sample_verdict(obj, where, path)
            if fid >= len(kb.facts):
                raise LmEvalError(f"{where}: fact_id {fid} is not in the KB ({len(kb.facts)} facts; was the task "
                                  "exported from another KB?)", file=path, field="doc.fact_id")
            if verdicts.get(fid, known) != known:
                raise LmEvalError(f"{where}: fact {fid} has two different verdicts", file=path, field="acc")
            verdicts[fid] = known
    if not verdicts:
        raise LmEvalError(f"{flag}: no samples in the given files", field=flag)
    return verdicts


def _model_of(paths: list[str]) -> str | None:
    """The model lm-eval ran (``pretrained=`` of its model_args), from a ``results_*.json`` beside
    the samples files; ``None`` when there is none or it says nothing readable."""
    for folder in dict.fromkeys(Path(p).parent for p in paths):
        for f in sorted(folder.glob("results_*.json")):
            try:
                cfg = json.loads(f.read_text(encoding="utf-8")).get("config", {})
                args = cfg.get("model_args")
                if isinstance(args, str):
                    args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
                if isinstance(args, dict) and args.get("pretrained"):
                    return str(args["pretrained"])
            except (ValueError, OSError, AttributeError):
                continue
    return None


def known_from_samples(kb: KnowledgeBase, paths: list[str], *, kb_file: str | None = None) -> dict[str, Any]:
    """The ``probe -o`` document of the verdicts in lm-eval sample files (module docstring)."""
    verdicts = read_samples(kb, paths)
    formats = set()
    for path in paths:  # the answer format the task was exported in (every document records it)
        for line in read_text(path, error=LmEvalError).splitlines()[:1]:
            spec = json.loads(line)["doc"].get("prompt_format") if line.strip() else None
            if isinstance(spec, str):
                formats.add(spec)
    probed = sorted(verdicts)
    ids = [i for i in probed if verdicts[i]]
    by_group = {}
    for g in kb.groups:
        in_g = [i for i in probed if kb.group_of(i) == g]
        by_group[g] = [sum(verdicts[i] for i in in_g), len(in_g)]
    prompt = PromptFormat.parse(formats.pop()).describe() if len(formats) == 1 else None
    out = {"known": len(ids), "total": len(probed), "known_share": round(len(ids) / len(probed), 6),
           **{f"{g}_{k}": by_group[g][i] for g in ("family", "biography") if g in by_group
              for i, k in enumerate(("known", "total"))},
           "known_by_group": by_group, "mode": "exact", "protocol": "lm-eval", "prompt_format": prompt,
           "format_source": "lm-eval samples", "model": _model_of(paths), "kb": kb_file,
           "samples": [str(p) for p in paths]}
    return {**out, "fact_ids": ids, "facts": [list(kb.facts[i]) for i in ids]}
