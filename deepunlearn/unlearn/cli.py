"""``deepunlearn finetune`` and ``deepunlearn unlearn`` (two modules, one per command)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from .finetune_cli import register as register_finetune
    from .unlearn_cli import register as register_unlearn

    register_finetune(sub)
    register_unlearn(sub)
