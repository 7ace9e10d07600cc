"""Knowledge-base layer: facts, entities, KB files (version 2), domain folders (``domains/family``
with its generator, ``domains/org``) and their sampling, probe forms, importers."""

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
