import json
import pickle
import subprocess
import sys
import zipfile

import pytest

from deepunlearn.kg import KBFileError, load_kb, save_kb
from deepunlearn.kg.edu_relat import (
    import_edu_relat,
    load_release_example,
    load_release_minimal_sets,
    load_release_rules,
)
from deepunlearn.kg.safe_pickle import UnsafePickleError, safe_load

RELEASE_COUNTS = {
    "child": 100, "father": 65, "mother": 65, "brother": 42, "wife": 34, "husband": 34,
    "sister": 28, "niece": 11, "aunt": 11, "nephew": 5, "uncle": 5,
    "birthyear": 100, "birthplace": 100, "job": 100,
}
RELEASE_TARGETS = [267, 272, 45, 108, 79, 97, 32, 220, 145, 300, 61, 374, 311, 280, 29, 290, 68, 146,
                   122, 77, 60, 51, 116, 274, 127, 343, 324, 260, 344, 286, 275, 229, 78, 219, 375, 349,
                   283, 282, 244, 186, 304, 28, 11, 106, 96, 180, 224, 171, 250, 269, 392, 265, 214, 59, 187]


def test_import_counts_and_order(edu_kb):
    assert len(edu_kb.entities) == 100
    assert len(edu_kb.facts) == 700
    assert edu_kb.relation_counts() == RELEASE_COUNTS
    assert edu_kb.targets == RELEASE_TARGETS
    # release row 0: "Richard Perry is Reid Perry's father." -> fact 0
    assert edu_kb.facts[0] == ("Reid Perry", "father", "Richard Perry")
    assert edu_kb.facts[400] == ("Sloane Lee", "birthyear", "1908")
    assert edu_kb.probe(0).question == "Who is Richard Perry to Reid Perry?"
    assert edu_kb.probe(0).answer == "father"
    assert edu_kb.probe(401).question == "What is the birthplace of Sloane Lee?"
    assert edu_kb.probe(401).answer == "Washington state"
    genders = [e["gender"] for e in edu_kb.entities.values()]
    assert genders.count("female") == 51 and genders.count("male") == 49


def test_probes_equal_release_questions(edu_kb, edu_dir):
    rel = safe_load(edu_dir / "family_relationships.pt")
    bio = safe_load(edu_dir / "family_biographies.pt")
    qs = list(zip(rel["question4"], rel["answer4"])) + list(zip(bio["question4"], bio["answer4"]))
    assert [(p.question, p.answer) for p in edu_kb.probes()] == qs


def test_roundtrip_file_and_cli(edu_dir, tmp_path):
    out = tmp_path / "edu.json"
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "data", "import-edu-relat", str(edu_dir), "-o", str(out), "--json"],
                       capture_output=True, text=True, check=True)
    assert json.loads(r.stdout)["facts"] == 700
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "data", "show", str(out), "--json"],
                       capture_output=True, text=True, check=True)
    shown = json.loads(r.stdout)
    assert shown["people"] == 100 and shown["facts"] == 700
    assert shown["relations"] == RELEASE_COUNTS
    assert len(shown["targets"]) == 55 and shown["targets"][1] == ["Zoey Jenkins", "husband", "Xavier Ross"]
    kb = load_kb(out)
    again = tmp_path / "again.json"
    save_kb(kb, again)
    assert again.read_bytes() == out.read_bytes()


def test_release_extras(edu_dir):
    sets = load_release_minimal_sets(edu_dir, order="sorted")
    assert len(sets) == 55 and sum(len(v) for v in sets.values()) == 593
    assert sets[272] == sorted([frozenset({272, 231, 379, 319}), frozenset({272, 75, 347, 379})], key=sorted)
    # the same sets in the reference's order, from the release root or its unlearn_minimal_set/
    ref = load_release_minimal_sets(edu_dir)
    assert {t: set(v) for t, v in ref.items()} == {t: set(v) for t, v in sets.items()}
    assert load_release_minimal_sets(edu_dir / "unlearn_minimal_set") == ref
    ex = load_release_example(edu_dir)
    assert ex.recall == 0.75 and round(ex.accuracy, 4) == 0.1523
    assert len(ex.forgotten()) == 300 + 293
    rules = load_release_rules(edu_dir)
    assert len(rules) == 48 and rules[0] == ([(0, "wife", 1)], (1, "husband", 0))


