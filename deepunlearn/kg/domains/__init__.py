"""The built-in domain folders (each holds domain.toml and rules.dl; see :mod:`deepunlearn.kg.domain`)."""
