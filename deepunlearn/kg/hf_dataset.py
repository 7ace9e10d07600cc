"""A KB as a Hugging Face dataset folder, and back (``data export --format hf``, ``data import-hf``).

The folder is what ``datasets.load_dataset(DIR, CONFIG)`` reads offline and what
``DatasetDict.push_to_hub`` / ``huggingface_hub.upload_folder`` publish::

    DIR/README.md              the dataset card: the hub's YAML header (configs, licence, ...) and prose
    DIR/deepunlearn.json       what the tables do not hold (KB name, metadata, target order, the sets)
    DIR/data/<config>.parquet  one parquet file per configuration, split "train" (as TOFU's)

Configurations (each a table; every row of a fact names its ``fact_id`` in the KB, its
``subject``, ``relation``, ``object``, ``group`` and ``split``):

``facts``
    one row per stored fact: its primary question and answer, whether it is a target.
``forms``
    one row per probe form of every fact (the primary question, the paraphrases ``qa1..``, the
    statements ``st1..``, the yes/no pair, the KB's own forms), with its kind, prompt and split.
``paraphrased``
    the question forms other than the primary one (where the KB has any).
``forget_<t>`` / ``retain_<t>``
    per target fact id ``t``: the facts of the minimal deep-unlearning set chosen for ``t`` (the
    target among them, with the set's id among the target's sets) and every other fact of the KB.
``holdout``
    facts of the same domain about entities the KB does not hold (``data holdout``), where given.
``entities`` / ``relations``
    the entities with their attributes; the relations with kind, group and templates.

:func:`read_hf` rebuilds the KB from the tables and ``deepunlearn.json`` (the KB file written
from it has the bytes of the exported one); the templated forms are recomputed, not read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import UserError
from .kb import KnowledgeBase

MARKER = "deepunlearn.json"
FORMAT = "deepunlearn-hf"
VERSION = 1
DATA = "data"
#: the columns of a fact row, in order (forget/retain rows add target_id, set_id, is_target)
FACT_COLUMNS = ("fact_id", "subject", "relation", "object", "group", "kind", "question", "answer", "split",
                "target", "own_wording")
FORM_COLUMNS = ("fact_id", "subject", "relation", "object", "group", "form", "kind", "text", "prompt", "answer",
                "split", "explicit", "explicit_index")


class HFDatasetError(UserError, ValueError):
    """A dataset folder cannot be written or read back: the message names the file and the problem."""


def fact_splits(kb: KnowledgeBase) -> dict[int, str]:
    """A fact's split: the one an import recorded (``metadata["splits"]``), else ``unlearn`` for a target."""
    out = {int(t): "unlearn" for t in kb.targets}
    recorded = kb.metadata.get("splits")
    if isinstance(recorded, dict):
        for s, ids in recorded.items():
            for i in ids if isinstance(ids, list) else ():
                if isinstance(i, int) and 0 <= i < len(kb.facts):
                    out[i] = str(s)
    return out


def fact_rows(kb: KnowledgeBase, ids=None) -> list[dict[str, Any]]:
    """One row per fact (``ids``, default every fact), columns :data:`FACT_COLUMNS`."""
    targets, splits = set(kb.targets), fact_splits(kb)
    rows = []
    for i in range(len(kb.facts)) if ids is None else ids:
        s, r, o = kb.facts[i]
        rel, p = kb.relations[r], kb.probe(i)
        rows.append({"fact_id": i, "subject": s, "relation": r, "object": o, "group": rel.group, "kind": rel.kind,
                     "question": p.question, "answer": p.answer, "split": splits.get(i), "target": i in targets,
                     "own_wording": i in kb.probe_overrides})
    return rows


def form_rows(kb: KnowledgeBase) -> list[dict[str, Any]]:
    """One row per probe form of every fact, columns :data:`FORM_COLUMNS`."""
    from .forms import forms_of

    explicit = {id(f): k for k, f in enumerate(kb.forms)}  # a form's place among the KB's own forms
    rows = []
    for i, (s, r, o) in enumerate(kb.facts):
        group = kb.relations[r].group
        for f in forms_of(kb, i):
            rows.append({"fact_id": i, "subject": s, "relation": r, "object": o, "group": group, "form": f.name,
                         "kind": f.kind, "text": f.text, "prompt": f.prompt, "answer": f.answer, "split": f.split,
                         "explicit": id(f) in explicit, "explicit_index": explicit.get(id(f))})
    return rows


