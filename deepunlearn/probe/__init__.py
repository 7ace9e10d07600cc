"""probe layer: load causal LMs, build the tiny local model, and probe which facts a model knows.

Public API (torch is imported only when a function runs)::

    load_model(name_or_dir, *, device=None, dtype=None, prompt=None, answer_format="recorded",
               trust_remote_code=False) -> ModelBundle
    check_device(device, *, flag=None) -> str
    check_trained_on(bundle, kb, kb_file=None) -> str | None
    quiet_hf() -> context manager (transformers/huggingface_hub progress bars off, restored after)
    build_tiny_model(kb, out_dir, *, seed=0, hidden=512, layers=2, heads=8, arch="llama", prompt=None) -> Path
    PromptFormat.named(name) / .for_model(model_type, name) / .parse(spec) -> PromptFormat
    chat_format(tokenizer, *, source="the tokenizer", flag=None) -> PromptFormat  ("chat", from the chat template)
    find_gguf(path) -> Path | None; gguf_summary(file) -> dict  (GGUF header only)
    import_gguf(file, out_dir, *, dtype="fp32", force=False, bundle=None) -> dict
    model_info(name, *, trust_remote_code=False) -> dict  (no weights loaded)
    probe(bundle, kb, fact_ids=None, *, mode="exact", forms=None, any_modes=None, batch_size=None, model_fn=None,
          progress=True, compose=None) -> ProbeResult  (modes: MODES = exact, generate, yesno, rank, any, compose;
          compose takes the questions of deepunlearn.rules.compose.compose_set)
    ProbeModeSpec(name, help, forms, kinds, score=..., ...); register_probe_mode(spec) -> spec;
    probe_modes() -> (spec, ...); probe_mode(name) -> spec  (deepunlearn.probe.modes: one spec per mode)
    cached_probe(bundle, kb, *, mode="exact", cache_dir=None, fact_ids=None, forms=None, any_modes=None, **kw)
    encode_forms(tokenizer, prompt, forms, *, with_rest=False) -> [(prompt ids, continuation ids)]
    form_prompt_ids(tokenizer, prompt, forms) -> [prompt ids]   (generate mode over forms)
    score_facts(bundle, kb, fact_ids=None, *, model_fn=None, k=20.0, n_perturbed=5, seed=0, generate=True,
                candidates=True, batch_size=None, progress=True) -> FactScores  
    roc(member_values, nonmember_values) -> dict; mia_report(member, nonmember) -> dict
    measures: forget_quality, model_utility, privleak, genex, bootstrap_ci (deepunlearn.probe.measures)
"""

from .cache import cached_probe, default_cache_dir
from .chat import chat_format
from .fingerprint import check_trained_on, kb_fingerprint, model_fingerprint, weights_fingerprint
from .gguf import find_gguf, gguf_summary
from .model_import import import_gguf, model_info
from .models import ModelBundle, ModelLoadError, check_device, load_model, quiet_hf, read_meta, save_bundle
from .modes import ProbeModeSpec, probe_mode, probe_modes, register_probe_mode
from .form_encoding import encode_forms, form_prompt_ids
from .probing import MODES, ProbeResult, logits_fn, probe
from .protocol import PROTOCOL_NAMES, Protocol, get_protocol
from .prompts import FORMAT_NAMES, PromptFormat, encode_pair, encode_pairs, left_pad, question_ids
from .tiny import build_tiny_model
from .mia import mia_report, roc
from .scores import FactScores, ScoresError, check_k, score_facts

__all__ = [
    "FORMAT_NAMES", "MODES", "encode_forms", "form_prompt_ids", "ModelBundle", "ModelLoadError", "PROTOCOL_NAMES", "ProbeResult", "PromptFormat", "Protocol", "get_protocol",
    "build_tiny_model", "cached_probe", "chat_format", "find_gguf", "gguf_summary", "import_gguf", "model_info", "check_device", "check_trained_on", "quiet_hf", "default_cache_dir", "encode_pair", "encode_pairs",
    "kb_fingerprint", "left_pad", "load_model", "logits_fn", "model_fingerprint", "probe",
    "question_ids", "read_meta", "save_bundle", "weights_fingerprint",
    "FactScores", "ScoresError", "check_k", "mia_report", "roc", "score_facts",
    "ProbeModeSpec", "probe_mode", "probe_modes", "register_probe_mode",
]
