"""Two workers asking for the same retain model (a sweep's oracle) at once train it once: the second
waits on the key's lock and finds it cached (deepunlearn.unlearn.retrain.key_lock)."""

from __future__ import annotations

import json
import threading
import time

import deepunlearn.unlearn.retrain as rt


def test_one_key_is_trained_once_by_two_workers(tmp_path, monkeypatch):
    folder = tmp_path / "cache" / "k1"
    plan = rt.RetrainPlan({}, "A", None, {}, [1], "k1", folder)
    calls = []

    def slow_train(p, kb, *, progress, device):
        calls.append(threading.current_thread().name)
        time.sleep(0.5)  # long enough for the other worker to arrive while this one trains
        folder.mkdir(parents=True)
        (folder / "deepunlearn.json").write_text(json.dumps({"retrain": {"key": "k1"}}))
        return folder

    monkeypatch.setattr(rt, "_train_into", slow_train)
    got = []
    workers = [threading.Thread(target=lambda: got.append(rt.train_planned(plan, None)), name=f"w{i}")
               for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1 and got == [folder, folder]
    assert sorted(p.name for p in folder.parent.iterdir()) == ["k1"]  # the lock file is gone


def test_other_keys_do_not_wait(tmp_path, monkeypatch):
    seen = []

    def train(p, kb, *, progress, device):
        seen.append(p.key)
        p.folder.mkdir(parents=True)
        (p.folder / "deepunlearn.json").write_text(json.dumps({"retrain": {"key": p.key}}))
        return p.folder

    monkeypatch.setattr(rt, "_train_into", train)
    with rt.key_lock(tmp_path / "k1"):  # k1 held: k2 still trains
        rt.train_planned(rt.RetrainPlan({}, "A", None, {}, [1], "k2", tmp_path / "k2"), None)
    assert seen == ["k2"]
