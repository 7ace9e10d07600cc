"""The method catalogue: torch-free, equal to the registry, read by plan and guard; ``--param``;
the probe modes' single list and the forms dispatch's refusal of an unknown mode."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from deepunlearn.unlearn.methods import catalog

ROOT = Path(__file__).resolve().parents[2]


def test_catalog_and_modes_import_without_torch():
    code = ("import sys, deepunlearn.unlearn.methods.catalog, deepunlearn.probe.modes, deepunlearn.bench.grids; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_catalog_equals_the_method_registry():
    from deepunlearn.unlearn.methods import METHODS, GradientUnlearner, ReinforcedUnlearner

    builtin = {n: c for n, c in METHODS.items() if c.__module__.startswith("deepunlearn.")}
    assert set(builtin) == {s.name for s in catalog.BUILTIN}
    for spec in catalog.BUILTIN:
        cls = builtin[spec.name]
        assert catalog.load_class(spec) is cls
        assert spec.kind == ("steps" if issubclass(cls, GradientUnlearner) else "strength")
        assert issubclass(cls, (GradientUnlearner, ReinforcedUnlearner))
        assert spec.needs_rules == cls.needs_rules
        assert tuple(cls.Params().grid) == tuple(spec.grid), spec.name
        assert cls.Params is catalog.load_params(spec), spec.name
        assert catalog.check_spec(spec, spec.name) is spec


@pytest.mark.parametrize("grid", [[], (), None])
def test_a_spec_without_a_grid_is_refused_naming_it(grid):
    spec = catalog.MethodSpec("ga_clip", "steps", grid, catalog.GRADIENT, "deepunlearn.unlearn.methods.ga:GradientAscent",
                              params="deepunlearn.unlearn.methods.params.gradient:GAParams")
    with pytest.raises(catalog.CatalogError, match=r"^method ga_clip: the MethodSpec lacks grid$") as e:
        catalog.check_spec(spec, "method ga_clip")
    assert e.value.field == "grid"


def test_find_tells_a_method_from_another_name():
    assert catalog.find("NPO") is catalog.get_spec("npo") and catalog.find("ga@b5") is None
    with pytest.raises(catalog.CatalogError, match="unknown unlearning method 'ga@b5'"):
        catalog.get_spec("ga@b5")


def test_the_spec_is_where_a_default_grid_and_the_rates_are_written(monkeypatch):
    import dataclasses

    from deepunlearn.unlearn.methods import NPO, GAParams, NPOGDRParams, TVParams, get_method

    for spec in catalog.BUILTIN:
        cls = get_method(spec.name)
        if spec.rates is not None:
            assert (cls.paper_lr, cls.paper_lr_large, cls.paper_lr_ratio) == dataclasses.astuple(spec.rates), spec.name
    assert (NPO.paper_lr, NPO.paper_lr_ratio) == (4e-5, 2.0)
    # the paper's preset is the paper's methods' own grids
    assert catalog.paper_grids() == {s.name: tuple(s.grid) for s in catalog.BUILTIN if s.paper}
    assert list(catalog.paper_grids()) == ["ga", "npo", "tv", "whp"]
    # a grid changed in the spec is the Params' default: nothing else holds a copy
    for name, grid in (("ga", (3, 5)), ("npo_gdr", (2, 7)), ("tv", (0.1, 2))):
        monkeypatch.setitem(catalog._BUILTIN, name, dataclasses.replace(catalog.get_spec(name), grid=grid))
    assert GAParams().grid == [3, 5] and NPOGDRParams().grid == [2, 7] and TVParams().grid == [0.1, 2.0]


@pytest.mark.parametrize("change, field", [({"paper_grids": {"gpt2-xl": ()}}, "grid"),
                                           ({"grid": (1, float("inf"))}, "grid"),
                                           ({"rates": catalog.PaperRates(lr=0.0)}, "rates")])
def test_a_bad_spec_is_refused_naming_it_and_the_field(change, field):
    import dataclasses

    spec = dataclasses.replace(catalog.get_spec("ga"), name="ga_clip", **change)
    with pytest.raises(catalog.CatalogError, match="^method ga_clip: ") as e:
        catalog.check_spec(spec, "method ga_clip")
    assert e.value.field == field


def test_every_method_is_planned_and_guarded(five_people_model_dir):
    from deepunlearn.bench.guard import check_fit
    from deepunlearn.unlearn.plan import plan_memory

    peaks = {m: plan_memory(five_people_model_dir, m, fix_for=None).peak for m in catalog.names()}
    assert peaks["whp"] > peaks["tv"] > 0 and peaks["ga"] == peaks["graddiff"]
    rmu = plan_memory(five_people_model_dir, "rmu", fix_for=None)
    assert rmu.parts["method_copy"] > 0 and rmu.phases["train"] > plan_memory(five_people_model_dir, "ga").phases["train"]
    fit = check_fit("tiny", str(five_people_model_dir), methods=catalog.names(), lora=False, device="cuda",
                    free_bytes=1 << 40)
    assert fit["method"] in catalog.names()


def _args(*params: str, **kw) -> argparse.Namespace:
    base = dict(retain=None, retain_weight=None, base=None, choice=None, grid=None, param=list(params))
    return argparse.Namespace(**{**base, **kw})


def test_param_sets_any_field_of_the_method_params():
    from deepunlearn.unlearn.methods import get_method
    from deepunlearn.unlearn.cli.requests import build_method

    m = build_method(get_method("npo"), None, _args("max_grad_norm=1", "beta=0.5", "schedule=constant",
                                                     "warmup_steps=null"))
    assert (m.params.max_grad_norm, m.params.beta, m.params.schedule, m.params.warmup_steps) == (1, 0.5, "constant",
                                                                                                  None)


@pytest.mark.parametrize("item, words", [
    ("gamma=1", ["--param gamma", "allowed keys", "beta", "max_grad_norm"]),
    ("beta=-1", ["--param beta=-1", "allowed keys"]),
    ("beta", ["--param 'beta'", "KEY=VALUE"]),
    ("schedule=cosine", ["--param schedule", "allowed keys"]),
])
def test_param_errors_name_the_flag_the_key_and_the_allowed_keys(item, words):
    from deepunlearn.cli import CLIError
    from deepunlearn.unlearn.methods import get_method
    from deepunlearn.unlearn.cli.requests import build_method

    with pytest.raises(CLIError) as e:
        build_method(get_method("npo"), None, _args(item))
    assert "\n" not in str(e.value) and e.value.field == "--param"
    for w in words:
        assert w in str(e.value)


def test_param_refuses_a_key_its_own_flag_sets():
    from deepunlearn.cli import CLIError
    from deepunlearn.unlearn.methods import get_method
    from deepunlearn.unlearn.cli.requests import build_method

    with pytest.raises(CLIError, match="--param retain: set twice"):
        build_method(get_method("ga"), None, _args("retain=kl", retain="nll"))


def test_probe_modes_are_read_from_one_list():
    from deepunlearn.probe.modes import ANY_MODES, DEFAULT_SELECTION, FACT_MODES, MODES
    from deepunlearn.probe.result import MODES as RESULT_MODES
    from deepunlearn.unlearn.cli.attack import ATTACK_MODES

    assert RESULT_MODES == MODES and set(FACT_MODES) == set(MODES) - {"compose"}
    assert ATTACK_MODES == FACT_MODES and set(ANY_MODES) == set(FACT_MODES) - {"any"}
    assert set(DEFAULT_SELECTION) == set(MODES)


def test_forms_dispatch_refuses_an_unknown_mode():
    import numpy as np

    from deepunlearn.probe.forms_probe import probe_forms

    with pytest.raises(ValueError, match="unknown probe mode 'guess'"):
        probe_forms(None, None, np.array([0]), mode="guess", forms=None, any_modes=None, batch_size=1,
                    model_fn=None, progress=False)


def test_unlearn_help_lists_every_method():
    out = subprocess.run([sys.executable, "-m", "deepunlearn", "unlearn", "--help"], cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, capture_output=True, text=True, timeout=120)
    text = " ".join(out.stdout.split())
    assert catalog.help_names() in text and "--param KEY=VALUE" in text


# ---------------------------------------------------------------------------------------------
# every list of names that still lives outside the catalogue and modes.py names all of them


def _help_parser(*command: str) -> argparse.ArgumentParser:
    from deepunlearn.cli import build_parser

    parser = build_parser()
    for name in command:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def _help(*command: str) -> str:
    """The help text of a subcommand, joined into one line."""
    return " ".join(_help_parser(*command).format_help().split())


def _flag_help(text: str, flag: str) -> str:
    """The part of a help text that describes ``flag`` (up to the next flag)."""
    import re

    after = text.split(f" {flag} ", 1)[1]
    return re.split(r" --?[a-z][a-z-]* [A-Z{]| --?[a-z][a-z-]* [a-z](?=[a-z]*:)", after, maxsplit=1)[0]


def _named(name: str, text: str) -> bool:
    import re

    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def test_every_probe_mode_is_named_where_the_modes_are_listed():
    import deepunlearn.bench.config_probe as config_probe
    import deepunlearn.probe as probe_pkg
    import deepunlearn.probe.cli.probe as probe_cli
    from deepunlearn.bench.config import SweepConfig
    from deepunlearn.probe.modes import FACT_MODES, MODES, PROTOCOL_MODES, modes_help

    described = _flag_help(_help("probe"), "--mode").split("} ", 1)[1]      # past the choices
    assert [m for m in MODES if f"{m}: " not in described] == []             # each mode says what it counts
    texts = {
        "sweep field probe_mode": SweepConfig.model_fields["probe_mode"].description,
        "config_probe docstring": config_probe.__doc__,
        "probe package docstring": probe_pkg.__doc__,
        "probe command docstring": probe_cli.__doc__,
        "modes_help()": modes_help(),
    }
    # a sweep's primary probe takes the per-fact modes; compose is the probe command's alone
    sweep = ("sweep field probe_mode", "config_probe docstring")
    missing = {where: [m for m in (FACT_MODES if where in sweep else MODES) if not _named(m, text)]
               for where, text in texts.items()}
    assert not any(missing.values()), missing
    plan_modes = next(a for a in _help_parser("plan")._actions if a.dest == "probe_mode").choices
    assert tuple(plan_modes) == PROTOCOL_MODES


def test_every_method_is_named_and_drawn_where_the_methods_are_listed():
    import deepunlearn.bench.demo as demo
    from deepunlearn.bench.cli import DEMO_DESCRIPTION
    from deepunlearn.bench.report.plots import method_color
    from deepunlearn.unlearn.methods import BASES, METHODS
    from deepunlearn.unlearn.plan import plan_methods

    names = catalog.names()
    # the unlearn package's docstring names every built-in method
    import deepunlearn.unlearn as unlearn_pkg

    assert [s.name for s in catalog.BUILTIN if not _named(s.name, unlearn_pkg.__doc__)] == []
    # the demo's help and docstring name the demo's methods
    for where, text in (("demo help", DEMO_DESCRIPTION), ("demo docstring", demo.__doc__)):
        assert [m for m in catalog.demo_methods() if not _named(m, text)] == [], where
    assert _named(catalog.help_names(), _flag_help(_help("demo"), "--methods"))
    # every method's choices, plans, bases and registry
    assert set(names) <= set(METHODS) and tuple(names) + ("finetune",) == plan_methods()
    assert tuple(BASES) == catalog.bases() and set(BASES) <= set(names)
    assert next(a for a in _help_parser("plan")._actions if a.dest == "method").choices == plan_methods()
    # the report: one colour and one label per method, all different (the paper's four keep theirs)
    colours = [method_color(m, names) for m in names]
    assert len(set(colours)) == len(names) and [method_color(m, names) for m in ("ga", "npo", "tv", "whp")] == [
        catalog.colour(m) for m in ("ga", "npo", "tv", "whp")]
    assert len({catalog.title(m) for m in names}) == len(names)
    # messages that name the methods of a kind name every one of them
    strength = [m for m in names if catalog.kind_of(m) == "strength"]
    assert strength and all(_named(catalog.title(m), catalog.titles("strength")) for m in strength)
