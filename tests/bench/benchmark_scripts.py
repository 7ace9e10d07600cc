"""The benchmark scripts as modules, for the tests that drive them (``benchmarks/`` is a folder of
scripts, not a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
