"""The rules layer's commands: ``data generate`` (:mod:`.generate`), ``data import-triples`` and
``data export --format tsv`` (:mod:`.triples`), ``data never-true``, which join the kg layer's
``data`` group, and the ``rules`` group (:mod:`.rules`, with ``rules compose`` in
:mod:`.compose`). None of them imports torch."""

from __future__ import annotations

import argparse

from . import check_domain, generate, hf, never_true, rules, triples

#: In the order their commands appear in ``--help``.
MODULES = (generate, check_domain, triples, hf, never_true, rules)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the layer's commands to ``deepunlearn``'s subparsers."""
    for mod in MODULES:
        mod.register(sub)
