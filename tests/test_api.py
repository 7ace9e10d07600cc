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


#: the catalogue of unlearning methods: the functions a plug-in author and a tool builder call
CATALOGUE = ["names", "find", "get_spec", "specs", "check_spec"]


def _sections(doc: str) -> set[str]:
    """The numpydoc section titles of a docstring (a title underlined with dashes)."""
    lines = doc.splitlines()
    return {a.strip() for a, b in zip(lines, lines[1:]) if b.strip() and set(b.strip()) == {"-"}
            and len(b.strip()) == len(a.strip())}


def _public_api():
    from deepunlearn.unlearn.methods import catalog

    yield from ((f"deepunlearn.{n}", getattr(deepunlearn, n)) for n in deepunlearn.__all__)
    yield from ((f"catalog.{n}", getattr(catalog, n)) for n in CATALOGUE)


@pytest.mark.parametrize("name, value", list(_public_api()), ids=lambda x: x if isinstance(x, str) else "")
def test_the_public_api_has_numpydoc_sections(name, value):
    """Every public function documents its parameters, what it returns and its example in numpydoc
    sections (and a class its parameters or attributes); ``Raises`` where it raises a user error."""
    doc = inspect.getdoc(value) or ""
    have = _sections(doc)
    need = {"Examples"}
    takes = [p for p in inspect.signature(value).parameters if p != "self"]
    if inspect.isclass(value):
        assert have & {"Parameters", "Attributes"}, f"{name}: no Parameters or Attributes section"
    else:
        need |= {"Returns"} | ({"Parameters"} if takes else set())
    assert need <= have, f"{name} lacks the numpydoc sections {sorted(need - have)}"
    if "Raises" in have:
        raised = doc.split("Raises\n------\n", 1)[1].split("\n\n", 1)[0]
        assert raised.splitlines()[0].strip().isidentifier(), f"{name}: Raises should start with an exception name"
