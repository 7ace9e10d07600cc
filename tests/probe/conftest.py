"""Probe-layer fixtures: a minimal untrained checkpoint (1 layer, 16 wide, built in about a
second) for the tests that corrupt a model folder's files, and its two-fact KB."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def mini_kb():
    from deepunlearn.kg.kb import KnowledgeBase

    return KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "child", "Bob"), ("Bob", "parent", "Ann")],
                               name="mini")


@pytest.fixture(scope="session")
def mini_kb_file(mini_kb, tmp_path_factory):
    from deepunlearn.kg.io import save_kb

    path = tmp_path_factory.mktemp("mini-kb") / "mini.json"
    save_kb(mini_kb, path)
    return path


@pytest.fixture(scope="session")
def mini_model_dir(mini_kb, tmp_path_factory):
    """Read-only: copy it (``mini_copy``) before changing a file."""
    from deepunlearn.probe import build_tiny_model

    return build_tiny_model(mini_kb, tmp_path_factory.mktemp("mini-model") / "mini", hidden=16, heads=2, layers=1)


@pytest.fixture
def mini_copy(mini_model_dir, tmp_path):
    """A fresh copy of the minimal checkpoint that a test may corrupt."""
    return shutil.copytree(mini_model_dir, tmp_path / "model")
