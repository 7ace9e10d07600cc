"""Protocols, per-model grids and job seeds in sweep configs.

Expected values come from the reference (wrh14/deep_unlearning): ``config/model_config.yaml``
(gpt2-xl: ``ga_num_epochs: 32``, ``npo_num_epochs: 32``, ``tv_alpha_list: "0.2 1.0 5.0 10.0
30.0 60.0 80.0"``; phi/llama: 16 epochs, ``"0.2 0.5 1.0 5.0 10.0"``), the Table-3 notebook (WHP
``alpha_list = ["10.0", "1000.0", "100000.0", "10000000.0", "100000000.0"]`` for every model,
GA/NPO checkpoints at steps 1..num_epochs of which the paper reports powers of two), and
``forget.py``/``vllm_eval.py`` for the reference protocol (generate-and-substring probing, K =
the dataset, the release's minimal sets, the first best set).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from deepunlearn.bench.config import ConfigError, load_config, parse_config
from deepunlearn.bench.runner import model_manifest, plan_jobs
from deepunlearn.bench.store import Point, ResultsStore

# the reference's grids, transcribed from the files named in the module docstring
REF_PHI_LLAMA = {"ga": [1, 2, 4, 8, 16], "npo": [1, 2, 4, 8, 16], "tv": [0.2, 0.5, 1.0, 5.0, 10.0],
                 "whp": [10.0, 1e3, 1e5, 1e7, 1e8]}
REF_GPT2_XL = {"ga": [1, 2, 4, 8, 16, 32], "npo": [1, 2, 4, 8, 16, 32],
               "tv": [0.2, 1.0, 5.0, 10.0, 30.0, 60.0, 80.0], "whp": [10.0, 1e3, 1e5, 1e7, 1e8]}


def _write(p, text):
    p.write_text(textwrap.dedent(text))
    return p


def _floats(grids):
    return {m: [float(x) for x in g] for m, g in grids.items()}


def test_protocol_per_model_and_top_level_overrides(tmp_path):
    (tmp_path / "sets").mkdir()
    cfg = load_config(_write(tmp_path / "s.toml", """
        kb = "kb.json"
        protocol = "reference"
        probe_mode = "exact"
        [[models]]
        name = "a"
        [[models]]
        name = "b"
        protocol = "Default"
    """))
    a, b = cfg.protocol_for("a"), cfg.protocol_for("b")
    # the reference: K = the dataset, the release's sets, np.argmax's first best set, one warm-up step
    assert (a.name, a.probe_mode, a.k_mode, a.sets, a.tie, a.warmup_steps) == ("reference", "exact", "dataset",
                                                                              "release", "first", 1)
    assert (b.name, b.probe_mode, b.k_mode, b.sets, b.tie) == ("default", "exact", "probed", "exact", "accuracy")
    assert cfg.sets_for("a") == "release"

    old = load_config(_write(tmp_path / "old.toml", 'kb = "kb.json"\nmodels = ["m"]\nexact = false\n'))
    assert old.protocol_for("m").sets == "mdus" and old.protocol_for("m").name == "default"
    folder = load_config(_write(tmp_path / "f.toml", 'kb = "kb.json"\nmodels = ["m"]\nsets = "sets"\n'))
    assert folder.sets_for("m") == str(tmp_path / "sets") and folder.protocol_for("m").sets == "release"


@pytest.mark.parametrize("body, field", [
    ('kb = "k.json"\nmodels = ["m"]\nprotocol = "paper"\n', "field protocol: unknown protocol 'paper'"),
    ('kb = "k.json"\n[[models]]\nname = "m"\nprotocol = "x"\n', "field models.0.protocol: unknown protocol"),
    ('kb = "k.json"\nmodels = ["m"]\nexact = false\nsets = "exact"\n', "field exact:"),
    ('kb = "k.json"\nmodels = ["m"]\nsets = "no-such-folder"\n', "field sets: no folder"),
    ('kb = "k.json"\nmodels = ["m"]\ntie = "last"\n', "field tie"),
    ('kb = "k.json"\n[[models]]\nname = "m"\ngrids = "gpt3"\n', "field models.0.grids: unknown grid preset"),
    ('kb = "k.json"\n[methods]\nga = [1]\n[[models]]\nname = "m"\n[models.grids]\ntv = [1]\n',
     "field models.0.grids.tv: method 'tv' is not in [methods]"),
    ('kb = "k.json"\n[methods]\nga = [1]\n[[models]]\nname = "m"\n[[models]]\nname = "n"\n[models.grids]\nga = [2, 2]\n',
     "field models.1.grids"),
])
def test_errors_name_the_field(tmp_path, body, field):
    p = _write(tmp_path / "bad.toml", body)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value).startswith(f"{p}: ") and field in str(e.value)
    r = subprocess.run([sys.executable, "-m", "deepunlearn", "bench", "--config", str(p), "--json"],
                       capture_output=True, text=True) if "protocol" in field else None
    if r is not None:   # the CLI: exit 1, one line, no traceback, nothing on stdout
        assert r.returncode == 1 and set(json.loads(r.stdout)) == {"error", "file", "field"} and len(r.stderr.strip().splitlines()) == 1


def test_grid_tables_and_presets(tmp_path):
    cfg = load_config(_write(tmp_path / "s.toml", """
        kb = "kb.json"
        [methods]
        ga = [1, 2]
        tv = []
        whp = [10]
        [[models]]
        name = "xl"
        path = "some/checkpoint"
        grids = "gpt2-xl"
        [[models]]
        name = "own"
        [models.grids]
        tv = [3, 4]
        ga = []
        [[models]]
        name = "phi"
        path = "microsoft/phi-1_5"
        grids = "phi"
    """))
    assert _floats(cfg.grids_for("xl")) == _floats({m: REF_GPT2_XL[m] for m in ("ga", "tv", "whp")})
    assert cfg.grids_for("own") == {"ga": REF_PHI_LLAMA["ga"], "tv": [3, 4], "whp": [10]}
    assert _floats(cfg.grids_for("phi")) == _floats({m: REF_PHI_LLAMA[m] for m in ("ga", "tv", "whp")})
    assert cfg.grid_sources("own") == {"ga": "paper", "tv": "models.grids", "whp": "methods"}
    # jobs carry each model's own grid
    with ResultsStore(tmp_path / "o") as s:
        s.bind("fp", {})
        jobs, _ = plan_jobs(cfg, [5], s)
    assert {(j.model, j.method): list(j.grid) for j in jobs}[("xl", "tv")] == [0.2, 1, 5, 10, 30, 60, 80]
    assert {(j.model, j.method): list(j.grid) for j in jobs}[("own", "tv")] == [3, 4]


def test_gpt2_family_models_get_the_gpt2_xl_grids(tmp_path, small_kb):
    from deepunlearn.probe import build_tiny_model

    build_tiny_model(small_kb, tmp_path / "g", hidden=16, layers=1, heads=2, arch="gpt2")
    build_tiny_model(small_kb, tmp_path / "l", hidden=16, layers=1, heads=2, arch="llama")
    assert json.loads((tmp_path / "g" / "config.json").read_text())["model_type"] == "gpt2"
    cfg = load_config(_write(tmp_path / "s.toml", """
        kb = "kb.json"
        models = ["g", "l", "openai-community/gpt2-xl"]
        [methods]
        ga = []
        npo = []
        tv = [0.5, 5]
        whp = []
    """))
    want = {"ga": REF_GPT2_XL["ga"], "npo": REF_GPT2_XL["npo"], "tv": [0.5, 5], "whp": REF_GPT2_XL["whp"]}
    assert _floats(cfg.grids_for("g")) == _floats(want) == _floats(cfg.grids_for("gpt2-xl"))
    assert _floats(cfg.grids_for("l")) == _floats({**REF_PHI_LLAMA, "tv": [0.5, 5]})
    m = model_manifest(cfg, "g")
    assert m["grid_sources"]["ga"] == "auto gpt2-xl" and "GPT2-XL grids (ga, npo)" in m["note"]
    assert "note" not in model_manifest(cfg, "l")
    # the reference protocol keeps the family grids; a dumped config reloads to the same grids
    ref = parse_config({**yaml.safe_load(cfg.to_yaml()), "protocol": "reference"})
    assert ref.grids_for("g") == cfg.grids_for("g")
    assert yaml.safe_load(cfg.to_yaml())["methods"]["ga"] == []


def _fp(data, kb="k" * 64):
    return parse_config({"kb": "kb.json", "models": ["gpt2", "m"], **data}).fingerprint(kb)


def test_fingerprint_follows_the_resolved_protocol(tmp_path):
    base = _fp({})
    assert base == _fp({}) == _fp({"protocol": "default"}) == _fp({"probe_mode": "exact", "exact": True})
    others = [
        _fp({"protocol": "reference"}),
        _fp({"models": ["gpt2", {"name": "m", "protocol": "reference"}]}),
        _fp({"probe_mode": "generate"}), _fp({"k_mode": "dataset"}), _fp({"tie": "first"}),
        _fp({"exact": False}), _fp({"sets": "release"}), _fp({"seed": 1}),
        _fp({"models": ["gpt2", {"name": "m", "grids": "gpt2-xl"}]}),
    ]
    assert len({base, *others}) == len(others) + 1
    # a sets folder is part of the experiment through its content
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "0.txt").write_text("1 2")
    a = parse_config({"kb": "kb.json", "models": ["m"], "sets": str(tmp_path / "sets")}).fingerprint("k")
    (tmp_path / "sets" / "0.txt").write_text("1 3")
    assert a != parse_config({"kb": "kb.json", "models": ["m"], "sets": str(tmp_path / "sets")}).fingerprint("k")
    # the resolved copy written next to the results reloads to the same sweep
    cfg = parse_config({"kb": "kb.json", "models": ["gpt2", {"name": "m", "protocol": "reference"}],
                        "methods": {"ga": [], "tv": [1]}, "seed": 3})
    again = parse_config(yaml.safe_load(cfg.to_yaml()))
    assert again.fingerprint("k") == cfg.fingerprint("k") and again.grids_for("gpt2") == cfg.grids_for("gpt2")


def test_job_seeds_are_sha256_of_seed_model_target_method(tmp_path):
    cfg = parse_config({"kb": "kb.json", "models": ["m"], "methods": {"ga": [1], "tv": [1]}, "seed": 11})
    with ResultsStore(tmp_path) as s:
        s.bind("fp", {})
        jobs, _ = plan_jobs(cfg, [3, 4], s)
    for j in jobs:   # an independent computation of the documented derivation
        digest = hashlib.sha256(json.dumps([11, j.model, j.target, j.method]).encode()).digest()
        assert j.seed == int.from_bytes(digest[:4], "big")
    assert len({j.seed for j in jobs}) == 4


def test_report_lists_the_protocol_fields_that_differ(tmp_path):
    from deepunlearn.bench.report import build_report

    cfg = parse_config({"kb": "kb.json", "models": ["a", {"name": "b", "protocol": "reference"}],
                        "methods": {"ga": [1]}, "tie": "first"})
    manifest = {"models": {m: model_manifest(cfg, m) for m in ("a", "b")}, "seed": 0}
    pts = [Point(m, 1, "ga", 1, recall=0.5, accuracy=0.5) for m in ("a", "b")]
    text = build_report(pts, tmp_path, config=cfg.model_dump(mode="json"), manifest=manifest).read_text()
    section = text[text.index("## Protocol"):text.index("## Headline")]
    line_a = next(l for l in section.splitlines() if l.startswith("- `a`"))
    line_b = next(l for l in section.splitlines() if l.startswith("- `b`"))
    assert "protocol `default`" in line_a and "tie = `first`" in line_a and "probe_mode" not in line_a
    for field in ("probe_mode = `generate`", "k_mode = `dataset`", "sets = `release`", "tie = `first`",
                  "warmup_steps = `1`", "finetune_early_stop = off"):
        assert field in line_b, field
