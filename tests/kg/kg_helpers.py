"""Helpers shared by the kg tests (imported as ``from kg_helpers import cli``; not a test module)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from deepunlearn.cli import main
from deepunlearn.kg import KnowledgeBase


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``deepunlearn ARGV`` in-process: (exit code, stdout, stderr); usage errors exit via SystemExit."""
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def small_kb() -> KnowledgeBase:
    """Three people, a marriage, a child and a birth year; targets 0 and 2."""
    return KnowledgeBase.build(
        {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
        [("Ann", "husband", "Bob"), ("Bob", "wife", "Ann"), ("Ann", "child", "Cy"), ("Cy", "mother", "Ann"),
         ("Ann", "birthyear", "1950")],
        targets=[0, 2], name="small")


def one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit 1, one stderr line (no traceback), holding every needle."""
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]


def bio_of(kb) -> dict:
    """{person: {value relation: value}} of a KB; two values of one relation fail."""
    out: dict = defaultdict(dict)
    for s, r, o in kb.facts:
        if kb.relations[r].kind == "value":
            assert r not in out[s], f"{s} has two {r} facts"
            out[s][r] = o
    return out


@pytest.fixture(scope="module")
def generated():
    """Several generated KBs with their truth: sizes and seeds that exercise several trees."""
    from deepunlearn.kg.domains.family.generate import generate_family

    cases = [(100, 0), (100, 7), (100, 11), (250, 3), (40, 5)]
    return [(n, seed, *generate_family(n, seed, return_truth=True)) for n, seed in cases]


def surname(name: str) -> str:
    return name.rsplit(" ", 1)[-1]
