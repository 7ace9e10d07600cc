"""The tutorials run as written: every ``bash`` block of docs/tutorials/, page by page in the
order of the site's navigation, in one folder (each tutorial starts where the quick start left
off), against the tiny model on the CPU. A block preceded by ``<!-- not run: REASON -->`` is
skipped (the reason is required). Every sweep config shown in a ``toml`` block parses.

One substitution keeps the test environment as it was: ``pip install -e PATH`` installs the
package into a folder of its own (``--target``, put on ``PYTHONPATH`` for the later blocks)
rather than into the environment the rest of the suite runs in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^>]*?) -->\s*\n)?```(?P<lang>bash|toml)\n(?P<body>.*?)```", re.S)


def _nav_pages() -> list[Path]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    section = next(item["Tutorials"] for item in nav if isinstance(item, dict) and "Tutorials" in item)
    return [ROOT / "docs" / next(iter(entry.values())) for entry in section]


def test_every_tutorial_page_is_in_the_nav():
    assert sorted(_nav_pages()) == sorted(TUTORIALS.glob("*.md"))


def _blocks(page: Path):
    for m in BLOCK.finditer(page.read_text()):
        if m["why"] is not None:
            assert m["why"].strip(), f"{page.name}: a skipped block must say why"
            continue
        yield m["lang"], m["body"]


@pytest.mark.slow
def test_the_tutorials_run_as_written(tmp_path):
    from deepunlearn.bench.config import parse_config

    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    site.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "DEEPUNLEARN_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "MPLBACKEND": "Agg"}
    # `deepunlearn` is the console script of the package under test; `python` the interpreter
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "deepunlearn").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m deepunlearn "$@"\n')
    (shim / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for f in shim.iterdir():
        f.chmod(0o755)
    env["PATH"] = os.pathsep.join([str(shim), os.environ.get("PATH", "")])
    ran = 0
    for page in _nav_pages():
        for lang, body in _blocks(page):
            if lang == "toml":
                data = tomllib.loads(body)
                if "models" in data:  # a sweep config: it must parse as one
                    parse_config(data, source=f"{page.name}", base=work)
                continue
            script = re.sub(r"pip install -e (\S+)",
                            rf"{sys.executable} -m pip install --quiet --no-deps --no-build-isolation --target {site} \1",
                            body)
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                               capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, f"{page.name}: block\n{body}\nexit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            ran += 1
    assert ran >= 12


#: ``load_kb("kb.json").probe(N)  # "QUESTION"``: a question a tutorial shows in a comment
SHOWN_QUESTION = re.compile(r'load_kb\("kb\.json"\)\.probe\((\d+)\)\s*#\s*"([^"]+)"')


def test_the_questions_the_tutorials_show_are_the_kbs():
    """A question a tutorial names in a comment is the one the quick start's KB asks
    (``deepunlearn data generate --people 20 --seed 7``)."""
    import deepunlearn

    kb = deepunlearn.generate_family(20, seed=7)
    shown = [(page.name, int(m[1]), m[2]) for page in sorted(TUTORIALS.glob("*.md"))
             for m in SHOWN_QUESTION.finditer(page.read_text())]
    assert shown, "no tutorial shows a question any more: drop this test"
    assert [(page, i, q) for page, i, q in shown if kb.probe(i).question != q] == []
