"""The curated top-level API: ``import deepunlearn`` loads no layer and no torch; every public
name resolves to the object it names, is listed by ``dir()``, and its docstring carries a
doctested example (``--doctest-modules`` runs them where they are defined)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import deepunlearn

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_light():
    code = ("import sys, deepunlearn; heavy = [m for m in ('torch', 'transformers', 'deepunlearn.kg', "
            "'deepunlearn.rules', 'deepunlearn.probe') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", deepunlearn.__all__)
def test_every_public_name_resolves_with_an_example(name):
    module, obj = deepunlearn._API[name].split(":")
    value = getattr(deepunlearn, name)
    assert value is getattr(__import__(module, fromlist=[obj]), obj)
    assert name in dir(deepunlearn)
    doc = inspect.getdoc(value) or ""
    assert ">>> " in doc, f"deepunlearn.{name} has no example in its docstring"


def test_unknown_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        deepunlearn.nothing_here  # noqa: B018
