"""``data export --format hf`` and ``data import-hf``: a folder ``datasets.load_dataset`` reads
offline, whose row counts are the KB's, whose forget sets make their targets underivable, and
which reads back to the same KB file byte for byte."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest

from deepunlearn import generate_family
from deepunlearn.cli import main
from deepunlearn.kg.forms import forms_of
from deepunlearn.kg.io import load_kb, save_kb
from deepunlearn.rules.graph import derivable


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _export(kb_path, out, capsys, *extra) -> dict:
    rc = main(["data", "export", str(kb_path), "--format", "hf", "-o", str(out), "--json", *extra])
    res = capsys.readouterr()
    assert rc == 0, res.err
    return json.loads(res.out)


def _expected_counts(kb, sets) -> dict[str, int]:
    """Row counts from the KB itself, not from the export's own record."""
    n = len(kb.facts)
    out = {"facts": n, "forms": sum(len(forms_of(kb, i)) for i in range(n)),
           "entities": len(kb.entities), "relations": len(kb.relations)}
    for t in kb.targets:
        out[f"forget_{t}"] = len(sets[t])
        out[f"retain_{t}"] = n - len(sets[t])
    return out


def _check_sets(kb, folder) -> dict[int, list[int]]:
    """Every forget set holds its target, is the set_id-th minimal set, and removing it makes the
    target underivable; returns the sets."""
    from deepunlearn.rules.metrics import Evaluator

    ev = Evaluator(kb)
    sets = {}
    for t in kb.targets:
        rows = pq.read_table(folder / "data" / f"forget_{t}.parquet").to_pylist()
        ids = [r["fact_id"] for r in rows]
        assert [r["fact_id"] for r in rows if r["is_target"]] == [t]
        assert sorted(ev.minimal_sets(t).sets[rows[0]["set_id"]]) == sorted(ids)
        assert not derivable(ev.graph, t, removed=ids)  # a deep-unlearning set, and a minimal one:
        assert all(derivable(ev.graph, t, removed=[i for i in ids if i != f]) for f in ids)
        retain = {r["fact_id"] for r in pq.read_table(folder / "data" / f"retain_{t}.parquet").to_pylist()}
        assert retain.isdisjoint(ids) and len(retain) + len(ids) == len(kb.facts)
        sets[t] = ids
    return sets


def _load_every_config(folder, cache) -> dict[str, int]:
    import datasets

    datasets.disable_progress_bars()
    names = datasets.get_dataset_config_names(str(folder))
    return {n: datasets.load_dataset(str(folder), n, cache_dir=str(cache))["train"].num_rows for n in names}


