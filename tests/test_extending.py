"""docs/extending.md's checklist for a probe mode, followed on a copy of the package: a toy mode
added to the two files the guide names (its spec, its scorer) works end to end (the ``probe``
command takes it and probes a model with it), and an incomplete spec fails at load, naming it.
The toy mode is teacher-forced greedy decoding, known on any form, which is what ``exact``
means: on the same forms it must know exactly what ``exact`` knows, form by form."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")

#: the guide's step 1 (a spec in modes.BUILTIN) and step 2 (its scorer in forms_probe.py)
TOY_SPEC = ('    ProbeModeSpec("toy", "the teacher-forced greedy answer is the gold answer on some selected form", "all",\n'
            '                  TEXT_KINDS, score="deepunlearn.probe.forms_probe:score_toy"),\n')
TOY_SCORER = ('\n\ndef score_toy(run, forms):\n'
              '    """``toy``: the argmax is the gold token at every continuation position."""\n'
              '    return run.teacher_forced(forms)[1], None\n')


def _mode_files() -> list[str]:
    section = GUIDE.split("## A probe mode", 1)[1].split("\n## ", 1)[0]
    return list(dict.fromkeys(re.findall(r"`(deepunlearn/[\w/]+\.py)`", section)))


def _copy(tmp_path: Path, *, scorer: bool = True, spec: str = TOY_SPEC) -> Path:
    """The package copied to tmp_path with the toy mode added as the guide says."""
    pkg = tmp_path / "deepunlearn"
    shutil.copytree(ROOT / "deepunlearn", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    modes = pkg / "probe" / "modes.py"
    text = modes.read_text(encoding="utf-8")
    text = text.replace("\n)\nfor _spec in BUILTIN:", "\n" + spec + ")\nfor _spec in BUILTIN:", 1)
    assert spec in text
    modes.write_text(text, encoding="utf-8")
    if scorer:
        fp = pkg / "probe" / "forms_probe.py"
        fp.write_text(fp.read_text(encoding="utf-8") + TOY_SCORER, encoding="utf-8")
    return tmp_path


def _python(where: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=where, env=env, capture_output=True, text=True,
                          timeout=600)


PROBE_BOTH = """
import contextlib, io, json, sys
import torch
torch.set_num_threads(1)
import deepunlearn
from deepunlearn.cli import main
from deepunlearn.kg.io import load_kb
from deepunlearn.probe import load_model, probe
kb = load_kb(sys.argv[1])
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(["probe", "--model", sys.argv[2], "--kb", sys.argv[1], "--mode", "toy", "--json", "-o", sys.argv[3]])
bundle = load_model(sys.argv[2], device="cpu")
toy, exact = (probe(bundle, kb, mode=m, forms="all", progress=False) for m in ("toy", "exact"))
print(json.dumps({"rc": rc, "cli": json.loads(out.getvalue()), "file": deepunlearn.__file__,
                  "toy": sorted(toy.known_ids()), "exact": sorted(exact.known_ids()),
                  "toy_forms": {n: c.get("toy") for n, c in toy.per_form.items()},
                  "exact_forms": {n: c.get("exact") for n, c in exact.per_form.items()}}))
"""


def test_the_guide_names_two_files_for_a_mode():
    assert _mode_files() == ["deepunlearn/probe/modes.py", "deepunlearn/probe/forms_probe.py",
                             "deepunlearn/probe/evidence.py"]  # the third only for calibrated verdicts
    assert "Only if calibrated verdicts" in GUIDE


def test_a_toy_mode_added_as_the_guide_says_probes_a_model_end_to_end(tmp_path, five_people_kb,
                                                                      five_people_model_dir):
    from deepunlearn.kg.io import save_kb

    where = _copy(tmp_path / "copy")
    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    got = _python(where, PROBE_BOTH, str(kb_file), str(five_people_model_dir), str(tmp_path / "toy.json"))
    assert got.returncode == 0, got.stderr[-2000:]
    res = json.loads(got.stdout.strip().splitlines()[-1])
    assert res["file"].startswith(str(where))  # the copy ran, not the installed package
    assert res["rc"] == 0 and res["cli"]["mode"] == "toy"
    assert res["toy"] == res["exact"] and len(res["toy"]) > 0  # what exact knows, no more, no less
    assert res["toy_forms"] == res["exact_forms"]  # form by form
    assert len(res["toy_forms"]) > 1  # the default selection of the toy mode ("all") asked several forms
    assert res["cli"]["known"] == len(res["toy"])
    written = json.loads((tmp_path / "toy.json").read_text())
    assert sorted(written["fact_ids"]) == res["toy"]  # the known facts, as rules recall --known reads them


def test_a_mode_whose_scorer_is_missing_fails_when_it_probes_naming_it(tmp_path):
    where = _copy(tmp_path / "copy", scorer=False)
    got = _python(where, "from deepunlearn.probe.modes import probe_mode; probe_mode('toy').scorer()")
    assert got.returncode != 0
    last = got.stderr.strip().splitlines()[-1]
    assert "probe mode 'toy': score 'deepunlearn.probe.forms_probe:score_toy' cannot be imported" in last


def test_a_spec_without_its_scorer_fails_at_load_naming_the_spec(tmp_path):
    where = _copy(tmp_path / "copy", spec='    ProbeModeSpec("toy", "a toy", "all", TEXT_KINDS),\n')
    got = _python(where, "import deepunlearn.probe.modes")
    assert got.returncode != 0
    assert got.stderr.strip().splitlines()[-1] == "TypeError: probe mode spec 'toy': lacks score"
