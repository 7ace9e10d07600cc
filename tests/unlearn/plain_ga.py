"""An unlearned model made outside deepunlearn, as a user's own code would (imported as
``from plain_ga import ascend``; not a test module)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def ascend(a_dir: Path, out_dir: Path, question: str, answer: str, steps: int, lr: float = 0.05, *,
           copy_meta: bool = False) -> Path:
    """Gradient ascent on one fact with plain torch and transformers; ``copy_meta``: A's
    deepunlearn.json is copied beside the weights (so B records A's answer format)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    fmt = json.loads((a_dir / "deepunlearn.json").read_text())["prompt"]
    prompt = fmt["question_start"] + question + fmt["question_end"]
    tok = AutoTokenizer.from_pretrained(a_dir)
    model = AutoModelForCausalLM.from_pretrained(a_dir, dtype=torch.float32)
    ids = torch.tensor([tok(prompt + fmt["answer_tag"] + answer)["input_ids"]])
    labels = ids.clone()
    labels[0, :len(tok(prompt)["input_ids"])] = -100
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        (-model(input_ids=ids, labels=labels).loss).backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    if copy_meta:
        shutil.copy(a_dir / "deepunlearn.json", out_dir / "deepunlearn.json")
    return out_dir
