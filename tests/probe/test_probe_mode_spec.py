"""The probe-mode registry (:mod:`deepunlearn.probe.modes`): the tables every command and config
read are derived from the specs and equal the modes' contract below; a spec is checked complete
when it registers; a mode registered from outside the package is offered and described by the
commands and probes a model, alone and inside ``any``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deepunlearn.probe import modes
from deepunlearn.probe.modes import (
    TEXT_KINDS, ProbeModeSpec, any_modes, check_mode, mode_names, modes_help, probe_mode, probe_modes,
    register_probe_mode, unregister_probe_mode,
)

# The contract: the tables as they were written by hand before they were derived from the specs.
MODES = ("exact", "generate", "yesno", "rank", "any", "compose")
FACT_MODES = ("exact", "generate", "yesno", "rank", "any")
ANY_MODES = ("exact", "yesno", "rank", "generate")
PROTOCOL_MODES = ("exact", "generate")
DEFAULT_SELECTION = {"exact": "default", "generate": "default", "rank": "default", "yesno": "all", "any": "all",
                     "compose": "default"}
DESCRIPTIONS = {
    "exact": "the greedy (teacher-forced) answer is the gold answer",
    "generate": "the answer appears in the generated tokens",
    "yesno": "the yes/no forms are answered right",
    "rank": "the answer ranks first among the answers of its type",
    "any": "known under any mode on any form",
    "compose": "a derived fact is answered (generated, as in generate) through a multi-hop question that "
               "composes the body of a rule deriving it (deepunlearn.kg.compose)",
}


def test_the_derived_tables_equal_the_contract():
    assert modes.MODES == mode_names() == MODES
    assert modes.FACT_MODES == mode_names(fact=True) == FACT_MODES
    assert modes.ANY_MODES == any_modes() == ANY_MODES
    assert modes.PROTOCOL_MODES == mode_names(protocol=True) == PROTOCOL_MODES
    assert modes.DEFAULT_SELECTION == DEFAULT_SELECTION
    assert modes.DESCRIPTIONS == DESCRIPTIONS
    assert {s.name: s.forms for s in probe_modes()} == DEFAULT_SELECTION
    assert modes_help() == "; ".join(f"{m}: {d}" for m, d in DESCRIPTIONS.items())
    from typing import get_args

    assert get_args(modes.Mode) == MODES and get_args(modes.FactMode) == FACT_MODES
    assert get_args(modes.AnyMode) == ANY_MODES
    from deepunlearn.probe.protocol import Protocol

    assert get_args(Protocol.model_fields["probe_mode"].annotation) == PROTOCOL_MODES


def test_an_unknown_mode_is_the_one_line_error():
    for call in (check_mode, probe_mode):
        with pytest.raises(ValueError) as e:
            call("guess")
        assert str(e.value) == "unknown probe mode 'guess': expected one of " + ", ".join(MODES)


@pytest.mark.parametrize("spec, message", [
    (ProbeModeSpec("half", "known by half", "all", TEXT_KINDS), "probe mode spec 'half': lacks score"),
    (ProbeModeSpec("half", "known by half", "all", score="x:y"), "probe mode spec 'half': lacks kinds"),
    (ProbeModeSpec("half", "", "", TEXT_KINDS, score="x:y"), "probe mode spec 'half': lacks help, forms"),
    (ProbeModeSpec("half", "two\nlines", "all", TEXT_KINDS, score="x:y"), "probe mode spec 'half': help must be one line"),
    (ProbeModeSpec("half", "h", "all", TEXT_KINDS, score="x:y", known_when="most"),
     "probe mode spec 'half': known_when 'most' is not 'any' or 'all'"),
    (ProbeModeSpec("exact", "another exact", "all", TEXT_KINDS, score="x:y"),
     "probe mode spec 'exact': a probe mode of that name is registered already"),
])
def test_an_incomplete_spec_is_refused_naming_it(spec, message):
    with pytest.raises(TypeError) as e:
        register_probe_mode(spec)
    assert str(e.value) == message
    assert mode_names() == MODES  # nothing registered


def test_a_spec_without_a_name_is_refused():
    with pytest.raises(TypeError, match=r"^probe mode spec ProbeModeSpec\(name='', .*the name must be a non-empty word"):
        register_probe_mode(ProbeModeSpec("", "h", "all", TEXT_KINDS, score="x:y"))
    with pytest.raises(TypeError, match="expected a ProbeModeSpec, got dict"):
        register_probe_mode({"name": "toy"})
    with pytest.raises(TypeError, match="probe mode 'exact' is built in"):
        unregister_probe_mode("exact")


def score_greedy(run, forms):
    """The toy mode: the teacher-forced argmax is the gold answer (exact's rule, another name)."""
    return np.asarray(run.teacher_forced(forms)[1], dtype=bool), None


#: runs first in ``any`` (cost below exact's), so it sees every fact there; it reads the probe's
#: teacher-forced pass (``teacher_forced``), so that pass covers every form, as under exact
GREEDY = ProbeModeSpec("greedy", "the greedy answer is the gold answer on some selected form", "all", TEXT_KINDS,
                       score=score_greedy, in_any=True, cost=-1, teacher_forced=True)


@pytest.fixture
def greedy():
    register_probe_mode(GREEDY)
    try:
        yield GREEDY
    finally:
        unregister_probe_mode("greedy")
    assert mode_names() == MODES


def _help(capsys, *argv) -> str:
    from deepunlearn.cli import main

    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_a_registered_mode_is_offered_and_described(greedy, capsys):
    assert mode_names()[-1] == "greedy" and "greedy" in mode_names(fact=True)
    assert "greedy" not in mode_names(protocol=True)
    assert any_modes() == ("greedy",) + ANY_MODES
    assert modes_help().endswith("; greedy: " + GREEDY.help)
    for argv, flag in ((("probe",), "--mode"), (("unlearn",), "--probe-mode"), (("evaluate",), "--mode"),
                       (("attack",), "--mode")):
        text = _help(capsys, *argv)
        choices = text.split(f"{flag} {{", 1)[1].split("}", 1)[0].split(",")
        assert "greedy" in choices, argv
    assert "greedy: the greedy answer is the gold answer on some selected form" in _help(capsys, "probe")


def test_a_registered_mode_probes_a_tiny_model_alone_in_any_and_from_the_command(
        greedy, five_people_kb, five_people_model_dir, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe
    from deepunlearn.probe.evidence import mode_evidence

    bundle = load_model(five_people_model_dir, device="cpu")
    kb = five_people_kb
    toy, exact = (probe(bundle, kb, mode=m, forms="all", progress=False) for m in ("greedy", "exact"))
    assert toy.mode == "greedy" and toy.outputs is None
    assert sorted(toy.known_ids()) == sorted(exact.known_ids()) and len(toy.known_ids()) > 0
    assert {n: c["greedy"] for n, c in toy.per_form.items()} == {n: c["exact"] for n, c in exact.per_form.items()}
    np.testing.assert_array_equal(toy.logprob, exact.logprob)
    # its default selection ("all") asks every form, and ``any`` runs it first, on every fact
    assert probe(bundle, kb, mode="greedy", progress=False).per_form == toy.per_form
    agg = probe(bundle, kb, mode="any", progress=False)
    assert {n: c["greedy"] for n, c in agg.per_form.items() if "greedy" in c} == \
        {n: c["greedy"] for n, c in toy.per_form.items()}
    assert agg.known_ids() >= toy.known_ids()
    # no evidence: calibration leaves it out by default and refuses it by name
    with pytest.raises(ValueError, match=r"probe mode\(s\) greedy: no evidence"):
        mode_evidence(bundle, kb, [0], ["greedy"])
    kb_file = save_kb(kb, tmp_path / "kb.json")
    assert main(["probe", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--mode", "greedy",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "greedy" and out["known"] == len(toy.known_ids())
    assert set(out["per_form"]) == set(toy.per_form)


def test_a_registered_mode_is_a_sweeps_and_a_runners_probe_mode(greedy, five_people_kb, five_people_model_dir):
    from deepunlearn.bench.config import SweepConfig
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    cfg = SweepConfig.model_validate({"kb": "kb.json", "models": [{"name": "m", "path": "m"}], "methods": ["ga"],
                                      "probe_mode": "greedy"})
    assert cfg.probe_mode == "greedy"
    with pytest.raises(Exception, match="Input should be 'exact', 'generate', 'yesno', 'rank', 'any' or 'greedy'"):
        SweepConfig.model_validate({"kb": "kb.json", "models": [{"name": "m", "path": "m"}], "methods": ["ga"],
                                    "probe_mode": "loud"})
    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, probe_mode="greedy",
                          progress=False)
    assert runner.probe_mode == "greedy"
