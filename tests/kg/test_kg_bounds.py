"""Bounded, checked input on the kg layer: files the user names are regular files under a size
cap (a FIFO or /dev/zero is refused before it is opened), release pickles are of the expected
type and expand to a bounded size, and entity, relation and value names are one printable line
each. Every refusal is exit 1 with one stderr line naming the file and the key."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest

from deepunlearn.errors import INPUT_BYTES_ENV, UserError, read_bytes
from deepunlearn.kg import KBFileError, load_kb, save_kb, to_dict
from deepunlearn.kg.domain import builtin_folder
from deepunlearn.kg.edu_relat import SHIPPED_DIR, ReleaseError, import_edu_relat
from deepunlearn.kg.safe_pickle import UnsafePickleError, expanded_size, safe_load
from kg_helpers import cli, one_line_error, small_kb

ZERO = "/dev/zero"


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "kb.fifo"
    os.mkfifo(p)
    return p


@pytest.fixture
def kb_doc():
    return to_dict(small_kb())


def write_json(tmp_path, doc, name="kb.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")  # ensure_ascii: "\ud800" stays an escape
    return p


# ------------------------------------------------------------------------ regular files, size caps
def test_show_dev_zero_is_refused_at_once(capsys):
    one_line_error(*cli(capsys, "data", "show", ZERO)[::2], ZERO, "not a regular file")


def test_a_fifo_kb_is_refused_without_blocking(fifo, capsys):
    one_line_error(*cli(capsys, "data", "show", str(fifo))[::2], str(fifo), "not a regular file")


def test_a_fifo_forms_file_is_refused(fifo, tmp_path, capsys):
    kb = save_kb(small_kb(), tmp_path / "small.json")
    one_line_error(*cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(fifo))[::2], "--add", str(fifo),
                   "not a regular file")


def test_load_kb_refuses_dev_zero_as_a_config_kb_would_name_it():
    with pytest.raises(KBFileError, match="/dev/zero: not a regular file"):
        load_kb(ZERO, flag="kb")


def test_size_cap_from_the_environment(tmp_path, capsys, monkeypatch):
    kb = save_kb(small_kb(), tmp_path / "small.json")
    monkeypatch.setenv(INPUT_BYTES_ENV, "100")
    one_line_error(*cli(capsys, "data", "show", str(kb))[::2], str(kb), "over the size limit of 100 bytes",
                   INPUT_BYTES_ENV)
    monkeypatch.setenv(INPUT_BYTES_ENV, str(kb.stat().st_size))  # exactly the size: read
    assert cli(capsys, "data", "show", str(kb))[0] == 0


def test_size_cap_on_a_forms_file(tmp_path, capsys, monkeypatch):
    import deepunlearn.kg.forms_file as forms_file

    kb = save_kb(small_kb(), tmp_path / "small.json")
    forms = tmp_path / "extra.jsonl"
    forms.write_text(json.dumps({"fact": 0, "question": "Who is Bob to Ann?", "answer": "husband"}) + "\n" * 3000)
    assert forms_file.MAX_FORMS_BYTES == 128 << 20
    monkeypatch.setenv(forms_file.FORMS_BYTES_ENV, "2000")
    one_line_error(*cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(forms))[::2], str(forms),
                   "over the size limit of 2,000 bytes", forms_file.FORMS_BYTES_ENV)
    monkeypatch.delenv(forms_file.FORMS_BYTES_ENV)
    monkeypatch.setattr(forms_file, "MAX_FORMS_BYTES", 2000)
    assert cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(forms))[0] == 1
    monkeypatch.setattr(forms_file, "MAX_FORMS_BYTES", 4000)
    assert cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(forms))[0] == 0


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_size_cap_names_the_variable(tmp_path, capsys, monkeypatch, value):
    kb = save_kb(small_kb(), tmp_path / "small.json")
    monkeypatch.setenv(INPUT_BYTES_ENV, value)
    one_line_error(*cli(capsys, "data", "show", str(kb))[::2], INPUT_BYTES_ENV, repr(value))


def test_read_bytes_stops_at_the_cap(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    assert read_bytes(p, limit=10) == b"x" * 10
    with pytest.raises(UserError, match="over the size limit of 9 bytes"):
        read_bytes(p, limit=9)


def _domain_copy(tmp_path) -> Path:
    d = tmp_path / "dom"
    shutil.copytree(builtin_folder() / "org", d)
    return d


def test_domain_toml_on_dev_zero(tmp_path, capsys):
    d = _domain_copy(tmp_path)
    (d / "domain.toml").unlink()
    (d / "domain.toml").symlink_to(ZERO)
    one_line_error(*cli(capsys, "data", "generate", "--domain", str(d), "-o", str(tmp_path / "o.json"))[::2],
                   str(d / "domain.toml"), "not a regular file")
    assert not (tmp_path / "o.json").exists()


def test_domain_toml_size_cap(tmp_path, capsys, monkeypatch):
    import deepunlearn.kg.domain as domain

    d = _domain_copy(tmp_path)
    monkeypatch.setattr(domain, "MAX_SMALL_FILE_BYTES", 1000)
    one_line_error(*cli(capsys, "data", "generate", "--domain", str(d), "-o", str(tmp_path / "o.json"))[::2],
                   str(d / "domain.toml"), "over the size limit of 1,000 bytes")


# ------------------------------------------------------------------------------- names
@pytest.mark.parametrize("mutate, key, problem", [
    (lambda d: d["entities"].__setitem__("Ann\u202e", {"gender": "female"}), 'entities["Ann\\u202e"]',
     "bidi control (U+202E)"),
    (lambda d: d["entities"].__setitem__("Ann\u2066", {"gender": "female"}), 'entities["Ann\\u2066"]', "U+2066"),
    (lambda d: d["entities"].__setitem__("A\x00n", {"gender": "female"}), 'entities["A\\u0000n"]',
     "control character (U+0000)"),
    (lambda d: d["entities"].__setitem__("A\nn", {"gender": "female"}), 'entities["A\\nn"]', "control character"),
    (lambda d: d["entities"].__setitem__("A|n", {"gender": "female"}), 'entities["A|n"]', "'|'"),
    (lambda d: d["entities"].__setitem__("A" * 201, {"gender": "female"}), 'entities["' + "A" * 57 + '..."]',
     "201 characters long"),
    (lambda d: d["relations"].__setitem__("__class__", d["relations"]["husband"]), "relations.__class__",
     "not a name rules.dl can write"),
    (lambda d: d["relations"].__setitem__("Husband", d["relations"]["husband"]), "relations.Husband",
     "not a name rules.dl can write"),
    (lambda d: d["facts"].append(["Bob", "birthyear", "19|50"]), "facts[5][2]", "value \"19|50\" holds '|'"),
])
def test_bad_names_in_a_kb_file(tmp_path, capsys, kb_doc, mutate, key, problem):
    mutate(kb_doc)
    path = write_json(tmp_path, kb_doc)
    one_line_error(*cli(capsys, "data", "show", str(path))[::2], f"{path}: {key}", problem)


@pytest.mark.parametrize("where, key", [
    (lambda d: d["entities"].__setitem__("Ann\ud800", {"gender": "female"}), 'entities["Ann\\ud800"] (the key)'),
    (lambda d: d["facts"].append(["Bob", "birthyear", "\udc00"]), "facts[5][2]"),
    (lambda d: d["relations"]["husband"]["questions"].append("Who is {o2} to {o1}?\ud83d"),
     "relations.husband.questions[1]"),
])
def test_lone_surrogates_in_a_kb_file(tmp_path, capsys, kb_doc, where, key):
    where(kb_doc)
    path = write_json(tmp_path, kb_doc)
    one_line_error(*cli(capsys, "data", "show", str(path))[::2], f"{path}: {key}", "lone surrogate")


def test_a_paired_surrogate_escape_is_an_ordinary_character(tmp_path, capsys, kb_doc):
    kb_doc["entities"]["Ann \U0001f600"] = {"gender": "female"}
    path = write_json(tmp_path, kb_doc)
    assert "\\ud83d\\ude00" in path.read_text()
    assert cli(capsys, "data", "show", str(path))[0] == 0


def test_lone_surrogate_in_a_forms_file(tmp_path, capsys):
    kb = save_kb(small_kb(), tmp_path / "small.json")
    forms = tmp_path / "extra.jsonl"
    forms.write_text(json.dumps({"fact": 0, "question": "Who is Bob to Ann?\ud800", "answer": "husband"}) + "\n")
    one_line_error(*cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(forms))[::2],
                   str(forms), "line 1", "question", "lone surrogate")


def test_a_forms_file_name_with_a_bidi_override(tmp_path, capsys):
    kb = save_kb(small_kb(), tmp_path / "small.json")
    forms = tmp_path / "extra.jsonl"
    forms.write_text(json.dumps({"fact": 0, "question": "Who is Bob to Ann?", "answer": "husband",
                                 "name": "x\u202ey"}) + "\n")
    one_line_error(*cli(capsys, "data", "forms", "--kb", str(kb), "--add", str(forms))[::2], str(forms), "line 1")


@pytest.mark.parametrize("edit, key, problem", [
    (('"North Tower", "South Tower"', '"North Tower", "North Tower"'), "entities.office.names",
     "names must be distinct, ['North Tower'] repeat"),
    (('count = 200\nnames = "person"', 'count = 3\nnames = ["Ann Lee", "Bob Ray", "Ann Lee"]'),
     "entities.person.names", "names must be distinct, ['Ann Lee'] repeat"),
    (('"North Tower"', '"North|Tower"'), "entities.office.names[0]", "holds '|'"),
    (('"Engineering"', '"Engi\\u202eneering"'), "entities.department.values[0]", "bidi control"),
    (("[relations.manager]", "[relations.__class__]"), "relations.__class__", "lower-case letter"),
])
def test_bad_names_in_domain_toml(tmp_path, capsys, edit, key, problem):
    d = _domain_copy(tmp_path)
    toml = d / "domain.toml"
    text = toml.read_text()
    assert edit[0] in text
    toml.write_text(text.replace(edit[0], edit[1], 1))
    one_line_error(*cli(capsys, "data", "generate", "--domain", str(d), "-o", str(tmp_path / "o.json"))[::2],
                   f"{toml}: {key}", problem)


# ------------------------------------------------------------------------------- release pickles
def _release_copy(tmp_path) -> Path:
    d = tmp_path / "release"
    shutil.copytree(SHIPPED_DIR, d)
    return d


def _bomb(depth: int = 64) -> list:
    x: list = []
    for _ in range(depth):
        x = [x, x]
    return x


def test_expanded_size_counts_shared_references():
    assert expanded_size([1, 2, [3, 4]], 100) == 6
    leaf = [1, 2]
    assert expanded_size([leaf, leaf], 100) == 7  # shared twice: counted twice
    cyc: list = []
    cyc.append(cyc)
    assert expanded_size(cyc, 100) == 2
    assert expanded_size(_bomb(), 10_000) > 10_000


@pytest.mark.parametrize("name", ["subsample.pt", "family-200-graph.pt", "family_relationships.pt"])
def test_a_reference_bomb_is_refused(tmp_path, capsys, name):
    d = _release_copy(tmp_path)
    data = pickle.dumps(_bomb(), protocol=2)
    assert len(data) < 2000
    (d / name).write_bytes(data)
    code, _, err = cli(capsys, "data", "import-edu-relat", str(d), "-o", str(tmp_path / "o.json"))
    one_line_error(code, err, str(d / name), "shared references expand to over")


def test_the_element_cap_is_a_parameter(tmp_path):
    p = tmp_path / "x.pt"
    p.write_bytes(pickle.dumps(list(range(100))))
    assert len(safe_load(p)) == 100
    with pytest.raises(UnsafePickleError, match="over 50 elements"):
        safe_load(p, max_elements=50)


@pytest.mark.parametrize("name, obj, expected", [
    ("subsample.pt", {"a": 1}, "expected a list or integer array of row ids, found dict of 1"),
    ("subsample.pt", ["1"], "expected a list or integer array of row ids"),
    ("family_relationships.pt", [1, 2], "expected a dict of columns"),
    ("family_biographies.pt", {"question4": 3, "answer4": []}, "expected a dict of columns"),
    ("family_relationships.pt", {"question4": ["q"], "answer4": [1]}, "column 'answer4': expected a list of 1 strings"),
    ("family-200-graph.pt", 7, "expected (edge_list, edge_type_list, names, persons), four lists; found int"),
    ("family-200-graph.pt", ([[0, 1]], "wife", ["A"], []), "four lists; found tuple of 4"),
])
def test_release_pickles_of_the_wrong_type(tmp_path, capsys, name, obj, expected):
    d = _release_copy(tmp_path)
    (d / name).write_bytes(pickle.dumps(obj))
    code, _, err = cli(capsys, "data", "import-edu-relat", str(d), "-o", str(tmp_path / "o.json"))
    one_line_error(code, err, str(d / name), expected)


def _edited_graph(monkeypatch, edit) -> None:
    """``import_edu_relat`` reads the release graph with ``edit`` applied (its Person records
    cannot be pickled again, so the file itself stays as shipped)."""
    import deepunlearn.kg.edu_relat as edu

    def load(path, *a, **kw):
        obj = safe_load(path, *a, **kw)
        if Path(path).name == "family-200-graph.pt":
            edit(*obj)
        return obj

    monkeypatch.setattr(edu, "safe_load", load)


def test_a_release_edge_out_of_range(monkeypatch):
    _edited_graph(monkeypatch, lambda edges, types, names, persons: edges.__setitem__(3, [0, 10_000]))
    with pytest.raises(ReleaseError, match=r"family-200-graph.pt: edge_list\[3\]: expected a pair of indexes"):
        import_edu_relat()


def test_a_release_name_with_a_pipe(monkeypatch):
    _edited_graph(monkeypatch, lambda edges, types, names, persons: names.__setitem__(5, "A|B"))
    with pytest.raises(ReleaseError, match=r'family-200-graph.pt: names\[5\]: entity name "A\|B" holds'):
        import_edu_relat()


def test_a_torch_archive_that_inflates_past_the_cap(tmp_path, monkeypatch):
    p = tmp_path / "big.pt"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\0" * 100_000)
    p.write_bytes(buf.getvalue())
    assert p.stat().st_size < 2000
    monkeypatch.setenv(INPUT_BYTES_ENV, "5000")
    with pytest.raises(UnsafePickleError, match="data.pkl would inflate to 100,000 bytes"):
        safe_load(p)


def test_a_fifo_pickle_is_refused(fifo):
    with pytest.raises(UnsafePickleError, match="not a regular file"):
        safe_load(fifo)
