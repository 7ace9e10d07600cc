"""``deepunlearn probe --mode ... --forms ...`` and the probe cache's keys over forms."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main


def _run(capsys, *argv):
    code = main(["probe", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_probe_json_adds_per_form_and_fallback(capsys, mini_model_dir, mini_kb_file):
    code, out, _ = _run(capsys, "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--mode", "yesno",
                        "--forms", "yes1,no1", "--json")
    assert code == 0
    d = json.loads(out)
    # mini: Ann -child-> Bob has yes1 and no1; Bob -parent-> Ann has none ("parent" is no
    # built-in relation, it has no templates): it falls back and is not known under yesno.
    assert d["mode"] == "yesno" and d["forms"] == "yes1,no1" and d["fallback"] == 1 and d["total"] == 2
    assert set(d["per_form"]) == {"yes1", "no1"}
    assert all(v["yesno"][1] == 1 for v in d["per_form"].values())
    assert d["known"] <= 1
    code, out, _ = _run(capsys, "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--json")
    assert code == 0 and "per_form" not in json.loads(out)  # today's probe: no form fields


def test_probe_text_prints_a_per_form_table(capsys, mini_model_dir, mini_kb_file):
    code, out, _ = _run(capsys, "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--mode", "exact",
                        "--forms", "primary,st1")
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "forms 'primary,st1'; 0 fact(s) fell back to their primary form"
    assert lines[2].split() == ["form", "mode", "known/probed"]
    assert [ln.split()[:2] for ln in lines[3:]] == [["primary", "exact"], ["st1", "exact"]]
    # both facts have a primary form; only the child fact (a built-in relation) has st1
    assert lines[3].split()[2].endswith("/2") and lines[4].split()[2].endswith("/1")


def test_a_bad_forms_token_is_one_line_naming_the_flag(capsys, mini_model_dir, mini_kb_file):
    code, out, err = _run(capsys, "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--forms", "st1,bogus")
    assert code == 1 and out == ""
    assert err.startswith("deepunlearn probe: error: --forms: 'bogus' is not a form of this KB") and err.count("\n") == 1
    code, out, _ = _run(capsys, "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--forms", "bogus", "--json")
    assert code == 1 and json.loads(out)["field"] == "--forms"


def test_a_bad_mode_is_a_usage_error(capsys, mini_kb_file):
    with pytest.raises(SystemExit) as e:
        main(["probe", "--model", "m", "--kb", str(mini_kb_file), "--mode", "fuzzy"])
    assert e.value.code == 2 and "--mode" in capsys.readouterr().err


def test_cache_keys_differ_by_mode_forms_and_any_modes(mini_model_dir, mini_kb, tmp_path):
    from deepunlearn.probe import cached_probe, load_model
    from deepunlearn.probe.cache import probe_key

    b = load_model(mini_model_dir, device="cpu")
    keys = [probe_key(b, mini_kb, "exact"), probe_key(b, mini_kb, "exact", forms="all"),
            probe_key(b, mini_kb, "exact", forms="test"), probe_key(b, mini_kb, "yesno", forms="all"),
            probe_key(b, mini_kb, "any", forms="all"), probe_key(b, mini_kb, "any", forms="all", any_modes=["rank"])]
    assert len(set(keys)) == len(keys)
    assert probe_key(b, mini_kb, "exact", forms="default") == keys[0]  # today's key is kept
    first = cached_probe(b, mini_kb, mode="any", forms="all", cache_dir=tmp_path, progress=False)
    files = list(tmp_path.iterdir())
    again = cached_probe(b, mini_kb, mode="any", forms="all", cache_dir=tmp_path, progress=False)
    assert again.per_form == first.per_form and again.forms == "all" and list(tmp_path.iterdir()) == files
    cached_probe(b, mini_kb, mode="exact", cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.iterdir())) == 2
