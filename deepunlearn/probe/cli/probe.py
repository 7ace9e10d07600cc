"""``deepunlearn probe``: which facts of a KB does a model know?

``deepunlearn probe --model DIR --kb KB.json [-o KNOWN.json] [--protocol default|reference]
[--mode exact|generate|yesno|rank|any|compose] [--forms SEL] [--answer-format NAME|TEMPLATE] --json``
prints ``{"known": int, "total": int, "mode": ..., "prompt_format": {...}, ...}``; KNOWN.json
lists the known fact ids and facts. ``--forms`` picks the probe forms (
:func:`deepunlearn.kg.forms.select_forms`: ``default``, ``all``, a split, form names, comma
separated); over forms (any selection but ``default``, or the modes yesno, rank, any) the JSON
adds ``forms``, ``fallback`` and ``per_form`` (``{form: {mode: [known, probed]}}``) and the text
output a table of them (:mod:`deepunlearn.probe.forms_probe`). ``--mode compose --compose FILE``
asks the derived facts through the multi-hop questions of ``deepunlearn rules compose``
(:mod:`deepunlearn.probe.compose_probe`); the JSON adds ``compose_questions``,
``compose_answered``, ``compose_by_rule`` and KNOWN.json every question with its verdict.

The protocol picks the probe mode (``reference``: generate, the reference's rule; ``default``:
exact) and the answer format (``reference``: always the model family's, as the reference
evaluates every checkpoint; ``default``: the checkpoint's recorded one, else the family's).
``--mode`` and ``--answer-format`` override it. ``--scores`` and ``--mia --holdout HOLD.json``
(likelihood scores, membership inference; :mod:`deepunlearn.probe.cli.scores`) replace the
known/total count. :func:`add_format_args` and
:func:`resolve_format` give the model commands (``probe``, ``finetune``, ``unlearn``) the same
options: ``--answer-format``, ``--trust-remote-code`` (off: a checkpoint's own Python never
runs) and, where the parser has ``--device``, its check before anything loads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

ANSWER_FORMAT_HELP = (
    "answer format for every model, overriding the checkpoint's and the protocol's: llama, phi, gpt2 (the "
    "reference's), bare (no answer tag), or a template 'START{question}END[|TAG]' ('|' starts the answer tag; "
    "\\n is a newline), e.g. 'Question: {question}\\n|Answer:'")


TRUST_REMOTE_CODE_HELP = (
    "let a checkpoint whose config.json names its own Python code (auto_map) run that code; "
    "off by default: such a model is refused and nothing from its folder runs")


def add_format_args(parser: argparse.ArgumentParser, *, protocol: bool = True) -> None:
    """Add ``--protocol default|reference|pretrained`` (unless ``protocol=False``, for a parser that has
    its own), ``--answer-format NAME|TEMPLATE`` and ``--trust-remote-code`` to a model
    command's parser; :func:`resolve_format` turns them into :func:`load_model` arguments."""
    from ..protocol import PROTOCOL_NAMES

    if protocol:
        parser.add_argument("--protocol", choices=PROTOCOL_NAMES, default="default",
                            help="protocol preset: reference reproduces the paper's code, default departs "
                                 "where documented, pretrained probes what a model learned in pretraining "
                                 "(its chat template, answers in sentences; default: default)")
    parser.add_argument("--answer-format", default=None, metavar="NAME|TEMPLATE", help=ANSWER_FORMAT_HELP)
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_REMOTE_CODE_HELP)


def resolve_protocol(args: argparse.Namespace):
    """The :class:`~deepunlearn.probe.protocol.Protocol` named by ``args.protocol`` (a name, a
    Protocol, or missing: ``default``); a bad name is a :class:`~deepunlearn.cli.CLIError`."""
    from ...cli import CLIError
    from ..protocol import get_protocol

    try:
        return get_protocol(getattr(args, "protocol", None))
    except ValueError as e:
        raise CLIError(f"--protocol: {e}") from None


