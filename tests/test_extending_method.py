"""docs/extending.md's checklist for a built-in method, followed on a copy of the package: one new
module in the methods' folder (the class) and one ``MethodSpec`` line in ``BUILTIN`` (the
catalogue), no other file touched. The copy's catalogue lists the method, the ``unlearn`` command
runs it on a tiny model with the grid its spec declares, a sweep file takes ``[methods] toy_ga``
and ``[params.toy_ga]`` (an unknown key refused, naming the table) and runs it, and ``plan``
plans it. The toy method is gradient ascent with its loss written out, so its trajectory must be
GA's, point by point."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")

#: the method's module: GA's loss written out, GA's torch-free parameters reused
TOY_MODULE = '''"""toy_ga: gradient ascent, its loss written out (negated answer NLL)."""

from __future__ import annotations

from ..losses import nll_loss
from .base import GradientUnlearner, Session
from .params.gradient import GAParams


class ToyGA(GradientUnlearner):
    name = "toy_ga"
    Params = GAParams

    def loss(self, session: Session):
        return -nll_loss(session.logits(), session.batch["labels"])
'''
#: its catalogue line; the grid (1, 3) is its own, not GA's (1, 2, 4, 8, 16)
TOY_GRID = [1, 3]
TOY_SPEC = ('    MethodSpec("toy_ga", "steps", (1, 3), GRADIENT, _M + "toy_ga:ToyGA", label="Toy-GA", colour="#123456",\n'
            '               description="gradient ascent, its loss written out", rates=GA_RATES,\n'
            '               params=_P + "gradient:GAParams"),\n')


def _method_paths() -> list[str]:
    """The package paths (files and folders) the guide's "A method" section names."""
    section = GUIDE.split("## A method", 1)[1].split("\n## ", 1)[0]
    return list(dict.fromkeys(re.findall(r"`(deepunlearn/[\w/]+(?:\.py|/))`", section)))


def _copy(where: Path) -> Path:
    """The package copied to ``where`` with the toy method added as the guide says."""
    pkg = where / "deepunlearn"
    shutil.copytree(ROOT / "deepunlearn", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "unlearn" / "methods" / "toy_ga.py").write_text(TOY_MODULE, encoding="utf-8")
    cat = pkg / "unlearn" / "methods" / "builtin.py"
    text = cat.read_text(encoding="utf-8")
    end = "\n)\n"  # the end of BUILTIN
    assert text.count(end) == 1
    cat.write_text(text.replace(end, "\n" + TOY_SPEC.rstrip("\n") + end, 1), encoding="utf-8")
    return where


def _edited(copy: Path) -> list[str]:
    """The files of the copy that differ from the package's or are new, as repository paths."""
    out = []
    for f in sorted((copy / "deepunlearn").rglob("*.py")):
        rel = f.relative_to(copy)
        if not (ROOT / rel).exists() or not filecmp.cmp(f, ROOT / rel, shallow=False):
            out.append(rel.as_posix())
    return out


RUN = r"""
import contextlib, io, json, sys
import torch
torch.set_num_threads(1)
import deepunlearn
from deepunlearn.cli import main
from deepunlearn.kg.io import load_kb
from deepunlearn.probe import load_model, probe
from deepunlearn.unlearn.methods import catalog

kb_file, model, work = sys.argv[1:4]
res = {"file": deepunlearn.__file__, "names": catalog.names()}
spec = catalog.get_spec("toy_ga")
res["spec"] = [spec.kind, list(spec.grid), spec.title, catalog.colour("toy_ga")]
target = min(probe(load_model(model, device="cpu"), load_kb(kb_file), progress=False).known_ids())


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


common = ["--model", model, "--kb", kb_file, "--target", str(target), "--lr", "1e-3", "--device", "cpu",
          "--threads", "1", "--cache-dir", work + "/cache", "--json"]
rc, out, err = cli("unlearn", "--method", "toy_ga", *common, "-o", work + "/toy.json")
res["toy"] = [rc, json.loads(out) if rc == 0 else err]
rc, out, err = cli("unlearn", "--method", "ga", "--grid", "1,3", *common)
res["ga"] = [rc, json.loads(out) if rc == 0 else err]
rc, out, err = cli("unlearn", "--method", "toy_ga", *common, "--param", "sigma=1")
res["bad_param"] = [rc, err]
plans = {m: cli("plan", "--model", "smollm2-135m", "--method", m, "--json") for m in ("toy_ga", "ga")}
res["plan"] = {m: [rc, json.loads(out) if rc == 0 else err] for m, (rc, out, err) in plans.items()}

from deepunlearn.bench.config import ConfigError, load_config
from deepunlearn.bench.runner import run_sweep


def sweep(name, *lines):
    path = f"{work}/{name}.toml"
    with open(path, "w") as f:
        f.write("\n".join([f'kb = "{kb_file}"', f'output = "{work}/{name}"', "threads = 1",
                           "[[models]]", 'name = "tiny"', f'path = "{model}"', *lines,
                           "[targets]", f"refs = [{target}]", ""]))
    return load_config(path)


cfg = sweep("sweep", "[methods]", "toy_ga = []", "[params.toy_ga]", "lr = 1e-3")
res["cfg"] = {m: list(g) for m, g in cfg.methods.items()}
outcome = run_sweep(cfg, progress=False)
res["sweep"] = {"summary": sorted(outcome.summary["tiny"]),
                "points": sorted({(p.method, p.param) for p in outcome.points})}
try:
    sweep("bad", "[methods]", "toy_ga = [1, 2]", "[params.toy_ga]", "sigma = 1")
    res["bad_table"] = None
except ConfigError as e:
    res["bad_table"] = str(e)
print(json.dumps(res))
"""


