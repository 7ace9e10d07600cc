"""``attack --model-derived``: the model-derived verdict before and after every attack (each
relearning step count, the quantised model). The compose answers are scripted (every compose
question is answered with one object whatever the weights), so each verdict is known: with the
target's own object every compose question is answered (never deep), with another object none is
(deep exactly where the attack's own probe no longer answers the target)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from scripted import answer_fn, derived_pair  # noqa: E402


def test_attack_reports_model_derived_deep_after_each_attack(five_people_model_dir, five_people_kb, tmp_path,
                                                             monkeypatch, capsys):
    import deepunlearn.unlearn.derived as derived

    kb = five_people_kb
    target, other = derived_pair(five_people_model_dir, kb)
    save_kb(kb, tmp_path / "kb.json")
    assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(tmp_path / "kb.json"), "--method",
                 "ga", "--target", str(target), "--grid", "4", "--lr", "1e-3", "--save-model", str(tmp_path / "u"),
                 "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
    capsys.readouterr()
    real = derived.model_derived
    for says, answered in ((kb.facts[target][2], True), (kb.facts[other][2], False)):
        def scripted(bundle, kb_, t, rules, says=says, **kw):
            return real(bundle, kb_, t, rules, **{**kw, "model_fn": answer_fn(bundle, says)})

        monkeypatch.setattr(derived, "model_derived", scripted)
        assert main(["attack", "--model", str(tmp_path / "u"), "--original", str(five_people_model_dir),
                     "--kb", str(tmp_path / "kb.json"), "--target", str(target), "--relearn", "1,8",
                     "--relearn-lr", "1e-3", "--quantize", "int8", "--model-derived",
                     "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
        obj = json.loads(capsys.readouterr().out)
        stages = [(obj["deep_model"], obj["model_derived"], obj["target_forgotten"])]
        stages += [(obj["deep_model_relearn"][n], obj["model_derived_relearn"][n], not obj["target_relearned"][n])
                   for n in ("1", "8")]
        stages += [(obj["deep_model_quant"], obj["model_derived_quant"], not obj["target_quant"])]
        for deep_model, md, forgotten in stages:
            assert md["compose_questions"] >= 1 and md["direct"] is (not forgotten)
            assert md["compose_answered"] == (md["compose_questions"] if answered else 0)
            assert deep_model is (forgotten and not answered)
    assert main(["attack", "--model", str(tmp_path / "u"), "--kb", str(tmp_path / "kb.json"), "--target",
                 str(target), "--relearn", "1", "--model-derived", "--cache-dir", str(tmp_path / "c")]) == 0
    assert "deep (model)" in capsys.readouterr().out
