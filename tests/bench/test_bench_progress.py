"""The sweep's progress on stderr: the final 100 % line once, no cursor-up
escape (ESC[A) from a library's bar nested in the sweep's."""

from __future__ import annotations

import json
import re

import pytest

from deepunlearn.bench.config import load_config
from deepunlearn.bench.runner import run_sweep

from bench_helpers import FakeExecutor


def _hundred(err: str) -> int:
    """How many times the sweep bar showed its complete state (\\r-separated redraws included)."""
    return len(re.findall(r"sweep: 100%", err))


def test_sweep_prints_its_final_line_once(sweep_files, capfd):
    class Chatty(FakeExecutor):  # a status line after the last point: tqdm redrew the complete bar for it
        def run(self, spec, jobs, sink):
            super().run(spec, jobs, sink)
            sink(jobs[-1], {"event": "status", "text": "all done"})

    out = run_sweep(load_config(sweep_files()), executor=Chatty(), progress=True)
    err = capfd.readouterr().err
    assert out.computed == 8
    assert _hundred(err) == 1 and "\x1b[A" not in err and "all done\n" in err
    assert err.rstrip("\n").splitlines()[-1].split("\r")[-1].startswith("sweep: 100%|")


def test_skipped_sweep_prints_its_final_line_once(sweep_files, capfd):
    run_sweep(load_config(sweep_files()), executor=FakeExecutor(skip=True), progress=True)
    err = capfd.readouterr().err
    assert _hundred(err) == 1 and err.count("warning: skipping target") == 2


@pytest.mark.slow
def test_real_sweep_stderr_is_clean(small_kb, tiny_model_dir, tmp_path, capfd):
    """The tiny model, one known target, GA [1]: a model load inside the sweep's bar."""
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(tiny_model_dir, device="cpu"), small_kb, mode="exact", progress=False).known_ids()
    target = next(t for t in small_kb.targets if t in known)
    save_kb(small_kb, tmp_path / "kb.json")
    (tmp_path / "s.toml").write_text("\n".join([
        'kb = "kb.json"', 'rules = "family"', 'output = "out"', "threads = 1",
        "[[models]]", 'name = "tiny"', f'path = "{tiny_model_dir}"',
        "[methods]", "ga = [1]", "[targets]", f"refs = {json.dumps([target])}", ""]))
    capfd.readouterr()
    out = run_sweep(load_config(tmp_path / "s.toml"), progress=True)
    err = capfd.readouterr().err
    assert out.computed == 1
    assert "\x1b[A" not in err, repr(err)
    assert _hundred(err) == 1, repr(err)
