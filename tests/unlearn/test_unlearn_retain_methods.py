"""The retain-term methods: idk, simnpo and rmu with hand-checked losses, the KL retain term,
retain samples that never hold a forget-set or chosen-set fact, an empty retain pool as one clear
error, each new method lowering the target's answer probability on a tiny model (Llama and
GPT-2 style), and GA / NPO / TV / WHP giving exactly the points they gave before the method-API
change (``data/old_points.json``, made by ``data/make_old_points.py`` at commit 5d1e2a4)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from deepunlearn.cli import main
from deepunlearn.unlearn.losses import sequence_logprob
from deepunlearn.unlearn.methods import (
    IDK, REFUSALS, RMU, METHODS, GAParams, RetainPoolError, RetainSampler, Session, SimNPO, decoder_layers,
    get_method, refusal_for,
)
from deepunlearn.unlearn.methods.retain import retain_term

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_old_points  # noqa: E402


# ----------------------------------------------------------------------------- fixtures

def build(kb, folder: Path, arch: str = "llama") -> Path:
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    build_tiny_model(kb, folder, seed=0, hidden=64, layers=2, heads=4, arch=arch)
    finetune(load_model(folder, device="cpu"), kb, FinetuneConfig.tiny(lr=3e-3, epochs=100), out_dir=folder,
             progress=False)
    return folder


@pytest.fixture(scope="module")
def model_dir(five_people_kb, tmp_path_factory):
    """The 64-wide, 2-layer Llama-style model of ``data/make_old_points.py`` (25 facts)."""
    return build(five_people_kb, tmp_path_factory.mktemp("rm-llama"))


@pytest.fixture
def runner(five_people_kb, model_dir, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    return TargetRunner(load_model(model_dir, device="cpu"), five_people_kb, rules="family", cache_dir=tmp_path,
                        progress=False)


@pytest.fixture
def target(runner, five_people_kb) -> int:
    t = int(five_people_kb.targets[0])
    assert t in runner.known
    return t


class Fixed(torch.nn.Module):
    """A 'model' whose logits are given: the losses can be computed by hand."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.fixed = logits

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        return SimpleNamespace(logits=self.fixed)


def target_logp(runner, target: int) -> float:
    with torch.no_grad():
        batch = runner.encode([target])
        logits = runner.bundle.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return float(sequence_logprob(logits, batch["labels"])[0][0])


# ----------------------------------------------------------------------------- registry, params

def test_the_new_methods_are_registered_with_their_papers_defaults():
    assert {"idk", "simnpo", "rmu"} <= set(METHODS)
    simnpo, rmu, idk = SimNPO().params, RMU().params, IDK().params
    assert (simnpo.beta, simnpo.gamma, simnpo.forget_weight, simnpo.retain_weight) == (4.5, 0.0, 0.125, 1.0)
    assert SimNPO().retain_kind == "nll" and IDK().retain_kind == "nll" and RMU().retain_kind == "activations"
    assert all(get_method(n)().uses_retain for n in ("idk", "simnpo", "rmu"))
    assert (rmu.layer, rmu.steering, rmu.train, rmu.retain_weight) == (None, 4.0, "down", 1.0)
    assert idk.grid == simnpo.grid == rmu.grid == [1, 2, 4, 8, 16]
    assert (IDK.paper_lr_ratio, SimNPO.paper_lr_ratio, RMU.paper_lr_ratio) == (1.0, 1.0, 2.5)
    assert len(REFUSALS) >= 10 and len(set(REFUSALS)) == len(REFUSALS)


# ----------------------------------------------------------------------------- hand-checked losses

def test_simnpo_loss_on_known_logits_matches_a_hand_computation():
    torch.manual_seed(1)
    logits = torch.randn(2, 5, 6)
    labels = torch.tensor([[-100, -100, 3, 4, 1], [-100, -100, -100, 2, -100]])
    batch = {"input_ids": torch.zeros(2, 5, dtype=torch.long), "attention_mask": torch.ones(2, 5), "labels": labels}
    session = Session(Fixed(logits), batch, lr=1e-3)
    beta, gamma, w = 4.5, 0.3, 0.125
    u = SimNPO(beta=beta, gamma=gamma, retain="none")
    by_hand = []
    for b in range(2):
        lp = [math.log(math.exp(logits[b, t - 1, labels[b, t]]) / sum(math.exp(x) for x in logits[b, t - 1].tolist()))
              for t in range(5) if labels[b, t] != -100]
        x = -beta * sum(lp) / len(lp) - gamma
        by_hand.append(-(2 / beta) * math.log(1 / (1 + math.exp(-x))))
    assert float(u.total_loss(session)) == pytest.approx(w * sum(by_hand) / 2, rel=1e-5)


def test_the_kl_term_is_zero_at_the_start_and_positive_after_a_step(runner, target):
    u = get_method("ga")(GAParams(retain="kl"))
    session = runner.session(u, target)
    session.step = 1
    assert float(retain_term(session, "kl").detach()) == 0.0  # the model IS the original
    next(iter(session.descend(u.total_loss, 2)))
    session.step = 1  # the same retain facts as before the step
    assert float(retain_term(session, "kl").detach()) > 1e-6
    session.restore()
    assert runner.snapshot.equal(runner.bundle.model)


