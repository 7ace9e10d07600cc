"""Collect ``bench_*.py`` files when pytest is given the folder
(``python -m pytest benchmarks/ --benchmark-only``); a file named on the command line is
collected by pytest itself."""

from __future__ import annotations

import pytest


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


# ------------------------------------------------------------------------------- shared fixtures
import os  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def release_dir() -> Path:
    """The EDU-RELAT release: ``$DEEPUNLEARN_EDU_RELAT``, else the copy shipped with deepunlearn."""
    from deepunlearn.kg.edu_relat import SHIPPED_DIR

    env = os.environ.get("DEEPUNLEARN_EDU_RELAT")
    return Path(env) if env else SHIPPED_DIR


@pytest.fixture(scope="session")
def edu_kb():
    from deepunlearn.kg.edu_relat import import_edu_relat

    return import_edu_relat(release_dir())


@pytest.fixture(scope="session")
def edu_model_dir(edu_kb) -> Path:
    """The 2-layer, 512-wide tiny model finetuned to >= 95 % on the release, built once and kept
    under ``~/.cache/deepunlearn/bench/`` keyed on the KB; ``DEEPUNLEARN_BENCH_MODEL=DIR`` names another."""
    from deepunlearn.probe import build_tiny_model, kb_fingerprint, load_model, read_meta
    from deepunlearn.probe.cache import default_cache_dir
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    given = os.environ.get("DEEPUNLEARN_BENCH_MODEL")
    if given:
        return Path(given)
    folder = default_cache_dir().parent / "bench" / f"tiny-edu-{kb_fingerprint(edu_kb)}"
    meta = read_meta(folder) if folder.is_dir() else {}
    if meta.get("total") != len(edu_kb) or meta.get("known", 0) < 0.95 * len(edu_kb):
        build_tiny_model(edu_kb, folder)
        res = finetune(load_model(folder, device="cpu"), edu_kb, FinetuneConfig.tiny(), out_dir=folder)
        assert res.share >= 0.95, res
    return folder
