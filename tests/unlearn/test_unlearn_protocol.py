"""The unlearning optimisation of the ``reference`` protocol equals the paper's code, run
here through Hugging Face's own pieces (``get_linear_schedule_with_warmup``, the Trainer's weight
decay groups, its causal-LM loss) in an independent loop."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Trainer, get_linear_schedule_with_warmup

from deepunlearn.probe import get_protocol
from deepunlearn.unlearn.methods import GradientAscent, Session, TaskVector
from deepunlearn.unlearn.snapshot import WeightSnapshot

from test_unlearn_methods import toy_batch, toy_model  # tests/unlearn is on sys.path (rootdir import)


def reference_session(model, lr, protocol="reference") -> Session:
    pr = get_protocol(protocol)
    return Session(model, toy_batch(), lr, max_grad_norm=pr.max_grad_norm, weight_decay=pr.weight_decay,
                   schedule=pr.schedule, warmup_steps=pr.warmup_steps, reinforce_steps=pr.reinforce_steps,
                   reinforce_schedule=pr.reinforce_schedule, reinforce_warmup_steps=pr.reinforce_warmup_steps,
                   snapshot=WeightSnapshot(model))


def hf_run(model, lr: float, steps: int, sign: float) -> tuple[list[float], torch.nn.Module]:
    """The reference's loop: HF Trainer's AdamW parameter groups (weight decay 0.01 except biases
    and norms), HF's linear schedule with 1 warm-up step over ``steps``, the HF causal-LM loss
    (times -1 for GA), no gradient clipping (DeepSpeed ZeRO-3 without ``gradient_clipping``)."""
    model = copy.deepcopy(model)
    decay = set(Trainer.get_decay_parameter_names(None, model))
    groups = [{"params": [p for n, p in model.named_parameters() if n in decay], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=steps)
    batch, rates = toy_batch(), []
    for _ in range(steps):
        model.train()
        rates.append(sched.get_last_lr()[0])
        loss = sign * model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            labels=batch["labels"]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return rates, model.eval()


def test_ga_lr_at_every_step_and_weights_equal_the_reference_run():
    model = toy_model()
    ref_rates, ref_model = hf_run(model, 1e-3, 16, sign=-1.0)
    s = reference_session(model, 1e-3)
    reached = [int(st.param) for st in GradientAscent().trajectory(s, [1, 2, 4, 8, 16])]
    assert reached == [1, 2, 4, 8, 16]
    assert s.rates == pytest.approx(ref_rates, rel=1e-12, abs=0)
    assert s.rates[0] == 0.0 and sum(s.rates) == pytest.approx(8e-3)
    for (n, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7, msg=n)


def test_a_trajectory_stopped_early_is_the_full_one_at_that_step():
    full, short = toy_model(), toy_model()
    s_full = reference_session(full, 1e-3)
    at4 = None
    for st in GradientAscent().trajectory(s_full, [1, 2, 4, 8, 16]):
        if st.param == 4:
            at4 = {n: p.detach().clone() for n, p in full.named_parameters()}
    s_short = reference_session(short, 1e-3)
    steps = GradientAscent().trajectory(s_short, [1, 2, 4, 8, 16])
    for st in steps:
        if st.param == 4:
            break
    steps.close()
    for n, p in short.named_parameters():
        assert torch.equal(p, at4[n]), n


def test_reinforcement_vector_norm_ratio_to_the_reference_schedule_is_one():
    model = toy_model(1)
    _, ref_model = hf_run(model, 1e-3, 10, sign=1.0)
    theta = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref_norm = torch.sqrt(sum(((q.detach() - theta[n]) ** 2).sum()
                              for (n, _), q in zip(model.named_parameters(), ref_model.parameters())))
    s = reference_session(model, 1e-3)
    TaskVector().reinforce(s)
    ours = torch.sqrt(sum(((p.detach() - theta[n]) ** 2).sum() for n, p in model.named_parameters()))
    assert float(ours / ref_norm) == pytest.approx(1.0, abs=1e-5)
    # a constant rate for 10 steps (the old behaviour) gives a far longer vector
    const = toy_model(1)
    s_const = Session(const, toy_batch(), 1e-3, weight_decay=0.01, reinforce_schedule="constant",
                      snapshot=WeightSnapshot(const))
    TaskVector().reinforce(s_const)
    longer = torch.sqrt(sum(((p.detach() - theta[n]) ** 2).sum() for n, p in const.named_parameters()))
    assert float(longer / ref_norm) > 1.3


def test_default_protocol_schedule_has_no_zero_rate_step():
    s = reference_session(toy_model(), 1e-3, protocol="default")
    list(GradientAscent().trajectory(s, [1, 2, 4, 8, 16]))
    assert s.rates[0] == pytest.approx(1e-3)
    assert s.rates == pytest.approx([1e-3 * (16 - k) / 16 for k in range(16)])


def test_reference_sets_reproduce_the_release_example_through_the_sweeps_evaluator(edu_dir, edu_kb):
    """The evaluator a TargetRunner (and so a sweep) builds for ``sets="release"``, ``tie="first"``
    and K = the dataset gives the release's own rec_acc.pt for target row 272."""
    from deepunlearn.kg.edu_relat import load_release_example
    from deepunlearn.kg.safe_pickle import safe_load
    from deepunlearn.unlearn.points import evaluator

    pr = get_protocol("reference")
    assert (pr.sets, pr.tie, pr.k_mode) == ("release", "first", "dataset")
    ev = evaluator(edu_kb, None, None, pr.sets, pr.tie, 100)
    ex = load_release_example(edu_dir, 272)
    e = ev.evaluate(272, ex.forgotten())
    rec_acc = [float(x) for x in safe_load(edu_dir / "example_for_evaluation" / "rec_acc.pt")]
    assert e.recall == rec_acc[0] == 0.75
    assert e.accuracy == pytest.approx(rec_acc[3], abs=1e-12) and round(e.accuracy, 8) == 0.15229885


