"""The ``deepunlearn`` command (docs/safety.md; its contract: docs/design.md section 3).

Every layer contributes its subcommands through a ``register(subparsers)`` function in its own
``cli`` module. Those modules import only argparse-level things at import time; heavy imports
(torch, transformers) happen inside the handlers, so ``data`` and ``rules`` start fast.

Contract: with ``--json`` a command prints exactly one JSON object on stdout; progress and
errors go to stderr. An error is one line on stderr naming the file, the flag or field and the
problem; with ``--json`` stdout then carries ``{"error": ..., "file": ..., "field": ...}``.
Exit codes: 0 success, 1 a user error (bad file, unknown fact, ...), 2 bad command-line usage
(argparse), 70 an internal error (a bug; ``--debug`` shows its traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
import sys
import traceback
from typing import Any, Callable

from .errors import UserError, describe, dumps

#: Layer CLI modules, in the order their commands appear in ``--help``.
LAYER_CLIS = (
    "deepunlearn.kg.cli",
    "deepunlearn.kg.rdf_cli",  # data import-rdf, data export --format ttl|nt join the data group
    "deepunlearn.rules.cli",  # data generate, import-triples, never-true join the kg layer's data group; rules
    "deepunlearn.probe.cli",  # probe, model; data export --format lm-eval, data import-lm-eval-samples
    "deepunlearn.unlearn.cli",  # finetune, unlearn, evaluate, plan, attack
    "deepunlearn.bench.cli",
    "deepunlearn.bench.verdict_store",
)


class CLIError(UserError):
    """A user-facing error: printed as one line on stderr, exit code 1."""


def emit(args: argparse.Namespace, obj: dict[str, Any], text: str | Callable[[], str] | None = None) -> None:
    """Print a command's result: the JSON object with ``--json`` (NaN/inf become ``null``, so
    the output is always valid JSON), else readable text."""
    if getattr(args, "json", False):
        sys.stdout.write(dumps(obj, ensure_ascii=False) + "\n")
    else:
        if callable(text):
            text = text()
        sys.stdout.write((text if text is not None else dumps(obj, indent=2, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def add_threads(p: argparse.ArgumentParser, default: int | None = 1) -> None:
    """``--threads N``: torch intra-op threads (default one: on a 2-core box one thread was 3-9x
    faster than two for the models this tool trains)."""
    p.add_argument("--threads", type=threads_int, default=default, metavar="N",
                   help=f"torch CPU threads (default: {default if default else 'torch' + chr(39) + 's choice'}; "
                        "one is fastest for small models on small machines)")


def apply_threads(args: argparse.Namespace) -> None:
    """Set torch's intra-op thread count from ``--threads`` (if given)."""
    n = getattr(args, "threads", None)
    if n:
        import torch

        torch.set_num_threads(n)


