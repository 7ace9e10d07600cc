"""A sweep file's ``[params.<method>]`` tables: each checked into its method's ``Params`` class
where it enters the configuration (torch-free: the class comes from the method's catalogue spec,
:func:`~deepunlearn.unlearn.methods.catalog.load_params`), as the method's class checks it when a
run makes it (fields, grid, kind: :func:`~deepunlearn.unlearn.methods.params.checked_params`).

An unknown key is one line naming the table and the key::

    sweep.toml: field params.npo.betta: [params.npo] has no key 'betta'; npo's keys: beta, grid, lr, ...

What the sweep records (its store's ``config``, its results key) is each table as the file gave
it (:func:`param_tables`), so a value written ``2`` stays ``2`` and a store's fingerprint does not
depend on how a field is typed.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..unlearn.methods.catalog import CatalogError, get_spec, load_params
from ..unlearn.methods.params import MethodParams, UnlearnError, method_params

PARAMS_HELP = ("per method, its hyper-parameters besides the grid ([params.du_loop] base = 'ga'; [params.ga] retain = "
               "'kl'), each table checked into the method's Params class when the file is read; an unknown key is "
               "refused")


def typed_params(tables: Any, methods: Mapping[str, Any] | None) -> Any:
    """``tables`` (method -> table) as method -> its ``Params`` (only the keys given are set);
    :class:`ValueError` ``field params.<method>[.<key>]: ...`` for a method not in ``methods``
    (the configuration's ``[methods]``), a table that is not one, an unknown key or a bad value.
    Anything but a table of tables is left to the schema; ``methods`` None (they did not
    validate) leaves the tables unchecked."""
    if not isinstance(tables, Mapping) or methods is None:
        return tables if methods is not None else {}
    out: dict[str, MethodParams] = {}
    for method, values in tables.items():
        if method not in methods:
            raise ValueError(f"field params.{method}: method {method!r} is not in [methods] "
                             f"({', '.join(methods)}); add it there to run it")
        if isinstance(values, MethodParams):
            out[method] = values
            continue
        if not isinstance(values, Mapping):
            raise ValueError(f"field params.{method}: expected a table of {method}'s parameters "
                             f"([params.{method}]), got {type(values).__name__}")
        try:
            out[method] = method_params(method, values)
        except CatalogError as e:  # an unknown method, or a plug-in whose spec cannot be read
            raise ValueError(f"field params.{method}: {e}") from None
        except UnlearnError as e:
            raise ValueError(_message(method, values, e)) from None
    return out


def _message(method: str, values: Mapping[str, Any], e: UnlearnError) -> str:
    key = getattr(e, "field", None)
    if key is None:
        return f"field params.{method}: {e}"
    fields = load_params(get_spec(method)).model_fields
    if key in values and key not in fields:
        return (f"field params.{method}.{key}: [params.{method}] has no key {key!r}; {method}'s keys: "
                f"{', '.join(sorted(fields))}")
    return f"field params.{method}.{key}: {e}"


def param_tables(params: Mapping[str, MethodParams], given: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict]:
    """Each method's table as the configuration gave it (``given``), else the keys its ``Params``
    had set (a configuration built in code)."""
    given = given or {}
    return {m: dict(given[m]) if m in given else p.model_dump(mode="json", exclude_unset=True)
            for m, p in params.items()}
