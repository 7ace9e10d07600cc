"""The small causal LM built locally for tests, demos and CPU experiments (docs/models.md).

No model hub is reachable, so this module makes a model from nothing but a KB: a word-level
tokenizer trained with ``tokenizers`` on the KB's facts written in the model's answer format
(so the answer tag's words, ``Answer`` and ``:``, are tokens too), a config from
``transformers`` (Llama-style by default; any of the nine families of :data:`ARCHS`), random weights, all saved with ``save_pretrained`` so every later step loads
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
#: Suffix of the ``--model tiny`` cache folder's key: bumped when :func:`tokenizer_texts`
#: changes, so a tiny model built before (whose tokenizer lacks the probe forms' words) is
#: not reused.
TOKENIZER_VERSION = "-forms1"

#: The default answer format of (Llama-style) tiny models: the reference's Llama format.
TINY_PROMPT = PromptFormat.named("llama")
#: Architectures :func:`build_tiny_model` can build, each from its own transformers config class
#: (the ``model_type`` of the config): the families the paper evaluates (Llama, Phi, GPT-2) and
#: those users bring (Qwen2/3, Pythia's GPT-NeoX, Gemma 2, OLMo 2, Mistral). See
#: :func:`tiny_config` for what each keeps of its family.
ARCHS = ("llama", "phi", "gpt2", "qwen2", "qwen3", "gpt_neox", "gemma2", "olmo2", "mistral")
#: Families whose usual checkpoints tie the output layer to the input embeddings (GPT-2; Gemma 2;
#: the small Qwen2/Qwen3 models, 0.5-4B, that such tiny stand-ins mimic). The others keep a
#: separate ``lm_head`` (Llama-2/3, Phi-1.5/2, Pythia, OLMo 2, Mistral 7B).
TIED_ARCHS = ("gpt2", "qwen2", "qwen3", "gemma2")
#: Attention implementation forced at build time where the family needs one: Gemma 2's attention
#: logit soft-capping exists only in the eager path (SDPA would silently drop it), as Hugging
#: Face recommends; transformers also picks eager when it loads a gemma2 config.
ATTN_IMPLEMENTATION = {"gemma2": "eager"}
#: Families whose tiny tokenizer is byte-level BPE rather than word-level: transformers loads a
#: ``qwen2`` checkpoint's tokenizer as ``Qwen2Tokenizer`` whatever its ``tokenizer_config.json``
#: says (qwen2 is in ``MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS``), and that class rebuilds a BPE
#: model from the file's vocabulary and merges: a word-level vocabulary has no merges, so every
#: word would fall apart into unknown letters and the model could learn nothing.
TOKENIZER_MODELS = {"qwen2": "bpe"}


def probe_texts(kb: KnowledgeBase, prompt: PromptFormat = TINY_PROMPT) -> list[str]:
    """The text a tiny model sees for the KB: every probe's full text (question part, answer tag,
    answer) in ``prompt``."""
    return [prompt.text(p.question, p.answer) for p in kb.probes()]


def form_texts(kb: KnowledgeBase, prompt: PromptFormat = TINY_PROMPT) -> list[str]:
    """Every form of every fact (:func:`deepunlearn.kg.forms.forms_of`) as the model reads it:
    qa and yes/no forms in ``prompt`` (question part, answer tag, answer), statements raw; and
    each spelling of yes/no probing (``yes``, ``Yes``, ``no``, ``No``) after the answer tag."""
    from ..kg.forms import forms_of

    texts, question = [], None
    for i in range(len(kb.facts)):
        for f in forms_of(kb, i)[1:]:  # the primary form is probe_texts' own
            texts.append(f.text if f.kind == "statement" else prompt.text(f.text, f.answer))
            question = question if question is not None or f.kind != "yesno" else f.text
    question = question if question is not None else (kb.probe(0).question if kb.facts else "")
    return texts + [prompt.text(question, s) for s in ("yes", "Yes", "no", "No")]


def tokenizer_texts(kb: KnowledgeBase, prompt: PromptFormat = TINY_PROMPT, *, forms: bool = True) -> list[str]:
    """The texts the tiny tokenizer is trained on: :func:`probe_texts`, every form's text
    (:func:`form_texts`), plus, for a KB with canaries (:mod:`deepunlearn.kg.canaries`), every
    reference code in a canary's answer position. A real BPE tokenizer spells any string; the
    word-level one knows only the words it was built on, and would read a word of a paraphrase,
    a statement, ``Yes``/``No`` or a reference code it never saw as ``<unk>`` (exposure's ranking
    of a canary among its references would compare unknown tokens; a statement probe would ask
    with unknown words). The probe texts come first, so the vocabulary of a KB's own questions
    is trained on first; the forms add the words only they use. ``forms=False`` leaves the forms
    out: the questions-only vocabulary of a model built without forms (probes of other forms
    then read their new words as ``<unk>``)."""
    from ..kg.canaries import canary_info

    texts = probe_texts(kb, prompt)
    if not texts:
        return texts
    if forms:
        texts += form_texts(kb, prompt)
    info = canary_info(kb)
    if info and info["facts"] and info.get("references"):
        question = kb.probe(info["facts"][0]).question
        texts += [prompt.text(question, ref) for ref in info["references"]]
    return texts


def build_tokenizer(texts: list[str], *, model: str = "wordlevel"):
    """A word-level ``PreTrainedTokenizerFast`` over ``texts``.

    ``model="bpe"``: a byte-level BPE tokenizer instead, trained to the end on ``texts`` so that
    every word of them is still one token (its vocabulary also holds the 256 byte symbols and the
    pieces merged on the way). It is for families whose tokenizer class rebuilds a BPE model from
    the saved vocabulary and merges and would make a word-level one useless (see
    :data:`TOKENIZER_MODELS`).

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

    if model not in ("wordlevel", "bpe"):
        raise ValueError(f"tokenizer model must be 'wordlevel' or 'bpe', got {model!r}")
    if model == "bpe":
        tok = Tokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(special_tokens=list(SPECIAL_TOKENS), min_frequency=1, vocab_size=10**7,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    else:
        tok = Tokenizer(models.WordLevel(unk_token=UNK))
        trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS), min_frequency=1, vocab_size=10**7,
                                            show_progress=False)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
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
    """A small config of architecture ``arch`` (one of :data:`ARCHS`): ``hidden`` wide, MLP 4x
    wider, ``layers`` layers, ``heads`` heads, every dropout 0, the token ids of ``tokenizer``.

    What each keeps of its family: rotary positions everywhere but GPT-2 (learned absolute
    positions); partial rotary for Phi (half of each head) and GPT-NeoX (a quarter, parallel
    residual); grouped-query attention (half as many key/value heads, where ``heads`` is even)
    for Qwen2, Qwen3, Gemma 2 and Mistral; Qwen2's q/k/v biases and Qwen3's and OLMo 2's q/k
    norms (fixed by their classes); Gemma 2's attention and final-logit soft-capping and
    alternating sliding/global layers (window: ``max_positions``, so no probe is cut); Mistral's
    sliding window (idem); tied embeddings for :data:`TIED_ARCHS`. The Llama one (2 layers, 512
    wide, a 293-word vocabulary: 8.7M parameters) is the default tiny model of docs/models.md.
    """
    from transformers import (Gemma2Config, GPT2Config, GPTNeoXConfig, LlamaConfig, MistralConfig, Olmo2Config,
                              PhiConfig, Qwen2Config, Qwen3Config)

    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of the number of heads {heads}")
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}: expected one of {', '.join(ARCHS)}")
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id)
    tied = arch in TIED_ARCHS
    if arch == "gpt2":
        return GPT2Config(vocab_size=len(tokenizer), n_embd=hidden, n_layer=layers, n_head=heads,
                          n_positions=max_positions, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                          tie_word_embeddings=tied, **ids)
    common = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden,
                  num_hidden_layers=layers, num_attention_heads=heads, max_position_embeddings=max_positions,
                  tie_word_embeddings=tied, attention_dropout=0.0, **ids)
    head_dim = hidden // heads
    kv = heads // 2 if heads % 2 == 0 else heads  # grouped-query attention where the family has it
    if arch == "llama":
        return LlamaConfig(num_key_value_heads=heads, **common)
    if arch == "phi":
        return PhiConfig(num_key_value_heads=heads, resid_pdrop=0.0, embd_pdrop=0.0,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                         **common)
    if arch == "gpt_neox":
        return GPTNeoXConfig(hidden_dropout=0.0, classifier_dropout=0.0, use_parallel_residual=True,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.25},
                             **common)
    if arch == "qwen2":
        return Qwen2Config(num_key_value_heads=kv, **common)
    if arch == "qwen3":
        return Qwen3Config(num_key_value_heads=kv, head_dim=head_dim, **common)
    if arch == "olmo2":
        return Olmo2Config(num_key_value_heads=heads, **common)
    if arch == "mistral":
        return MistralConfig(num_key_value_heads=kv, head_dim=head_dim, sliding_window=max_positions, **common)
    return Gemma2Config(num_key_value_heads=kv, head_dim=head_dim, query_pre_attn_scalar=head_dim,
                        sliding_window=max_positions, attn_implementation=ATTN_IMPLEMENTATION["gemma2"], **common)


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
    forms: bool = True,
) -> Path:
    """Build an untrained tiny causal LM for ``kb`` in ``out_dir`` and return the folder.

    The folder is a normal Hugging Face checkpoint (config, safetensors weights, tokenizer) plus
    ``deepunlearn.json`` recording the answer format ``prompt`` (anything
    :meth:`PromptFormat.parse` takes); by default the reference format of the architecture's
    family (:meth:`PromptFormat.for_model` of ``arch``: ``gpt2`` for ``gpt2`` and ``gpt_neox``,
    ``phi`` for ``phi``, ``llama`` for the others). ``arch`` is one of :data:`ARCHS`
    (:func:`tiny_config` says what each keeps of its family). The tokenizer is trained on the KB in that format. Load it with
    :func:`~deepunlearn.probe.models.load_model` and finetune it with
    :func:`deepunlearn.unlearn.finetune.finetune`. The same KB and seed give the same weights.
    ``forms=False``: the vocabulary of the KB's primary questions only (:func:`tokenizer_texts`),
    i.e. the model every earlier version built for the same KB and seed.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from .models import META_FILE, META_FORMAT, quiet_hf
    from .fingerprint import kb_fingerprint

    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}: expected one of {', '.join(ARCHS)}")
    prompt = PromptFormat.for_model(arch) if prompt is None else PromptFormat.parse(prompt)
    texts = tokenizer_texts(kb, prompt, forms=forms)
    if not texts:
        raise ValueError(f"knowledge base {kb.name!r} has no facts to build a tokenizer from")
    tokenizer = build_tokenizer(texts, model=TOKENIZER_MODELS.get(arch, "wordlevel"))
    longest = max(len(ids) for ids in tokenizer(texts)["input_ids"])
    max_positions = max(128, 1 << (longest + 16).bit_length())  # room for the answer and 10 generated tokens
    config = tiny_config(tokenizer, hidden=hidden, layers=layers, heads=heads, max_positions=max_positions, arch=arch)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        kwargs = {"attn_implementation": ATTN_IMPLEMENTATION[arch]} if arch in ATTN_IMPLEMENTATION else {}
        model = AutoModelForCausalLM.from_config(config, **kwargs)
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
