"""The scripts of examples/ run as a reader would run them (``python examples/NAME.py``) and
print what their docstrings promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPECT = {
    "rules_api.py": ["minimal sets", "forget a minimal set:    recall 1.00"],
    "evaluate_own_model.py": ["target forgotten:", "deep: "],
}


def test_every_example_script_is_covered():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(EXPECT)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECT))
def test_example_runs(script, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "DEEPUNLEARN_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    for line in EXPECT[script]:
        assert line in r.stdout, r.stdout


def test_the_readme_python_example_prints_what_it_says(tmp_path):
    import re

    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    said = re.search(r"# ([\d.]+ [\d.]+)\n", block).group(1)  # the printed values, as its comment gives them
    r = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == said.split()
