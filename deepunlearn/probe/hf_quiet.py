"""Quiet Hugging Face libraries for a block: their progress bars and, optionally, warnings."""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def quiet_hf(errors_only: bool = False) -> Iterator[None]:
    """Silence transformers' and huggingface_hub's progress bars ("Loading weights", "Writing
    model shards", downloads) for the block, and with ``errors_only`` transformers' warnings
    too (a load report table of missing weights: :func:`load_model` raises its own one-line
    error for those); then restore every setting as it was. Our own tqdm bars (probing,
    finetuning, unlearning) are not theirs and stay."""
    import huggingface_hub.utils as hub_utils
    from transformers.utils import logging as tf_logging

    tf_was = tf_logging.is_progress_bar_enabled()
    hub_was_off = hub_utils.are_progress_bars_disabled()
    verbosity = tf_logging.get_verbosity()
    tf_logging.disable_progress_bar()  # also disables huggingface_hub's
    if errors_only:
        tf_logging.set_verbosity_error()
    try:
        yield
    finally:
        tf_logging.set_verbosity(verbosity)
        if tf_was:
            tf_logging.enable_progress_bar()
        if hub_was_off:
            hub_utils.disable_progress_bars()
        else:
            hub_utils.enable_progress_bars()