def test_the_guide_names_the_files_a_built_in_method_edits():
    assert _method_paths() == ["deepunlearn/unlearn/methods/", "deepunlearn/unlearn/methods/builtin.py",
                               "deepunlearn/unlearn/methods/params/"]  # the third only for parameters of its own


def test_a_toy_method_added_as_the_guide_says_runs_through_unlearn_a_sweep_and_plan(
        tmp_path, five_people_kb, five_people_model_dir):
    from deepunlearn.kg.io import save_kb

    where = _copy(tmp_path / "copy")
    # one new module in the methods' folder and the catalogue, nothing else: the files the guide names
    edited = _edited(where)
    assert edited == ["deepunlearn/unlearn/methods/builtin.py", "deepunlearn/unlearn/methods/toy_ga.py"]
    named = _method_paths()
    assert all(f in named or f.rsplit("/", 1)[0] + "/" in named for f in edited)

    kb_file = save_kb(five_people_kb, tmp_path / "kb.json")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(where), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    got = subprocess.run([sys.executable, "-c", RUN, str(kb_file), str(five_people_model_dir), str(work)],
                         cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    res = json.loads(got.stdout.strip().splitlines()[-1])
    assert res["file"].startswith(str(where))  # the copy ran, not the installed package

    # the catalogue: listed last, with what its spec declares
    assert res["names"][-1] == "toy_ga"
    assert res["spec"] == ["steps", TOY_GRID, "Toy-GA", "#123456"]

    # unlearn: the spec's grid when none is given, and GA's trajectory (the same loss)
    rc, toy = res["toy"]
    assert rc == 0, toy
    assert toy["method"] == "toy_ga" and [p["param"] for p in toy["points"]] == TOY_GRID
    rc, ga = res["ga"]
    assert rc == 0, ga
    keys = ("param", "recall", "accuracy", "forgotten")
    assert [[p[k] for k in keys] for p in toy["points"]] == [[p[k] for k in keys] for p in ga["points"]]
    assert any(p["forgotten"] for p in toy["points"])  # the trajectory moved: the comparison is not empty
    assert json.loads((work / "toy.json").read_text())["method"] == "toy_ga"  # -o wrote it
    rc, err = res["bad_param"]
    assert rc != 0 and "--param sigma: toy_ga has no parameter 'sigma'" in err and "grid, lr" in err  # GA's keys

    # plan: planned as the gradient method its spec says it is (GA's memory profile)
    (rc_toy, plan_toy), (rc_ga, plan_ga) = res["plan"]["toy_ga"], res["plan"]["ga"]
    assert rc_toy == 0 and rc_ga == 0, (plan_toy, plan_ga)
    assert plan_toy["phases"] == plan_ga["phases"] and plan_toy["method"] == "toy_ga"

    # a sweep file: [methods] toy_ga = [] takes the spec's grid, [params.toy_ga] is read, the points run
    assert res["cfg"] == {"toy_ga": TOY_GRID}
    assert res["sweep"]["summary"] == ["toy_ga"]
    assert res["sweep"]["points"] == [["toy_ga", g] for g in TOY_GRID]
    assert "field params.toy_ga.sigma: [params.toy_ga] has no key 'sigma'" in res["bad_table"]
