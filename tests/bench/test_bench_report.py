"""The report: markdown with the paper's table and figures that are real, non-blank PNGs."""

import json
import random

import pytest

from deepunlearn.bench.config import PAPER_GRIDS
from deepunlearn.bench.report import build_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_png(path, min_w=400, min_h=250):
    """A valid PNG, of a sensible size, with real content (not one flat colour)."""
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == PNG_MAGIC, path
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, (path, w, h)
    rgb = img[..., :3]
    assert rgb.std() > 0.05, path                       # not blank
    assert (rgb.reshape(-1, 3).max(1) - rgb.reshape(-1, 3).min(1) > 0.2).mean() > 0.005, path  # has colour marks


def fake_points(kb, models=("tiny",)):
    rng = random.Random(0)
    pts = []
    for mi, model in enumerate(models):
        for t in kb.targets[:22]:
            for k, (m, grid) in enumerate(PAPER_GRIDS.items()):
                for j, g in enumerate(grid):
                    x = (j + 1) / len(grid)
                    r = min(1, max(0, x * (1 - 0.2 * k) + rng.gauss(0, 0.1)))
                    a = min(1, max(0, 1 - x * (0.8 + 0.1 * k) + 0.1 * mi + rng.gauss(0, 0.05)))
                    pts.append(dict(model=model, target=t, method=m, param=g, recall=r, accuracy=a,
                                    accuracy_family=a * 0.9, accuracy_biography=min(1.0, a * 1.1),
                                    target_forgotten=r > 0.3, forgotten=[1, 2], exact=True))
    return pts


@pytest.mark.parametrize("models", [("tiny",), ("tiny", "phi-1.5")])
def test_report_files(tmp_path, edu_kb, models):
    pts = fake_points(edu_kb, models)
    cfg = {"kb": "kb.json", "rules": "family", "k_mode": "probed", "probe_mode": "exact",
           "models": [{"name": m} for m in models], "methods": {k: list(v) for k, v in PAPER_GRIDS.items()}}
    path = build_report(pts, tmp_path / "rep", kb=edu_kb, methods=list(PAPER_GRIDS), models=list(models), config=cfg)
    text = path.read_text()
    for name in ("curves", "headline", "superficial", "family_biography", "by_relation"):
        assert f"]({name}.png)" in text
        check_png(tmp_path / "rep" / f"{name}.png")
    for m in models:
        check_png(tmp_path / "rep" / f"trajectories_{m}.png")
    assert "Recall@Acc>=0.8 (up)" in text and "## By target relation" in text
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert list(summary["models"]) == list(models)
    assert set(summary["by_relation"][models[0]]["ga"]) <= set(edu_kb.relations)
    rows = (tmp_path / "rep" / "points.csv").read_text().splitlines()
    assert len(rows) == len(pts) + 1 and rows[0].startswith("model,target,relation,method,param")
