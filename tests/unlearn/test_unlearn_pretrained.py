"""``unlearn --protocol pretrained``: K is what the model answers as it is, by the pretrained
protocol's rule (greedy decoding of 32 tokens, the answer as whole words, in the chat template when
the tokenizer has one). K is checked against a plain greedy loop and a plain whole-word test written
here, not against the probe code."""

from __future__ import annotations

import json
import re

import torch

from deepunlearn.cli import main


def _greedy(model, ids: list[int], n: int, eos: int | None) -> list[int]:
    """``n`` argmax tokens after ``ids``, one full forward pass per token, stopping at ``eos``."""
    out: list[int] = []
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == eos:
                break
            seq.append(nxt)
    return out


def _says(answer: str, text: str, subject: str) -> bool:
    """``answer`` as whole words of ``text`` (case-insensitive), the subject taken out first when
    it holds the answer."""
    def word(s: str) -> str:
        return r"(?<![A-Za-z0-9])" + re.escape(s.lower()) + r"(?![A-Za-z0-9])"

    t = text.lower()
    if re.search(word(answer), subject.lower()):
        t = re.sub(word(subject), " ", t)
    return re.search(word(answer), t) is not None


def test_k_is_what_the_model_answers_as_shipped(five_people_model_dir, five_people_kb, tmp_path, capsys):
    from deepunlearn.kg.io import save_kb
    from deepunlearn.probe import load_model
    from deepunlearn.probe.prompts import question_ids

    kb = five_people_kb
    kb_file = save_kb(kb, tmp_path / "kb.json")
    bundle = load_model(five_people_model_dir, device="cpu", answer_format="chat")
    bundle.model.eval()
    truth = set()
    for i, (s, _, o) in enumerate(kb.facts):
        probe = kb.probe(i)
        prompt = question_ids(bundle.tokenizer, bundle.prompt, [probe.question])[0]
        new = _greedy(bundle.model, prompt, 32, bundle.eos_id)
        text = bundle.tokenizer.decode(new, skip_special_tokens=True)
        if _says(probe.answer, text, s):
            truth.add(i)
    assert truth, "the fixture model answers none of its facts"
    target = min(truth)
    out_file = tmp_path / "points.json"
    assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga",
                 "--target", str(target), "--grid", "1", "--lr", "1e-3", "--protocol", "pretrained",
                 "--cache-dir", str(tmp_path / "c"), "-o", str(out_file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] == "pretrained" and out["probe_mode"] == "generate" and out["k_mode"] == "probed"
    assert set(out["fact_ids"]) == truth and out["known"] == len(truth)
    assert json.loads(out_file.read_text())["fact_ids"] == out["fact_ids"]
    # a fact the model does not answer is no target under this protocol
    missing = sorted(set(range(len(kb))) - truth)
    if missing:
        assert main(["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga",
                     "--target", str(missing[0]), "--grid", "1", "--protocol", "pretrained",
                     "--cache-dir", str(tmp_path / "c")]) == 1
        assert "target" in capsys.readouterr().err


def test_the_protocol_flag_lists_the_probe_layers_presets():
    import argparse

    from deepunlearn.probe.protocol import PROTOCOL_NAMES
    from deepunlearn.unlearn.cli import unlearn as unlearn_cli

    parser = argparse.ArgumentParser()
    unlearn_cli.register(parser.add_subparsers())
    sub = parser._subparsers._group_actions[0].choices["unlearn"]
    flag = next(a for a in sub._actions if "--protocol" in a.option_strings)
    assert tuple(flag.choices) == PROTOCOL_NAMES and "pretrained" in flag.choices
