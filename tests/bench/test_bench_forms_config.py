"""The sweep options of probe forms and checks: probe_mode beyond the protocol's two, forms /
unlearn_forms, adversarial and [attacks]; their one-line field errors, the forms check against the
KB, what reaches ``TargetRunner`` (and that a sweep without them builds it exactly as before), and
the resolved config.yaml reloading to the same sweep."""

from __future__ import annotations

import json

import pytest
import yaml

from bench_helpers import FakeExecutor
from deepunlearn.bench import jobs, runner
from deepunlearn.bench.config import ConfigError, load_config, parse_config
from deepunlearn.bench.jobs import work_spec
from deepunlearn.bench.runner import check_config, run_sweep
from deepunlearn.cli import main
from deepunlearn.kg.io import load_kb

ATTACKS = "[attacks]\nrelearn = [1, 2, 4, 8]\nrelearn_size = 4\nquantize = \"int8\"\n"
FULL = 'probe_mode = "any"\nforms = "test,qa1"\nunlearn_forms = "unlearn"\nadversarial = true\n' + ATTACKS


def test_the_new_fields_parse(sweep_files):
    cfg = load_config(sweep_files(extra=FULL))
    assert (cfg.probe_mode, cfg.forms, cfg.unlearn_forms, cfg.adversarial) == ("any", "test,qa1", "unlearn", True)
    assert cfg.attacks.model_dump() == {"relearn": [1, 2, 4, 8], "relearn_size": 4, "relearn_lr": None,
                                        "relearn_on": "other", "quantize": "int8", "at": "last"}
    m = cfg.models[0]
    assert cfg.probe_mode_for(m) == "any"
    # the protocol holds exact/generate; a mode it cannot hold does not break it
    assert cfg.protocol_for(m).probe_mode in ("exact", "any")


