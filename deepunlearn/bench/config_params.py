"""A sweep file's ``[params.<method>]`` tables: each is checked into its method's ``Params`` class
where it enters the configuration (:func:`~deepunlearn.unlearn.methods.params.typed_params`,
torch-free); an unknown key is one line naming the table and the key::

    sweep.toml: field params.npo.betta: [params.npo] has no key 'betta'; npo's keys: beta, grid, lr, ...

What the sweep records (its store's ``config``, its results key) is each table as the file gave
it (:func:`param_tables`), so a value written ``2`` stays ``2`` and a store's fingerprint does not
depend on how a field is typed.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..unlearn.methods.params import MethodParams

PARAMS_HELP = ("per method, its hyper-parameters besides the grid ([params.du_loop] base = 'ga'; [params.ga] retain = "
               "'kl'), each table checked into the method's Params class when the file is read; an unknown key is "
               "refused")


def param_tables(params: Mapping[str, MethodParams], given: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict]:
    """Each method's table as the configuration gave it (``given``), else the keys its ``Params``
    had set (a configuration built in code)."""
    given = given or {}
    return {m: dict(given[m]) if m in given else p.model_dump(mode="json", exclude_unset=True)
            for m, p in params.items()}
