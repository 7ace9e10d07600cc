"""Fuzz the model inputs: a checkpoint folder's ``config.json`` and ``deepunlearn.json``
(``model info DIR``, ``probe --model DIR``) and GGUF files (``model info FILE.gguf``, ``model
import``), written with the gguf package's writer from drawn header fields (architecture,
block count, widths, heads, tensor shape and type), then mutated as bytes (the header's
version, tensor count and key count, bit flips, truncation)."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz_harness import Fuzzer, fuzz_settings
from fuzz_mutations import byte_mutations, json_mutations
from fuzz_seeds import write_gguf


@pytest.mark.parametrize("fname", ["config.json", "deepunlearn.json"])
def test_checkpoint_json(seeds, work, fname):
    fz = Fuzzer(f"checkpoint-{fname}")
    seed = (seeds["model"] / fname).read_bytes()
    mutations = st.one_of(json_mutations(json.loads(seed)), json_mutations(json.loads(seed)), byte_mutations(seed))
    cmds = st.sampled_from([["model", "info", "m", "--json"], ["model", "info", "m"],
                            ["probe", "--model", "m", "--kb", "kb.json", "--json", "--threads", "1"]])

    @fuzz_settings(1)
    @given(mutations, cmds)
    def run(mutated, cmd):
        data, what = mutated
        m = work / "m"
        shutil.rmtree(m, ignore_errors=True)
        shutil.copytree(seeds["model"], m)
        (m / fname).write_bytes(data)
        fz.check(cmd, work, protect=work, allow_change=(m / fname,), note=what)

    run()
    fz.finish()


#: header fields: small and ordinary values, with now and then one a model could not have
SMALL = dict(blocks=st.sampled_from([1, 1, 2, 0]), width=st.sampled_from([16, 16, 32, 0, 15]),
             heads=st.sampled_from([2, 2, 4, 0, 3]), rows=st.sampled_from([16, 1, 2]),
             ctx=st.sampled_from([64, 0, 1, 2**31]), arch=st.sampled_from(["llama", "llama", "gpt2", "qwen2", "",
                                                                             "__class__", "foo|bar"]),
             dtype=st.sampled_from([np.float32, np.float16, np.int8, np.int32]))
#: sizes far beyond what the machine holds: reading the header must not try to allocate them
HUGE = dict(SMALL, blocks=st.sampled_from([1, 4096, 2**31 - 1]), width=st.sampled_from([16, 65536, 2**31 - 1]),
            heads=st.sampled_from([2, 1, 2**20]))


def _header_mutations(seed: bytes):
    """The fixed header: magic, u32 version, u64 tensor count, u64 key count."""
    def put(t):
        off, fmt, value = t
        return seed[:off] + struct.pack(fmt, value) + seed[off + struct.calcsize(fmt):], f"header @{off} <- {value}"

    return st.one_of(
        st.tuples(st.just(4), st.just("<I"), st.sampled_from([0, 1, 2, 4, 2**32 - 1])).map(put),
        st.tuples(st.sampled_from([8, 16]), st.just("<Q"), st.sampled_from([0, 2, 1000, 2**32, 2**63, 2**64 - 1])).map(
            put),
        byte_mutations(seed))


def _gguf_test(tmp_path, fz: Fuzzer, fields: dict, scale: float, timeout: float | None = None) -> None:
    cmds = [["model", "info", "f.gguf", "--json"], ["model", "import", "f.gguf", "-o", "imp", "--json"]]

    @fuzz_settings(scale)
    @given(st.fixed_dictionaries(fields), st.sampled_from([True, False, False]), st.data(), st.sampled_from(cmds))
    def run(kw, mutate, data, cmd):
        p = write_gguf(tmp_path / "f.gguf", **kw)
        what = ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in kw.items())
        if mutate:
            raw, how = data.draw(_header_mutations(p.read_bytes()))
            p.write_bytes(raw)
            what += "; " + how
        shutil.rmtree(tmp_path / "imp", ignore_errors=True)
        fz.check(cmd, tmp_path, protect=tmp_path, allow_change=(p,), note=what, timeout=timeout)

    run()
    fz.finish()


def test_gguf(tmp_path):
    _gguf_test(tmp_path, Fuzzer("gguf"), SMALL, 1.5)


def test_gguf_declaring_huge_sizes(tmp_path):
    fz = Fuzzer("gguf-huge", max_failures=1)
    # a shorter time bound: a model of these sizes takes hours to build, 4 s tells
    write_gguf(tmp_path / "f.gguf", blocks=4096, width=65536)
    fz.check(["model", "import", "f.gguf", "-o", "imp"], tmp_path, protect=tmp_path, timeout=4,
             note="blocks=4096, width=65536")
    _gguf_test(tmp_path, fz, HUGE, 0.5, timeout=4)
