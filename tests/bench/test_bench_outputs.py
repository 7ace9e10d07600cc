"""The output policy on bench and demo: the lock never follows a link, an output that is a file
or a folder of other files is refused before any work, a model's identity covers every file that
changes its answers, and the demo checks its folder's sweep identity before it trains."""

from __future__ import annotations

import json
import os

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.guard import LOCK_NAME, SweepLock
from deepunlearn.bench.runner import run_sweep
from deepunlearn.bench.store import ResultsStore, StoreError
from deepunlearn.cli import main

from bench_helpers import FakeExecutor


@pytest.fixture
def fake_executor(monkeypatch):
    import deepunlearn.bench.runner as runner

    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: FakeExecutor())


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ------------------------------------------------------------------------------------ the lock


def test_a_lock_link_is_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(victim)
    with pytest.raises(StoreError) as e:
        with SweepLock(out):
            pass
    assert str(e.value).startswith(f"{out / LOCK_NAME}: the results folder's lock file is a symbolic link")
    assert victim.read_text() == "precious"


def test_bench_with_a_lock_link_is_one_line(sweep_files, tmp_path, capsys, fake_executor):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / LOCK_NAME).symlink_to(victim)
    code, _, err = run(capsys, "bench", "--config", str(sweep_files()), "--quiet")
    assert code == 1 and err.count("\n") == 1 and "is a symbolic link" in err
    assert victim.read_text() == "precious" and not (tmp_path / "out" / "results.sqlite").exists()


# ------------------------------------------------------------------------------------ the output folder


def test_bench_output_that_is_a_file_is_one_line(sweep_files, tmp_path, capsys, fake_executor):
    f = tmp_path / "results.txt"
    f.write_text("mine")
    code, _, err = run(capsys, "bench", "--config", str(sweep_files()), "-o", str(f), "--quiet")
    assert code == 1 and err == f"deepunlearn bench: error: -o {f}: exists and is not a folder\n"
    assert f.read_text() == "mine"


def test_bench_refuses_a_folder_of_files_it_would_replace_unless_force(sweep_files, tmp_path, capsys,
                                                                       fake_executor):
    mine = tmp_path / "exp"
    mine.mkdir()
    (mine / "config.yaml").write_text("my sweep notes\n")
    code, _, err = run(capsys, "bench", "--config", str(sweep_files()), "-o", str(mine), "--quiet")
    assert code == 1 and err == (f"deepunlearn bench: error: -o {mine}: a non-empty folder that is not a results "
                                 "folder (no results.sqlite); refusing to replace it (pass --force to replace it)\n")
    assert sorted(p.name for p in mine.iterdir()) == ["config.yaml"]
    assert (mine / "config.yaml").read_text() == "my sweep notes\n"
    code, _, err = run(capsys, "bench", "--config", str(sweep_files()), "-o", str(mine), "--quiet", "--force")
    assert code == 0, err and (mine / "results.sqlite").is_file()
    # its own results folder is resumed without --force
    code, _, err = run(capsys, "bench", "--config", str(sweep_files()), "-o", str(mine), "--quiet")
    assert code == 0, err


# ------------------------------------------------------------------------------------ model identity


@pytest.mark.parametrize("name, text", [
    ("deepunlearn.json", '{"prompt": {"question": "Q: {q}\\nA:"}}'),
    ("tokenizer.json", '{"model": {"vocab": {"a": 0}}}'),
    ("tokenizer_config.json", '{"eos_token": "</s>"}'),
    ("generation_config.json", '{"do_sample": false}'),
    ("adapter_config.json", '{"r": 8}'),
    ("adapter_model.safetensors", "other adapter weights"),
])
def test_a_changed_file_that_changes_the_answers_is_never_resumed(sweep_files, fake_model, name, text):
    (fake_model / name).write_text("{}")
    cfg = load_config(sweep_files())
    assert run_sweep(cfg, executor=FakeExecutor(), progress=False).computed == 8
    with ResultsStore(cfg.output) as s:  # as if killed half-way
        s._tx([("DELETE FROM points WHERE method = 'tv' AND target = 2", ()),
               ("DELETE FROM jobs WHERE method = 'tv' AND target = 2", ())])
    (fake_model / name).write_text(text)
    ex = FakeExecutor()
    with pytest.raises(StoreError, match="changed since this sweep started"):
        run_sweep(cfg, executor=ex, progress=False)
    assert ex.calls == 0