def test_idk_labels_are_refusal_tokens_never_the_true_answer(runner, target, five_people_kb):
    u = get_method("idk")()
    session = runner.session(u, target)
    session.step = 3
    refusal = refusal_for(target, 3)
    assert refusal in REFUSALS and [r for _, r in u.pairs(session)] == [refusal]
    batch = u.refusal_batch(session)
    q = five_people_kb.probe(target).question
    expected = runner.encode_pairs([(q, refusal)])
    assert torch.equal(batch["labels"], expected["labels"]) and torch.equal(batch["input_ids"], expected["input_ids"])
    got_answer = set(batch["labels"][batch["labels"] != -100].tolist())
    tok = runner.bundle.tokenizer
    words = set(tok(five_people_kb.probe(target).answer, add_special_tokens=False)["input_ids"]) - {tok.unk_token_id}
    assert words and not words & got_answer  # not one word of the true answer is trained
    assert words <= set(runner.encode([target])["labels"][0].tolist())  # (those of the true answer's labels)
    assert {refusal_for(target, s) for s in range(1, 30)} != {refusal}  # a fresh, seeded draw per step


# ----------------------------------------------------------------------------- retain sets

@pytest.mark.parametrize("method", ["graddiff", "npo_gdr", "idk", "rmu", "simnpo"])
def test_retain_samples_never_hold_forget_or_chosen_facts(runner, target, monkeypatch, method):
    seen: list[list[int]] = []
    original = RetainSampler.batch

    def spy(self, step):
        seen.append(self.ids(step))  # the facts this step draws
        return original(self, step)

    monkeypatch.setattr(RetainSampler, "batch", spy)
    chosen = set(runner.chosen_set(target))
    points = list(runner.run(target, method, grid=[1, 2, 4], seed=0))
    assert [p.param for p in points] == [1, 2, 4]
    assert len(seen) == 4  # one retain batch per optimiser step
    drawn = {i for ids in seen for i in ids}
    assert drawn and drawn <= set(runner.known)
    assert target not in drawn and not drawn & chosen


@pytest.fixture(scope="module")
def one_fact(five_people_kb, tmp_path_factory):
    """A KB of the target alone and a model that knows it: K = the forget set."""
    from deepunlearn.kg.io import save_kb

    kb = five_people_kb.subset([int(five_people_kb.targets[0])], name="one-fact")
    folder = tmp_path_factory.mktemp("one-fact")
    return kb, build(kb, folder / "model"), save_kb(kb, folder / "kb.json")


def test_an_empty_retain_pool_is_one_clear_error(one_fact, tmp_path, capsys):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    kb, model, kb_file = one_fact
    runner = TargetRunner(load_model(model, device="cpu"), kb, rules="family", cache_dir=tmp_path, progress=False)
    assert runner.known == {0}
    with pytest.raises(RetainPoolError, match="the retain pool is empty"):
        list(runner.run(0, "rmu", grid=[1]))
    assert runner.snapshot.equal(runner.bundle.model)
    rc = main(["unlearn", "--model", str(model), "--kb", str(kb_file), "--target", "0", "--method", "idk",
               "--grid", "1", "--cache-dir", str(tmp_path), "--json"])
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.err.count("\n") == 1 and cap.err.startswith("deepunlearn unlearn: error: the retain pool is empty")
    assert json.loads(cap.out)["field"] == "retain"


# ----------------------------------------------------------------------------- real outcomes

@pytest.mark.parametrize("method", ["idk", "simnpo", "rmu"])
def test_each_new_method_lowers_the_targets_answer_probability(runner, target, method):
    before = target_logp(runner, target)
    u = get_method(method)()
    session = runner.session(u, target)
    last = list(u.trajectory(session, [16]))
    assert [s.param for s in last] == [16.0]
    after = target_logp(runner, target)
    session.restore()
    assert after < before - 0.03, (before, after)
    assert target_logp(runner, target) == before  # restored


@pytest.fixture(scope="module")
def gpt2_dir(five_people_kb, tmp_path_factory):
    return build(five_people_kb, tmp_path_factory.mktemp("rm-gpt2"), arch="gpt2")


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True])
def test_rmu_on_a_gpt2_style_model_trains_only_its_mlp_projections(five_people_kb, gpt2_dir, tmp_path, lora):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    bundle = load_model(gpt2_dir, device="cpu")
    runner = TargetRunner(bundle, five_people_kb, rules="family", cache_dir=tmp_path, progress=False, lora=lora)
    assert decoder_layers(bundle.model) is bundle.model.transformer.h
    t = min(runner.known)  # any fact the model knows (it may not know the KB's target)
    before_w = {n: p.detach().clone() for n, p in bundle.model.named_parameters()}
    before = target_logp(runner, t)
    u = RMU()
    session = runner.session(u, t)
    if lora:  # as the loop does
        from deepunlearn.unlearn.snapshot import LoraAdapter

        session.lora = LoraAdapter(bundle.model, runner.lora_params, seed=0)
    list(u.trajectory(session, [16]))
    after = target_logp(runner, t)
    changed = {n for n, p in bundle.model.named_parameters() if n in before_w and not torch.equal(p, before_w[n])}
    session.restore()
    assert after < before
    if not lora:  # layer (2 - 1) // 2 = 0: its MLP output projection only
        assert changed == {"transformer.h.0.mlp.c_proj.weight"}
    assert all(p.requires_grad for p in bundle.model.parameters())
    assert all(torch.equal(p, before_w[n]) for n, p in bundle.model.named_parameters())


# ----------------------------------------------------------------------------- old points

@pytest.mark.slow
def test_ga_npo_tv_whp_points_are_unchanged_since_before_the_method_api_change(tmp_path):
    golden = json.loads((DATA / "old_points.json").read_text())
    now = make_old_points.old_points(tmp_path, make_old_points.edu_dir(make_old_points.ROOT))
    assert now == golden
