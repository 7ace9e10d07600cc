"""The methods' Params classes: torch-free modules named by each catalogue spec, the very classes
the methods use, checked when a plug-in's spec is read, and a sweep file's [params.<method>] tables
typed into them (and checked, with the rest of the configuration, without importing torch)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.bench.config import ConfigError, load_config, parse_config
from deepunlearn.unlearn.methods import catalog

ROOT = Path(__file__).resolve().parents[2]

SWEEP = """kb = "kb.json"
[[models]]
name = "tiny"
path = "tiny"
[methods]
ga = [1, 4]
npo = []
tv = [1]
du_loop = [4]
[params.du_loop]
base = "ga"
overshoot = 1
[params.npo]
beta = 0.5
"""


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_every_params_class_and_a_sweep_check_import_no_torch(tmp_path):
    """Every method's Params, and what ``bench`` checks of a sweep file before its first point
    (the file, names, grids and [params]; targets, forms, oracle and chance against the KB)."""
    import deepunlearn
    from deepunlearn.kg.io import save_kb

    save_kb(deepunlearn.generate_family(8, seed=1), tmp_path / "kb.json")
    (tmp_path / "sweep.toml").write_text(SWEEP)
    code = ("import sys\n"
            "from deepunlearn.unlearn.methods import catalog\n"
            "names = [catalog.load_params(s).__name__ for s in catalog.specs().values()]\n"
            "from deepunlearn.bench.config import load_config\n"
            "from deepunlearn.bench import runner\n"
            "from deepunlearn.kg.io import load_kb\n"
            f"cfg = load_config({str(tmp_path / 'sweep.toml')!r})\n"
            "kb = load_kb(cfg.kb)\n"
            "assert runner.select_targets(kb, cfg.targets, cfg)\n"
            "runner.check_config(cfg); runner.check_forms(cfg, kb); runner.check_oracle(cfg, kb); runner.check_chance(cfg)\n"
            "print(len(names), type(cfg.params['du_loop']).__name__, 'torch' in sys.modules)")
    assert _run(code) == f"{len(catalog.names())} DULoopParams False"


def test_each_method_uses_the_params_class_its_spec_names():
    from deepunlearn.unlearn.methods import get_method
    from deepunlearn.unlearn.methods.ga import GAParams
    from deepunlearn.unlearn.methods.params.gradient import GAParams as torch_free

    assert GAParams is torch_free  # the old import path still gives the class
    for spec in catalog.BUILTIN:
        params = catalog.load_params(spec)
        assert params.__module__.startswith("deepunlearn.unlearn.methods.params."), spec.name
        assert get_method(spec.name).Params is params, spec.name


@pytest.mark.parametrize("path, words", [
    ("deepunlearn.unlearn.methods.params.nowhere:GAParams", ["cannot import it", "ModuleNotFoundError"]),
    ("deepunlearn.unlearn.methods.params.gradient:GAParms", ["cannot import it", "GAParms"]),
    ("deepunlearn.unlearn.methods.catalog:MethodSpec", ["is not a MethodParams subclass"]),
    ("GAParams", ["is not 'module:Class'"]),
])
def test_a_spec_whose_params_do_not_import_is_refused_naming_it(path, words):
    spec = dataclasses.replace(catalog.get_spec("ga"), name="ga_clip", params=path)
    with pytest.raises(catalog.CatalogError, match="^method ga_clip: params ") as e:
        catalog.check_spec(spec, "method ga_clip")
    assert e.value.field == "params" and "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)
    without = dataclasses.replace(spec, params=None)
    with pytest.raises(catalog.CatalogError, match="^method ga_clip: the MethodSpec lacks params$"):
        catalog.check_spec(without, "method ga_clip")


def test_a_class_whose_params_differ_from_its_spec_is_refused():
    spec = dataclasses.replace(catalog.get_spec("npo"), params="deepunlearn.unlearn.methods.params.gradient:GAParams")
    with pytest.raises(catalog.CatalogError, match="the class's Params is .*NPOParams.*not the spec's params") as e:
        catalog.load_class(spec)
    assert e.value.field == "params"


def test_sweep_params_are_typed_and_recorded_as_written(tmp_path):
    from deepunlearn.unlearn.methods.params.du import DULoopParams
    from deepunlearn.unlearn.methods.params.gradient import NPOParams

    (tmp_path / "sweep.toml").write_text(SWEEP)
    cfg = load_config(tmp_path / "sweep.toml")
    loop, npo = cfg.params["du_loop"], cfg.params["npo"]
    assert isinstance(loop, DULoopParams) and isinstance(npo, NPOParams)
    assert (loop.base, loop.overshoot, loop.lr_scale, npo.beta) == ("ga", 1.0, 0.5, 0.5)
    # recorded as the file wrote it (1, not 1.0), so a store's fingerprint keeps its value
    tables = {"du_loop": {"base": "ga", "overshoot": 1}, "npo": {"beta": 0.5}}
    assert cfg.recorded()["params"] == tables == cfg.param_tables()
    assert repr(cfg.recorded()["params"]["du_loop"]["overshoot"]) == "1"
    again = parse_config(cfg.model_dump())
    assert again.params == cfg.params and again.recorded()["params"] == tables
    assert again.fingerprint("kb") == cfg.fingerprint("kb")


@pytest.mark.parametrize("table, message", [
    ("[params.npo]\nbetta = 1", "field params.npo.betta: [params.npo] has no key 'betta'; npo's keys: beta, grid,"),
    ("[params.npo]\nbeta = -1", "field params.npo.beta: npo: beta: Input should be greater than 0 (got -1)"),
    ("[params.tv]\nsam_rho = 0.1", "field params.tv.sam_rho: tv: sam_rho applies to the gradient methods' steps"),
    ("[params.ga]\ngrid = [0]", "field params.ga.grid: ga: grid values are step counts (positive integers), got [0]"),
    ("[params.whp]\nspace = 'logit'", "field params.whp: method 'whp' is not in [methods] (ga, npo, tv, du_loop)"),
])
def test_a_bad_params_table_is_one_line_naming_the_table_and_key(tmp_path, table, message):
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP.split("[params.du_loop]")[0] + table + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"{path}: {message}" or str(e.value).startswith(f"{path}: {message}")
    assert "\n" not in str(e.value) and e.value.field == message.split(":")[0].removeprefix("field ")


def test_a_params_table_of_a_method_the_catalogue_lacks_names_the_table(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP.replace("tv = [1]", "tvv = [1]").split("[params.du_loop]")[0] + "[params.tvv]\nalpha = 1\n")
    with pytest.raises(ConfigError, match=r"field params\.tvv: unknown unlearning method 'tvv'; expected one of ") as e:
        load_config(path)
    assert e.value.field == "params.tvv"
