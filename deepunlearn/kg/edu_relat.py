"""Import the public EDU-RELAT release (the paper's data) into the native KB format.

The folder holds the files listed in docs/data.md. Fact order is kept: relationship
rows 0..399 become fact ids 0..399 and biography rows 0..299 become 400..699, so a release
row id *is* a fact id. The 55 targets keep the release's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from .kb import KBError, KnowledgeBase, Relation
from .names import name_problem, shown
from .safe_pickle import safe_load

_BIO_QUESTION = re.compile(r"^What is the (?P<attr>[a-z]+) of (?P<who>.+)\?$")

#: The release as shipped with deepunlearn (package data, MIT licence: ``LICENSE`` beside it).
SHIPPED_DIR = Path(__file__).resolve().parent / "resources" / "edu-relat"
#: What a KB imported from the shipped copy records as ``metadata["release_dir"]``: the copy's
#: place depends on the installation, so the KB names it rather than its path.
SHIPPED = "shipped"

REQUIRED = ("family-200-graph.pt", "family_relationships.pt", "family_biographies.pt", "subsample.pt")


class ReleaseError(KBError):
    """The release folder is missing a file or holds something unexpected."""


#: Relations the release's rules (rule set ``edu-relat``) name but no KB holds, with why. The
#: import says so once and records them in ``metadata["acknowledged_relations"]``; the rules
#: commands then do not repeat the "relation ... never fires" warning on every run.
RELEASE_RULE_QUIRKS = {
    "newphe": "the release's rules 16 and 19 (rule set 'edu-relat', this KB's default) use 'newphe', a "
              "misspelling of 'nephew' that no fact has, so they never fire, as in the reference "
              "(rule set 'family' corrects it)",
}


def _need(folder: Path, name: str) -> Path:
    p = folder / name
    if not p.exists():
        raise ReleaseError(f"{folder}: missing release file {name!r} (expected the files of the EDU-RELAT release)")
    return p


def release_dir(where: str | Path | None = None) -> Path:
    """The release folder ``where`` names: ``None`` or ``"shipped"`` is the copy shipped with
    deepunlearn, anything else a folder path."""
    return SHIPPED_DIR if where is None or str(where) == SHIPPED else Path(where)


def import_edu_relat(folder: str | Path | None = None) -> KnowledgeBase:
    """Build the 700-fact KB of the release (``folder``: a copy of the release; by default the
    one shipped with deepunlearn).

    ``metadata["release_dir"]`` records the release folder (absolute; ``"shipped"`` for the
    shipped copy), so that the release's stored minimal sets can be found again from the KB
    (``deepunlearn.rules.stored_sets``).

    >>> kb = import_edu_relat()
    >>> len(kb.facts), len(kb.targets), kb.metadata["release_dir"]
    (700, 55, 'shipped')

    Probes keep the release's own ``question4``/``answer4`` wording; where that equals the
    relation's template (everywhere in the official release) nothing extra is stored.
    """
    shipped = folder is None or str(folder) == SHIPPED
    folder = release_dir(folder)
    graph, rel, bio, targets = _read_release(folder)
    edges, edge_types, names, persons = graph
    gpath, _, bpath, _ = (folder / n for n in REQUIRED)
    entities = _entities(gpath, names, persons)
    if len(edges) != len(rel["question4"]):
        raise ReleaseError(f"{folder}: {len(edges)} graph edges but {len(rel['question4'])} relationship rows")
    facts, questions = _facts(gpath, bpath, graph, rel, bio, entities)

    relations: dict[str, Relation] = {}
    for _, r, _ in facts:
        if r not in relations:
            relations[r] = Relation.default(r, "entity" if r in set(edge_types) else "value")
    kb = KnowledgeBase(
        entities=entities,
        relations=relations,
        facts=facts,
        targets=targets,
        name="edu-relat",
        metadata={
            "source": "EDU-RELAT public release (wrh14/deep_unlearning, MIT licence)",
            "rules": "edu-relat",
            # where the release lies: `rules --sets release` reads its unlearn_minimal_set/ from here
            "release_dir": SHIPPED if shipped else str(folder.resolve()),
            # rules-vs-KB warnings the user is told once, at import (see release_notes)
            "acknowledged_relations": dict(RELEASE_RULE_QUIRKS),
        },
    )
    for i, (q, a) in enumerate(questions):
        p = kb.probe(i)
        if (p.question, p.answer) != (q, a):
            kb.probe_overrides[i] = (q, a)
    kb.forms = release_forms(folder, rel, bio)
    try:
        kb.validate()
    except ReleaseError:
        raise
    except KBError as e:  # a name no KB may hold (a '|', a control character, ...)
        raise ReleaseError(f"{folder}: {e}", file=folder, field=e.field) from None
    return kb


def _read_release(folder: Path) -> tuple[list, dict, dict, list[int]]:
    """The release's four files, checked: the graph's four lists, the relationship and
    biography rows, and the target row ids."""
    if not folder.is_dir():
        raise ReleaseError(f"{folder}: not a folder")
    for n in REQUIRED:
        _need(folder, n)
    gpath, rpath, bpath, spath = (folder / n for n in REQUIRED)
    graph = safe_load(gpath)
    if not (isinstance(graph, (tuple, list)) and len(graph) == 4 and all(isinstance(x, list) for x in graph)):
        raise ReleaseError(f"{gpath}: expected (edge_list, edge_type_list, names, persons), four lists; "
                           f"found {_kind(graph)}", file=gpath)
    rel, bio = _rows(rpath), _rows(bpath)
    subsample = safe_load(spath)
    if isinstance(subsample, np.ndarray) and subsample.ndim == 1 and subsample.dtype.kind in "iu":
        subsample = subsample.tolist()
    if not (isinstance(subsample, (list, tuple)) and all(_is_int(t) for t in subsample)):
        raise ReleaseError(f"{spath}: expected a list or integer array of row ids, found {_kind(subsample)}",
                           file=spath)
    return graph, rel, bio, [int(t) for t in subsample]


def _entities(gpath: Path, names: list, persons: list) -> dict[str, dict[str, str]]:
    """The people of the graph with their genders; a bad name or gender is a ReleaseError."""
    if len(names) != len(persons):
        raise ReleaseError(f"{gpath}: {len(names)} names but {len(persons)} persons")
    entities: dict[str, dict[str, str]] = {}
    for i, (name, person) in enumerate(zip(names, persons)):
        gender = getattr(person, "gender", None)
        if gender not in ("male", "female"):
            raise ReleaseError(f"{gpath}: persons[{i}] has gender {str(gender)[:60]!r}")
        if not isinstance(name, (str, int, np.integer)):
            raise ReleaseError(f"{gpath}: names[{i}]: expected a name (a string), found {_kind(name)}", file=gpath)
        problem = name_problem(str(name))
        if problem:
            raise ReleaseError(f"{gpath}: names[{i}]: entity name {shown(str(name))} {problem}", file=gpath,
                               field=f"names[{i}]")
        entities[str(name)] = {"gender": gender}
    return entities


def _facts(gpath: Path, bpath: Path, graph: list, rel: dict, bio: dict,
           entities: dict) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The facts (graph edges, then biography rows) with the release's question and answer of each."""
    edges, edge_types, names, _ = graph
    facts: list[tuple[str, str, str]] = []
    questions: list[tuple[str, str]] = []
    for i, (edge, r) in enumerate(zip(edges, edge_types)):
        try:
            a, b = edge
            facts.append((str(names[int(a)]), str(r), str(names[int(b)])))
        except (TypeError, ValueError, IndexError):
            raise ReleaseError(f"{gpath}: edge_list[{i}]: expected a pair of indexes into names, found "
                               f"{_kind(edge)}", file=gpath) from None
        questions.append((rel["question4"][i], rel["answer4"][i]))
    for i, (q, a) in enumerate(zip(bio["question4"], bio["answer4"])):
        m = _BIO_QUESTION.match(q) if isinstance(q, str) else None
        if not m or m["who"] not in entities:
            raise ReleaseError(f"{bpath}: row {i}: cannot read question {str(q)[:80]!r}")
        facts.append((m["who"], m["attr"], str(a)))
        questions.append((q, str(a)))
    return facts, questions