def _torch_zip(path, payload: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")


class _Evil:
    def __reduce__(self):
        return (subprocess.call, (["touch", str(_Evil.marker)],))


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, edu_dir):
    _Evil.marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(), protocol=4)
    # a plain pickle and one inside a torch zip archive
    raw = tmp_path / "evil.pkl"
    raw.write_bytes(payload)
    with pytest.raises(UnsafePickleError, match="refused to load subprocess.call"):
        safe_load(raw)
    # an importer folder whose graph file is malicious
    bad = tmp_path / "release"
    bad.mkdir()
    for f in edu_dir.iterdir():
        if f.is_file():
            (bad / f.name).write_bytes(f.read_bytes())
    _torch_zip(bad / "family-200-graph.pt", payload)
    with pytest.raises(UnsafePickleError, match="family-200-graph.pt"):
        import_edu_relat(bad)
    assert not _Evil.marker.exists()
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "data", "import-edu-relat", str(bad), "-o", str(tmp_path / "x.json")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "refused to load" in r.stderr and r.stdout == ""   # no --json: nothing on stdout
    assert not _Evil.marker.exists()


def test_missing_release_file(tmp_path):
    with pytest.raises(Exception, match="missing release file"):
        import_edu_relat(tmp_path)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d["facts"].__setitem__(3, ["Reid Perry", "father"]), "field facts.3"),
        (lambda d: d.__setitem__("targets", ["x"]), "field targets.0"),
        (lambda d: d["relations"]["child"].__setitem__("kind", "cousin"), "field relations.child.kind"),
        (lambda d: d["relations"]["child"].__setitem__("question", "Who is {person}?"), "relations.child.question"),
        (lambda d: d.__setitem__("version", 99), "field version"),
        (lambda d: d["facts"].__setitem__(5, ["Nobody", "father", "Reid Perry"]), "facts[5]: subject 'Nobody'"),
        (lambda d: d["facts"].__setitem__(6, ["Reid Perry", "cousin", "Sloane Lee"]), "facts[6]: relation 'cousin'"),
        (lambda d: d.__setitem__("targets", [9999]), "targets[0]: fact index 9999"),
        (lambda d: d.pop("entities"), "field entities: Field required"),
    ],
)
def test_malformed_kb_names_the_field(edu_kb, tmp_path, mutate, needle):
    from deepunlearn.kg import to_dict

    d = json.loads(json.dumps(to_dict(edu_kb)))
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(KBFileError) as e:
        load_kb(p)
    assert str(p) in str(e.value) and needle in str(e.value)
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "data", "show", str(p), "--json"], capture_output=True, text=True)
    assert r.returncode == 1 and needle in r.stderr and set(json.loads(r.stdout)) == {"error", "file", "field"}


def test_not_json(tmp_path):
    p = tmp_path / "kb.json"
    p.write_text('{"facts": [1, 2,')
    with pytest.raises(KBFileError, match=r"kb.json:1:17: not valid JSON \(Expecting value\)"):
        load_kb(p)


