"""Fuzzing the probe layer's loaders: random bytes and random JSON as a checkpoint's
``config.json``, ``deepunlearn.json`` and ``pytorch_model.bin`` (in a copy of the minimal tiny
checkpoint) make :func:`load_model` return a bundle or raise :class:`ModelLoadError`, never
another exception; random JSON (and near-valid documents) make ``ProbeResult.from_json`` return
a result or raise a UserError. Each loader's inputs, outcomes and time are printed at the end
(``pytest -s``) for the issue's note."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepunlearn.errors import UserError
from deepunlearn.probe import ModelLoadError, ProbeResult, load_model

#: loader -> Counter of outcomes; loader -> seconds spent
OUTCOMES: dict[str, Counter] = defaultdict(Counter)
SECONDS: dict[str, float] = defaultdict(float)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=12), kids, max_size=5),
    max_leaves=25,
)
# documents shaped like the real ones, with random values: these get past "not an object"
meta_like = st.fixed_dictionaries({}, optional={
    "format": st.sampled_from(["deepunlearn-model", "x"]) | json_values, "version": json_values,
    "prompt": json_values | st.fixed_dictionaries({}, optional={
        "question_start": st.text(max_size=8), "question_end": st.text(max_size=8),
        "answer_tag": st.text(max_size=8) | json_values, "name": st.text(max_size=8)}),
    "kb": json_values})
config_like = st.fixed_dictionaries({"model_type": st.sampled_from(["llama", "gpt2", "bert", "", "x"]) | json_values},
                                    optional={"architectures": json_values, "auto_map": json_values,
                                              "torch_dtype": json_values, "tie_word_embeddings": json_values})
documents = {
    "config.json": st.binary(max_size=300) | json_values | config_like,
    "deepunlearn.json": st.binary(max_size=300) | json_values | meta_like,
    "pytorch_model.bin": st.binary(max_size=300) | json_values,
}
MODEL_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def fuzz_report():
    yield
    print("\nprobe fuzz: loader, inputs tried, outcomes, seconds")
    for name in sorted(OUTCOMES):
        c = OUTCOMES[name]
        print(f"  {name}: {sum(c.values())} inputs, {dict(c.most_common())}, {SECONDS[name]:.1f}s")


def _encode(doc) -> bytes:
    import json

    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def _outcome(e: BaseException | None) -> str:
    if e is None:
        return "loaded"
    return "ModelLoadError: " + " ".join(str(e).split(": ")[1:2])[:40]


@pytest.mark.parametrize("fname", sorted(documents))
def test_random_checkpoint_files_load_or_raise_model_load_error(fname, mini_model_dir):
    @MODEL_SETTINGS
    @given(doc=documents[fname])
    def run(doc):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(shutil.copytree(mini_model_dir, Path(tmp) / "m"))
            if fname == "pytorch_model.bin":
                (folder / "model.safetensors").unlink()
            (folder / fname).write_bytes(_encode(doc))
            t0 = time.perf_counter()
            err = None
            try:
                load_model(folder, device="cpu")
            except ModelLoadError as e:  # anything else fails the test
                err = e
            finally:
                SECONDS[f"load_model({fname})"] += time.perf_counter() - t0
            OUTCOMES[f"load_model({fname})"][_outcome(err)] += 1

    run()


probe_result_like = st.fixed_dictionaries({}, optional={
    "fact_ids": json_values | st.lists(st.integers(-3, 2**63), max_size=4),
    "known": json_values | st.lists(st.booleans(), max_size=4),
    "logprob": json_values | st.lists(st.none() | st.floats(), max_size=4),
    "outputs": json_values | st.lists(st.text(max_size=5), max_size=4),
    "mode": st.sampled_from(["exact", "generate", "x"]) | json_values,
})


@settings(max_examples=400, deadline=None, derandomize=True)
@given(doc=json_values | probe_result_like | st.binary(max_size=200) | st.text(max_size=200))
def test_random_json_to_probe_result(doc):
    import json

    if isinstance(doc, (dict, list)) and not isinstance(doc, bytes):
        doc = doc if isinstance(doc, dict) and doc.keys() <= {"fact_ids", "known", "logprob", "outputs", "mode"} \
            else json.dumps(doc)
    t0 = time.perf_counter()
    try:
        r = ProbeResult.from_json(doc)
        outcome = "read"
        assert len(r.fact_ids) == len(r.known) == len(r.logprob)
    except UserError as e:  # anything else fails the test
        outcome = "UserError: " + str(e).split(": ", 1)[-1][:30]
    SECONDS["ProbeResult.from_json"] += time.perf_counter() - t0
    OUTCOMES["ProbeResult.from_json"][outcome] += 1