def _kind(x: object) -> str:
    """What a pickle held, in words (its type, and its length where it has one)."""
    n = f" of {len(x)}" if isinstance(x, (list, tuple, dict, set, frozenset)) else ""
    if isinstance(x, np.ndarray):
        n = f" of dtype {x.dtype} and shape {x.shape}"
    return f"{type(x).__name__}{n}"


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _rows(path: Path) -> dict:
    """A release table (``family_relationships.pt``, ``family_biographies.pt``): a dict of
    columns, each a list of strings of the same length as ``question4``."""
    rows = safe_load(path)
    if not isinstance(rows, dict) or not all(isinstance(rows.get(k), list) for k in ("question4", "answer4")):
        raise ReleaseError(f"{path}: expected a dict of columns (lists) with question4 and answer4, found "
                           f"{_kind(rows)}", file=path)
    n = len(rows["question4"])
    for k, col in rows.items():
        if not isinstance(col, list) or len(col) != n or not all(isinstance(x, str) for x in col):
            raise ReleaseError(f"{path}: column {str(k)[:40]!r}: expected a list of {n} strings, found {_kind(col)}",
                               file=path)
    return rows


def release_forms(folder: Path, rel: dict, bio: dict) -> list:
    """The release's own probe forms of every fact (relationship row i = fact i, biography row j
    = fact 400 + j), named after their columns: ``question`` (the completion: the statement
    ``fact`` with its answer span), ``question2`` (yes/no, answer yes), ``question3`` (yes/no with
    a false distractor, answer no; relationships only) and ``question4`` (the QA probe, which is
    also the ``primary`` form). A row whose completion is not its ``fact`` sentence cut before the
    answer is a :class:`ReleaseError`."""
    from .forms import Form, FormError

    out: list[Form] = []
    for offset, rows, fname in ((0, rel, "family_relationships.pt"), (len(rel["question4"]), bio, "family_biographies.pt")):
        for k in range(len(rows["question4"])):
            i = offset + k
            try:
                st = Form(i, "statement", str(rows["fact"][k]), str(rows["answer"][k]), "question")
                if st.prompt.rstrip() != str(rows["question"][k]).rstrip():
                    raise FormError(f"completion {rows['question'][k]!r} is not the fact {rows['fact'][k]!r} "
                                    "cut before its answer")
                out.append(st)
                if "question2" in rows:
                    out.append(Form(i, "yesno", str(rows["question2"][k]), str(rows["answer2"][k]).lower(), "question2"))
                    out.append(Form(i, "yesno", str(rows["question3"][k]), str(rows["answer3"][k]).lower(), "question3"))
                out.append(Form(i, "qa", str(rows["question4"][k]), str(rows["answer4"][k]), "question4"))
            except (FormError, KeyError, IndexError, TypeError) as e:
                raise ReleaseError(f"{folder / fname}: row {k}: {e}") from None
    return out


