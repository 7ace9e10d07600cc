"""Stored minimal sets and the reference's tie rule: the Evaluator with ``sets=`` and
``tie="first"`` against an independent reimplementation of the reference's recall/accuracy code
(the Table-3 notebook and calculate_recall_and_acc.py), on the release's own files."""

from __future__ import annotations

import numpy as np
import pytest

from deepunlearn.kg.edu_relat import load_release_example
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.kg.safe_pickle import safe_load
from deepunlearn.rules import Evaluator, RulesError, parse_datalog, stored_sets


def reference_rec_acc(set_file, rel_correct, bio_correct):
    """The reference, line for line: get_valid_unlearn_general (stored sets, iterated as
    torch.load returns them), get_prec_rec_acc, np.argmax, and the all-facts accuracy."""
    minimal_unlearn_set = list(safe_load(set_file))
    unlearn_ind = 1 - np.asarray(rel_correct).astype(np.float32)
    recall_list, acc_list = [], []
    for minimal_set in minimal_unlearn_set:
        minimal_set_ind = np.zeros(len(unlearn_ind))
        minimal_set_ind[list(minimal_set)] = 1
        recall_list.append((minimal_set_ind * unlearn_ind).sum() / minimal_set_ind.sum())
        acc_list.append(1 - (unlearn_ind * (1 - minimal_set_ind)).sum() / (len(unlearn_ind) - len(minimal_set)))
    rec = max(recall_list)
    argmax = np.asarray(recall_list).argmax()
    acc_bio = np.asarray(bio_correct).mean()
    num_rel, num_bio = len(rel_correct), len(bio_correct)
    size_mul = len(minimal_unlearn_set[argmax])
    acc_all = (acc_bio * num_bio + acc_list[argmax] * (num_rel - size_mul)) / (num_bio + num_rel - size_mul)
    return rec, acc_list[argmax], acc_bio, acc_all, sorted(int(i) for i in minimal_unlearn_set[argmax])


@pytest.fixture(scope="module")
def release_evaluator(edu_kb):
    """What sweeps build for the reference protocol: K = the dataset, the release's sets, first tie."""
    return Evaluator(edu_kb, known=None, exact=False, seeds=100, sets=stored_sets(edu_kb, "release"), tie="first")


def test_release_example_with_stored_sets_and_first_tie(edu_dir, release_evaluator):
    ex = load_release_example(edu_dir, 272)
    rec_acc = [float(x) for x in safe_load(edu_dir / "example_for_evaluation" / "rec_acc.pt")]
    e = release_evaluator.evaluate(272, ex.forgotten())
    assert e.recall == 0.75 == rec_acc[0]
    assert e.accuracy == pytest.approx(rec_acc[3], abs=1e-12) and round(e.accuracy, 8) == 0.15229885
    assert e.accuracy_family == pytest.approx(rec_acc[1]) and e.accuracy_biography == pytest.approx(rec_acc[2])
    assert e.exact is False and e.n_sets == 2
    ref = reference_rec_acc(edu_dir / "unlearn_minimal_set" / "272.pt", ex.relationships_correct, ex.biographies_correct)
    assert (e.recall, e.accuracy_family, e.accuracy_biography) == pytest.approx(ref[:3])
    assert e.accuracy == pytest.approx(ref[3], abs=1e-12)
    # U*_A is the first stored set of maximal recall (both reach 0.75), not the accuracy rule's pick
    assert e.set == ref[4] == [231, 272, 319, 379]
    assert Evaluator(release_evaluator.kb, sets=release_evaluator.stored).evaluate(272, ex.forgotten()).set == [
        75, 272, 347, 379]