@pytest.mark.parametrize("extra, message", [
    ("[attacks]\nrelearn = [2, 1]\n", "field attacks.relearn: steps must be sorted and distinct, e.g. [1, 2], got [2, 1]"),
    ("[attacks]\nrelearn = [0, 1]\n", "field attacks.relearn: steps must be >= 1, got 0"),
    ("[attacks]\nrelearn = [1.5]\n", "field attacks.relearn: steps must be whole numbers >= 1, got 1.5"),
    ("[attacks]\nrelearn = [true]\n", "field attacks.relearn: steps must be whole numbers >= 1, got True"),
    ("[attacks]\nquantize = \"int3\"\n", "field attacks.quantize: Input should be 'int8', 'int4' or 'nf4'"),
    ("[attacks]\nrelearn = [1]\nrelearn_size = 0\n", "field attacks.relearn_size: Input should be greater than or equal to 1"),
    ("[attacks]\nrelearn = [1]\nrelearn_lr = 0\n", "field attacks.relearn_lr: expected a finite number > 0, got 0"),
    ("[attacks]\nrelearn = [1]\nrelearn_lr = nan\n", "field attacks.relearn_lr: expected a finite number > 0, got nan"),
    ("[attacks]\nrelearn = [1]\nat = \"first\"\n", "field attacks.at: Input should be 'last' or 'all'"),
    ("[attacks]\nrelearn = [1]\nsteps = 3\n", "field attacks.steps: Extra inputs are not permitted"),
    ("[attacks]\nat = \"all\"\n", "field attacks: no attack asked for: give relearn = [1, 2, 4, 8] and/or quantize"),
    ('probe_mode = "adversarial"\n', "field probe_mode: Input should be 'exact', 'generate', 'yesno', 'rank' or 'any'"),
    ('adversarial = "yes"\n', "field adversarial: Input should be a valid boolean"),
    ("forms = 3\n", "field forms: Input should be a valid string"),
])
def test_bad_values_give_one_line_errors_naming_the_field(sweep_files, extra, message):
    path = sweep_files(extra=extra)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    text = str(e.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text


def test_cli_prints_the_attacks_error_as_one_json_object(sweep_files, capsys):
    path = sweep_files(extra="[attacks]\nrelearn = [4, 2]\n")
    assert main(["bench", "--config", str(path), "--quiet", "--json"]) == 1
    out, err = capsys.readouterr()
    obj = json.loads(out)
    assert obj["field"] == "attacks.relearn" and obj["file"] == str(path)
    assert obj["error"] == f"{path}: field attacks.relearn: steps must be sorted and distinct, e.g. [2, 4], got [4, 2]"
    assert err.strip() == f"deepunlearn bench: error: {obj['error']}"


class _Capture:
    """Stands in for ``TargetRunner``: records the keyword arguments it was built with."""

    seen: list[dict] = []

    def __init__(self, bundle, kb, **kwargs):
        from deepunlearn.unlearn.runner_options import flat_options

        _Capture.seen.append(flat_options(**kwargs))  # every option by its flat keyword


def _runner_kwargs(monkeypatch, cfg, kb):
    import deepunlearn.unlearn as unlearn

    _Capture.seen = []
    monkeypatch.setattr(unlearn, "TargetRunner", _Capture)
    jobs.new_target_runner(work_spec(cfg, kb), cfg.models[0].name, None, kb, None)
    return _Capture.seen[-1]


NEW_KEYS = {"forms", "unlearn_forms", "adversarial", "attacks"}


def _unset(kw) -> bool:
    """None of the new options reaches the runner set."""
    return all(not kw[k] for k in NEW_KEYS)


def test_the_options_reach_the_target_runner(sweep_files, tmp_path, monkeypatch):
    cfg = load_config(sweep_files(extra=FULL))
    kw = _runner_kwargs(monkeypatch, cfg, load_kb(tmp_path / "kb.json"))
    assert kw["probe_mode"] == "any" and kw["forms"] == "test,qa1" and kw["unlearn_forms"] == "unlearn"
    assert kw["adversarial"] is True
    assert kw["attacks"] == {"relearn": [1, 2, 4, 8], "relearn_size": 4, "relearn_lr": None, "quantize": "int8",
                             "at": "last"}


def test_unset_options_are_not_passed(sweep_files, tmp_path, monkeypatch):
    cfg = load_config(sweep_files())
    kw = _runner_kwargs(monkeypatch, cfg, load_kb(tmp_path / "kb.json"))
    assert _unset(kw) and kw["probe_mode"] == "exact"
    assert "probe" not in cfg.results_key("kb")   # the fingerprint of an older sweep is unchanged
    # a probe mode the protocol holds changes the protocol, not the runner's keywords
    cfg = load_config(sweep_files(extra='probe_mode = "generate"\n'))
    kw = _runner_kwargs(monkeypatch, cfg, load_kb(tmp_path / "kb.json"))
    assert _unset(kw) and kw["probe_mode"] == "generate"
    assert kw["protocol"].probe_mode == "generate" and "probe" not in cfg.results_key("kb")


def test_each_option_changes_the_fingerprint(sweep_files):
    base = load_config(sweep_files()).fingerprint("kb")
    prints = {load_config(sweep_files(name=f"s{i}.toml", extra=extra)).fingerprint("kb")
              for i, extra in enumerate(['forms = "test"\n', 'unlearn_forms = "test"\n', "adversarial = true\n",
                                         "[attacks]\nrelearn = [1]\n", "[attacks]\nquantize = \"int8\"\n",
                                         'probe_mode = "yesno"\n', 'probe_mode = "rank"\n'])}
    assert len(prints) == 7 and base not in prints


def test_relearn_on_split_reaches_the_runner_and_other_keeps_the_fingerprint(sweep_files, tmp_path, monkeypatch):
    plain = load_config(sweep_files(extra="[attacks]\nrelearn = [1]\n"))
    other = load_config(sweep_files(name="o.toml", extra='[attacks]\nrelearn = [1]\nrelearn_on = "other"\n'))
    split = load_config(sweep_files(name="s.toml", extra='[attacks]\nrelearn = [1]\nrelearn_on = "split"\n'))
    assert plain.fingerprint("kb") == other.fingerprint("kb") != split.fingerprint("kb")
    assert "relearn_on" not in plain.results_key("kb")["probe"]["attacks"]
    kw = _runner_kwargs(monkeypatch, split, load_kb(tmp_path / "kb.json"))
    assert kw["attacks"]["relearn_on"] == "split"
    with pytest.raises(ConfigError, match=r"field attacks.relearn_on: Input should be 'other', 'split' or 'split-set'"):
        load_config(sweep_files(name="b.toml", extra='[attacks]\nrelearn = [1]\nrelearn_on = "half"\n'))


def test_the_resolved_config_reloads_to_the_same_sweep(sweep_files, tmp_path):
    cfg = load_config(sweep_files(extra=FULL))
    again = parse_config(yaml.safe_load(cfg.to_yaml()), base=tmp_path)
    assert again.model_dump() == cfg.model_dump() and again.fingerprint("kb") == cfg.fingerprint("kb")
    # and through a sweep: the config.yaml it writes
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    written = load_config(tmp_path / "out" / "config.yaml")
    assert written.attacks == cfg.attacks and written.forms == cfg.forms and written.probe_mode == "any"


def test_forms_are_checked_against_the_kb_before_anything_is_written(sweep_files, tmp_path):
    cfg = load_config(sweep_files(extra='forms = "test,nope"\n'))
    with pytest.raises(ConfigError) as e:
        run_sweep(cfg, executor=FakeExecutor(), progress=False)
    text = str(e.value)
    assert text.startswith(f"{tmp_path / 'sweep.toml'}: field forms: 'nope' is not a form of this KB, a split or "
                           "'default'/'all' (forms: primary, qa1,") and e.value.field == "forms"
    assert not (tmp_path / "out").exists()
    cfg = load_config(sweep_files(extra='unlearn_forms = "st9"\n'))
    with pytest.raises(ConfigError, match=r"field unlearn_forms: 'st9' is not a form of this KB"):
        run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert not (tmp_path / "out").exists()
    # known names pass, and the runner options carry them to the workers
    ex = FakeExecutor()
    cfg = load_config(sweep_files(extra='forms = "test,st1,no1"\nadversarial = true\n'))
    seen = []
    ex.run = lambda spec, jobs, sink, _run=ex.run: seen.append(spec) or _run(spec, jobs, sink)
    assert run_sweep(cfg, executor=ex, progress=False).computed == 8
    opts = seen[0].options["tiny"]
    assert (opts.probing.forms, opts.checks.adversarial, opts.training.unlearn_forms) == ("test,st1,no1", True, None)


def test_attack_checks_that_need_the_models_and_targets(sweep_files):
    cfg = load_config(sweep_files(extra='[attacks]\nquantize = "int8"\n'))
    cfg = cfg.model_copy(update={"models": [cfg.models[0].model_copy(update={"device": "cuda:0"})]})
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    assert "field attacks.quantize: int8 dynamic quantisation runs on CPU, but models.0 (tiny) is on cuda:0: " \
           "use quantize = 'int4' or 'nf4' on a GPU" in str(e.value)
    cfg = load_config(sweep_files(extra="[attacks]\nrelearn = [1]\n", targets="refs = [0, 2]\nbatch = [2]"))
    with pytest.raises(ConfigError, match=r"field attacks: attacks run on single-target trajectories"):
        check_config(cfg)


def test_adversarial_modes_need_adversarial_and_reach_the_runner(tmp_path):
    from deepunlearn.bench.config import ConfigError, parse_config
    from deepunlearn.bench.config_probe import runner_probe_options

    base = {"kb": "kb.json", "models": [{"name": "m", "path": "m"}], "methods": {"ga": [1]}}
    with pytest.raises(ConfigError, match="field adversarial_modes: .*set adversarial = true too"):
        parse_config({**base, "adversarial_modes": ["exact"]})
    cfg = parse_config({**base, "adversarial": True, "adversarial_modes": ["exact", "rank"]})
    assert runner_probe_options(cfg) == {"adversarial": True, "adversarial_modes": ["exact", "rank"]}
