"""A model whose answer a test sets, and the two-family KB the compose tests share (imported as
``from scripted import constant_fn``; not a test module)."""

from __future__ import annotations

import torch

from deepunlearn.kg.kb import KnowledgeBase


def constant_fn(bundle, token: str):
    """A ``model_fn`` preferring ``token`` (logit 1) over every other token (logit 0) everywhere."""
    tid = bundle.tokenizer.convert_tokens_to_ids(token)
    assert tid != bundle.tokenizer.unk_token_id, token
    vocab = len(bundle.tokenizer)

    def fn(ids, mask):
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        logits[..., tid] = 1.0
        return logits

    return fn


def two_families() -> KnowledgeBase:
    """Two families, each with a mother the rules derive from the father's wife: four derived
    facts, two answered "Ann", two "Eve"."""
    people = {"Kid": "male", "Bob": "male", "Ann": "female", "Tom": "male", "Dan": "male", "Eve": "female"}
    return KnowledgeBase.build({p: {"gender": g} for p, g in people.items()},
                               [("Kid", "father", "Bob"), ("Bob", "wife", "Ann"), ("Kid", "mother", "Ann"),
                                ("Tom", "father", "Dan"), ("Dan", "wife", "Eve"), ("Tom", "mother", "Eve")],
                               name="two-families")


def rule_fn(bundle, rule):
    """A ``model_fn`` whose logits at each position are ``rule(ids, c)``: ``{token id: logit}``
    for the next token after row ``ids`` up to column ``c`` (every other token 0)."""
    vocab = len(bundle.tokenizer)

    def fn(ids, mask):
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        for r in range(ids.shape[0]):
            for c in range(ids.shape[1]):
                for tok, v in rule([int(x) for x in ids[r, :c + 1]], c).items():
                    logits[r, c, tok] = v
        return logits

    return fn


def answer_fn(bundle, answer: str):
    """A ``model_fn`` that says ``answer`` and stops, whatever it is asked: the next token is the
    answer's token after the last one given, its first token when the last one given is not in it,
    and end of sequence after its last token (so greedy decoding outputs exactly ``answer``)."""
    toks = bundle.tokenizer(answer, add_special_tokens=False)["input_ids"]
    assert toks and bundle.eos_id is not None

    def rule(seq, c):
        last = seq[-1]
        return {toks[toks.index(last) + 1] if last in toks[:-1] else bundle.eos_id if last == toks[-1] else toks[0]: 1.0}

    return rule_fn(bundle, rule)


def ranked_fn(bundle, answers: list[str], junk: str):
    """A ``model_fn`` answering any question "Answer:" then ``answers[0]``, ``answers[1]``, ...
    in that order of preference (logits 3, 2, ...), then ``junk`` (logit 0.5), every other token
    0; after an answer, end of sequence (the tiny word-level tokenizer: a name is one token)."""
    tid = bundle.tokenizer.convert_tokens_to_ids
    q_end, ans, colon = tid("Ċ"), tid("Answer"), tid(":")
    names = [tid(a) for a in answers]

    def rule(seq, c):
        if seq[-1] == q_end:
            return {ans: 1.0}
        if seq[-1] == ans:
            return {colon: 1.0}
        if seq[-1] == colon and len(seq) > 1 and seq[-2] == ans:
            return {**{n: 3.0 - k for k, n in enumerate(names)}, tid(junk): 0.5}
        return {bundle.eos_id: 1.0}

    return rule_fn(bundle, rule)


def derived_pair(model_dir, kb):
    """Two derived facts the model knows, with compose questions, whose answers do not contain
    each other (the default protocol counts an answer as a substring)."""
    from deepunlearn.probe import load_model, probe
    from deepunlearn.rules.compose import compose_set

    known = set(probe(load_model(model_dir, device="cpu"), kb, progress=False).known_ids())
    cs = compose_set(kb, kb.metadata.get("rules", "family"))
    derived = [t for t in cs.fact_ids() if t in known]
    for a in derived:
        for b in derived:
            ans_a, ans_b = kb.facts[a][2].lower(), kb.facts[b][2].lower()  # what compose questions ask
            if ans_b not in ans_a and ans_a not in ans_b:
                return a, b
    raise AssertionError("the KB has no two known derived facts with distinct answers")
