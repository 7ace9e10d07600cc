"""Fixtures of the bench tests: a small KB file, a stand-in model folder and an executor that
fakes the unlearn layer (points or skips without loading a model), so the runner's own logic
(locks, resumption, model identity, reports) is tested in milliseconds."""

from __future__ import annotations

from pathlib import Path

import pytest



@pytest.fixture
def fake_model(tmp_path) -> Path:
    """A folder that passes for a checkpoint: config.json and a weights file (never loaded)."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    return d


@pytest.fixture
def sweep_files(tmp_path, fake_model):
    """A KB file (a few family facts, two targets) and a function writing a sweep config for it."""
    from deepunlearn.kg.io import save_kb
    from deepunlearn.kg.kb import KnowledgeBase

    kb = KnowledgeBase.build({"A": {}, "B": {}, "C": {}},
                             [("A", "child", "B"), ("A", "child", "C"), ("B", "father", "A"), ("C", "father", "A")],
                             targets=[0, 2])
    save_kb(kb, tmp_path / "kb.json")

    def write(name: str = "sweep.toml", *, model: str = "tiny", path: Path | str = fake_model, extra: str = "",
              targets: str = "refs = [0, 2]") -> Path:
        text = "\n".join([
            'kb = "kb.json"', 'output = "out"', extra,
            "[[models]]", f'name = "{model}"', f'path = "{path}"',
            "[methods]", "ga = [1, 2]", "tv = [0.5, 5]",
            "[targets]", targets, ""])
        (tmp_path / name).write_text(text)
        return tmp_path / name

    return write
