"""Probe modes over forms: milliseconds per fact of each mode on the same facts.

    python -m pytest benchmarks/bench_probe_modes.py --benchmark-only

The KB is the 25 EDU-RELAT people around Zoey Jenkins (181 facts: 106 family, 75 biography,
as ``tests/conftest.py``'s ``small_kb``); the model a tiny Llama (2 layers, 256 wide) built for
it, untrained (timings do not depend on what it knows; an untrained model decodes all 10 tokens,
the worst case of ``generate``). Every mode probes every fact over ``--forms all``: per fact 7
qa/statement forms (primary, qa1-3, st1-3) and 2 yes/no forms (yes1, no1), the family facts'
rank over the KB's family relation names, the biography facts' over their attribute's values.
``default`` is today's probe (exact, the primary form only) for comparison. Each benchmark's
``extra_info`` holds ``ms_per_fact``, ``forward_passes`` (model forward calls per run, counted
with a forward pre-hook; HF ``generate`` counts one per decoding step) and ``known``.
"""

from __future__ import annotations

import pytest

HIDDEN = 256


@pytest.fixture(scope="module")
def small(edu_kb, tmp_path_factory):
    import torch

    from deepunlearn.kg.graph import nearest_people
    from deepunlearn.probe import build_tiny_model, load_model

    torch.set_num_threads(1)  # one thread: the figures do not depend on what else the box runs

    kb = edu_kb.subset(nearest_people(edu_kb, "Zoey Jenkins", 25), name="edu-relat-25")
    folder = build_tiny_model(kb, tmp_path_factory.mktemp("modes") / "m", hidden=HIDDEN)
    return kb, load_model(folder, device="cpu")


@pytest.mark.parametrize("mode, forms", [("exact", None), ("exact", "all"), ("generate", "all"),
                                         ("yesno", "all"), ("rank", "all"), ("any", "all")],
                         ids=["default", "exact", "generate", "yesno", "rank", "any"])
def test_probe_mode(benchmark, small, mode, forms):
    from deepunlearn.probe import probe

    kb, bundle = small
    calls = [0]
    handle = bundle.model.register_forward_pre_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
    try:
        res = benchmark.pedantic(probe, args=(bundle, kb), kwargs={"mode": mode, "forms": forms, "progress": False},
                                 rounds=3, warmup_rounds=1, iterations=1)
    finally:
        handle.remove()
    runs = 4  # one warm-up + three rounds
    n = len(kb)
    benchmark.extra_info["facts"] = n
    benchmark.extra_info["ms_per_fact"] = round(1000 * benchmark.stats.stats.mean / n, 3)
    benchmark.extra_info["forward_passes"] = calls[0] // runs
    benchmark.extra_info["known"] = int(res.n_known)
    assert len(res) == n
