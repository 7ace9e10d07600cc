"""When does a generated answer count: the ``generate`` mode's rule, as a small value object.

The reference's rule (the default) decodes 10 new tokens greedily and counts a fact known iff
``answer.lower() in output.lower()``. That suits a model finetuned to answer with the bare
answer. A pretrained instruct model answers in sentences ("The capital of France is Paris."),
which can run past 10 tokens, and a plain substring test then also counts an echo of the
question: asked "Which country borders Nigeria?", an output that merely repeats "Nigeria"
contains the answer "Niger". The ``words`` rule decodes more tokens and asks for the answer as
whole words (letters and digits around it are not part of the match), case-insensitively, after
taking the fact's subject out of the output when the subject holds the answer (asked "In which
country is Mexico City?", repeating "Mexico City" does not answer "Mexico"). Adjectives are not
answers under ``words``: "an Indian city" does not give "India".

A bundle carries its rule (``ModelBundle.answer_rule``); the protocol decides it
(``Protocol.answer_match`` and ``Protocol.new_tokens``, :func:`rule_of`), and the probe cache key
includes every rule but the reference's.

>>> REFERENCE.matches("Niger", "Nigeria borders"), WORDS.matches("Niger", "Nigeria borders")
(True, False)
>>> WORDS.matches("Paris", "The capital of France is Paris.")
True
>>> WORDS.matches("São Paulo", "It is são paulo!")
True
>>> WORDS.matches("Dollar (USD)", "the US dollar (USD)")
True
>>> WORDS.matches("Mexico", "Mexico City is a big city."), WORDS.matches("Mexico", "Mexico City is in Mexico.")
(True, True)
>>> WORDS.matches("Mexico", "Mexico City is a big city.", subject="Mexico City")
False
>>> WORDS.matches("Mexico", "Mexico City is in Mexico.", subject="Mexico City")
True
>>> REFERENCE.key(), WORDS.key()
('', 'answer=words,tokens=32')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MATCHES = ("substring", "words")
Match = Literal["substring", "words"]


@dataclass(frozen=True)
class AnswerRule:
    """``max_new_tokens`` greedy tokens; ``match``: ``substring`` (the reference's) or ``words``."""

    max_new_tokens: int = 10
    match: Match = "substring"

    def __post_init__(self) -> None:
        if self.match not in MATCHES:
            raise ValueError(f"answer match must be one of {', '.join(MATCHES)}, got {self.match!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or not 1 <= self.max_new_tokens <= 512:
            raise ValueError(f"new tokens must be an integer in [1, 512], got {self.max_new_tokens!r}")

    def matches(self, answer: str, text: str, subject: str | None = None) -> bool:
        """Whether ``text`` (the decoded output) counts as giving ``answer``; ``subject``: the
        fact's subject, taken out of the output first under ``words`` when it holds the answer."""
        a, t = answer.lower(), text.lower()
        if self.match == "substring":
            return a in t
        if not a.strip():
            return False
        if subject and subject.strip() and _words(a).search(subject.lower()):
            t = _words(subject.lower()).sub(" ", t)
        return _words(a).search(t) is not None

    def key(self) -> str:
        """The part of a probe cache key this rule adds ('' for the reference's rule)."""
        return "" if self == REFERENCE else f"answer={self.match},tokens={self.max_new_tokens}"


def _words(s: str) -> "re.Pattern[str]":
    """``s`` as a run of whole words: no letter or digit right before or after it."""
    return re.compile(r"(?<![^\W_])" + re.escape(s.strip()) + r"(?![^\W_])")


REFERENCE = AnswerRule()
#: the pretrained protocol's rule: whole words within 32 new tokens
WORDS = AnswerRule(32, "words")


def rule_of(protocol) -> AnswerRule:
    """The rule a :class:`~deepunlearn.probe.protocol.Protocol` names."""
    return AnswerRule(int(protocol.new_tokens), protocol.answer_match)


def rule_of_bundle(bundle) -> AnswerRule:
    """The bundle's rule (the reference's for an object without one, e.g. a test double)."""
    return getattr(bundle, "answer_rule", None) or REFERENCE
