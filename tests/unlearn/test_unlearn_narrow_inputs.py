"""The forgetting checks and sequential requests read only what they use of the model they work
on (a :class:`CheckModel`, a :class:`Served`), so they run on scripted parts without any
:class:`~deepunlearn.unlearn.loop.TargetRunner`: the adversarial check puts what the aggregate
still knows back, the attack pool leaves out the targets' chosen sets, the sequence serves,
protects, measures and puts the weights back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from deepunlearn.unlearn.check_spec import CheckModel, CheckSpec
from deepunlearn.unlearn.checks import ForgettingChecks
from deepunlearn.unlearn.methods import UnlearnError
from deepunlearn.unlearn.requests import Served, _sequential
from deepunlearn.unlearn.snapshot import WeightSnapshot


class Evaluator:
    """Recall: the share of the target's set {t, t + 1} forgotten; accuracy: the share of the
    rest of K (0..5) still known."""

    K = frozenset(range(6))

    def evaluate(self, target, forgotten):
        s, lost = {target, target + 1}, set(forgotten)
        rest = self.K - s
        return SimpleNamespace(recall=len(s & lost) / 2, accuracy=1 - len(rest & lost) / len(rest), set=sorted(s))

    def accuracies(self, union, forgotten):
        rest = self.K - set(union)
        return (1 - len(rest & set(forgotten)) / len(rest),)


def test_the_spec_is_checked_from_the_options_alone():
    spec = CheckSpec.build("exact", adversarial=True, modes=["yesno"])
    assert spec.modes == ("exact", "yesno") and spec.active and spec.attacks is None
    assert not CheckSpec.build("exact").active
    assert CheckSpec.build("exact", attacks={"relearn": [2]}).attacks.relearn == [2]
    with pytest.raises(UnlearnError, match="adversarial_modes"):
        CheckSpec.build("exact", adversarial=True, modes=["no-such-mode"])


def test_adversarial_check_on_a_scripted_model(monkeypatch):
    import deepunlearn.probe as probe_pkg

    asked = []

    def probe(bundle, kb, ids, *, mode, forms, any_modes, batch_size, model_fn, progress):
        asked.append((list(ids), mode, forms, any_modes, batch_size))
        return SimpleNamespace(known_ids=lambda: {i for i in ids if i == 1})  # the aggregate still knows 1

    monkeypatch.setattr(probe_pkg, "probe", probe)
    model = CheckModel(bundle="B", kb="KB", evaluator=Evaluator(), batch_size=7)
    checks = ForgettingChecks(CheckSpec.build("exact", adversarial=True, modes=["yesno"]), model)
    point = SimpleNamespace(target=0, notes={})
    checks.adversarial_check([point], [0, 1])
    assert asked == [([0, 1], "any", "all", ("exact", "yesno"), 7)]
    assert point.notes == {"recall_adv": 0.5, "accuracy_adv": 1.0, "superficial": 0.5, "superficial_n": [1, 2]}


def test_attack_pool_and_measures_on_a_scripted_model():
    model = CheckModel(bundle=None, kb=None, evaluator=Evaluator(), known=Evaluator.K,
                       chosen_set=lambda t: [t, t + 1])
    checks = ForgettingChecks(CheckSpec.build("exact", attacks={"relearn": [1]}), model)
    assert checks.relearn_pool([0, 3]) == [2, 5]
    points = [SimpleNamespace(target=0), SimpleNamespace(target=3)]
    assert checks._measure(points, {2, 3, 4, 5}) == [(1.0, 1.0), (0.0, 0.5)]


def test_a_sequence_served_from_scripted_parts_puts_the_weights_back():
    net = torch.nn.Linear(6, 1, bias=False)
    with torch.no_grad():
        net.weight.zero_()
    protected, served = [], []

    def forgotten() -> set[int]:
        return {i for i in range(6) if net.weight[0, i] > 0.5}

    def serve(targets, u, values, seed):
        served.append((list(targets), seed))
        with torch.no_grad():
            for t in targets:
                net.weight[0, t] = net.weight[0, t + 1] = 1.0
        yield [SimpleNamespace(target=t, forgotten=sorted(forgotten()), notes={}) for t in targets]

    m = Served(model=net, snapshot=WeightSnapshot(net), known=Evaluator.K, evaluator=Evaluator(), serve=serve,
               known_after=lambda: set(Evaluator.K) - forgotten(),
               deep=lambda t, lost: {t, t + 1} <= set(lost), protect=protected.append)
    points = list(_sequential(m, [0, 3], None, [1.0], 5, None, "skip", False))
    assert served == [([0], 5), ([3], 6)]
    assert protected == [frozenset(), frozenset({0, 1}), frozenset()]  # the kept target's set, then none
    assert [p.notes["request"] for p in points] == [0, 1]
    assert points[1].notes["accuracy_after"] == 1.0
    assert points[1].notes["earlier"] == [{"target": 0, "recall": 1.0, "deep": True},
                                          {"target": 3, "recall": 1.0, "deep": True}]
    assert forgotten() == set()  # the original weights are back