def test_reference_finetuning_runs_every_epoch_with_hf_linear_warmup():
    """The reference finetunes 10 epochs (15 for GPT-2) with no early stop, weight decay 0.01, no
    clipping, HF's linear schedule with one epoch of warm-up."""
    from types import SimpleNamespace

    from deepunlearn.unlearn.finetune import FinetuneConfig, make_scheduler

    def fake(model_type, origin="finetuned"):
        return SimpleNamespace(meta={"origin": origin}, num_parameters=lambda: 1_400_000_000,
                               model=SimpleNamespace(config=SimpleNamespace(model_type=model_type)))

    ref = FinetuneConfig.for_bundle(fake("phi"), "reference")
    assert (ref.epochs, ref.target_known, ref.weight_decay, ref.grad_clip, ref.lr) == (10, None, 0.01, None, 2e-5)
    assert FinetuneConfig.for_bundle(fake("gpt2"), "reference").epochs == 15
    assert FinetuneConfig.for_bundle(fake("phi")).target_known == 0.95
    assert FinetuneConfig.for_bundle(fake("llama", origin="tiny"), "reference").target_known is None
    # 700 facts, batch 16: 44 steps an epoch, 440 in all, 44 warm-up steps (HF: max_steps // epochs)
    total = 44 * ref.epochs
    w = torch.nn.Parameter(torch.zeros(1))
    ours = make_scheduler(torch.optim.AdamW([w], lr=ref.lr), ref, total)
    hf_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=ref.lr)
    hf = get_linear_schedule_with_warmup(hf_opt, num_warmup_steps=total // ref.epochs, num_training_steps=total)
    for _ in range(total):
        assert ours.get_last_lr()[0] == pytest.approx(hf.get_last_lr()[0], rel=1e-12, abs=1e-20)
        ours.optimizer.step()
        hf_opt.step()
        ours.step()
        hf.step()
