"""Canaries (``add_canaries``, ``data generate --canaries C --repeat R``):
random-code facts outside every rule, with reference codes the tiny tokenizer knows."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg import KBError, load_kb
from deepunlearn.kg.canaries import ALPHABET, add_canaries
from deepunlearn.kg.domains.family.generate import generate_family
from kg_helpers import cli


@pytest.fixture(scope="module")
def base():
    return generate_family(20, seed=1)


def test_canaries_are_random_codes_of_distinct_people(base):
    kb = add_canaries(base, 5, repeat=10, seed=3)
    info = kb.metadata["canaries"]
    ids = info["facts"]
    assert ids == list(range(len(base.facts), len(base.facts) + 5))
    assert kb.facts[: len(base.facts)] == base.facts and kb.targets == base.targets + ids
    people = [kb.facts[i][0] for i in ids]
    codes = [kb.facts[i][2] for i in ids]
    assert len(set(people)) == 5 and set(people) <= set(base.entities)
    assert all(kb.facts[i][1] == "code" and len(c) == 10 and set(c) <= set(ALPHABET) for i, c in zip(ids, codes))
    assert (info["relation"], info["length"], info["alphabet"], info["repeat"]) == ("code", 10, ALPHABET, 10)
    refs = info["references"]
    assert len(refs) == len(set(refs)) == 999 and all(len(r) == 10 and set(r) <= set(ALPHABET) for r in refs)
    assert not set(refs) & (set(codes) | {o for _, _, o in base.facts})
    assert kb.probe(ids[0]).question == f"What is the code of {people[0]}?" and kb.probe(ids[0]).answer == codes[0]
    # seeded
    assert add_canaries(base, 5, repeat=10, seed=3).facts == kb.facts
    assert add_canaries(base, 5, repeat=10, seed=4).facts != kb.facts


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=21), "canaries: 21 asked but KB 'family-20-seed1' has only 20 people"),
    (dict(n=0), "canaries: n must be an integer >= 1 (got 0)"),
    (dict(n=2, repeat=0), "canaries: repeat must be an integer >= 1 (got 0)"),
])
def test_bad_arguments(base, kwargs, message):
    with pytest.raises(KBError) as e:
        add_canaries(base, **kwargs)
    assert str(e.value).startswith(message)


def test_canaries_are_added_once(base):
    with pytest.raises(KBError, match="already has a 'code' relation or canaries"):
        add_canaries(add_canaries(base, 1), 1)


def test_cli_generate_with_canaries(tmp_path, capsys):
    out = tmp_path / "kb.json"
    code, stdout, _ = cli(capsys, "data", "generate", "--people", "12", "--canaries", "3", "--repeat", "10",
                          "--seed", "5", "-o", str(out), "--json")
    assert code == 0 and json.loads(stdout)["canaries"] == 3
    kb = load_kb(out)
    assert kb.metadata["canaries"]["repeat"] == 10 and len(kb.metadata["canaries"]["facts"]) == 3
    assert kb.facts[:-3] == generate_family(12, seed=5).facts
    for argv, msg in [(["--repeat", "10"], "argument --repeat: only with --canaries"),
                      (["--canaries", "13"], "argument --canaries: 13 canaries need as many people (--people is 12)"),
                      (["--canaries", "2", "--repeat", "0"], "argument --repeat")]:
        bad = tmp_path / "bad.json"
        code, stdout, err = cli(capsys, "data", "generate", "--people", "12", *argv, "-o", str(bad), "--json")
        assert code == 2 and msg in err.strip().splitlines()[-1] and msg in json.loads(stdout)["error"]
        assert not bad.exists()


def test_rules_derive_nothing_from_codes_and_a_canary_is_its_own_minimal_set(base, tmp_path, capsys):
    from deepunlearn.kg import save_kb

    plain, with_c = save_kb(base, tmp_path / "a.json"), save_kb(add_canaries(base, 3), tmp_path / "b.json")
    code, a, err_a = cli(capsys, "rules", "closure", "--kb", str(plain), "--json")
    code_b, b, err_b = cli(capsys, "rules", "closure", "--kb", str(with_c), "--json")
    assert code == code_b == 0 and err_b == err_a == ""
    a, b = json.loads(a), json.loads(b)
    assert b["derived"] == a["derived"] and b["derived_by_relation"] == a["derived_by_relation"]
    assert b["passthrough"] == a["passthrough"] + 3 and b["warnings"] == []
    canary = len(base.facts) + 1
    code, out, _ = cli(capsys, "rules", "sets", "--kb", str(with_c), "--target", str(canary), "--json")
    assert code == 0
    sets = json.loads(out)
    assert sets["set_ids"] == [[canary]] and sets["exact"] is True


def test_the_tiny_tokenizer_knows_the_reference_codes(base, tmp_path):
    from deepunlearn.probe.models import load_model
    from deepunlearn.probe.tiny import build_tiny_model, build_tokenizer, probe_texts

    kb = add_canaries(base, 2)
    question = kb.probe(kb.metadata["canaries"]["facts"][0]).question
    refs = kb.metadata["canaries"]["references"]
    old = build_tokenizer(probe_texts(kb))  # from the probe texts alone: no reference codes
    assert any(old.unk_token_id in old(f"Question: {question}\nAnswer:{r}").input_ids for r in refs)
    build_tiny_model(kb, tmp_path / "m", hidden=16, layers=1, heads=2)
    bundle = load_model(tmp_path / "m", device="cpu")
    tok = bundle.tokenizer
    for r in refs:
        ids = tok(bundle.prompt.text(question, r)).input_ids
        assert tok.unk_token_id not in ids
        assert tok.decode(tok(r, add_special_tokens=False).input_ids) == r


def test_a_subset_renumbers_its_canaries(base):
    from deepunlearn.kg.canaries import canary_info

    kb = add_canaries(base, 3, repeat=10)
    a, b, c = kb.metadata["canaries"]["facts"]
    sub = kb.subset([0, 1, b, c])
    assert canary_info(sub)["facts"] == [2, 3] and [sub.facts[i] for i in (2, 3)] == [kb.facts[b], kb.facts[c]]
    assert kb.metadata["canaries"]["facts"] == [a, b, c]  # the original is untouched
