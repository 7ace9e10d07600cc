"""The regions domain: real countries and their subdivisions from the pycountry package (ISO 3166-2).

This folder is a domain folder (``domain.toml``, ``rules.dl``) whose facts are read, not drawn:
:func:`sample` (in :mod:`.generate`) is what the declarative generator calls instead of
:func:`deepunlearn.kg.sample.sample_domain` for this domain.
"""

from .generate import regions_tables, sample

__all__ = ["regions_tables", "sample"]
