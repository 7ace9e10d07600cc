"""Model-derived deep unlearning: the target is still model-derived when the model answers it
directly or through any compose question leading to it.

The verdict is checked on a model whose answer we set (a ``model_fn`` that says "Ann"
everywhere: it answers exactly the compose questions whose answer is Ann), then end to end
through ``unlearn --model-derived`` on the five-person fixture model, against the target's own
compose questions and the point's own direct verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.probe import build_tiny_model, load_model
from deepunlearn.rules.compose import compose_set
from deepunlearn.unlearn.derived import compose_questions, model_derived

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from scripted import constant_fn, two_families  # noqa: E402


@pytest.fixture(scope="module")
def families():
    return two_families()


def test_the_verdict_follows_the_direct_and_the_composed_answers(families, tmp_path):
    kb = families
    bundle = load_model(build_tiny_model(kb, tmp_path / "m", hidden=16, heads=2, layers=1), device="cpu")
    ann, eve = kb.facts.index(("Kid", "mother", "Ann")), kb.facts.index(("Tom", "mother", "Eve"))
    qs = compose_questions(kb, "family", ann)
    assert qs and all(q.fact_id == ann for q in qs)
    got = model_derived(bundle, kb, ann, "family", direct=False, model_fn=constant_fn(bundle, "Ann"))
    assert got["compose_questions"] == len(qs) == got["compose_answered"] and got["deep_model"] is False
    got = model_derived(bundle, kb, eve, "family", direct=False, model_fn=constant_fn(bundle, "Ann"))
    assert got["compose_answered"] == 0 and got["compose_questions"] > 0 and got["deep_model"] is True
    got = model_derived(bundle, kb, eve, "family", direct=True, model_fn=constant_fn(bundle, "Ann"))
    assert got["model_derived"] is True and got["deep_model"] is False
    leaf = kb.facts.index(("Kid", "father", "Bob"))  # derivable, but by no chain of facts in this KB
    assert not compose_set(kb, "family", fact_ids=[leaf]).questions
    assert model_derived(bundle, kb, leaf, "family", direct=False)["deep_model"] is True


def test_unlearn_records_model_derived_deep(five_people_model_dir, five_people_kb, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb

    kb = five_people_kb
    derived = compose_set(kb, kb.metadata.get("rules", "family")).fact_ids()
    assert derived
    kb_file = save_kb(kb, tmp_path / "kb.json")
    target = derived[0]
    assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga",
                 "--target", str(target), "--grid", "1,4", "--lr", "1e-3", "--model-derived",
                 "--save-model", str(tmp_path / "b"), "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first, last = out["points"]
    assert "model_derived" not in first  # the chosen point only: the last grid value
    md = last["model_derived"]
    assert md["direct"] is (not last["target_forgotten"])
    assert md["compose_questions"] >= 1 and 0 <= md["compose_answered"] <= md["compose_questions"]
    assert last["deep_model"] is (not md["direct"] and md["compose_answered"] == 0)
    # evaluate judges the saved model the same way: same K, same questions, same answers
    assert main(["evaluate", "--original", str(five_people_model_dir), "--unlearned", str(tmp_path / "b"),
                 "--kb", str(kb_file), "--target", str(target), "--model-derived",
                 "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["deep"] is last["deep"] and v["deep_model"] is last["deep_model"]
    assert {k: v["model_derived"][k] for k in ("direct", "compose_questions", "compose_answered")} == \
        {k: md[k] for k in ("direct", "compose_questions", "compose_answered")}
    assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "whp",
                 "--target", str(target), "--model-derived"]) == 1
    assert "--model-derived" in capsys.readouterr().err
