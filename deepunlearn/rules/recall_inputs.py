"""What ``rules recall`` reads besides the KB: the forgotten facts F, or the facts K_B the model
still knows after unlearning (then F = K \\ K_B), and whether the target is deeply forgotten.

A probe output lists what a model *knows*; read as ``--forgotten`` it would count everything the
model knows as lost (recall near 1, accuracy near 0, without a word). Such a file is refused there
and read as what it is with ``--known-after``. Probe outputs are recognised by their keys
(``probe -o``: ``known``/``total`` counts with ``prompt_format``; a stored probe result: ``known``
as a list of true/false; a probe cache entry: ``format`` ``deepunlearn-probe-cache``).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import load_json
from ..kg.refs import FactRefError, fact_list


def probe_output_kind(doc: Any) -> str | None:
    """What kind of probe output ``doc`` is (a phrase for messages), or ``None``."""
    if not isinstance(doc, dict) or isinstance(doc.get("forgotten"), list):
        return None  # `unlearn -o` records the forgotten facts beside K: a forgotten-facts file
    if doc.get("format") == "deepunlearn-probe-cache":
        return "a probe cache entry (the facts a model knows)"
    if isinstance(doc.get("fact_ids"), list) and "prompt_format" in doc and isinstance(doc.get("known"), int):
        return "the output of 'deepunlearn probe -o' (the facts a model knows)"
    if isinstance(doc.get("known"), list) and isinstance(doc.get("fact_ids"), list) and "logprob" in doc:
        return "a probe result (the facts a model knows)"
    return None


def refuse_probe_output(doc: Any, path: str | os.PathLike) -> None:
    """A probe output given as ``--forgotten`` is a FactRefError naming the file and what it is."""
    kind = probe_output_kind(doc)
    if kind is not None:
        raise FactRefError(f"--forgotten {path}: is {kind}, not the facts it forgot; give it as --known-after "
                           f"{path} (forgotten = K minus what it still knows)", file=path, field="--forgotten")


def read_known_after(kb, path: str | os.PathLike, flag: str = "--known-after") -> list[int]:
    """K_B from ``flag`` (``--known-after``): a probe output (any of the kinds above), the output
    of ``unlearn -o`` (K before unlearning minus the facts forgotten at its last point) or a list
    of facts."""
    doc = load_json(path, flag=flag, error=FactRefError)
    if isinstance(doc, dict) and doc.get("format") == "deepunlearn-probe-cache" and isinstance(doc.get("result"), dict):
        doc = doc["result"]
    if isinstance(doc, dict) and isinstance(doc.get("known"), list) and isinstance(doc.get("fact_ids"), list):
        flags, ids = doc["known"], doc["fact_ids"]
        if len(flags) != len(ids) or not all(isinstance(k, bool) for k in flags):
            raise FactRefError(f"{flag} {path}: fields 'known' and 'fact_ids' must be lists of the same "
                               "length, 'known' of true/false", file=path, field="known")
        doc = [i for i, k in zip(ids, flags) if k]
    elif isinstance(doc, dict) and isinstance(doc.get("forgotten"), list) and isinstance(doc.get("fact_ids"), list):
        # `unlearn -o`: K before unlearning (fact_ids) and the facts forgotten at its last point
        before = fact_list(kb, doc["fact_ids"], path=path, flag=flag, key="fact_ids")
        gone = set(fact_list(kb, doc["forgotten"], path=path, flag=flag, key="forgotten"))
        return [i for i in before if i not in gone]
    return fact_list(kb, doc, path=path, flag=flag, key="fact_ids")


def deep_after(kb, rules, known_after, target: int, max_groundings: int | None) -> dict:
    """``deep`` (the target is not in Ω(K_B, R)), ``superficial`` (the model lost the target
    but the rules still derive it) and the surviving derivation's text and K_B facts."""
    from .graph import derivation_graph
    from .survive import derivation_text, is_deep, leaves, surviving_derivation

    kb_set = set(int(i) for i in known_after)
    g = derivation_graph(kb, rules, known=sorted(kb_set), max_groundings=max_groundings)
    deep = is_deep(g, target)
    lost = int(target) not in kb_set
    tree = surviving_derivation(g, target) if lost and not deep else None
    return {"deep": deep, "superficial": lost and not deep, "surviving_ids": leaves(tree),
            "surviving_text": derivation_text(g, tree, indent="    ") if tree is not None else ""}
