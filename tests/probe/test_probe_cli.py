"""The probe command's flags and messages and the probe layer's readers of stored results:
--threads, quiet transformers bars, help on every flag, the KB-mismatch warning,
ProbeResult.from_json and the probe cache on bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deepunlearn.cli import main
from deepunlearn.errors import UserError
from deepunlearn.probe import ProbeResult, cached_probe, check_trained_on, load_model, save_bundle


def _probe_parser():
    from deepunlearn.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["probe"]


def test_every_probe_flag_has_help():
    p = _probe_parser()
    missing = [a.option_strings for a in p._actions if a.option_strings and not a.help]
    assert missing == []
    text = p.format_help()
    assert "--batch-size N" in text and "questions per forward pass" in text
    assert "--threads N" in text and "--trust-remote-code" in text


def test_probe_threads_sets_torch_threads(monkeypatch, mini_model_dir, mini_kb_file, capsys):
    import torch

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--threads", "3", "--json"]) == 0
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--json"]) == 0
    assert calls == [3, 1]  # default one thread
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["probe", "--model", "m", "--kb", "k", "--threads", "0"])
    assert e.value.code == 2 and "--threads: expected an integer >= 1, got '0'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["probe", "--model", "m", "--kb", "k", "--batch-size", "0"])
    assert e.value.code == 2 and "--batch-size: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_build_load_and_save_print_no_transformers_bars(mini_kb, tmp_path, capfd):
    from transformers.utils import logging as tf_logging

    from deepunlearn.probe import build_tiny_model

    capfd.readouterr()
    before = tf_logging.is_progress_bar_enabled()
    folder = build_tiny_model(mini_kb, tmp_path / "m", hidden=16, heads=2, layers=1)
    bundle = load_model(folder, device="cpu")
    save_bundle(bundle, tmp_path / "m2")
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err, err
    assert tf_logging.is_progress_bar_enabled() == before  # restored after each load/save


def test_quiet_hf_restores_the_settings_it_found():
    import huggingface_hub.utils as hub_utils
    from transformers.utils import logging as tf_logging

    from deepunlearn.probe import quiet_hf

    for enabled in (True, False):
        (tf_logging.enable_progress_bar if enabled else tf_logging.disable_progress_bar)()
        with quiet_hf():
            assert not tf_logging.is_progress_bar_enabled() and hub_utils.are_progress_bars_disabled()
        assert tf_logging.is_progress_bar_enabled() == enabled
        assert hub_utils.are_progress_bars_disabled() == (not enabled)
    tf_logging.enable_progress_bar()


# --- the KB a model was trained on --------------------------------------------------


def test_probing_on_another_kb_warns_once(mini_model_dir, mini_kb, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb
    from deepunlearn.kg.kb import KnowledgeBase

    other = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Bob", "child", "Ann")], name="other")
    other_file = tmp_path / "other.json"
    save_kb(other, other_file)
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(other_file), "--json"]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1
    fp = mini_model_dir / "deepunlearn.json"
    recorded = json.loads(fp.read_text())["kb"]["fingerprint"]
    assert warnings[0].startswith(
        f"deepunlearn probe: warning: model {mini_model_dir.resolve()} was trained on KB 'mini' "
        f"(fingerprint {recorded[:12]}), not on {other_file} (fingerprint ")
    assert warnings[0].endswith("its results on this KB are not comparable with its results on the KB it was "
                                "trained on")


def test_unlearning_on_another_kb_warns_too(mini_model_dir, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb
    from deepunlearn.kg.kb import KnowledgeBase

    other = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
                                [("Bob", "mother", "Ann"), ("Ann", "child", "Bob")], name="other")
    save_kb(other, tmp_path / "other.json")
    main(["unlearn", "--model", str(mini_model_dir), "--kb", str(tmp_path / "other.json"), "--method", "ga",
          "--target", "0", "--grid", "1", "--cache-dir", str(tmp_path / "c"), "--json"])
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "warning" in line][0].startswith(
        f"deepunlearn unlearn: warning: model {mini_model_dir.resolve()} was trained on KB 'mini'")


def test_check_trained_on(mini_model_dir, mini_kb):
    from deepunlearn.kg.kb import KnowledgeBase
    from deepunlearn.probe import kb_fingerprint

    bundle = load_model(mini_model_dir, device="cpu")
    assert check_trained_on(bundle, mini_kb) is None
    other = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")], name="o")
    assert "not on o (fingerprint" in check_trained_on(bundle, other)
    bundle.meta["kb"]["fingerprint"] = kb_fingerprint(mini_kb) + "f" * 32  # a 64-hex record of the same KB
    assert check_trained_on(bundle, mini_kb) is None
    for meta in ({}, {"kb": "x"}, {"kb": {"fingerprint": 3}}):
        bundle.meta = meta
        assert check_trained_on(bundle, other) is None  # nothing recorded: nothing to compare


def test_probing_on_its_own_kb_does_not_warn(mini_model_dir, mini_kb_file, capsys):
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--json"]) == 0
    assert "warning" not in capsys.readouterr().err


# --- stored probe results ------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("[" * 100 + "]" * 100, "run.json: JSON nested deeper than 64 levels"),
    ('{"fact_ids": [1], "known": [true], "logprob": [0.0]', "run.json:1:52: not valid JSON (Expecting"),
    ('{"fact_ids": [1], "known": [true], "logprob": [NaN]}', "run.json: not valid JSON (NaN is not JSON)"),
    ("[1, 2]", "run.json: expected a JSON object, got list"),
    ('{"fact_ids": [1], "logprob": [0.0]}', "run.json: missing field 'known'"),
    ('{"fact_ids": [true], "known": [true], "logprob": [0.0]}', "run.json: field 'fact_ids' must be a list of fact"),
    ('{"fact_ids": [1], "known": [1], "logprob": [0.0]}', "run.json: field 'known' must be a list of true/false"),
    ('{"fact_ids": [1], "known": [true], "logprob": [{}]}', "run.json: field 'logprob' must be a list of numbers"),
    ('{"fact_ids": [1], "known": [true], "logprob": [0], "outputs": [3]}', "run.json: field 'outputs' must be"),
    ('{"fact_ids": [1], "known": [true], "logprob": [0], "mode": "x"}', "run.json: field 'mode' must be one of"),
    ('{"fact_ids": [1, 2], "known": [true], "logprob": [0]}', "run.json: fact_ids, known, logprob (and outputs) must"),
])
def test_probe_result_from_bad_json_is_a_user_error(text, message):
    with pytest.raises(UserError) as e:
        ProbeResult.from_json(text, source="run.json")
    assert str(e.value).startswith(message)
    assert isinstance(e.value, ValueError)  # callers that caught ValueError still do


def test_probe_result_from_non_utf8_bytes_and_null_logprob():
    with pytest.raises(UserError, match="^probe result: not UTF-8 text"):
        ProbeResult.from_json(b'{"fact_ids": [1], "known": [true], "logprob": ["\xff"]}')
    r = ProbeResult.from_json({"fact_ids": [4], "known": [False], "logprob": [None]})
    assert np.isnan(r.logprob[0]) and r.to_json()["logprob"] == [None]
    r = ProbeResult(fact_ids=[1], known=[True], logprob=[-np.inf])
    assert json.loads(json.dumps(r.to_json(), allow_nan=False))["logprob"] == [None]


@pytest.mark.parametrize("content", [b"", b"{\"format\": ", b"[" * 10000, b"\xff\xfe", b"[]",
                                     b'{"format": "deepunlearn-probe-cache", "key": "KEY", "result": [1]}',
                                     b'{"format": "deepunlearn-probe-cache", "key": "KEY", "result": {"fact_ids": 1}}'])
def test_a_corrupt_cache_entry_is_recomputed(mini_model_dir, mini_kb, tmp_path, content):
    from deepunlearn.probe.cache import probe_key

    bundle = load_model(mini_model_dir, device="cpu")
    key = probe_key(bundle, mini_kb, "exact")
    entry = tmp_path / f"probe-{key}.json"
    entry.write_bytes(content.replace(b"KEY", key.encode()))
    res = cached_probe(bundle, mini_kb, cache_dir=tmp_path, progress=False)
    assert res.total == 2
    doc = json.loads(entry.read_text())  # overwritten with the fresh result
    assert doc["key"] == key and doc["result"]["fact_ids"] == [0, 1]
    assert cached_probe(bundle, mini_kb, cache_dir=tmp_path, progress=False).known.tolist() == res.known.tolist()
