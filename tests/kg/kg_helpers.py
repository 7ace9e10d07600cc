"""Helpers shared by the kg tests (imported as ``from kg_helpers import cli``; not a test module)."""

from __future__ import annotations

from deepunlearn.cli import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``deepunlearn ARGV`` in-process: (exit code, stdout, stderr); usage errors exit via SystemExit."""
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err
