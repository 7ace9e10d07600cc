"""People and repeats past the bounds of ``deepunlearn.limits`` on the data commands: ``data
generate --people/--canaries/--repeat`` and ``data holdout --people`` are one line naming the
flag, exit 1, before anything is read or written; ``DEEPUNLEARN_ALLOW_LARGE=1`` lifts them."""

from __future__ import annotations

import pytest

from deepunlearn.cli import main
from deepunlearn.limits import ALLOW_LARGE_ENV


def _line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def _bound(n: int, unit: str) -> str:
    return (f"is more than the bound of {n:,} {unit} (it would run for days or exhaust memory); "
            f"set {ALLOW_LARGE_ENV}=1 to lift it")


@pytest.mark.parametrize("args, line", [
    (["--people", "100000000"], f"--people 100000000: 100,000,000 people {_bound(2_000_000, 'people')}"),
    (["--people", "10", "--canaries", "2", "--repeat", "1000000000"],
     f"--repeat 1000000000: 1,000,000,000 repeats {_bound(10_000, 'repeats')}"),
])
def test_generate_past_the_bounds_is_one_line(tmp_path, monkeypatch, capsys, args, line):
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)
    out = tmp_path / "kb.json"
    assert main(["data", "generate", *args, "-o", str(out)]) == 1
    assert _line(capsys) == f"deepunlearn data: error: {line}"
    assert not out.exists()


def test_holdout_people_past_the_bound_is_refused_before_the_kb_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ALLOW_LARGE_ENV, raising=False)
    out = tmp_path / "hold.json"
    assert main(["data", "holdout", "--kb", str(tmp_path / "absent.json"), "--people", "100000000",
                 "-o", str(out)]) == 1
    assert _line(capsys) == f"deepunlearn data: error: --people 100000000: 100,000,000 people {_bound(1_000_000, 'people')}"
    assert not out.exists()


def test_the_environment_lifts_the_bounds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ALLOW_LARGE_ENV, "1")
    out = tmp_path / "kb.json"
    assert main(["data", "generate", "--people", "10", "--canaries", "2", "--repeat", "10001", "-o", str(out),
                 "--json"]) == 0
    assert out.is_file()
