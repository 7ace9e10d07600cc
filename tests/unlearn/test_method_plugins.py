"""A method from another package: the example plug-in (examples/plugins/deepunlearn-sam) is made
visible as pip would install it (its package folder on sys.path and a ``*.dist-info`` folder
with its ``entry_points.txt``, which is how entry points are found), then run through the
``unlearn`` command and a tiny sweep; no file of deepunlearn names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deepunlearn.unlearn.methods import catalog

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "deepunlearn-sam"


def fake_install(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A distribution's metadata as pip writes it: METADATA and entry_points.txt."""
    d = site / f"{dist}-0.1.0.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    lines = [f"[{catalog.ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (d / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The example plug-in, installed for this process (and forgotten after the test: the
    registry and sys.modules lose it); yields the PYTHONPATH of a subprocess."""
    from deepunlearn.unlearn.methods import METHODS

    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    eps = project["project"]["entry-points"][catalog.ENTRY_POINT_GROUP]
    site = tmp_path / "site"
    fake_install(site, "deepunlearn_sam", eps)
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    yield os.pathsep.join([str(ROOT), str(PLUGIN), str(site)])
    METHODS.pop("npo_sam", None)
    for name in [m for m in sys.modules if m == "deepunlearn_sam" or m.startswith("deepunlearn_sam.")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def known_target(five_people_model_dir, five_people_kb) -> int:
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(five_people_model_dir, device="cpu"), five_people_kb, progress=False).known_ids()
    return min(known)


def test_the_plugin_is_in_the_catalogue(plugin):
    assert "npo_sam" in catalog.names()
    spec = catalog.get_spec("npo_sam")
    assert (spec.kind, spec.title, catalog.colour("npo_sam")) == ("steps", "NPO-SAM", "#17becf")
    from deepunlearn.bench.grids import check_grid, family_default

    assert family_default("npo_sam", True) == (1, 2, 4, 8, 16)
    from deepunlearn.unlearn.plan import plan_memory

    sam, npo = plan_memory("smollm2-135m", "npo_sam"), plan_memory("smollm2-135m", "npo")
    assert sam.phases["train"] - npo.phases["train"] == sam.parts["method_step"] > 0
    with pytest.raises(ValueError, match="positive whole number of steps"):
        check_grid("npo_sam", [1.5])


def test_an_incomplete_spec_is_refused_naming_the_entry_point_and_the_field(tmp_path, monkeypatch):
    pkg = tmp_path / "src"
    pkg.mkdir()
    (pkg / "half_done.py").write_text(
        "from deepunlearn.unlearn.methods.catalog import MethodSpec\n"
        "SPEC = MethodSpec(name='half', kind='steps', grid=(1, 2), cls='half_done:Half')\n")
    fake_install(tmp_path / "site", "half_done", {"half": "half_done:SPEC"})
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert "half" in catalog.names()  # listed without loading it
    with pytest.raises(catalog.CatalogError) as e:
        catalog.get_spec("half")
    msg = str(e.value)
    assert "'half'" in msg and "entry point 'half_done:SPEC'" in msg and "memory" in msg and "\n" not in msg


def test_the_plugin_runs_through_unlearn(plugin, five_people_model_dir, five_people_kb, known_target, tmp_path):
    from deepunlearn.kg.io import save_kb

    kb = save_kb(five_people_kb, tmp_path / "kb.json")
    env = {**os.environ, "PYTHONPATH": plugin}
    out = subprocess.run([sys.executable, "-m", "deepunlearn", "unlearn", "--model", str(five_people_model_dir),
                          "--kb", str(kb), "--method", "npo_sam", "--target", str(known_target), "--grid", "1,2",
                          "--param", "rho=0.05", "--lr", "1e-3", "--device", "cpu", "--threads", "1",
                          "--cache-dir", str(tmp_path / "cache"), "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["method"] == "npo_sam" and [p["param"] for p in obj["points"]] == [1, 2]
    bad = subprocess.run([sys.executable, "-m", "deepunlearn", "unlearn", "--model", str(five_people_model_dir),
                          "--kb", str(kb), "--method", "npo_sam", "--target", str(known_target),
                          "--param", "sigma=1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "--param sigma" in bad.stderr and "rho" in bad.stderr


def test_the_plugin_runs_in_a_sweep(plugin, five_people_model_dir, five_people_kb, known_target, tmp_path):
    from deepunlearn.bench.config import load_config
    from deepunlearn.bench.runner import run_sweep
    from deepunlearn.kg.io import save_kb

    save_kb(five_people_kb, tmp_path / "kb.json")
    (tmp_path / "sweep.toml").write_text("\n".join([
        'kb = "kb.json"', 'output = "out"', "threads = 1",
        "[[models]]", 'name = "tiny"', f'path = "{five_people_model_dir}"',
        "[methods]", "npo_sam = [1, 2]",
        "[params.npo_sam]", "rho = 0.05", "lr = 1e-3",
        "[targets]", f"refs = [{known_target}]", ""]))
    outcome = run_sweep(load_config(tmp_path / "sweep.toml"), progress=False)
    assert "npo_sam" in outcome.summary["tiny"]
    report = (tmp_path / "out" / "report" / "report.md")
    assert not report.exists() or "NPO-SAM" in report.read_text()


def test_sam_with_a_vanishing_radius_follows_npo(plugin, five_people_runner, known_target):
    """The SAM step's surrogate loss carries the gradient taken at w + eps: with eps ~ 0 that is
    NPO's gradient, so the trajectory is NPO's (a real radius is run by the tests above)."""
    from deepunlearn.unlearn.methods import get_method

    runs = {}
    for name, extra in (("npo", {}), ("npo_sam", {"rho": 1e-12})):
        method = get_method(name)(grid=[1, 2, 4], lr=1e-3, **extra)
        runs[name] = [(p.param, p.recall, p.accuracy, p.forgotten) for p in
                      five_people_runner.run(known_target, method, seed=0)]
    assert runs["npo_sam"] == runs["npo"]
    assert runs["npo"][-1][3], "the trajectory forgot nothing: the comparison would be empty"
