"""The ``pretrained`` protocol: no finetuning, K is what the model answers as it is (its chat
template where it has one, answers in sentences counted by whole words), and everything after K
(sets, unlearning, measures) runs unchanged."""

from __future__ import annotations

import pytest

from deepunlearn.probe import get_protocol, load_model, probe
from deepunlearn.probe.answer_rule import REFERENCE, WORDS, AnswerRule, rule_of
from deepunlearn.probe.cache import probe_key


def test_the_preset_names_its_choices():
    p = get_protocol("pretrained")
    assert (p.probe_mode, p.answer_format, p.answer_match, p.new_tokens, p.k_mode) == \
        ("generate", "chat", "words", 32, "probed")
    assert rule_of(p) == WORDS and rule_of(get_protocol("default")) == rule_of(get_protocol("reference")) == REFERENCE


@pytest.mark.parametrize("answer,text,substring,words", [
    ("Paris", "The capital of France is Paris.", True, True),
    ("Niger", "Nigeria borders Chad.", True, False),
    ("Asia", "It lies in Eurasia", True, False),
    ("South America", "Brazil is in south america", True, True),
    ("Rupee", "the Indian rupees", True, False),
])
def test_whole_words_do_not_count_an_echo(answer, text, substring, words):
    assert REFERENCE.matches(answer, text) is substring and WORDS.matches(answer, text) is words


def test_a_bad_rule_is_refused():
    with pytest.raises(ValueError, match="answer match"):
        AnswerRule(10, "fuzzy")
    with pytest.raises(ValueError, match="new tokens"):
        AnswerRule(0, "words")


def test_chat_format_falls_back_without_a_template(tiny_model_dir):
    b = load_model(tiny_model_dir, device="cpu", answer_format="chat")
    assert b.prompt.name != "chat" and b.prompt_source == "recorded"


def test_the_rule_is_part_of_the_cache_key(tiny_bundle, small_kb):
    before = probe_key(tiny_bundle, small_kb, "generate")
    tiny_bundle.answer_rule = WORDS
    assert probe_key(tiny_bundle, small_kb, "generate") != before
    tiny_bundle.answer_rule = REFERENCE
    assert probe_key(tiny_bundle, small_kb, "generate") == before


def test_runner_takes_k_from_the_probe_and_unlearns(tiny_bundle, small_kb, tmp_path):
    from deepunlearn.unlearn import TargetRunner

    runner = TargetRunner(tiny_bundle, small_kb, protocol="pretrained", cache_dir=tmp_path, progress=False)
    assert tiny_bundle.answer_rule == WORDS and runner.probe_mode == "generate"
    tiny_bundle.answer_rule = WORDS
    direct = probe(tiny_bundle, small_kb, mode="generate", progress=False)
    assert runner.known == frozenset(int(i) for i in direct.known_ids()) and 0 < len(runner.known) <= len(small_kb)
    target = next(int(t) for t in small_kb.targets if int(t) in runner.known)
    points = list(runner.run(target=target, method="ga", grid=[1]))
    assert len(points) == 1 and 0.0 <= points[0].recall <= 1.0 and 0.0 <= points[0].accuracy <= 1.0


def test_repeating_a_subject_that_holds_the_answer_does_not_answer():
    assert not WORDS.matches("Mexico", "Mexico City is a large city.", subject="Mexico City")
    assert WORDS.matches("Mexico", "Mexico City is the capital of Mexico.", subject="Mexico City")
    assert WORDS.matches("Africa", "South Africa is in southern Africa.", subject="South Africa")
    assert REFERENCE.matches("Mexico", "Mexico City is a large city.", subject="Mexico City")
