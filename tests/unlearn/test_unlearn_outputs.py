"""The output policy on the commands that write model folders: ``finetune -o`` and ``unlearn
--save-model`` refuse a non-empty folder that is not a model folder (its files are kept) unless
--force, and a full disk while the weights are saved is exit code 1 naming the folder."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepunlearn.cli import main

TINY = ["--model", "tiny", "--tiny-hidden", "32", "--tiny-heads", "4", "--tiny-layers", "1"]


@pytest.fixture
def kb_file(tmp_path):
    assert main(["data", "generate", "--people", "5", "-o", str(tmp_path / "kb.json"), "--json"]) == 0
    return tmp_path / "kb.json"


@pytest.fixture
def notes(tmp_path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "thesis.txt").write_text("thesis")
    return d


@pytest.fixture
def known_at_once(monkeypatch, kb_file):
    """The probe says every fact is known: finetuning stops after its first epoch."""
    import deepunlearn.probe.probing as probing
    from deepunlearn.kg.io import load_kb

    n = len(load_kb(kb_file))
    monkeypatch.setattr(probing, "probe", lambda *a, **k: SimpleNamespace(share=1.0, n_known=n, total=n))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def test_finetune_refuses_a_folder_of_other_files(kb_file, notes, capsys):
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(notes), "--epochs", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and (notes / "thesis.txt").read_text() == "thesis" and sorted(notes.iterdir()) == [
        notes / "thesis.txt"]
    assert err == (f"deepunlearn finetune: error: -o {notes}: a non-empty folder that is not a model folder of "
                   "this tool (no deepunlearn.json); refusing to replace it (pass --force to replace it)\n")


def test_finetune_with_force_replaces_the_folder_as_a_whole(kb_file, notes, capsys, known_at_once):
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(notes), "--epochs", "1", "--force", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert not (notes / "thesis.txt").exists() and (notes / "config.json").is_file()
    assert json.loads(cap.out)["checkpoint"] == str(notes) and leftovers(notes) == []


def test_finetune_refuses_a_link_as_its_folder(kb_file, tmp_path, notes, capsys):
    link = tmp_path / "ckpt"
    link.symlink_to(notes)
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(link), "--epochs", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "is a symbolic link" in err and err.count("\n") == 1
    assert link.is_symlink() and (notes / "thesis.txt").read_text() == "thesis"


def test_a_full_disk_while_saving_the_weights_is_one_line_and_keeps_the_old_checkpoint(
        kb_file, tmp_path, capsys, monkeypatch, known_at_once):
    from safetensors import SafetensorError
    from transformers import PreTrainedModel

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')
    (ckpt / "deepunlearn.json").write_text('{"format": "deepunlearn-model"}')  # a model this tool wrote

    def full(self, *a, **k):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
                              'space left on device" })')

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full)
    rc = main(["finetune", "--kb", str(kb_file), *TINY, "-o", str(ckpt), "--epochs", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith(f"deepunlearn finetune: error: {ckpt}: cannot write: Error while serializing")
    assert err.count("\n") == 1 and "StorageFull" in err
    assert sorted(p.name for p in ckpt.iterdir()) == ["config.json", "deepunlearn.json"] and leftovers(ckpt) == []


def test_unlearn_save_model_refuses_a_folder_of_other_files(kb_file, notes, capsys):
    rc = main(["unlearn", "--model", "tiny", "--kb", str(kb_file), "--target", "0", "--method", "ga",
               "--save-model", str(notes)])
    err = capsys.readouterr().err
    assert rc == 1 and (notes / "thesis.txt").read_text() == "thesis"
    assert err == (f"deepunlearn unlearn: error: --save-model {notes}: a non-empty folder that is not a model folder "
                   "of this tool (no deepunlearn.json); refusing to replace it (pass --force to replace it)\n")
