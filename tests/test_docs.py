"""The documentation: the mkdocs site builds in strict mode, and README.md and docs/ speak of the
tool, not of its history (no issue numbers), and link only to files that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
ISSUE = re.compile(r"\bissues?[\s-]*\d+", re.IGNORECASE)


def _text_outside_code(path: Path) -> str:
    """The Markdown of ``path`` without fenced code blocks (a command's output may say anything)."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') is not installed")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",  # no -q: it hides the warnings --strict counts
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8").count(
        'id="deepunlearn.rules.closure.closure"') == 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers(page):
    hits = [m.group(0) for m in ISSUE.finditer(page.read_text(encoding="utf-8"))]
    assert not hits, f"{page.relative_to(ROOT)} mentions {hits}"
    assert "docs/runs" not in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_to_existing_files(page):
    missing = []
    for target in LINK.findall(_text_outside_code(page)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages == set(re.findall(r":\s*([\w/-]+\.md)\s*$", nav, re.MULTILINE))


def test_figures_exist_and_are_linked():
    figures = {p.name for p in (ROOT / "docs" / "figures").glob("*.png")}
    linked = set()
    for page in PAGES:
        linked |= {Path(t).name for t in LINK.findall(page.read_text(encoding="utf-8")) if t.endswith(".png")}
    assert linked <= figures
    assert figures <= linked, f"figures no page shows: {sorted(figures - linked)}"