def test_an_unchanged_or_hidden_file_still_resumes(sweep_files, fake_model):
    (fake_model / "tokenizer.json").write_text("{}")
    cfg = load_config(sweep_files())
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    os.utime(fake_model / "tokenizer.json")  # identified by content, not by time
    (fake_model / ".cache").mkdir()
    (fake_model / ".cache" / "download.metadata").write_text("etag")
    again = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert again.resumed and again.computed == 0


def test_a_store_of_an_earlier_version_still_resumes_and_then_records_the_full_identity(sweep_files, fake_model):
    from deepunlearn.bench.guard import _legacy_digest, identity_digest, model_identity

    (fake_model / "deepunlearn.json").write_text("{}")
    cfg = load_config(sweep_files())
    run_sweep(cfg, executor=FakeExecutor(), progress=False)
    with ResultsStore(cfg.output) as s:  # as an earlier version recorded it: weights and config.json only
        s.set_meta({"model_identity:tiny": _legacy_digest(str(fake_model))})
        s._tx([("DELETE FROM points WHERE method = 'tv' AND target = 2", ()),
               ("DELETE FROM jobs WHERE method = 'tv' AND target = 2", ())])
    again = run_sweep(cfg, executor=FakeExecutor(), progress=False)
    assert again.resumed and again.computed == 2
    with ResultsStore(cfg.output) as s:
        assert s.meta("model_identity:tiny") == identity_digest(model_identity(str(fake_model)))


# ------------------------------------------------------------------------------------ the demo


@pytest.fixture
def family_demo(tmp_path):
    """A folder as a family demo (seed 0) leaves it: its stamp, KB, model and store."""
    from deepunlearn.bench.demo import DEMO_FILE, _want
    from deepunlearn.kg.io import save_kb
    from deepunlearn.rules.generate import generate_kb

    out = tmp_path / "demo"
    out.mkdir()
    kb = generate_kb("family", 8, seed=0)
    save_kb(kb, out / "kb.json")
    (out / "model").mkdir()
    (out / "model" / "config.json").write_text("{}")
    (out / DEMO_FILE).write_text(json.dumps({**_want(kb, 0), "finetune": {}}))
    with ResultsStore(out) as s:
        s.bind("f" * 64, {"demo": True})
    return out


def test_demo_of_another_domain_is_refused_before_any_work(family_demo, capsys, monkeypatch):
    import deepunlearn.bench.demo as demo

    def no_work(*a, **k):
        raise AssertionError("the demo trained before checking its folder")

    monkeypatch.setattr(demo, "prepare_model", no_work)
    kb_before = (family_demo / "kb.json").read_bytes()
    code, _, err = run(capsys, "demo", "--domain", "org", "--people", "8", "-o", str(family_demo), "--quiet")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"deepunlearn demo: error: -o {family_demo}: holds results of a demo with another KB or seed")
    assert "--overwrite" in err
    assert (family_demo / "kb.json").read_bytes() == kb_before
    assert sorted(p.name for p in (family_demo / "model").iterdir()) == ["config.json"]


def test_demo_refuses_a_folder_of_other_files(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "kb.json").write_text("my own KB")
    code, _, err = run(capsys, "demo", "--people", "8", "-o", str(mine), "--quiet")
    assert code == 1 and "a non-empty folder that is not a demo folder" in err and "--force" in err
    assert sorted(p.name for p in mine.iterdir()) == ["kb.json"] and (mine / "kb.json").read_text() == "my own KB"
