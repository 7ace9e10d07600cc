"""Probe modes over forms against hand-checked verdicts of a model whose logits we set.

The model is a ``model_fn`` that gives one token logit 1 and every other token logit 0 at every
position, whatever the input: its greedy output is that token ten times, every other token is
equally (un)likely. On the four-fact family KB below, with the tiny word-level tokenizer (every
word one token, a statement's answer keeps its leading space: ``"Ġchild"``), every verdict
follows by hand (see each test).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.probe import ProbeResult, build_tiny_model, load_model, probe

from scripted import constant_fn

TEXT_FORMS = ("primary", "qa1", "qa2", "qa3", "st1", "st2", "st3")


@pytest.fixture(scope="module")
def family4():
    return KnowledgeBase.build({"Ann": {}, "Bob": {}, "Cid": {}},
                               [("Ann", "child", "Bob"), ("Bob", "father", "Ann"), ("Cid", "husband", "Ann"),
                                ("Ann", "wife", "Cid")], name="family4")


@pytest.fixture(scope="module")
def bundle4(family4, tmp_path_factory):
    folder = build_tiny_model(family4, tmp_path_factory.mktemp("family4") / "m", hidden=16, heads=2, layers=1)
    return load_model(folder, device="cpu")


def test_every_form_is_read_without_unknown_words(bundle4, family4):
    from deepunlearn.kg.forms import forms_of

    tok = bundle4.tokenizer
    for i in range(len(family4)):
        for f in forms_of(family4, i):
            text = f.text if f.kind == "statement" else bundle4.prompt.text(f.text, f.answer)
            assert tok.unk_token_id not in tok(text).input_ids, f
    for s in ("yes", "Yes", "no", "No"):
        assert tok.convert_tokens_to_ids(s) != tok.unk_token_id


def test_exact_over_forms_known_iff_any_form(bundle4, family4):
    # Always " child": a qa continuation is "Answer", ":", answer (never all " child"); a
    # statement's is the one token " child" for fact 0 only. So fact 0 is known, on st1..st3.
    res = probe(bundle4, family4, mode="exact", forms="all", model_fn=constant_fn(bundle4, "Ġchild"), progress=False)
    assert res.known.tolist() == [True, False, False, False]
    assert res.per_form == {**{n: {"exact": [0, 4]} for n in TEXT_FORMS[:4]},
                            **{n: {"exact": [1, 4]} for n in TEXT_FORMS[4:]}}
    assert res.fallback == 0 and res.forms == "all" and res.mode == "exact"
    # logprob: the first selected qa/statement form (primary here): log P("Answer") + log P(":")
    # + log P(answer), each -log(e + V - 1) under logits (1 on " child", 0 elsewhere).
    z = math.log(math.e + len(bundle4.tokenizer) - 1)
    np.testing.assert_allclose(res.logprob, [-3 * z] * 4, rtol=1e-6)
    st = probe(bundle4, family4, mode="exact", forms="st1", model_fn=constant_fn(bundle4, "Ġchild"), progress=False)
    np.testing.assert_allclose(st.logprob, [1 - z, -z, -z, -z], rtol=1e-6)


def test_generate_over_forms(bundle4, family4):
    # Ten times " child": "child" is in the output of every form of fact 0, of no other fact's.
    res = probe(bundle4, family4, mode="generate", forms="all", model_fn=constant_fn(bundle4, "Ġchild"), progress=False)
    assert res.known.tolist() == [True, False, False, False]
    assert res.per_form == {n: {"generate": [1, 4]} for n in TEXT_FORMS}
    assert res.outputs == [" child" * 10] * 4


def test_rank_a_tie_is_not_known(bundle4, family4):
    # The candidates of every fact are child, father, husband, wife. After "Answer:" they are
    # the tokens "child", "father", ... all with logit 0: a four-way tie, rank 2.5, not known.
    # In a statement they are " child", " father", ...: " child" has logit 1 and ranks first,
    # so fact 0 is known on st1..st3 and the others' gold ranks 2.5 (tied behind " child").
    from deepunlearn.kg.candidates import answer_candidates

    assert answer_candidates(family4, 0) == ["child", "father", "husband", "wife"]
    res = probe(bundle4, family4, mode="rank", forms="all", model_fn=constant_fn(bundle4, "Ġchild"), progress=False)
    assert res.known.tolist() == [True, False, False, False]
    assert res.per_form == {**{n: {"rank": [0, 4]} for n in TEXT_FORMS[:4]},
                            **{n: {"rank": [1, 4]} for n in TEXT_FORMS[4:]}}
    # The model's own forward (shared-prefix path) gives the rank of the full-sequence one.
    own = probe(bundle4, family4, mode="rank", forms="all", progress=False)
    via_fn = probe(bundle4, family4, mode="rank", forms="all", progress=False,
                   model_fn=lambda i, m: bundle4.model(input_ids=i, attention_mask=m).logits)
    assert own.known.tolist() == via_fn.known.tolist() and own.per_form == via_fn.per_form


@pytest.mark.parametrize("token, forms, right, known", [
    # always yes: the true form yes1 is right, the distractor no1 wrong: nothing is known
    ("yes", "all", {"yes1": [4, 4], "no1": [0, 4]}, [False] * 4),
    ("Yes", "yes1,no1", {"yes1": [4, 4], "no1": [0, 4]}, [False] * 4),
    # always no: the other way round
    ("No", "all", {"yes1": [0, 4], "no1": [4, 4]}, [False] * 4),
    # only the true form selected: always yes answers every selected form right
    ("yes", "yes1", {"yes1": [4, 4]}, [True] * 4),
    ("no", "no1", {"no1": [4, 4]}, [True] * 4),
    # a constant that is neither yes nor no: both sides tie (logsumexp(0, 0)): every form wrong
    ("Ġchild", "all", {"yes1": [0, 4], "no1": [0, 4]}, [False] * 4),
])
def test_yesno_every_selected_form_must_be_right(bundle4, family4, token, forms, right, known):
    res = probe(bundle4, family4, mode="yesno", forms=forms, model_fn=constant_fn(bundle4, token), progress=False)
    assert res.per_form == {n: {"yesno": v} for n, v in right.items()}
    assert res.known.tolist() == known
    assert np.isnan(res.logprob).all()  # no qa/statement form is selected under yesno


def test_yesno_without_yes_no_forms_knows_nothing(bundle4, family4):
    res = probe(bundle4, family4, mode="yesno", forms="primary", model_fn=constant_fn(bundle4, "yes"), progress=False)
    assert res.known.tolist() == [False] * 4 and res.fallback == 4 and res.per_form == {}


def test_any_is_the_union_and_runs_later_modes_on_unknown_facts_only(bundle4, family4):
    fn = constant_fn(bundle4, "Ġchild")
    res = probe(bundle4, family4, mode="any", model_fn=fn, progress=False)  # forms: all
    assert res.known.tolist() == [True, False, False, False] and res.forms == "all"
    # exact on every fact; yes/no, rank and generate only on facts 1..3 (fact 0 is exact-known)
    assert res.per_form["st1"] == {"exact": [1, 4], "rank": [0, 3], "generate": [0, 3]}
    assert res.per_form["yes1"] == {"yesno": [0, 3]}
    only_yes = probe(bundle4, family4, mode="any", forms="yes1", any_modes=["yesno"],
                     model_fn=constant_fn(bundle4, "yes"), progress=False)
    assert only_yes.known.all() and only_yes.per_form == {"yes1": {"yesno": [4, 4]}}
    with pytest.raises(ValueError, match="any_modes"):
        probe(bundle4, family4, mode="any", any_modes=["fuzzy"], progress=False)
    with pytest.raises(ValueError, match="any_modes"):
        probe(bundle4, family4, mode="exact", any_modes=["exact"], progress=False)


def test_any_contains_every_single_mode_on_a_real_model(bundle4, family4):
    # The untrained model's own forward (left padding, KV cache, HF generate).
    single = {m: probe(bundle4, family4, mode=m, forms="all", progress=False) for m in ("exact", "generate", "rank")}
    single["yesno"] = probe(bundle4, family4, mode="yesno", forms="all", progress=False)
    adv = probe(bundle4, family4, mode="any", forms="all", progress=False)
    union = np.zeros(len(family4), dtype=bool)
    for r in single.values():
        assert not (r.known & ~adv.known).any()
        union |= r.known
    assert adv.known.tolist() == union.tolist()


def test_primary_form_over_forms_is_todays_probe(tiny_bundle, small_kb):
    ids = list(range(0, len(small_kb), 4))
    for mode in ("exact", "generate"):
        today = probe(tiny_bundle, small_kb, ids, mode=mode, progress=False)
        assert today.per_form is None and today.forms is None and "per_form" not in today.to_json()
        forms = probe(tiny_bundle, small_kb, ids, mode=mode, forms="primary", progress=False)
        assert forms.known.tolist() == today.known.tolist() and forms.outputs == today.outputs
        np.testing.assert_allclose(forms.logprob, today.logprob, atol=1e-5)
        assert forms.per_form == {"primary": {mode: [int(today.known.sum()), len(ids)]}}
        default = probe(tiny_bundle, small_kb, ids, mode=mode, forms="default", progress=False)
        assert default.to_json() == today.to_json()


def test_per_form_round_trips_through_json(bundle4, family4):
    import json

    res = probe(bundle4, family4, [2, 0, 2], mode="any", model_fn=constant_fn(bundle4, "Ġchild"), progress=False)
    assert res.fact_ids.tolist() == [2, 0, 2] and res.known.tolist() == [False, True, False]
    for back in (ProbeResult.from_json(res.to_json()), ProbeResult.from_json(json.dumps(res.to_json()))):
        assert back.per_form == res.per_form and back.fallback == res.fallback and back.forms == "all"
        assert back.mode == "any" and back.known.tolist() == res.known.tolist()
    old = {k: v for k, v in res.to_json().items() if k not in ("per_form", "fallback", "forms")}
    assert ProbeResult.from_json(old).per_form is None
    bad = {**res.to_json(), "per_form": {"st1": {"exact": [3, 2]}}}
    with pytest.raises(ValueError, match="per_form"):
        ProbeResult.from_json(bad)
    with pytest.raises(ValueError, match="fallback"):
        ProbeResult.from_json({**res.to_json(), "fallback": -1})


def test_a_bad_selection_names_forms(bundle4, family4):
    from deepunlearn.kg.forms import FormError

    with pytest.raises(FormError, match="--forms: 'st9'"):
        probe(bundle4, family4, mode="exact", forms="st9", progress=False)