def need(module: str):
    """Import ``module`` (datasets, pyarrow.parquet) or say in one line how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise HFDatasetError(f"the Hugging Face dataset format needs the {module.split('.')[0]!r} package: "
                             "pip install 'deepunlearn[hf]' (datasets and pyarrow)") from None


def _features(columns: tuple[str, ...], extra: dict[str, str] | None = None):
    import datasets

    types = {"fact_id": "int64", "target_id": "int64", "set_id": "int64", "target": "bool", "own_wording": "bool",
             "explicit": "bool", "is_target": "bool", "explicit_index": "int64"}
    return datasets.Features({c: datasets.Value(types.get(c, "string")) for c in (*columns, *(extra or {}))})


def config_tables(kb: KnowledgeBase, sets: dict[int, dict], holdout: KnowledgeBase | None = None
                  ) -> dict[str, tuple[list[dict], tuple[str, ...]]]:
    """Every configuration's rows and columns (module docstring). ``sets[t]`` holds the chosen
    set of target ``t`` (``set``: fact ids, the target among them) and its ``set_id``."""
    facts = fact_rows(kb)
    forms = form_rows(kb)
    out: dict[str, tuple[list[dict], tuple[str, ...]]] = {"facts": (facts, FACT_COLUMNS), "forms": (forms, FORM_COLUMNS)}
    para = [r for r in forms if r["kind"] == "qa" and r["form"] != "primary"]
    if para:
        out["paraphrased"] = (para, FORM_COLUMNS)
    cols = ("target_id", "set_id", "is_target", *FACT_COLUMNS)
    for t in kb.targets:
        info = sets[int(t)]
        chosen = set(info["set"])
        out[f"forget_{t}"] = ([{"target_id": int(t), "set_id": info["set_id"], "is_target": r["fact_id"] == t, **r}
                               for r in facts if r["fact_id"] in chosen], cols)
        out[f"retain_{t}"] = ([{"target_id": int(t), "set_id": info["set_id"], "is_target": False, **r}
                               for r in facts if r["fact_id"] not in chosen], cols)
    if holdout is not None:
        out["holdout"] = (fact_rows(holdout), FACT_COLUMNS)
    attrs = tuple(dict.fromkeys(k for a in kb.entities.values() for k in a))
    if "entity" in attrs:
        raise HFDatasetError(f"KB {kb.name!r}: an entity attribute is called 'entity', the column that names the "
                             "entity in the entities configuration; rename the attribute", field="entities")
    out["entities"] = ([{"entity": e, **{k: a.get(k) for k in attrs}} for e, a in kb.entities.items()],
                       ("entity", *attrs))
    out["relations"] = ([{"name": n, "kind": r.kind, "group": r.group, "questions": list(r.questions),
                          "statements": list(r.statements), "answer": r.answer} for n, r in kb.relations.items()],
                        ("name", "kind", "group", "questions", "statements", "answer"))
    return out


def _dataset(rows: list[dict], columns: tuple[str, ...]):
    import datasets

    feats = _features(tuple(c for c in columns if c not in ("questions", "statements")))
    if "questions" in columns:
        feats = datasets.Features({**{c: feats[c] for c in ("name", "kind", "group")},
                                   "questions": datasets.Sequence(datasets.Value("string")),
                                   "statements": datasets.Sequence(datasets.Value("string")),
                                   "answer": datasets.Value("string")})
    return datasets.Dataset.from_list(rows, features=feats)


def write_hf(kb: KnowledgeBase, out: str | os.PathLike, sets: dict[int, dict], *, holdout: KnowledgeBase | None = None,
             license: str = "other", sets_note: str = "", kb_file: str | None = None,
             holdout_file: str | None = None) -> dict[str, Any]:
    """Write the dataset folder ``out`` atomically (module docstring); returns the export's
    answer: the folder, each configuration's row count, the licence."""
    from ..errors import atomic_dir
    from .hf_card import card_text

    datasets = need("datasets")
    datasets.disable_progress_bars()  # one bar per parquet file otherwise
    tables = config_tables(kb, sets, holdout)
    counts = {name: len(rows) for name, (rows, _) in tables.items()}
    header = {"format": FORMAT, "version": VERSION,
              "kb": {"name": kb.name, "background": list(kb.background), "targets": [int(t) for t in kb.targets],
                     "metadata": kb.metadata, "form_splits": dict(sorted(kb.form_splits.items()))},
              "sets": {str(t): {k: v for k, v in sets[int(t)].items()} for t in kb.targets},
              "sets_note": sets_note, "configs": counts,
              **({"holdout": {"name": holdout.name, "of": holdout_file}} if holdout is not None else {})}
    with atomic_dir(out) as tmp:
        (tmp / DATA).mkdir()
        for name, (rows, columns) in tables.items():
            _dataset(rows, columns).to_parquet(str(tmp / DATA / f"{name}.parquet"))
        (tmp / "README.md").write_text(card_text(kb, header, license=license, kb_file=kb_file), encoding="utf-8")
        (tmp / MARKER).write_text(json.dumps(header, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return {"output": str(out), "format": "hf", "configs": counts, "license": license}


def dataset_folder(p: Path) -> bool:
    """An empty folder or one this export wrote (its ``deepunlearn.json``): ``-o`` may replace it."""
    return not any(p.iterdir()) or (p / MARKER).is_file()


def _table(folder: Path, name: str, columns: tuple[str, ...]) -> list[dict]:
    pa, pq = need("pyarrow"), need("pyarrow.parquet")

    path = folder / DATA / f"{name}.parquet"
    if not path.is_file():
        raise HFDatasetError(f"{path}: no such file (the {name!r} configuration of a 'data export --format hf' "
                             "folder)", file=path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise HFDatasetError(f"{path}: not a readable parquet file ({str(e).splitlines()[0][:200]})",
                             file=path) from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise HFDatasetError(f"{path}: column {missing[0]!r} is missing (expected {', '.join(columns)})",
                             file=path, field=missing[0])
    return table.to_pylist()


def read_hf(folder: str | os.PathLike, *, flag: str | None = None) -> KnowledgeBase:
    """The KB a dataset folder holds (:func:`write_hf`'s inverse); every problem is one
    :class:`HFDatasetError` naming the file."""
    from ..errors import load_json
    from .io import KBFileError, from_dict

    root = Path(folder)
    where = f"{flag} {root}" if flag else str(root)
    if not root.is_dir():
        raise HFDatasetError(f"{where}: no such folder (give a folder 'data export --format hf' wrote)", file=root,
                             field=flag)
    if not (root / MARKER).is_file():
        raise HFDatasetError(f"{where}: no {MARKER} in it: not a folder 'data export --format hf' wrote",
                             file=root / MARKER, field=flag)
    header = load_json(root / MARKER, error=HFDatasetError)
    kbh = header.get("kb") if isinstance(header, dict) else None
    if not (isinstance(header, dict) and header.get("format") == FORMAT and isinstance(kbh, dict)):
        raise HFDatasetError(f"{root / MARKER}: field format: expected {FORMAT!r} with a 'kb' object",
                             file=root / MARKER, field="format")
    if header.get("version") != VERSION:
        raise HFDatasetError(f"{root / MARKER}: field version: this deepunlearn reads version {VERSION}, found "
                             f"{header.get('version')!r}", file=root / MARKER, field="version")
    facts = _table(root, "facts", FACT_COLUMNS)
    rels = _table(root, "relations", ("name", "kind", "group", "questions", "statements", "answer"))
    ents = _table(root, "entities", ("entity",))
    forms = sorted((r for r in _table(root, "forms", FORM_COLUMNS) if r["explicit"]), key=lambda r: r["explicit_index"])
    for j, r in enumerate(facts):
        if r["fact_id"] != j:
            raise HFDatasetError(f"{root / DATA / 'facts.parquet'}: row {j}: fact_id {r['fact_id']!r}, expected {j} "
                                 "(rows in fact order)", file=root / DATA / "facts.parquet", field="fact_id")
    doc = {"format": "deepunlearn-kb", "version": 2, "name": kbh.get("name"), "background": kbh.get("background"),
           "entities": {e.pop("entity"): {k: v for k, v in e.items() if v is not None} for e in ents},
           "relations": {r["name"]: {"kind": r["kind"], "group": r["group"], "questions": r["questions"],
                                     "statements": r["statements"], "answer": r["answer"]} for r in rels},
           "facts": [[r["subject"], r["relation"], r["object"]] for r in facts],
           "targets": kbh.get("targets"),
           "probes": {str(r["fact_id"]): [r["question"], r["answer"]] for r in facts if r["own_wording"]},
           "metadata": kbh.get("metadata")}
    if forms or kbh.get("form_splits"):
        doc["forms"] = [{"fact": r["fact_id"], "kind": r["kind"], "text": r["text"], "answer": r["answer"],
                         "name": r["form"], **({"split": r["split"]} if r["split"] else {})} for r in forms]
        doc["form_splits"] = kbh.get("form_splits") or {}
    try:
        kb = from_dict(doc, source=str(root))
    except KBFileError as e:
        raise HFDatasetError(str(e), file=root, field=e.field) from None
    flagged = sorted(r["fact_id"] for r in facts if r["target"])
    if flagged != sorted(kb.targets):
        raise HFDatasetError(f"{root / DATA / 'facts.parquet'}: column target marks facts {flagged[:5]} but "
                             f"{MARKER} lists targets {sorted(kb.targets)[:5]}", file=root / DATA / "facts.parquet",
                             field="target")
    return kb
