"""Judge a model unlearned by your own code: is the target really gone?

A is a small model finetuned on a synthetic family KB; B is A after a few steps of plain
gradient ascent on the target's question, written with torch alone. ``deepunlearn.evaluate``
says what B forgot and whether the rules still derive the target from what it knows.

Run: python examples/evaluate_own_model.py [WORKDIR]    (about a minute on a CPU)
"""

import sys
import tempfile
from pathlib import Path

import torch

import deepunlearn
from deepunlearn.probe.tiny import build_tiny_model
from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
torch.set_num_threads(1)
kb = deepunlearn.generate_family(12, seed=7)
kb_file = deepunlearn.save_kb(kb, work / "kb.json")

# A: the model before unlearning
bundle = deepunlearn.load_model(build_tiny_model(kb, work / "tiny"), device="cpu")
finetune(bundle, kb, FinetuneConfig.tiny(), out_dir=work / "A", progress=False)
known = deepunlearn.probe_model(bundle, kb, progress=False).known_ids()
target = next(t for t in kb.targets if t in known)

# B: your own unlearning (here gradient ascent on the target's answer, 5 SGD steps)
q = kb.probe(target)
prompt = bundle.prompt.question_start + q.question + bundle.prompt.question_end
ids = torch.tensor([bundle.tokenizer(prompt + bundle.prompt.answer_tag + q.answer)["input_ids"]])
labels = ids.clone()
labels[0, :len(bundle.tokenizer(prompt)["input_ids"])] = -100
opt = torch.optim.SGD(bundle.model.parameters(), lr=0.01)
for _ in range(5):
    (-bundle.model(input_ids=ids, labels=labels).loss).backward()
    opt.step()
    opt.zero_grad()
bundle.model.save_pretrained(work / "B")
bundle.tokenizer.save_pretrained(work / "B")

verdict = deepunlearn.evaluate(work / "A", work / "B", kb_file, target, progress=False)
print(verdict.text())
print(f"deep: {verdict.deep}; forgotten {len(verdict.forgotten)} of {verdict.known_original} known facts")
