"""transformers' tables of architectures (``CONFIG_MAPPING_NAMES``) and causal-LM classes
(``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``), read from its source text without importing it:
importing the modules that define them imports torch (seconds), which ``model info`` and the
checks before a load do not need. :func:`auto_table` parses the file with :mod:`ast` (no code
runs) and returns ``None`` where the file does not hold the table in the expected shape; callers
then import transformers as before.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path


@functools.lru_cache(maxsize=None)
def auto_table(name: str) -> dict[str, str] | None:
    """The ``OrderedDict([(key, value), ...])`` literal assigned to ``name`` in transformers'
    ``models/auto`` modules (``auto_mappings.py`` in recent versions, ``configuration_auto.py``
    and ``modeling_auto.py`` before), read from their source; ``None`` when none holds it. Names
    a module adds later (``.update(...)``) are missing: callers ask transformers about a name
    the table lacks."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    auto = Path(list(spec.submodule_search_locations)[0]) / "models" / "auto"
    for module in ("auto_mappings", "configuration_auto", "modeling_auto"):
        try:
            tree = ast.parse((auto / f"{module}.py").read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                         for t in node.targets)
                    and isinstance(node.value, ast.Call) and len(node.value.args) == 1):
                continue
            try:
                pairs = ast.literal_eval(node.value.args[0])
            except ValueError:
                continue
            if isinstance(pairs, list) and all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                return {str(k): v for k, v in pairs if isinstance(v, str)}
    return None


def known_model_types() -> set[str] | None:
    """Every ``model_type`` transformers knows, or ``None`` (then ask transformers itself)."""
    table = auto_table("CONFIG_MAPPING_NAMES")
    return set(table) if table else None
