"""``deepunlearn demo --json`` end to end (a generated family, the tiny model built and finetuned,
a real sweep, the report), then run again: it resumes and computes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_bench_report import check_png

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("ga", "tv")


def _demo(out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Smaller than the default (50 people, four methods) to keep the suite fast; the default's
    # wall time is measured separately (see the bench layer's report).
    cmd = [sys.executable, "-m", "deepunlearn", "demo", "--json", "-o", str(out), "--people", "20",
           "--methods", ",".join(METHODS)]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout          # exactly one JSON object on stdout
    assert "sweep" in r.stderr and "[4/4]" in r.stderr   # progress went to stderr
    assert "protocol 'default'" in r.stderr               # the demo says which protocol it runs
    return json.loads(lines[0])


@pytest.mark.slow
def test_demo_json_report_and_resume(tmp_path):
    out = tmp_path / "demo"
    res = _demo(out)
    assert set(res["methods"]) == set(METHODS)
    for m in METHODS:
        s = res["methods"][m]
        for key in ("acc_at_recall_0.8", "recall_at_acc_0.8", "auc", "acc_at_superficial"):
            assert 0.0 <= s[key] <= 1.0, (m, key)
        assert s["n_targets"] >= 8                       # one per relation (of those the family has)
    assert res["points"] == res["computed"] == res["targets"] * 10 and not res["resumed"]
    assert res["exact"] is True and res["skipped"] == 0  # targets drawn among facts the model knows
    assert res["protocols"] == {"tiny": "default"}
    # the stratified draw: one target per relation
    kb = json.loads((out / "kb.json").read_text())
    refs = yaml.safe_load((out / "config.yaml").read_text())["targets"]["refs"]
    rels = [kb["facts"][t][1] for t in refs]
    assert len(rels) == len(set(rels)) == res["targets"]

    report = Path(res["report"])
    assert report.is_file() and report.parent == out / "report"
    text = report.read_text()
    assert "Recall@Acc>=0.8 (up)" in text and "GA" in text and "TV" in text
    for name in ("curves", "headline", "superficial", "family_biography", "by_relation", "trajectories_tiny"):
        check_png(report.parent / f"{name}.png")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"][-1]["status"] == "finished" and manifest["versions"]["torch"]
    assert manifest["models"]["tiny"]["protocol"]["name"] == "default" and not manifest["models"]["tiny"]["protocol_differs"]
    assert "## Protocol" in text and "- `tiny`: protocol `default`; differs: none" in text

    again = _demo(out)                                   # resumes: model reused, nothing recomputed
    assert again["resumed"] and again["computed"] == 0
    assert again["methods"] == res["methods"]


def test_demo_domain_generates_that_domain_s_kb_and_refuses_it_with_kb(tmp_path, capsys):
    """``demo --domain org`` starts from an org KB (the rest of the pipeline is the same code as
    the family demo above); ``--domain`` with ``--kb`` is a usage error naming the flag."""
    from deepunlearn.bench.demo import prepare_kb
    from deepunlearn.cli import main
    from deepunlearn.kg.io import dumps_kb, load_kb
    from deepunlearn.rules.generate import generate_domain

    kb, path = prepare_kb(tmp_path, None, 20, 3, progress=False, domain="org")
    assert load_kb(path).metadata["domain"] == "org" and dumps_kb(kb) == dumps_kb(generate_domain("org", 20, 3))
    assert kb.groups == ["reporting", "work", "location"]
    with pytest.raises(SystemExit) as e:
        main(["demo", "--kb", path, "--domain", "org", "-o", str(tmp_path / "d")])
    assert e.value.code == 2
    assert "argument --domain: not allowed with --kb" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
    assert main(["demo", "--domain", "no-such", "-o", str(tmp_path / "d")]) == 1
    assert capsys.readouterr().err.strip() == ("deepunlearn demo: error: unknown domain 'no-such': expected one of "
                                               "family, geo, org, regions or a path to a domain folder")
    assert not (tmp_path / "d").exists()
