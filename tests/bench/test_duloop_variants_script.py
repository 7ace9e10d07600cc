"""benchmarks/duloop_variants.py's variant names: a named variant with ``@key=value`` overrides
(values read as JSON, else text), one clear error for an unknown name or a malformed override, and
the margin variants pinned to NPO's margin."""

from __future__ import annotations

import pytest

from tests.bench.benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def script():
    return load_benchmark("duloop_variants")


def test_overrides_add_to_the_named_variant_without_changing_it(script):
    method, params = script.variant("du_loop+tamper32@tamper_splits=2@lookahead=margin@tamper_every_half=false")
    assert method == "du_loop"
    assert params["tamper"] == 32 and params["tamper_splits"] == 2 and params["tamper_every_half"] is False
    assert params["lookahead"] == "margin"  # not JSON: kept as text
    assert "tamper_splits" not in script.VARIANTS["du_loop+tamper32"][1]
    assert script.variant("ga") == ("ga", {})


@pytest.mark.parametrize("name, says", [("du_loop+nothing", "unknown variant 'du_loop+nothing'"),
                                        ("du_loop@tamper", "expected @key=value, got 'tamper'"),
                                        ("du_loop@=3", "expected @key=value")])
def test_bad_names_are_one_line(script, name, says):
    with pytest.raises(SystemExit) as e:
        script.variant(name)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_margin_variants_keep_npos_margin_and_du_loop_is_the_defaults(script):
    gas = ("du_loop-margin1", "du_loop+linked")  # measured with GA's margin, du_loop's own default
    with_margin = [n for n, (m, p) in script.VARIANTS.items()
                   if m == "du_loop" and p.get("overshoot", 0) > 0 and n not in gas]
    assert "du_loop+over1+heal8" in with_margin and "du_loop+tamper32" in with_margin
    assert all(script.variant(n)[1]["margin_base"] == "npo" for n in with_margin)
    assert all("margin_base" not in script.variant(n)[1] for n in gas)
    assert script.variant("du_loop+over1+heal8@margin_base=ga")[1]["margin_base"] == "ga"
    assert script.variant("du_loop") == ("du_loop", {})


def test_every_variant_but_the_defaults_and_linked_pins_the_lookahead_off(script):
    """The variants measured without the lookahead pin it off: du_loop's defaults look ahead."""
    from deepunlearn.unlearn.methods.du import DULoopParams

    assert DULoopParams().lookahead == "margin" and DULoopParams().overshoot == 2.0
    for name, (method, params) in script.VARIANTS.items():
        if method != "du_loop" or name in ("du_loop", "du_loop+linked"):
            continue
        assert (params["lookahead"], params["tamper_on"], params["tamper_halves"]) == ("off", "split", "random"), name
    linked = script.variant("du_loop+linked")[1]
    assert linked == {"overshoot": 1.0, "lookahead": "margin", "tamper_on": "split-set", "tamper_halves": "linked"}


def test_a_split_with_nothing_to_relearn_is_left_out_of_the_relearning_column(script, tmp_path):
    """A split-set attack on a target whose chosen set is the target alone trains on nothing: its
    row says None, and the table's relearning mean is over the targets that were attacked."""
    import json
    from types import SimpleNamespace

    def point(relearn):
        return SimpleNamespace(notes={"deep": True, "recall_relearn": relearn, "seconds": 1.0}, accuracy=0.95,
                               recall=1.0, lr=1e-4)

    rows = [script._row("du_loop", t, [point(r)], ("relearn",)) for t, r in ((1, {}), (2, {"8": 1.0}), (3, {"8": 0.5}))]
    assert [r["relearn_deep"] for r in rows] == [None, 1.0, 0.0]
    f = tmp_path / "v.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = next(x for x in script.summarise(str(f)).splitlines() if x.startswith("| `du_loop`"))
    assert line.split(" | ")[7] == "0.50 [0.00, 1.00]" and line.endswith("| 3 |")


def test_a_row_counts_the_facts_back_after_the_longest_attack_and_those_the_rules_imply(script):
    from types import SimpleNamespace

    notes = {"deep": True, "recall_relearn": {"2": 1.0, "8": 0.5}, "seconds": 1.0,
             "returned_relearn": {"2": {}, "8": {"4": True, "9": False}}}
    row = script._row("du_loop", 9, [SimpleNamespace(notes=notes, accuracy=0.95, recall=1.0, lr=1e-4)], ("relearn",))
    assert (row["returned"], row["returned_implied"], row["relearn_deep"]) == (2, 1, 0.0)
    row = script._row("du_loop", 9, [SimpleNamespace(notes={"deep": True, "seconds": 1.0}, accuracy=0.95, recall=1.0,
                                                     lr=1e-4)], ("relearn",))
    assert "returned" not in row


def test_still_deep_counts_a_check_only_where_the_target_was_deep_before_it(script, tmp_path):
    """A model that was not deep at its last point and whose attack dislodged a fact is deep
    after the attack, not still deep: ``still_deep`` counts it as 0 in every check's column."""
    import json
    from types import SimpleNamespace

    def point(deep):
        notes = {"deep": deep, "recall_relearn": {"8": 1.0}, "recall_quant": 1.0, "seconds": 1.0}
        return SimpleNamespace(notes=notes, accuracy=0.95, recall=1.0, lr=1e-4)

    rows = [script._row("npo", t, [point(d)], ("relearn", "int4")) for t, d in ((1, True), (2, False))]
    f = tmp_path / "v.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def cells(still):
        line = next(x for x in script.summarise(str(f), still).splitlines() if x.startswith("| `npo`"))
        return line.split(" | ")[7], line.split(" | ")[9]

    assert cells(False) == ("1.00 [1.00, 1.00]", "1.00 [1.00, 1.00]")
    assert cells(True)[0].startswith("0.50") and cells(True)[1].startswith("0.50")
