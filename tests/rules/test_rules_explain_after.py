"""``rules explain --after KNOWN_B.json``: whether a target is still derivable from what a model
knows after unlearning, checked against the independent naive Datalog on every fact of the release
subset, with random losses."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from naive_datalog import naive_closure  # noqa: E402

from deepunlearn.cli import main  # noqa: E402
from deepunlearn.kg.io import save_kb  # noqa: E402
from deepunlearn.rules.load import load_rules  # noqa: E402


def _run(capsys, *argv: str) -> tuple[int, dict | str, str]:
    code = main(["rules", "explain", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv and out else out), err


def test_deep_after_agrees_with_a_naive_closure(small_kb, tmp_path, capsys):
    kb_file = save_kb(small_kb, tmp_path / "kb.json")
    rules = load_rules("edu-relat")
    rng = random.Random(0)
    checked = superficial = 0
    for t in small_kb.targets:
        # what a model still knows: the KB without the target and a random 70 % of the rest
        after = sorted(i for i in range(len(small_kb.facts)) if i != t and rng.random() > 0.7)
        (tmp_path / "after.json").write_text(json.dumps(after))
        code, got, err = _run(capsys, "--kb", str(kb_file), "--rules", "edu-relat", "--target", str(t),
                              "--after", str(tmp_path / "after.json"), "--json")
        assert code == 0, err
        derivable = small_kb.facts[t] in naive_closure([small_kb.facts[i] for i in after], rules, small_kb.entities)
        assert got["deep"] is (not derivable) and got["superficial"] is derivable and got["target_known"] is False
        if derivable:
            superficial += 1
            # the surviving facts are known after unlearning and derive the target on their own
            assert set(got["surviving_ids"]) <= set(after)
            assert small_kb.facts[t] in naive_closure([small_kb.facts[i] for i in got["surviving_ids"]], rules,
                                                      small_kb.entities)
        checked += 1
    assert checked == len(small_kb.targets) and 0 < superficial < checked


def test_text_output_and_a_known_target(small_kb, tmp_path, capsys):
    kb_file = save_kb(small_kb, tmp_path / "kb.json")
    t = small_kb.targets[0]
    (tmp_path / "all.json").write_text(json.dumps(list(range(len(small_kb.facts)))))
    code, out, _ = _run(capsys, "--kb", str(kb_file), "--target", str(t), "--after", str(tmp_path / "all.json"))
    assert code == 0 and "deep: no (the model still knows the target" in out
    (tmp_path / "none.json").write_text("[]")
    code, out, _ = _run(capsys, "--kb", str(kb_file), "--target", str(t), "--after", str(tmp_path / "none.json"))
    assert code == 0 and "deep: yes" in out and "surviving" not in out


def test_bad_after_file_is_one_line(small_kb, tmp_path, capsys):
    kb_file = save_kb(small_kb, tmp_path / "kb.json")
    (tmp_path / "bad.json").write_text('{"nope": 1}')
    code, _, err = _run(capsys, "--kb", str(kb_file), "--target", str(small_kb.targets[0]),
                        "--after", str(tmp_path / "bad.json"))
    assert code == 1 and err.count("\n") == 1 and "--after" in err and "bad.json" in err


def test_an_unlearn_points_file_is_read_as_k_minus_its_forgotten_facts(small_kb, tmp_path, capsys):
    """``unlearn -o`` records K before unlearning (``fact_ids``, ``known`` a count) and the facts
    forgotten at its last point: given as ``--after`` it means K minus those, never K itself."""
    kb_file = save_kb(small_kb, tmp_path / "kb.json")
    rules = load_rules("edu-relat")
    t = small_kb.targets[0]
    known = list(range(len(small_kb.facts)))
    forgotten = [t] + [i for i in known if i % 3 == 0 and i != t]
    doc = {"method": "ga", "index": t, "points": [], "known": len(known), "fact_ids": known, "point": 8,
           "forgotten": [list(small_kb.facts[i]) for i in forgotten]}
    (tmp_path / "points.json").write_text(json.dumps(doc))
    code, got, err = _run(capsys, "--kb", str(kb_file), "--rules", "edu-relat", "--target", str(t),
                          "--after", str(tmp_path / "points.json"), "--json")
    assert code == 0, err
    after = [i for i in known if i not in set(forgotten)]
    assert got["known_after"] == len(after) and got["target_known"] is False
    derivable = small_kb.facts[t] in naive_closure([small_kb.facts[i] for i in after], rules, small_kb.entities)
    assert got["deep"] is (not derivable)