def int_at_least(lo: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``lo`` (a bad value is a usage error naming the flag)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = None
        if v is None or v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        return v

    parse.__name__ = f"integer >= {lo}"
    return parse


def number_in(lo: float, hi: float = math.inf, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in the interval from ``lo`` to ``hi`` (``*_open``: that end
    excluded). ``nan`` and ``inf`` are always refused.

    >>> number_in(0, 1, lo_open=True)("1"), int_at_least(2)("3")
    (1.0, 3)
    """
    what = ("a finite number " + (f"> {lo:g}" if lo_open else f">= {lo:g}") if hi == math.inf else
            f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}")

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return v

    parse.__name__ = what
    return parse


#: The common ones.
positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def seed_int(text: str) -> int:
    """An argparse type: a random seed, an integer from 0 to ``limits.MAX_SEED`` (2**63 - 1)."""
    from .limits import MAX_SEED

    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer seed from 0 to {MAX_SEED}, got {text!r}")
    return v


def int_bounded(bound: int, unit: str) -> Callable[[str], int]:
    """An argparse type: an integer from 1 to ``bound`` (a :mod:`.limits` bound, lifted by
    ``DEEPUNLEARN_ALLOW_LARGE=1``)."""
    from .limits import bound_text, too_large

    def parse(text: str) -> int:
        v = positive_int(text)
        if too_large(v, bound):
            raise argparse.ArgumentTypeError(bound_text(v, bound, unit))
        return v

    parse.__name__ = f"integer from 1 to {bound}"
    return parse


def threads_int(text: str) -> int:
    """An argparse type: a thread count from 1 to ``limits.max_threads()`` (4 x the CPUs, at least 64)."""
    from .limits import max_threads

    return int_bounded(max_threads(), "threads")(text)


def mdus_seeds_int(text: str) -> int:
    """An argparse type: a count of MDUS seeds from 1 to ``limits.MAX_MDUS_SEEDS``."""
    from .limits import MAX_MDUS_SEEDS

    return int_bounded(MAX_MDUS_SEEDS, "seeds")(text)


seed_int.__name__ = "seed"
threads_int.__name__ = "thread count"
mdus_seeds_int.__name__ = "seed count"
positive_float = number_in(0, lo_open=True)
fraction = number_in(0, 1)


def add_force(p: argparse.ArgumentParser, what: str = "the output") -> None:
    """``--force``: replace an existing output this command did not write (see
    :func:`deepunlearn.outputs.check_output`)."""
    p.add_argument("--force", action="store_true",
                   help=f"replace {what} even when it exists and is not one this command writes (another file or "
                        "a non-empty folder of other files, or a symbolic link: the link itself is replaced); a "
                        "device, FIFO or socket is never replaced")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


class _Parser(argparse.ArgumentParser):
    """argparse, plus the ``--json`` error object for usage errors (exit code 2)."""

    json_errors = False

    def error(self, message: str):  # type: ignore[override]
        if _Parser.json_errors:
            # the flag the message names ("argument --seed: ...", "--grid 0: ...") is the field
            m = re.match(r"(?:argument )?(-{1,2}[A-Za-z][\w-]*)", message)
            field = m.group(1) if m else None
            sys.stdout.write(dumps({"error": f"{self.prog}: {message}", "file": None, "field": field}) + "\n")
            sys.stdout.flush()
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="deepunlearn",
        description="Deep unlearning of facts in language models: KBs, rules, probing, unlearning, benchmarks.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"deepunlearn {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="let tracebacks through (may be given anywhere on the command line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in LAYER_CLIS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # layer without commands yet
                continue
            raise
        mod.register(sub)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that are the user's, not ours: every layer's errors derive from UserError;
    the OS's file errors name their file."""
    return (UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def _environment_fault(e: BaseException) -> bool:
    """A disk full, read-only or forbidden folder met outside the atomic writers: the
    environment's fault (exit code 1, the file named), not a bug."""
    from .outputs import is_write_fault

    return is_write_fault(e)


def _report(args: argparse.Namespace | None, command: str, e: BaseException, *, internal: bool) -> None:
    if internal:
        line = (f"deepunlearn {command}: internal error: {type(e).__name__}: {e} "
                "(a bug: rerun with --debug for the traceback and report it)")
    else:
        line = f"deepunlearn {command}: error: {e}"
    print(" ".join(line.split("\n")), file=sys.stderr)
    if args is not None and getattr(args, "json", False):
        obj = describe(e)
        if internal:
            obj["error"] = f"internal error: {type(e).__name__}: {e}"
        sys.stdout.write(dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A library's warning as one line on stderr (``warning: Category: text``; only the error line
    opens with ``deepunlearn``): the default shows the source line too, and a multi-line message
    as many lines."""
    text = " ".join(str(message).split())
    try:
        print(f"warning: {category.__name__}: {text}", file=file or sys.stderr)
    except OSError:  # stderr closed: a warning is not worth a failure
        pass


def main(argv: list[str] | None = None) -> int:
    """Run one command. ``--debug`` (anywhere on the line) lets tracebacks through."""
    import warnings

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    _Parser.json_errors = "--json" in argv
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _one_line_warning
    try:
        return _main(argv, debug)
    finally:
        warnings.showwarning = shown


def _main(argv: list[str], debug: bool) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
        return int(result or 0)
    except KeyboardInterrupt:
        print("deepunlearn: interrupted", file=sys.stderr)
        return 130
    except _user_errors() as e:
        if debug:
            traceback.print_exc()
        _report(args, args.command, e, internal=False)
        return 1
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if isinstance(e, RuntimeError) and str(e).startswith("Symlink loop from") and not debug:
            # pathlib's resolve() on a loop of links (an OSError from Python 3.13 on): the user's file system
            _report(args, args.command, UserError(f"{str(e).split(' from ', 1)[1]}: a loop of symbolic links"),
                    internal=False)
            return 1
        if _environment_fault(e) and not debug:
            from .outputs import OutputError, why

            reason = why(e) if isinstance(e, OSError) else " ".join(str(e).split())
            _report(args, args.command, OutputError(f"cannot write: {reason}", file=getattr(e, "filename", None)),
                    internal=False)
            return 1
        if debug:
            raise
        _report(args, args.command, e, internal=True)
        return 70


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