def acknowledged_relations(kb: KnowledgeBase) -> dict[str, str]:
    """``metadata["acknowledged_relations"]`` of a KB: relations its rules may name although no
    fact has them, which the user was told about (at import); empty if absent or malformed."""
    got = kb.metadata.get("acknowledged_relations")
    if not isinstance(got, dict):
        return {}
    return {str(k): str(v) for k, v in got.items()}


def release_notes(kb: KnowledgeBase) -> list[str]:
    """What ``data import-edu-relat`` tells the user once about the imported KB."""
    return [f"{why}; recorded in the KB's metadata 'acknowledged_relations', so the rules commands on this KB "
            f"do not repeat this warning" for why in acknowledged_relations(kb).values()]


# ---------------------------------------------------------------------------- release extras
# Read by the rules layer's checks (cached minimal sets, example evaluation, raw rules).


def minimal_set_folder(folder: str | Path) -> Path:
    """The folder of ``<row>.pt`` files: ``folder/unlearn_minimal_set`` when the release root
    is given, else ``folder`` itself when it holds ``<row>.pt`` files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReleaseError(f"{folder}: not a folder (expected the release folder or a folder of <row>.pt minimal-set files)")
    sub = folder / "unlearn_minimal_set"
    if sub.is_dir():
        return sub
    if any(p.stem.isdigit() for p in folder.glob("*.pt")):
        return folder
    raise ReleaseError(f"{folder}: no unlearn_minimal_set/ folder and no <row>.pt minimal-set files in it")


def load_release_minimal_sets(folder: str | Path, order: Literal["reference", "sorted"] = "reference"
                              ) -> dict[int, list[frozenset[int]]]:
    """``unlearn_minimal_set/<row>.pt`` -> {row: [frozenset of row ids, ...]}.

    ``folder`` is the release folder or the ``unlearn_minimal_set/`` folder itself (any folder
    of that layout: files named ``<row>.pt``, each a pickled ``set`` of ``frozenset``s of row ids).

    The reference (``utils_metric.get_valid_unlearn_general`` and the Table-3 notebook) does
    ``torch.load`` and iterates the set as it comes back. Unpickling a set rebuilds it by inserting
    the pickle's items in their stored order (``set(items)``), and the safe unpickler does exactly
    that; the iteration order of a set of frozensets of ints does not depend on ``PYTHONHASHSEED``
    (int hashes are not randomised). ``order="reference"`` (default) keeps that iteration order,
    i.e. the order in which the reference computed its recall list and took ``argmax``;
    ``order="sorted"`` sorts the sets by their sorted ids. A file holding a list of sets (not
    the release's layout) keeps the list's order, duplicates dropped.
    """
    if order not in ("reference", "sorted"):
        raise ValueError(f"order must be 'reference' or 'sorted', got {order!r}")
    d = minimal_set_folder(folder)
    out: dict[int, list[frozenset[int]]] = {}
    for p in sorted((p for p in d.glob("*.pt") if p.stem.isdigit()), key=lambda p: int(p.stem)):
        items = safe_load(p)
        if not isinstance(items, (set, frozenset, list, tuple)):
            raise ReleaseError(f"{p}: expected a set of frozensets of row ids, found {type(items).__name__}")
        sets: list[frozenset[int]] = []
        for k, s in enumerate(items):  # a set: its own iteration order, nothing rebuilt
            try:
                sets.append(frozenset(int(x) for x in s))
            except (TypeError, ValueError):
                raise ReleaseError(f"{p}: item {k} is not a set of row ids: {s!r}") from None
        if isinstance(items, (list, tuple)):  # a list: the reference's list(...) keeps its order
            sets = list(dict.fromkeys(sets))
        out[int(p.stem)] = sorted(sets, key=sorted) if order == "sorted" else sets
    return out


def release_relationship_facts(folder: str | Path) -> list[tuple[str, str, str]] | None:
    """The release's relationship rows as facts ``(subject, relation, object)`` (row i = fact i),
    from ``family-200-graph.pt`` in ``folder`` or its parent; ``None`` when there is none."""
    folder = Path(folder)
    for d in (folder, folder.parent):
        p = d / "family-200-graph.pt"
        if p.is_file():
            try:
                edges, edge_types, names, _ = safe_load(p)
                return [(str(names[int(a)]), str(r), str(names[int(b)])) for (a, b), r in zip(edges, edge_types)]
            except (TypeError, ValueError, IndexError):
                raise ReleaseError(f"{p}: expected (edge_list, edge_type_list, names, persons)") from None
    return None


@dataclass(frozen=True)
class ReleaseExample:
    """``example_for_evaluation/``: per-row correctness after unlearning target row 272 and the
    reference's (recall, accuracy of relationships, accuracy of biographies, accuracy)."""

    target: int
    relationships_correct: list[bool]
    biographies_correct: list[bool]
    recall: float
    accuracy_relationships: float
    accuracy_biographies: float
    accuracy: float

    def forgotten(self) -> list[int]:
        """Fact ids (= row ids) the model got wrong: relationships, then biographies (400+)."""
        n = len(self.relationships_correct)
        return [i for i, ok in enumerate(self.relationships_correct) if not ok] + [
            n + i for i, ok in enumerate(self.biographies_correct) if not ok
        ]


def load_release_example(folder: str | Path, target: int = 272) -> ReleaseExample:
    d = Path(folder) / "example_for_evaluation"
    try:
        rel = [bool(x) for x in safe_load(_need(d, "relationships_correct.pt"))]
        bio = [bool(x) for x in safe_load(_need(d, "biographies_correct.pt"))]
        rec, acc_rel, acc_bio, acc = (float(x) for x in safe_load(_need(d, "rec_acc.pt")))
    except (TypeError, ValueError) as e:
        raise ReleaseError(f"{d}: expected lists of booleans and (recall, accuracies) numbers ({e})", file=d) from None
    return ReleaseExample(target, rel, bio, rec, acc_rel, acc_bio, acc)


def load_release_rules(folder: str | Path) -> list[tuple[list[tuple[int, str, int]], tuple[int, str, int]]]:
    """``family_rule.pt`` -> [(body tuples, head tuple)]; a tuple ``(i, r, j)`` means x_j is x_i's r."""
    rules = safe_load(_need(Path(folder), "family_rule.pt"))
    out = []
    for k, rule in enumerate(rules):
        try:
            body = [(int(i), str(r), int(j)) for i, r, j in rule.left_tuples]
            i, r, j = rule.right_tuple
        except (AttributeError, TypeError, ValueError):
            raise ReleaseError(f"{folder}/family_rule.pt: rule {k} is not a Rule(left_tuples, right_tuple)") from None
        out.append((body, (int(i), str(r), int(j))))
    return out
