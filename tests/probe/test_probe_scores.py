"""Per-fact scores against hand computations on a model with known logits.

The model is a bigram table: the next-token logits depend only on the current token. Most rows
are all zeros (uniform over the vocabulary V); a few rows get chosen weights w (logit log w, the
rest 0), so every probability is a ratio of small integers over Z = V - (#weighted) + sum(w).
"""

from __future__ import annotations

import math
import types
import zlib

import numpy as np
import pytest
import torch

from deepunlearn.kg.candidates import perturbed
from deepunlearn.probe.models import ModelBundle
from deepunlearn.probe.prompts import PromptFormat
from deepunlearn.probe.scores import FactScores, ScoresError, check_k, min_k_prob, rouge_l_recall, score_facts
from deepunlearn.probe.tiny import build_tokenizer, probe_texts

LLAMA = PromptFormat.named("llama")
#: after ":" (the answer tag's end and "Question:"): the relation names' weights
COLON = {"father": 8.0, "mother": 4.0, "child": 2.0}
REL_NAMES = ("child", "father", "mother", "husband", "wife", "brother", "sister", "aunt", "uncle", "nephew", "niece")


class Bigram(torch.nn.Module):
    """Logits = table[current token]; a Hugging Face-like forward with a (dummy) KV cache that
    checks the attention mask and position ids it is given against the cache's length."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(table)
        self.calls = 0

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False,
                **kw):
        from transformers import DynamicCache

        self.calls += 1
        cache = None
        if use_cache:
            cache = past_key_values if past_key_values is not None else DynamicCache()
            z = torch.zeros(input_ids.shape[0], 1, input_ids.shape[1], 1, dtype=self.table.dtype)
            cache.update(z, z, 0)
            assert attention_mask.shape[1] == cache.get_seq_length()
        if position_ids is not None and attention_mask is not None:
            want = (attention_mask.cumsum(-1) - 1)[:, -input_ids.shape[1]:]
            real = attention_mask[:, -input_ids.shape[1]:] == 1
            assert torch.equal(position_ids[real], want[real])
        return types.SimpleNamespace(logits=self.table[input_ids], past_key_values=cache)


@pytest.fixture(scope="module")
def bigram(five_people_kb):
    tok = build_tokenizer(probe_texts(five_people_kb, LLAMA))
    V = len(tok)
    table = torch.zeros(V, V, dtype=torch.float64)
    tid = tok.convert_tokens_to_ids

    def weight(row: str, col: str, w: float) -> None:
        table[tid(row), tid(col)] = math.log(w)

    for name, w in COLON.items():
        weight(":", name, w)
    weight("Washington", "Ġstate", 3.0)
    weight("Ċ", "Answer", 50.0)  # greedy decoding: "\n" -> "Answer" -> ":" -> "father" -> EOS
    weight("Answer", ":", 50.0)
    weight("father", "</s>", 50.0)
    bundle = ModelBundle(model=Bigram(table), tokenizer=tok, prompt=LLAMA, device="cpu", name="bigram")
    return bundle, V, tok


def _Z(V: int, weights) -> float:
    return V - len(weights) + sum(weights)


def test_family_scores_by_hand(bigram, five_people_kb):
    bundle, V, _ = bigram
    kb = five_people_kb
    facts = {4: "father", 5: "child", 3: "husband"}  # 4: Willow's father, 5: Zoey's child, 3: Zoey's husband
    assert {i: kb.probe(i).answer for i in facts} == facts
    s = score_facts(bundle, kb, list(facts), generate=False, progress=False)
    Z = _Z(V, COLON.values())
    w = {r: COLON.get(r, 1.0) for r in REL_NAMES}
    assert s.n_candidates.tolist() == [11, 11, 11]
    assert s.n_tokens.tolist() == [1, 1, 1]  # "Answer" ":" are the prompt; the answer is one token
    for row, (fid, ans) in enumerate(facts.items()):
        assert s.prob[row] == pytest.approx(w[ans] / Z, rel=1e-12)
        assert s.logprob[row] == pytest.approx(math.log(w[ans] / Z), rel=1e-12)
        assert s.mc_prob[row] == pytest.approx(w[ans] / sum(w.values()), rel=1e-12)
        wrong = perturbed(kb, fid, 5, 0)
        assert len(wrong) == 5 and ans not in wrong
        assert s.truth_ratio[row] == pytest.approx(np.mean([w[a] for a in wrong]) / w[ans], rel=1e-12)
    # father: first of 11; child: behind father and mother; husband ties with 7 others at weight
    # 1 behind three: ranks 4..11 share the average 7.5
    assert s.rank.tolist() == [1.0, 3.0, 7.5]
    assert s.exposure == pytest.approx([math.log2(11), math.log2(11) - math.log2(3), math.log2(11) - math.log2(7.5)])
    # nll_candidates: gold's per-token NLL first, then the other 10 in sorted order
    others = [r for r in sorted(REL_NAMES) if r != "father"]
    assert s.nll_candidates[0] == pytest.approx([-math.log(8 / Z)] + [-math.log(w[r] / Z) for r in others])


def test_min_k_ppl_zlib_by_hand(bigram, five_people_kb):
    bundle, V, tok = bigram
    kb = five_people_kb
    s = score_facts(bundle, kb, [4], generate=False, candidates=False, k=20, progress=False)
    text = LLAMA.text(kb.probe(4).question, "father")
    n = len(tok(text)["input_ids"]) - 1  # every token but <s> has a prediction
    Z = _Z(V, COLON.values())
    # "Question" ":" " Who" ... "?" "\n" "Answer" ":" "father": " Who" follows ":" (weight 1),
    # "father" follows ":" (weight 8), "Answer" follows "\n" and ":" follows "Answer" (weight 50 in
    # a row of V - 1 ones), every other token follows a uniform row
    lps = [math.log(1 / Z), math.log(8 / Z)] + [math.log(50 / (V - 1 + 50))] * 2 + [-math.log(V)] * (n - 4)
    kk = int(n * 20 / 100)
    assert kk >= 2
    assert s.min_k[0] == pytest.approx(np.mean(sorted(lps)[:kk]), rel=1e-12)
    assert s.ppl[0] == pytest.approx(math.exp(-np.mean(lps)), rel=1e-12)
    assert s.zlib[0] == pytest.approx(-np.mean(lps) / len(zlib.compress(text.encode())), rel=1e-12)
    assert np.isnan(s.rank[0]) and np.isnan(s.truth_ratio[0]) and s.nll_candidates[0] is None
    assert np.isnan(s.rouge_l[0]) and s.outputs is None


def test_two_token_answers_go_through_the_cache(bigram, five_people_kb):
    """Fact 11: Xavier Ross's birthplace "Washington state" (2 tokens) vs "California state":
    the second token comes from the expanded prefix cache."""
    bundle, V, _ = bigram
    kb = five_people_kb
    assert kb.probe(11).answer == "Washington state"
    s = score_facts(bundle, kb, [11], generate=False, n_perturbed=5, progress=False)
    Z = _Z(V, COLON.values())
    p_wash = math.sqrt((1 / Z) * (3 / (V - 1 + 3)))
    p_cal = math.sqrt((1 / Z) * (1 / V))
    assert s.n_candidates[0] == 2 and s.n_tokens[0] == 2
    assert s.prob[0] == pytest.approx(p_wash, rel=1e-12)
    assert s.rank[0] == 1 and s.exposure[0] == pytest.approx(1.0)
    assert s.mc_prob[0] == pytest.approx(p_wash / (p_wash + p_cal), rel=1e-12)
    assert s.truth_ratio[0] == pytest.approx(p_cal / p_wash, rel=1e-12)  # one wrong answer exists


def test_shared_prefix_equals_full_sequences_and_greedy_rouge(bigram, five_people_kb):
    bundle, _, _ = bigram
    model = bundle.model
    a = score_facts(bundle, five_people_kb, generate=False, batch_size=4, progress=False)
    b = score_facts(bundle, five_people_kb, model_fn=lambda ids, m: model(input_ids=ids, attention_mask=m).logits,
                    batch_size=3, progress=False)
    for name in ("logprob", "prob", "rank", "exposure", "mc_prob", "truth_ratio", "min_k", "ppl", "zlib"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-10, err_msg=name)
    for x, y in zip(a.nll_candidates, b.nll_candidates):
        np.testing.assert_allclose(x, y, rtol=1e-10)
    # greedy decoding through the table: "Answer:father" for every question
    assert set(b.outputs) == {"Answer:father"}
    answers = [five_people_kb.probe(int(i)).answer for i in b.fact_ids]
    assert b.rouge_l.tolist() == [1.0 if x == "father" else 0.0 for x in answers]


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_shared_prefix_equals_model_fn_on_a_transformer(arch, five_people_kb, tmp_path, recwarn):
    """An untrained tiny transformer (random logits everywhere): the KV-cache path and the
    full-sequence path agree to float32 rounding, for rotary and absolute positions; the cache
    is passed under the name the installed transformers takes (no deprecation warning)."""
    from deepunlearn.probe import build_tiny_model, load_model

    bundle = load_model(build_tiny_model(five_people_kb, tmp_path / arch, hidden=32, layers=1, heads=2, arch=arch),
                        device="cpu")
    model = bundle.model
    a = score_facts(bundle, five_people_kb, generate=False, batch_size=7, progress=False)
    b = score_facts(bundle, five_people_kb, generate=False, batch_size=5, progress=False,
                    model_fn=lambda ids, m: model(input_ids=ids, attention_mask=m).logits)
    for name in ("logprob", "prob", "mc_prob", "truth_ratio", "min_k", "ppl", "zlib"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-4, atol=1e-5, err_msg=name)
    assert a.rank.tolist() == b.rank.tolist()
    assert not model.training
    assert not [w for w in recwarn if "past_key_values" in str(w.message)]


def test_rouge_l_is_rouge_scores_own_value():
    from rouge_score import rouge_scorer

    out, gold = "Answer: the fathers of Zoey", "father"
    want = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(gold, out)["rougeL"].recall
    assert rouge_l_recall(out, gold) == want == 1.0  # stemming: fathers -> father
    assert rouge_l_recall("Washington", "Washington state") == 0.5


@pytest.mark.parametrize("k", [0, -5, 100.5, float("nan"), float("inf"), True, "20"])
def test_bad_k_is_refused_naming_k(k, bigram, five_people_kb):
    with pytest.raises(ScoresError, match=r"^k \(Min-K% Prob's percentage of tokens\) must be a number in \(0, 100\]") as e:
        score_facts(bigram[0], five_people_kb, [0], k=k, progress=False)
    assert e.value.field == "k"


def test_min_k_prob_rounding():
    assert check_k(100) == 100.0
    assert min_k_prob([-1, -2, -3], 100) == -2.0
    assert min_k_prob([-1, -2, -3], 20) == -3.0  # int(3 * 0.2) = 0 -> at least one token
    assert min_k_prob([-1, -2, -3, -4, -5, -6, -7, -8, -9, -10], 20) == -9.5  # int(10 * 0.2) = 2


def test_json_round_trip_and_subset(bigram, five_people_kb):
    s = score_facts(bigram[0], five_people_kb, [4, 11, 5], generate=False, progress=False)
    back = FactScores.from_json(s.to_json())
    for name in ("fact_ids", "prob", "rank", "truth_ratio", "min_k", "rouge_l"):
        np.testing.assert_array_equal(getattr(back, name), getattr(s, name))
    sub = s.subset([5, 4])
    assert sub.fact_ids.tolist() == [5, 4] and sub.prob.tolist() == [s.prob[2], s.prob[0]]
    assert s.means()["rouge_l"] is None and s.means()["n_candidates"] == pytest.approx(8.0)
    with pytest.raises(ScoresError, match="field 'prob' must be a list of numbers"):
        FactScores.from_json({**s.to_json(), "prob": ["x", 1, 2]})


def test_train_mode_is_restored(bigram, five_people_kb):
    model = bigram[0].model
    model.train()
    try:
        score_facts(bigram[0], five_people_kb, [0], generate=False, progress=False)
        assert model.training
    finally:
        model.eval()