def resolve_format(args: argparse.Namespace, protocol=None) -> dict[str, Any]:
    """Keyword arguments of :func:`~deepunlearn.probe.models.load_model` (and
    :func:`load_for_cli`) from ``--answer-format``, ``--trust-remote-code`` and the protocol:
    ``{"prompt": PromptFormat | None, "answer_format": "recorded" | "family" | "chat",
    "trust_remote_code": bool}``. ``protocol`` defaults to :func:`resolve_protocol` of ``args``;
    a bad ``--answer-format`` is a CLIError naming it. When ``args`` has ``device``, it is
    checked here, before anything is loaded (a ModelLoadError naming ``--device``)."""
    from ...cli import CLIError
    from ..models import check_device
    from ..prompts import PromptFormat

    if getattr(args, "device", None) is not None:
        check_device(args.device, flag="--device")
    protocol = protocol if protocol is not None else resolve_protocol(args)
    spec = getattr(args, "answer_format", None)
    prompt = None
    if spec is not None:
        try:
            prompt = PromptFormat.parse(spec)
        except ValueError as e:
            raise CLIError(f"--answer-format: {e}") from None
    return {"prompt": prompt, "answer_format": protocol.answer_format,
            "trust_remote_code": bool(getattr(args, "trust_remote_code", False))}


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads, positive_int

    p = sub.add_parser("probe", help="probe a causal LM on a KB's questions: which facts does it know?")
    p.add_argument("--model", required=True,
                   help="checkpoint folder, hub name, or 'tiny' (an untrained tiny model for the KB)")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("-o", "--output", default=None, help="write the known fact ids and facts to this JSON file")
    add_force(p)
    add_format_args(p)
    from ..modes import mode_names, modes_help

    p.add_argument("--mode", choices=mode_names() + ("any_raw",), default=None,
                   help=f"what counts as known: {modes_help()}. any is adversarial: calibrated with --calibration, "
                        "else the raw rule, as any_raw, which counts chance guesses as known; compose asks the "
                        "questions of --compose FILE. Default: the protocol's (default: exact, reference: generate)")
    p.add_argument("--compose", default=None, metavar="COMPOSE.json",
                   help="the compose questions --mode compose asks ('deepunlearn rules compose --kb KB -o FILE')")
    p.add_argument("--forms", default=None, metavar="SEL",
                   help="probe forms, comma separated: default (the primary question, today's probe), all, a split "
                        "(train, test, unlearn) or form names (primary, qa1, st1, yes1, ..., the KB's own); a fact "
                        f"none of whose forms is picked gets its primary form (default: default; {_other_selections()})")
    p.add_argument("--batch-size", type=positive_int, default=64, metavar="N",
                   help="questions per forward pass (default: 64; lower it if memory runs out)")
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu, mps (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    p.add_argument("--cache-dir", default=None,
                   help="keep the result in this folder, keyed on the model's weights and the KB (default: no cache)")
    from .scores import add_args as add_score_args

    add_score_args(p)
    from .calibrate import add_args as add_calibration_args

    add_calibration_args(p)
    add_threads(p)
    add_json(p)
    p.set_defaults(handler=_probe)


def resolve_model(name: str, kb, kb_path: str | Path | None = None, prompt=None) -> str:
    """A model argument -> what :func:`load_model` takes; ``tiny`` builds (once) an untrained
    tiny model for the KB under the cache folder, its tokenizer trained in ``prompt``'s answer
    format (default: the reference's Llama format)."""
    if name != "tiny":
        return name
    from ..tiny import TOKENIZER_VERSION
    from ..cache import default_cache_dir
    from ..fingerprint import kb_fingerprint
    from ..models import META_FILE
    from ..prompts import PromptFormat
    from ..tiny import TINY_PROMPT, build_tiny_model

    prompt = TINY_PROMPT if prompt is None else PromptFormat.parse(prompt)
    key = kb_fingerprint(kb) + TOKENIZER_VERSION
    if prompt != TINY_PROMPT:
        import hashlib

        key += "-" + hashlib.sha256(prompt.model_dump_json().encode()).hexdigest()[:12]
    folder = default_cache_dir().parent / "tiny" / key
    if not (folder / META_FILE).is_file():
        build_tiny_model(kb, folder, prompt=prompt)
    return str(folder)


def load_for_cli(name: str, kb, device=None, dtype=None, *, prompt=None, answer_format: str = "recorded",
                 trust_remote_code: bool = False):
    """:func:`load_model` with its errors turned into CLI errors; ``prompt``, ``answer_format``
    and ``trust_remote_code`` as :func:`resolve_format` returns them (``**resolve_format(args)``).
    A ModelLoadError passes through as it is (a UserError keeping its file and field)."""
    from ...cli import CLIError
    from ..models import load_model

    try:
        return load_model(resolve_model(name, kb, prompt=prompt), device=device, dtype=dtype, prompt=prompt,
                          answer_format=answer_format, trust_remote_code=trust_remote_code)
    except ValueError as e:  # a bad --dtype
        raise CLIError(str(e)) from None


def _check_places(args: argparse.Namespace) -> None:
    """``--cache-dir`` and ``--output`` checked before anything loads: an output that is not ours is refused."""
    if args.cache_dir:
        from ..cache import check_cache_dir

        check_cache_dir(args.cache_dir, where="--cache-dir")
    if args.output is not None:  # before anything loads: an output that is not ours is refused at once
        from ...output_kinds import KNOWN_DOC
        from ...outputs import check_output

        check_output(args.output, force=args.force, ours=KNOWN_DOC, what="an output of 'deepunlearn probe'",
                     inputs={"--kb": args.kb, "--model": args.model, "--calibration": getattr(args, "calibration", None),
                             "--holdout": getattr(args, "holdout", None), "--calibrate": getattr(args, "calibrate", None),
                             "--exclude": getattr(args, "exclude", None), "--retain": getattr(args, "retain", None)})


def _run_scores(args: argparse.Namespace, kb, load_bundle) -> int:
    """``--scores``, ``--mia``: their flags checked, then :func:`.scores.run`."""
    from ...cli import CLIError
    from .calibrate import wanted
    from .scores import run

    if wanted(args):
        raise CLIError("--calibrate, --exclude and --calibration are for the known/total probe, not --scores "
                       "or --mia", field="--calibration")

    if args.holdout and not args.mia:
        raise CLIError("--holdout is for --mia", field="--holdout")
    if args.facts and not (args.scores or args.mia):
        raise CLIError("--facts is for --scores or --mia", field="--facts")
    return run(args, kb, load_bundle)


def _compose_questions(args: argparse.Namespace, kb, spec) -> list | None:
    """The compose questions of ``--compose`` for mode ``compose`` (None for any other mode)."""
    from ...cli import CLIError

    questions = None
    if spec.derived != (args.compose is not None):
        raise CLIError("--compose FILE goes with --mode compose, and --mode compose needs it (write it with "
                       "'deepunlearn rules compose --kb KB -o FILE')", field="--compose")
    if spec.derived:
        from ...kg.compose import read_compose

        if args.forms is not None or args.cache_dir:
            raise CLIError("--mode compose asks its own questions: no --forms or --cache-dir", field="--mode")
        questions = read_compose(kb, args.compose)
    return questions


def _timed_probe(args: argparse.Namespace, bundle, kb, mode: str, questions):
    """The probe (through the cache with ``--cache-dir``) and the seconds it took."""
    from ...cli import CLIError
    from ..cache import cached_probe
    from ..probing import probe

    t0 = time.perf_counter()
    try:
        if args.cache_dir:
            res = cached_probe(bundle, kb, mode=mode, forms=args.forms, cache_dir=args.cache_dir,
                               batch_size=args.batch_size)
        else:
            res = probe(bundle, kb, mode=mode, forms=args.forms, batch_size=args.batch_size, compose=questions)
    except ValueError as e:  # e.g. an answer format under which an answer adds no tokens
        raise CLIError(str(e)) from None
    return res, time.perf_counter() - t0


def _known_report(args: argparse.Namespace, kb, res, bundle, protocol, label: str,
                  seconds: float) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """The probe's JSON report and its known/total per relation group; written to ``--output``."""
    from ..pretrained import known_by_relation

    # per relation group (family / biography in the family domain): [known, total]
    by_group = {g: [int(res.known[m[res.fact_ids]].sum()), int(m[res.fact_ids].sum())]
                for g, m in kb.group_masks.items()}
    out = {
        "known": res.n_known,
        "total": res.total,
        "known_share": round(res.share, 6),
        **{f"{g}_{k}": by_group[g][i] for g in ("family", "biography") if g in by_group
           for i, k in enumerate(("known", "total"))},
        "known_by_group": by_group,
        "known_by_relation": known_by_relation(kb, res),
        "mode": label,
        "protocol": protocol.name,
        "prompt_format": bundle.prompt.describe(),
        "format_source": bundle.prompt_source,
        "model": bundle.name,
        "kb": str(args.kb),
        "seconds": round(seconds, 3),
    }
    if res.per_form is not None:
        out.update(forms=res.forms, fallback=int(res.fallback), per_form=res.per_form)
    if res.compose is not None:
        from ..compose_probe import by_rule

        out.update(compose_questions=len(res.compose), compose_answered=sum(r["known"] for r in res.compose),
                   compose_by_rule=by_rule(res.compose))
    if args.output:
        ids = sorted(res.known_ids())
        doc = {**out, "fact_ids": ids, "facts": [list(kb.facts[i]) for i in ids],
               **({} if res.compose is None else {"compose": res.compose})}
        from ...errors import atomic_write_text

        path = atomic_write_text(args.output, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        out["output"] = str(path)
    return out, by_group


def _probe(args: argparse.Namespace) -> int:
    import sys

    from ...cli import CLIError, apply_threads, emit
    from ...kg.io import load_kb
    from ..fingerprint import check_trained_on

    _check_places(args)
    protocol = resolve_protocol(args)
    fmt = resolve_format(args, protocol)  # checks --device before anything loads
    mode = args.mode or protocol.probe_mode
    from ..answer_rule import rule_of

    def load(name, *a, **kw):  # every model of this command answers by the protocol's rule
        bundle = load_for_cli(name, *a, **kw)
        bundle.answer_rule = rule_of(protocol)
        return bundle

    apply_threads(args)
    from . import calibrate

    from ..modes import probe_mode

    spec = probe_mode("any" if mode == "any_raw" else mode)
    if spec.derived and (args.scores or args.mia or args.holdout or args.facts or calibrate.wanted(args)):
        raise CLIError("--mode compose is the known/total probe of derived facts: no --scores, --mia, --holdout, "
                       "--facts or calibration", field="--mode")
    kb = load_kb(args.kb)
    if args.forms is not None:
        from ...kg.forms import parse_selection

        parse_selection(kb, args.forms, flag="--forms")  # a bad token: one line naming --forms, before loading
        if args.scores or args.mia:
            raise CLIError("--forms is for the known/total probe, not --scores or --mia", field="--forms")
    if args.scores or args.mia or args.holdout or args.facts:
        return _run_scores(args, kb, lambda: load(args.model, kb, args.device, args.dtype, **fmt))
    if calibrate.wanted(args):
        return calibrate.run(args, kb, lambda name: load(name, kb, args.device, args.dtype, **fmt))
    if spec.aggregate:
        print(f"deepunlearn probe: note: --mode {mode} is uncalibrated: chance guesses count as known "
              "(calibrate with --calibrate HOLD.json, apply with --calibration FILE)", file=sys.stderr)
    label, mode = mode, spec.name
    questions = _compose_questions(args, kb, spec)
    bundle = load(args.model, kb, args.device, args.dtype, **fmt)
    warning = check_trained_on(bundle, kb, kb_file=args.kb)
    if warning:
        print(f"deepunlearn probe: warning: {warning}", file=sys.stderr)
    res, seconds = _timed_probe(args, bundle, kb, mode, questions)
    out, by_group = _known_report(args, kb, res, bundle, protocol, label, seconds)
    emit(args, out, lambda: (
        f"{bundle.name} knows {res.n_known} of {res.total} facts ({res.share:.1%}; "
        + ", ".join(f"{g} {k}/{n}" for g, (k, n) in by_group.items()) + ") "
        f"[{label}, format {bundle.prompt.spec!r} ({bundle.prompt_source}), {seconds:.1f}s]"
        + ("" if res.per_form is None else "\n" + form_table(res))
    ))
    return 0


def _other_selections() -> str:
    """``all for yesno/any``: the modes whose default form selection is not ``default``."""
    from ..modes import probe_modes

    by: dict[str, list[str]] = {}
    for s in probe_modes():
        if s.forms != "default":
            by.setdefault(s.forms, []).append(s.name)
    return "; ".join(f"{sel} for {'/'.join(names)}" for sel, names in by.items())


def form_table(res) -> str:
    """The per-form verdicts of a probe over forms as a small text table (form, mode,
    known/probed), plus the selection and its fallback count."""
    rows = [(name, m, f"{k}/{n}") for name, modes in res.per_form.items() for m, (k, n) in modes.items()]
    width = max([len("form")] + [len(r[0]) for r in rows])
    lines = [f"forms {res.forms!r}; {res.fallback} fact(s) fell back to their primary form",
             f"{'form':<{width}}  {'mode':<8}  known/probed"]
    lines += [f"{name:<{width}}  {m:<8}  {kn}" for name, m, kn in rows]
    return "\n".join(lines)
