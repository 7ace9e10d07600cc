"""Which results-store methods turn sqlite3 errors into one line naming the file: every public
one, found from the class itself, so a method added later is guarded without a list to keep."""

from __future__ import annotations

import sqlite3

import pytest

from deepunlearn.bench.store import ResultsStore, StoreError
from deepunlearn.bench.store_guard import guard, guarded_names


def test_every_public_method_of_the_store_is_guarded():
    public = [n for n, v in vars(ResultsStore).items() if not n.startswith("_") and callable(v)]
    assert {"points", "add_points", "clear", "close", "finish_job"} <= set(public)
    assert [n for n in public + ["__init__", "_tx"] if not hasattr(getattr(ResultsStore, n), "__wrapped__")] == []


def test_a_method_added_to_a_class_is_guarded_and_names_the_file(tmp_path):
    class Store:
        def __init__(self, path):
            self.path = path

        def new_method(self):
            raise sqlite3.OperationalError("database or disk is full")

        def _helper(self):
            raise sqlite3.OperationalError("disk I/O error")

    guard(Store, StoreError)
    assert guarded_names(Store) == ["__init__", "new_method"]
    with pytest.raises(StoreError, match=f"^{tmp_path}: cannot write the results store"):
        Store(tmp_path).new_method()
    with pytest.raises(sqlite3.OperationalError):
        Store(tmp_path)._helper()
