"""The family domain (paper section 4): this folder is a domain folder (``domain.toml``,
``rules.dl``) whose generator is the realistic family generator (:mod:`.generate`: generations,
marriages, names; :mod:`.network`, :mod:`.params`) rather than the declarative one, and whose
families :mod:`.layout` draws."""
