"""Collect ``bench_*.py`` files when pytest is given the folder
(``python -m pytest benchmarks/ --benchmark-only``); a file named on the command line is
collected by pytest itself."""

from __future__ import annotations

import pytest


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
