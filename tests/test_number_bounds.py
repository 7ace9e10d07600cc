"""One bound table for every number a user gives (deepunlearn.limits, docs/safety.md "Limits on
numbers"): seeds, thread counts, MDUS seed counts, a domain's entity counts and YAML documents
are refused in one line naming the flag or the file and field (exit code 2 for a flag, 1 for a
file), never an internal error, an abort in the OpenMP runtime or a run that does not end."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main

HUGE_SEED = "99999999999999999999999"


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [
    ["unlearn", "--seed", HUGE_SEED], ["evaluate", "--seed", HUGE_SEED], ["attack", "--seed", HUGE_SEED],
    ["finetune", "--seed", str(2**63)], ["data", "generate", "--seed", HUGE_SEED],
    ["data", "never-true", "--seed", HUGE_SEED], ["demo", "--seed", HUGE_SEED],
])
def test_a_seed_past_64_bits_is_a_usage_error(argv, capsys):
    line = _usage_error(argv, capsys)
    assert "argument --seed: expected an integer seed from 0 to 9223372036854775807" in line


@pytest.mark.parametrize("argv", [
    ["finetune", "--threads", "1000000000"], ["unlearn", "--threads", "100000"], ["bench", "--threads", "5000"],
])
def test_a_thread_count_past_the_bound_is_a_usage_error(argv, capsys):
    line = _usage_error(argv, capsys)
    from deepunlearn.limits import max_threads

    assert "argument --threads:" in line and f"bound of {max_threads():,} threads" in line
    assert "DEEPUNLEARN_ALLOW_LARGE" in line


def test_the_thread_bound_is_lifted_by_allow_large(monkeypatch):
    from deepunlearn.cli import threads_int

    monkeypatch.setenv("DEEPUNLEARN_ALLOW_LARGE", "1")
    assert threads_int("5000") == 5000


@pytest.mark.parametrize("argv", [["rules", "sets", "--seeds", "1000000000"], ["unlearn", "--seeds", "200000"]])
def test_an_mdus_seed_count_past_the_bound_is_a_usage_error(argv, capsys):
    assert "bound of 100,000 seeds" in _usage_error(argv, capsys)


def test_mdus_stops_at_its_time_budget_whatever_the_seed_count():
    import numpy as np

    from deepunlearn import generate_family
    from deepunlearn.rules.graph import derivation_graph
    from deepunlearn.rules.minimal import minimal_sets
    from deepunlearn.rules.sampling import mdus

    kb = generate_family(8, seed=1)
    g = derivation_graph(kb, "family")
    t = kb.targets[0]
    # a budget of 0 s: one DUS + RP run, then it stops (a billion runs would not end)
    assert len(mdus(g, t, seeds=10**9, rng=np.random.default_rng(0), time_budget=0)) == 1
    ms = minimal_sets(g, t, seeds=10**9, exact=False, time_budget=0)
    assert ms.method == "mdus" and len(ms.sets) == 1 and not ms.exact


SWEEP = 'kb = "kb.json"\n{extra}\n[[models]]\nname = "m"\npath = "ck"\n[methods]\nga = [1]\n'


@pytest.mark.parametrize("extra,field,says", [
    ("seed = 1e23", "seed", "integer seed from 0 to 9223372036854775807"),
    ("seed = -1", "seed", "integer seed"),
    ("threads = 1e9", "threads", "expected an integer from 1 to"),
    ("threads = 100000", "threads", "threads is more than the bound of"),
    ("threads = true", "threads", "integer from 1"),
    ("mdus_seeds = 1e9", "mdus_seeds", "integer from 1 to 100,000 seeds"),
    ("mdus_seeds = 1000000000", "mdus_seeds", "bound of 100,000 seeds"),
    ("seeds = 1000000000", "seeds", "bound of 100,000 seeds"),
    ("[run]\nseeds = [0, 18446744073709551616]", "run.seeds", "integer seed"),
    ("[targets]\nstratified = 1\nseed = 1e23", "targets.seed", "integer seed"),
])
def test_a_sweep_number_past_its_bound_names_the_field(tmp_path, extra, field, says):
    from deepunlearn.bench.config import ConfigError, load_config

    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(extra=extra))
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert f"field {field}:" in str(e.value) and says in str(e.value), str(e.value)


def _kb(tmp_path):
    from deepunlearn import generate_family
    from deepunlearn.kg.io import save_kb

    return str(save_kb(generate_family(6, seed=1), tmp_path / "kb.json"))


def _finetune_config(tmp_path, text: str, capsys) -> tuple[int, dict]:
    c = tmp_path / "c.yaml"
    c.write_text(text)
    rc = main(["finetune", "--kb", _kb(tmp_path), "--model", "tiny", "-o", str(tmp_path / "ck"), "--config", str(c),
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert not (tmp_path / "ck").exists()
    return rc, out


def test_a_finetune_config_alias_bomb_is_refused(tmp_path, capsys):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]  # 10**10 values
    rc, out = _finetune_config(tmp_path, "\n".join(lines) + "\nepochs: 1\n", capsys)
    assert rc == 1 and "configuration too large" in out["error"] and out["file"].endswith("c.yaml")


def test_a_finetune_config_key_given_twice_is_refused(tmp_path, capsys):
    rc, out = _finetune_config(tmp_path, "epochs: 1\nlr: 0.001\nepochs: 2\n", capsys)
    assert rc == 1 and "key 'epochs' given twice (line 3)" in out["error"] and out["field"] == "--config"


def test_a_finetune_config_seed_past_64_bits_is_refused(tmp_path, capsys):
    rc, out = _finetune_config(tmp_path, f"epochs: 1\nseed: {HUGE_SEED}\n", capsys)
    assert rc == 1 and "field seed" in out["error"]


def test_a_sweep_yaml_key_given_twice_is_refused(tmp_path):
    from deepunlearn.bench.config import ConfigError, load_config

    f = tmp_path / "s.yaml"
    f.write_text("kb: kb.json\nmodels: [{name: m, path: ck}]\nmethods: {ga: [1]}\nkb: other.json\n")
    with pytest.raises(ConfigError, match="key 'kb' given twice"):
        load_config(f)


def _domain(tmp_path, count_line: str):
    import shutil
    from importlib import resources

    d = tmp_path / "dom"
    shutil.copytree(str(resources.files("deepunlearn.kg") / "domains" / "org"), d)
    toml = d / "domain.toml"
    text = toml.read_text()
    start = text.index("[entities.city]")
    toml.write_text(text[:start] + text[start:].replace("count = 8", count_line, 1))
    return d


@pytest.mark.parametrize("count,says", [
    ("count = 100000000", "entities.city.count: 100,000,000 entities is more than the bound of 2,000,000"),
    ("count = true", "entities.city.count: input should be a valid integer"),
])
def test_a_domain_entity_count_is_bounded_and_never_coerced(tmp_path, count, says):
    from deepunlearn.kg.domain import DomainError, read_domain

    with pytest.raises(DomainError) as e:
        read_domain(_domain(tmp_path, count))
    assert says in str(e.value)


def test_a_rules_dl_folder_is_named_a_folder(tmp_path):
    from deepunlearn.kg.domain import DomainError, read_domain

    d = _domain(tmp_path, "count = 8")
    (d / "rules.dl").unlink()
    (d / "rules.dl").mkdir()
    with pytest.raises(DomainError, match="rules.dl: is a folder, expected a file"):
        read_domain(d)


@pytest.mark.parametrize("text,says", [
    ('[methods]\nga = [1]\nGA = [2]\n', "method 'GA' is also given as 'ga'"),
    ('[methods]\nga = ["1"]\n', "grid ['1'] holds text"),
])
def test_sweep_grids_are_never_coerced_or_merged(tmp_path, text, says):
    from deepunlearn.bench.config import ConfigError, load_config

    f = tmp_path / "s.toml"
    f.write_text('kb = "kb.json"\n[[models]]\nname = "m"\npath = "ck"\n' + text)
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
        load_config(f)


def test_a_nan_learning_rate_is_named_not_finite(tmp_path):
    from deepunlearn.bench.config import ConfigError, load_config

    f = tmp_path / "s.toml"
    f.write_text('kb = "kb.json"\n[[models]]\nname = "m"\npath = "ck"\nlr = nan\n[methods]\nga = [1]\n')
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert "field models.0.lr: Input should be a finite number" in str(e.value), str(e.value)


def test_a_library_warning_is_one_line_on_stderr(monkeypatch, capsys):
    import warnings

    import deepunlearn.kg.cli as kcli

    def warn(args):
        warnings.warn("first line\n  second line\n\nthird", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(kcli, "_show", warn)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["data", "show", "kb.json"]) == 0
    err = capsys.readouterr().err
    assert err == "warning: UserWarning: first line second line third\n"


def test_a_json_error_names_the_file_its_message_names(tmp_path, capsys):
    kb = _kb(tmp_path)
    assert main(["rules", "closure", "--kb", kb, "--rules", str(tmp_path / "missing.dl"), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == str(tmp_path / "missing.dl") and "rule file not found" in out["error"]


def test_describe_takes_the_file_from_a_message_that_opens_with_one():
    from deepunlearn.errors import UserError, describe

    assert describe(UserError("--rules r.dl:3: bad"))["file"] == "r.dl"
    assert describe(UserError("unknown domain 'x'"))["file"] is None