def test_every_release_target_matches_the_reference(edu_dir, edu_kb, release_evaluator):
    """All 55 targets, with forgotten facts drawn at random around each target's sets (so that
    recall ties and the first-set rule matter)."""
    rng = np.random.default_rng(0)
    ties = differs = 0
    release_evaluator_best = Evaluator(edu_kb, exact=False, sets=release_evaluator.stored)
    for t in edu_kb.targets:
        sets = release_evaluator.minimal_sets(t).sets
        assert release_evaluator.minimal_sets(t).method == "stored"
        pool = sorted(set().union(*sets))
        lost = set(rng.choice(pool, size=max(1, len(pool) // 2), replace=False).tolist())
        lost |= set(rng.choice(700, size=60, replace=False).tolist())
        rel = [i not in lost for i in range(400)]
        bio = [i + 400 not in lost for i in range(300)]
        rec, acc_rel, acc_bio, acc_all, first = reference_rec_acc(edu_dir / "unlearn_minimal_set" / f"{t}.pt", rel, bio)
        e = release_evaluator.evaluate(t, sorted(lost))
        assert e.recall == pytest.approx(rec, abs=1e-12), t
        assert e.set == first, t
        assert e.accuracy == pytest.approx(acc_all, abs=1e-12), t
        assert e.accuracy_family == pytest.approx(acc_rel, abs=1e-12), t
        ties += sum(1 for s in sets if len(s & lost) * len(first) == len(set(first) & lost) * len(s)) > 1
        differs += e.set != release_evaluator_best.evaluate(t, sorted(lost)).set
    # the draw exercises ties, and the first-set rule picks other sets than the accuracy rule
    assert ties >= 10 and differs >= 5, (ties, differs)


def tie_kb():
    # t is derivable from {a, b}, {a, c} or {d, e}: minimal sets {t,a,d}, {t,a,e}, {t,b,c,d}, {t,b,c,e}
    kb = KnowledgeBase.build({"p": {}, "q": {}}, [("p", r, "q") for r in "tabcde"] + [("p", "job", "x")])
    rules = parse_datalog("t(X, Y) :- a(X, Y), b(X, Y).\nt(X, Y) :- a(X, Y), c(X, Y).\n"
                          "t(X, Y) :- d(X, Y), e(X, Y).")
    return kb, rules


def test_first_tie_follows_the_given_order_and_accuracy_tie_does_not():
    kb, rules = tie_kb()
    lost = [0, 1, 2, 3, 4]  # recall 1 for {t,a,d} (accuracy 2/4) and {t,b,c,d} (accuracy 2/3)
    for order in ([{0, 1, 4}, {0, 2, 3, 4}, {0, 1, 5}], [{0, 2, 3, 4}, {0, 1, 4}, {0, 1, 5}]):
        stored = {0: [frozenset(s) for s in order]}
        first = Evaluator(kb, rules=rules, sets=stored, tie="first").evaluate(0, lost)
        best = Evaluator(kb, rules=rules, sets=stored).evaluate(0, lost)
        assert first.set == sorted(order[0]) and first.recall == 1.0
        assert first.accuracy == pytest.approx(2 / 4 if len(order[0]) == 3 else 2 / 3)
        assert best.set == [0, 2, 3, 4] and best.accuracy == pytest.approx(2 / 3)
        assert first.exact is False and first.n_sets == 3
    # computed sets (no stored ones): "first" is the first of the sorted sets
    e = Evaluator(kb, rules=rules, tie="first").evaluate(0, lost)
    assert e.set == [0, 1, 4] and e.exact is True


def test_targets_without_stored_sets_fall_back_to_computed_sets():
    kb, rules = tie_kb()
    ev = Evaluator(kb, rules=rules, sets={1: [frozenset({1})]})
    assert ev.minimal_sets(0).method == "exact" and len(ev.minimal_sets(0)) == 4
    assert ev.minimal_sets(1).method == "stored"
    ev = Evaluator(kb, rules=rules, exact=False, seeds=20, sets={})
    assert ev.minimal_sets(0).method == "mdus"
    assert set(ev.minimal_sets(0).sets) <= set(Evaluator(kb, rules=rules).minimal_sets(0).sets)


@pytest.mark.parametrize("sets, message", [
    ({0: [frozenset({0, 99})]}, "target 0, set 0 names fact 99, which is no fact of KB"),
    ({42: [frozenset({42})]}, "target 42 is no fact of KB"),
    ({0: [frozenset({1, 4})]}, "does not hold the target"),
    ({0: []}, "target 0 has no minimal set"),
])
def test_stored_sets_are_checked_against_the_kb(sets, message):
    kb, rules = tie_kb()
    with pytest.raises(RulesError, match=message):
        Evaluator(kb, rules=rules, sets=sets)
    with pytest.raises(RulesError, match="tie must be"):
        Evaluator(kb, rules=rules, tie="best")


def test_stored_sets_from_folders(edu_kb, edu_dir, tmp_path):
    import pickle

    a, b = stored_sets(edu_kb, "release"), stored_sets(edu_kb, edu_dir / "unlearn_minimal_set")
    assert a == b == stored_sets(edu_kb, str(edu_dir)) and len(a) == 55
    # a KB without the metadata, a subset of the release (renumbered facts), a row out of range
    bare = KnowledgeBase.build(edu_kb.entities, edu_kb.facts, name="bare")
    with pytest.raises(RulesError, match="records no release folder .*pass the folder"):
        stored_sets(bare, "release")
    sub = edu_kb.subset(range(100, 700), name="sub")
    with pytest.raises(RulesError, match=r"unlearn_minimal_set/\d+.pt: row \d+ of the release is .* not this KB's fact ids"):
        stored_sets(sub, "release")
    (tmp_path / "5.pt").write_bytes(pickle.dumps({frozenset({5, 7000})}))
    with pytest.raises(RulesError, match=r"5.pt: target 5, set 0 names row 7000, which is no fact of KB 'bare'"):
        stored_sets(bare, tmp_path)
    with pytest.raises(RulesError, match=r"^--sets: .*5.pt: not a folder"):
        stored_sets(bare, tmp_path / "5.pt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RulesError, match=r"^--sets: .*: no unlearn_minimal_set/ folder and no <row>.pt"):
        stored_sets(bare, tmp_path / "empty")
