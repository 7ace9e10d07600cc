"""Seed files the fuzz suite builds itself (the others come from the tool: see conftest.py)."""

from __future__ import annotations

from pathlib import Path


def write_gguf(path: Path, *, arch: str = "llama", blocks: int = 1, width: int = 16, heads: int = 2,
               rows: int = 16, ctx: int = 64, dtype=None, tokenizer: bool = True) -> Path:
    """A small GGUF file: an architecture's header fields, a 16-token tokenizer and one embedding tensor."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_block_count(blocks)
    w.add_context_length(ctx)
    w.add_embedding_length(width)
    w.add_feed_forward_length(width * 2)
    w.add_head_count(heads)
    if tokenizer:
        tokens = ["<unk>", "<s>", "</s>"] + [chr(97 + i) for i in range(13)]
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * len(tokens))
        w.add_token_types([2, 3, 3] + [1] * 13)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    w.add_tensor("token_embd.weight", np.ones((rows, 16), dtype=dtype or np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
