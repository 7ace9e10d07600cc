"""Shared fixtures. The EDU-RELAT release sits in ``../shared/edu-relat`` beside the checkout
(CI clones the project next to ``shared/``); ``DEEPUNLEARN_EDU_RELAT`` overrides the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def edu_relat_dir() -> Path:
    env = os.environ.get("DEEPUNLEARN_EDU_RELAT")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "edu-relat", ROOT / "shared" / "edu-relat"]
    for c in candidates:
        if (c / "family-200-graph.pt").exists():
            return c
    raise RuntimeError(
        "EDU-RELAT release not found: expected ../shared/edu-relat beside the checkout "
        "or DEEPUNLEARN_EDU_RELAT=/path/to/edu-relat"
    )


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
