"""Knowledge-base layer: facts, entities, KB files, the family generator, QA probes, importers."""

from .kb import (
    BIOGRAPHY_ATTRIBUTES,
    FAMILY_RELATIONS,
    Fact,
    KBError,
    KnowledgeBase,
    Probe,
    Relation,
)
from .io import KBFileError, dumps_kb, from_dict, load_kb, save_kb, to_dict

__all__ = [
    "BIOGRAPHY_ATTRIBUTES", "FAMILY_RELATIONS", "Fact", "KBError", "KBFileError", "KnowledgeBase",
    "Probe", "Relation", "dumps_kb", "from_dict", "load_kb", "save_kb", "to_dict",
]
