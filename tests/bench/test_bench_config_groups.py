"""A sweep file's runner options nested in the groups TargetRunner takes (deepunlearn/bench/config_groups.py):
the nested spelling and the flat one are the same sweep (the same configuration and the same work
for the workers); a flat key prints a note naming its group; errors name the key as the file spells it."""

from __future__ import annotations

import pickle

import pytest
from bench_helpers import FakeExecutor

from deepunlearn.bench.config import ConfigError, load_config
from deepunlearn.bench.config_groups import PLACES, SECTIONS
from deepunlearn.bench.jobs import work_spec
from deepunlearn.bench.runner import run_sweep
from deepunlearn.kg.io import load_kb
from deepunlearn.unlearn.runner_options import FLAT, GROUPS

FLAT_OPTIONS = '''probe_mode = "rank"
k_mode = "dataset"
forms = "default"
batch_size = 8
sets = "mdus"
tie = "first"
mdus_seeds = 7
lora = true
accuracy = "full"
scores = true
min_k = 10.0
adversarial = true
adversarial_modes = ["exact", "rank"]
[attacks]
relearn = [2, 4]
'''

NESTED_OPTIONS = '''[probing]
mode = "rank"
k_mode = "dataset"
forms = "default"
batch_size = 8
[minimal_sets]
sets = "mdus"
tie = "first"
seeds = 7
[training]
lora = true
[measures]
accuracy = "full"
scores = true
min_k = 10.0
[checks]
adversarial = true
modes = ["exact", "rank"]
[checks.attacks]
relearn = [2, 4]
'''


def test_the_nested_spelling_is_the_flat_sweep_and_the_flat_keys_print_their_place(sweep_files, tmp_path, capsys):
    flat = load_config(sweep_files(name="flat.toml", extra=FLAT_OPTIONS))
    nested = load_config(sweep_files(name="nested.toml", extra=NESTED_OPTIONS))
    assert capsys.readouterr().err == "" and nested.notes == ()  # printed by the sweep, once its checks pass
    notes = list(flat.notes)
    assert flat.recorded() == nested.recorded() and flat.fingerprint("kb") == nested.fingerprint("kb")
    kb = load_kb(tmp_path / "kb.json")
    a, b = work_spec(flat, kb), work_spec(nested, kb)
    assert a == b and pickle.loads(pickle.dumps(a)) == a  # the same work, picklable for Ray
    opts = a.options["tiny"]
    assert (opts.probing.mode, opts.probing.k_mode, opts.probing.batch_size) == ("rank", "dataset", 8)
    assert (opts.minimal_sets.sets, opts.minimal_sets.tie, opts.minimal_sets.seeds) == ("mdus", "first", 7)
    assert opts.training.lora and opts.measures.scores and opts.measures.min_k == 10.0
    assert opts.checks.adversarial and opts.checks.modes == ["exact", "rank"] and opts.checks.attacks["relearn"] == [2, 4]
    src = tmp_path / "flat.toml"
    assert f"note: {src}: probe_mode is read as [probing] mode" in notes
    assert f"note: {src}: mdus_seeds is read as [minimal_sets] seeds" in notes
    assert f"note: {src}: adversarial_modes is read as [checks] modes" in notes
    assert f"note: {src}: attacks is read as [checks] attacks" in notes
    assert len(notes) == 14 and all(n.startswith(f"note: {src}: ") for n in notes)  # one per flat key


def test_every_group_key_is_a_runner_option_by_its_groups_field_name():
    """One vocabulary: a sweep's [group] key is the field of TargetRunner's group of that name."""
    assert set(SECTIONS) == set(GROUPS)
    for group, keys in SECTIONS.items():
        for key, flat in keys.items():
            assert key in GROUPS[group].__dataclass_fields__, (group, key)
            assert FLAT[{"mdus_seeds": "seeds"}.get(flat, flat)] == (group, key)
    assert PLACES["probe_mode"] == ("probing", "mode") and PLACES["adversarial_calibration"] == ("checks", "calibration")


@pytest.mark.parametrize("extra, field, message", [
    ('[probing]\nmode = "nope"\n', "probing.mode", "field probing.mode: "),
    ('[probing]\nstride = 2\n', "probing.stride", "unknown option 'stride' of [probing]; expected one of: mode, forms"),
    ('k_mode = "dataset"\n[probing]\nk_mode = "probed"\n', "probing.k_mode",
     "given twice, as [probing] k_mode and as k_mode: give it once"),
    ('probing = 3\n', "probing", "[probing] is a table of options (mode, forms, k_mode, batch_size), got int"),
    ('[checks.attacks]\nrelearn = [4, 2]\n', "checks.attacks.relearn", "field checks.attacks.relearn: steps must be sorted"),
])
def test_an_error_in_a_group_names_the_key_as_the_file_spells_it(sweep_files, capsys, extra, field, message):
    path = sweep_files(extra=extra)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.field == field and str(e.value).startswith(f"{path}: ") and message in str(e.value)
    assert "note:" not in capsys.readouterr().err  # an error is one line


def test_a_sweep_prints_the_notes_once_its_checks_pass_and_an_error_stays_one_line(sweep_files, capsys):
    from deepunlearn.cli import main

    path = sweep_files(extra='k_mode = "dataset"\n')
    run_sweep(load_config(path), executor=FakeExecutor(), progress=False)
    assert capsys.readouterr().err.splitlines() == [f"note: {path}: k_mode is read as [probing] k_mode"]
    bad = sweep_files(name="bad.toml", extra='k_mode = "dataset"\nforms = "nope"\n')
    assert main(["bench", "--config", str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "field forms: 'nope' is not a form of this KB" in err[0]


def test_the_python_api_takes_the_groups_too():
    from deepunlearn.bench.config import SweepConfig

    base = {"kb": "kb.json", "models": ["m"], "methods": {"ga": [1]}}
    nested = SweepConfig.model_validate({**base, "probing": {"mode": "rank"}, "checks": {"attacks": {"relearn": [1]}}})
    flat = SweepConfig.model_validate({**base, "probe_mode": "rank", "attacks": {"relearn": [1]}})
    assert nested.recorded() == flat.recorded() and nested.probe_mode == "rank"
    with pytest.raises(ValueError, match=r"field probing.nope: unknown option 'nope' of \[probing\]"):
        SweepConfig.model_validate({**base, "probing": {"nope": 1}})
