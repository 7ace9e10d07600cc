"""The ``deepunlearn`` command (DESIGN.md section 7).

Every layer contributes its subcommands through a ``register(subparsers)`` function in its own
``cli`` module. Those modules import only argparse-level things at import time; heavy imports
(torch, transformers) happen inside the handlers, so ``data`` and ``rules`` start fast.

Contract: with ``--json`` a command prints exactly one JSON object on stdout; progress and
errors go to stderr. Exit codes: 0 success, 1 a user error (bad file, unknown fact, ...),
2 bad command-line usage (argparse), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Callable

#: Layer CLI modules, in the order their commands appear in ``--help``.
LAYER_CLIS = (
    "deepunlearn.kg.cli",
    "deepunlearn.rules.cli",
    "deepunlearn.probe.cli",
    "deepunlearn.unlearn.finetune_cli",
    "deepunlearn.unlearn.unlearn_cli",
    "deepunlearn.bench.cli",
)


class CLIError(Exception):
    """A user-facing error: printed as one line on stderr, exit code 1."""


def emit(args: argparse.Namespace, obj: dict[str, Any], text: str | Callable[[], str] | None = None) -> None:
    """Print a command's result: the JSON object with ``--json``, else readable text."""
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    else:
        if callable(text):
            text = text()
        sys.stdout.write((text if text is not None else json.dumps(obj, indent=2, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deepunlearn",
        description="Deep unlearning of facts in language models: KBs, rules, probing, unlearning, benchmarks.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"deepunlearn {__version__}")
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
    from .kg.kb import KBError

    errs: list[type[BaseException]] = [CLIError, KBError, FileNotFoundError, NotADirectoryError, IsADirectoryError]
    from .kg.safe_pickle import UnsafePickleError

    errs.append(UnsafePickleError)
    try:
        from .rules.errors import RulesError  # noqa: WPS433

        errs.append(RulesError)
    except ImportError:
        pass
    return tuple(errs)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
        return int(result or 0)
    except KeyboardInterrupt:
        print("deepunlearn: interrupted", file=sys.stderr)
        return 130
    except _user_errors() as e:
        print(f"deepunlearn {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