def test_a_family_kb_loads_config_by_config_and_reads_back_to_the_same_bytes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    kb = generate_family(8, seed=1)
    kb.probe_overrides[3] = ("A question of the KB's own?", kb.probe(3).answer)
    kb.form_splits["qa1"] = "test"
    src = save_kb(kb, tmp_path / "kb.json")
    forms = tmp_path / "more.jsonl"  # forms of a late fact, then of an early one: the KB keeps this order
    forms.write_text("".join(json.dumps({"fact": list(kb.facts[i]), "question": f"Asked again, {i}?",
                                         "answer": kb.probe(i).answer}) + "\n" for i in (9, 2)))
    assert main(["data", "forms", "--kb", str(src), "--add", str(forms), "--split", "test", "-o", str(src)]) == 0
    kb = load_kb(src)
    assert [f.fact_id for f in kb.forms] == [9, 2]
    hold = tmp_path / "hold.json"
    assert main(["data", "holdout", "--kb", str(src), "--seed", "3", "-o", str(hold), "--json"]) == 0
    capsys.readouterr()
    res = _export(src, tmp_path / "ds", capsys, "--holdout", str(hold), "--license", "cc-by-4.0")
    sets = _check_sets(kb, tmp_path / "ds")
    expected = {**_expected_counts(kb, sets), "holdout": len(load_kb(hold).facts),
                "paraphrased": sum(f.kind == "qa" and f.name != "primary" for i in range(len(kb.facts))
                                   for f in forms_of(kb, i))}
    assert _load_every_config(tmp_path / "ds", tmp_path / "cache") == expected == res["configs"]
    card = (tmp_path / "ds" / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n") and "license: cc-by-4.0" in card and "size_categories:\n- n<1K" in card
    assert "deepunlearn data generate --people 8 --seed 1" in card and "push_to_hub" in card
    facts = pq.read_table(tmp_path / "ds" / "data" / "facts.parquet").to_pylist()
    assert facts[3]["question"] == "A question of the KB's own?" and facts[3]["own_wording"]
    assert {r["split"] for r in facts if r["target"]} == {"unlearn"}
    assert main(["data", "import-hf", str(tmp_path / "ds"), "-o", str(tmp_path / "back.json")]) == 0
    assert _sha(tmp_path / "back.json") == _sha(src)


@pytest.mark.slow
def test_the_paper_release_reads_back_to_the_same_bytes_and_counts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    src = tmp_path / "edu.json"
    assert main(["data", "import-edu-relat", "-o", str(src)]) == 0
    capsys.readouterr()
    kb = load_kb(src)
    res = _export(src, tmp_path / "ds", capsys)
    assert res["license"] == "mit"
    sets = _check_sets(kb, tmp_path / "ds")
    expected = _expected_counts(kb, sets)
    got = {n: pq.read_metadata(tmp_path / "ds" / "data" / f"{n}.parquet").num_rows for n in expected}
    assert got == expected and len(sets) == 55
    import datasets

    forms = datasets.load_dataset(str(tmp_path / "ds"), "forms", cache_dir=str(tmp_path / "c"))["train"]
    assert forms.num_rows == expected["forms"] and sum(forms["explicit"]) == len(kb.forms)
    assert main(["data", "import-hf", str(tmp_path / "ds"), "-o", str(tmp_path / "back.json")]) == 0
    assert _sha(tmp_path / "back.json") == _sha(src)


def test_an_org_kb_every_config_loads_with_the_kbs_counts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from deepunlearn.rules.generate import generate_domain

    kb = generate_domain("org", 12, seed=2, targets_per_relation=1)
    src = save_kb(kb, tmp_path / "org.json")
    kb = load_kb(src)
    res = _export(src, tmp_path / "ds", capsys)
    sets = _check_sets(kb, tmp_path / "ds")
    expected = _expected_counts(kb, sets)
    got = _load_every_config(tmp_path / "ds", tmp_path / "cache")
    assert {n: got[n] for n in expected} == expected and set(got) - set(expected) <= {"paraphrased"}
    assert res["configs"] == got
    assert "deepunlearn data generate --domain org --people 12 --seed 2" in (tmp_path / "ds" / "README.md").read_text()
    assert main(["data", "import-hf", str(tmp_path / "ds"), "-o", str(tmp_path / "back.json")]) == 0
    assert _sha(tmp_path / "back.json") == _sha(src)


def test_refusals_are_one_line(tmp_path, capsys):
    src = save_kb(generate_family(6, seed=3), tmp_path / "kb.json")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert main(["data", "export", str(src), "--format", "hf", "-o", str(tmp_path / "other")]) == 1
    err = capsys.readouterr().err
    assert "not a dataset folder" in err and err.count("\n") == 1 and (tmp_path / "other" / "notes.txt").exists()
    assert main(["data", "import-hf", str(tmp_path / "other"), "-o", str(tmp_path / "b.json")]) == 1
    assert "no deepunlearn.json" in capsys.readouterr().err
    _export(src, tmp_path / "ds", capsys)
    (tmp_path / "ds" / "data" / "facts.parquet").write_bytes(b"not parquet")
    assert main(["data", "import-hf", str(tmp_path / "ds"), "-o", str(tmp_path / "b.json"), "--json"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert "facts.parquet: not a readable parquet file" in err["error"] and not (tmp_path / "b.json").exists()
    _export(src, tmp_path / "ds", capsys)  # its own folder is rewritten without --force
    with pytest.raises(SystemExit) as e:
        main(["data", "export", str(src), "--format", "tsv", "--license", "mit", "-o", str(tmp_path / "x.tsv")])
    assert e.value.code == 2 and "--license: only with --format hf" in capsys.readouterr().err


def test_without_datasets_installed_the_export_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import sys

    src = save_kb(generate_family(6, seed=3), tmp_path / "kb.json")
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets raises ImportError
    assert main(["data", "export", str(src), "--format", "hf", "-o", str(tmp_path / "ds")]) == 1
    err = capsys.readouterr().err
    assert "pip install 'deepunlearn[hf]'" in err and err.count("\n") == 1 and not (tmp_path / "ds").exists()


def test_an_imported_kb_keeps_its_splits_in_the_facts_config(tmp_path, capsys):
    tsv = tmp_path / "t.tsv"
    tsv.write_text("subject\trelation\tobject\tsplit\nAnn\thusband\tBob\tunlearn\nBob\twife\tAnn\ttest\n"
                   "Cy\tfather\tBob\ttrain\nAnn\tgender\tfemale\nBob\tgender\tmale\nCy\tgender\tmale\n")
    assert main(["data", "import-triples", str(tsv), "--domain", "family", "-o", str(tmp_path / "kb.json")]) == 0
    capsys.readouterr()
    _export(tmp_path / "kb.json", tmp_path / "ds", capsys)
    facts = pq.read_table(tmp_path / "ds" / "data" / "facts.parquet").to_pylist()
    assert [(r["subject"], r["split"], r["target"]) for r in facts] == [("Ann", "unlearn", True), ("Bob", "test", False),
                                                                         ("Cy", "train", False)]
    forget = pq.read_table(tmp_path / "ds" / "data" / "forget_0.parquet").to_pylist()
    assert [r["fact_id"] for r in forget] == [0, 1]  # husband and wife derive each other: both go
    assert main(["data", "import-hf", str(tmp_path / "ds"), "-o", str(tmp_path / "back.json")]) == 0
    assert _sha(tmp_path / "back.json") == _sha(tmp_path / "kb.json")