# An independent reading of a release set file: the standard library's pure-Python unpickler
# (not the C one the safe loader uses), restricted to the release's plain data. What it returns
# is what torch.load gave the reference; the reference iterated it as it came.
_ORDER_SCRIPT = r"""
import io, json, pickle, sys, zipfile
from pathlib import Path
import numpy as np
from deepunlearn.kg.edu_relat import load_release_minimal_sets

class Restricted(pickle._Unpickler):
    def find_class(self, module, name):
        if (module, name) in {("__builtin__", "set"), ("__builtin__", "frozenset")}:
            return {"set": set, "frozenset": frozenset}[name]
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("_codecs", "encode"):
            import codecs
            return codecs.encode
        if module == "numpy.core.multiarray" and name == "scalar":
            from numpy._core import multiarray
            return multiarray.scalar
        raise pickle.UnpicklingError(f"{module}.{name}")

folder = Path(sys.argv[1]) / "unlearn_minimal_set"
ours = load_release_minimal_sets(folder.parent)
theirs = {}
for p in folder.glob("*.pt"):
    with zipfile.ZipFile(p) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    theirs[int(p.stem)] = [sorted(int(x) for x in s) for s in Restricted(io.BytesIO(data)).load()]
print(json.dumps({"ours": {t: [sorted(s) for s in v] for t, v in ours.items()}, "theirs": theirs}, sort_keys=True))
"""


def test_release_sets_keep_the_reference_order_under_any_hash_seed(edu_dir):
    import os

    runs = []
    for seed in ("0", "4242"):
        r = subprocess.run([sys.executable, "-c", _ORDER_SCRIPT, str(edu_dir)], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        runs.append(json.loads(r.stdout))
    assert runs[0] == runs[1]
    ours, theirs = runs[0]["ours"], runs[0]["theirs"]
    assert ours == theirs and len(ours) == 55
    # the reference order is not the sorted one (so this test sees a sort)
    assert any(v != sorted(v) for v in ours.values())
    assert ours["272"] == [[231, 272, 319, 379], [75, 272, 347, 379]]


def test_import_records_the_release_folder(edu_kb, edu_dir, tmp_path):
    assert edu_kb.metadata["release_dir"] == str(edu_dir.resolve())
    save_kb(edu_kb, tmp_path / "kb.json")
    assert load_kb(tmp_path / "kb.json").metadata["release_dir"] == str(edu_dir.resolve())


def test_minimal_set_folder_errors(tmp_path):
    from deepunlearn.kg.edu_relat import ReleaseError

    with pytest.raises(ReleaseError, match="no unlearn_minimal_set/ folder and no <row>.pt"):
        load_release_minimal_sets(tmp_path)
    with pytest.raises(ReleaseError, match="not a folder"):
        load_release_minimal_sets(tmp_path / "nope")
    (tmp_path / "3.pt").write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(ReleaseError, match=r"3.pt: item 0 is not a set of row ids"):
        load_release_minimal_sets(tmp_path)
    (tmp_path / "3.pt").write_bytes(pickle.dumps({frozenset({3, 1}), frozenset({3, 2})}, protocol=4))
    assert sorted(map(sorted, load_release_minimal_sets(tmp_path)[3])) == [[1, 3], [2, 3]]


def test_shipped_release_is_the_default(tmp_path, monkeypatch):
    """The release ships with deepunlearn: `data import-edu-relat -o F` needs no folder, the KB
    names the shipped copy (not a path of this installation), and `rules sets --sets release`
    finds the release's stored minimal sets through it, from any working folder."""
    from deepunlearn.kg.edu_relat import SHIPPED_DIR

    assert (SHIPPED_DIR / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2024 Ruihan Wu")
    assert len(list((SHIPPED_DIR / "unlearn_minimal_set").glob("*.pt"))) == 55
    monkeypatch.chdir(tmp_path)
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "data", "import-edu-relat", "-o", "edu.json", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["facts"] == 700
    kb = load_kb(tmp_path / "edu.json")
    assert kb.metadata["release_dir"] == "shipped" and kb.targets == RELEASE_TARGETS
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "rules", "sets", "--kb", "edu.json", "--sets", "release",
                        "--target", "272", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # target 272's stored sets, read straight from the shipped pickle
    stored = safe_load(SHIPPED_DIR / "unlearn_minimal_set" / "272.pt")
    got = json.loads(r.stdout)
    assert got["method"] == "stored"
    assert sorted(map(sorted, got["set_ids"])) == sorted(sorted(int(i) for i in s) for s in stored)
