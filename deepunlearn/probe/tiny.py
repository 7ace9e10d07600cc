"""The small causal LM built locally for tests, demos and CPU experiments (DESIGN.md section 6).

No model hub is reachable, so this module makes a model from nothing but a KB: a word-level
tokenizer trained with ``tokenizers`` on the KB's facts written in the model's answer format
(so the answer tag's words, ``Answer`` and ``:``, are tokens too), a Llama-style config from
``transformers``, random weights, all saved with ``save_pretrained`` so every later step loads
it through :func:`~deepunlearn.probe.models.load_model` like any other checkpoint. Finetuned
(:mod:`deepunlearn.unlearn.finetune`), a 2-layer, 512-wide one memorises EDU-RELAT's 700 facts.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..kg.kb import KnowledgeBase
from .prompts import PromptFormat

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)

#: The default answer format of (Llama-style) tiny models: the reference's Llama format.
TINY_PROMPT = PromptFormat.named("llama")
#: Architectures :func:`build_tiny_model` can build: Llama-style (rotary positions, the default)
#: and GPT-2-style (learned absolute positions, the GPT-2 prompt format).
ARCHS = ("llama", "gpt2")


def probe_texts(kb: KnowledgeBase, prompt: PromptFormat = TINY_PROMPT) -> list[str]:
    """The text a tiny model sees for the KB: every probe's full text (question part, answer tag,
    answer) in ``prompt``."""
    return [prompt.text(p.question, p.answer) for p in kb.probes()]


def build_tokenizer(texts: list[str]):
    """A word-level ``PreTrainedTokenizerFast`` over ``texts``.

    Words are split GPT-2 style (byte-level, a word keeps its leading space), so decoding
    restores the text exactly: the multi-word answer ``"Washington state"`` is two tokens,
    ``Washington`` and `` state``, and decodes back to ``"Washington state"``. Every encoding
    starts with ``<s>``; ``</s>`` ends answers in training, ``<pad>`` pads, ``<unk>`` stands for
    words the KB never used.

    >>> tok = build_tokenizer(["Question: Where?\\nWashington state"])
    >>> tok.convert_ids_to_tokens(tok("Question: Where?\\nWashington state").input_ids)
    ['<s>', 'Question', ':', 'ĠWhere', '?', 'Ċ', 'Washington', 'Ġstate']
    >>> tok.decode(tok("Washington state", add_special_tokens=False).input_ids)
    'Washington state'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS), min_frequency=1, vocab_size=10**7,
                                        show_progress=False)
    tok.train_from_iterator(texts, trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD,
        padding_side="left", clean_up_tokenization_spaces=False,
    )


def tiny_config(tokenizer, *, hidden: int = 512, layers: int = 2, heads: int = 8, max_positions: int = 128,
                arch: str = "llama"):
    """A small config: ``hidden`` wide, MLP 4x wider. Llama-style with untied embeddings (2
    layers, 512 wide and a 293-word vocabulary make 8.7M parameters), or GPT-2-style."""
    from transformers import GPT2Config, LlamaConfig

    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of the number of heads {heads}")
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}: expected one of {ARCHS}")
    if arch == "gpt2":
        return GPT2Config(
            vocab_size=len(tokenizer), n_embd=hidden, n_layer=layers, n_head=heads, n_positions=max_positions,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(
    kb: KnowledgeBase,
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden: int = 512,
    layers: int = 2,
    heads: int = 8,
    arch: str = "llama",
    prompt: PromptFormat | str | dict | None = None,
) -> Path:
    """Build an untrained tiny causal LM for ``kb`` in ``out_dir`` and return the folder.

    The folder is a normal Hugging Face checkpoint (config, safetensors weights, tokenizer) plus
    ``deepunlearn.json`` recording the answer format ``prompt`` (anything
    :meth:`PromptFormat.parse` takes); by default the reference format of the architecture's
    family: ``llama`` for ``arch="llama"``, ``gpt2`` for ``arch="gpt2"`` (a GPT-2-style model
    with learned absolute positions). The tokenizer is trained on the KB in that format. Load it with
    :func:`~deepunlearn.probe.models.load_model` and finetune it with
    :func:`deepunlearn.unlearn.finetune.finetune`. The same KB and seed give the same weights.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from .models import META_FILE, META_FORMAT, quiet_hf
    from .fingerprint import kb_fingerprint

    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}: expected one of {ARCHS}")
    prompt = PromptFormat.for_model(arch) if prompt is None else PromptFormat.parse(prompt)
    texts = probe_texts(kb, prompt)
    if not texts:
        raise ValueError(f"knowledge base {kb.name!r} has no facts to build a tokenizer from")
    tokenizer = build_tokenizer(texts)
    longest = max(len(ids) for ids in tokenizer(texts)["input_ids"])
    max_positions = max(128, 1 << (longest + 16).bit_length())  # room for the answer and 10 generated tokens
    config = tiny_config(tokenizer, hidden=hidden, layers=layers, heads=heads, max_positions=max_positions, arch=arch)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, do_sample=False,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_hf():  # no "Writing model shards" bar
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    meta = {
        "format": META_FORMAT,
        "version": 1,
        "prompt": prompt.model_dump(),
        "origin": "tiny",
        "tiny": {"arch": arch, "seed": seed, "hidden": hidden, "layers": layers, "heads": heads,
                 "vocab": len(tokenizer), "parameters": sum(p.numel() for p in model.parameters())},
        "kb": {"name": kb.name, "fingerprint": kb_fingerprint(kb), "facts": len(kb.facts)},
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out
