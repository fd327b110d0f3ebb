"""Building kio entities from keyword arguments: the protocol client's and the broker's.

kio generates one frozen dataclass per entity and API version
(``kio.schema.<api>.v<N>.request`` / ``.response``), and the field sets of one entity
differ between versions (``FetchableTopicResponse`` has ``topic`` up to Fetch v12 and
``topic_id`` from v13, ``throttle_time`` appears in v1 of most responses, ...). Callers
write one call for every version they serve, so :func:`build` takes the union of fields
and decides, field by field:

- a field this version has is passed on;
- a field this version lacks but **another version of the same entity has** is a
  version-gated field: it is dropped (the caller meant it for the versions that have it);
  :func:`version_gated` is that set, read from kio's schema modules;
- any other field (misspelled, or a field of another entity) raises
  :class:`UnknownFieldError` naming the entity, the version and the field: a bug in the
  caller, never something to drop silently.

This module imports no kio at module level (it only walks the package of the entity class
it is given), so both ``client`` and ``embedded`` can share it from below.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterable
from typing import Any

__all__ = ["UnknownFieldError", "build", "field_names", "version_gated"]

_FIELDS: dict[type[Any], frozenset[str]] = {}
_GATED: dict[type[Any], frozenset[str]] = {}


class UnknownFieldError(TypeError):
    """An internal error: keyword arguments that no version of a kio entity has.

    Attributes
    ----------
    entity
        The entity's name with its API and version, e.g. ``FetchResponse (fetch v4
        response)``.
    version
        The entity's API version.
    fields
        The unknown field names, sorted.
    """

    def __init__(self, cls: type[Any], fields: Iterable[str]) -> None:
        self.entity = describe(cls)
        self.version = int(getattr(cls, "__version__", -1))
        self.fields = tuple(sorted(fields))
        names = ", ".join(repr(name) for name in self.fields)
        super().__init__(
            f"{self.entity} has no field {names}, in this version or any other: "
            "a misspelled field or a field of another entity"
        )


def describe(cls: type[Any]) -> str:
    """``Name (api vN kind)`` for a kio entity class (its class name for anything else)."""
    parts = cls.__module__.split(".")
    if len(parts) >= 5 and parts[:2] == ["kio", "schema"]:
        return f"{cls.__name__} ({parts[2]} {parts[3]} {parts[4]})"
    return cls.__name__


def field_names(cls: type[Any]) -> frozenset[str]:
    """The field names of the kio entity class ``cls`` (cached)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def version_gated(cls: type[Any]) -> frozenset[str]:
    """Fields other versions of ``cls``'s entity have and ``cls``'s version lacks (cached).

    The other versions are the classes of the same name in the sibling ``v<N>`` modules
    of the same API and kind (request or response). Empty for a class outside
    ``kio.schema``.
    """
    gated = _GATED.get(cls)
    if gated is not None:
        return gated
    parts = cls.__module__.split(".")
    names: set[str] = set()
    if len(parts) == 5 and parts[:2] == ["kio", "schema"]:
        package = ".".join(parts[:3])
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if not info.name.startswith("v"):
                continue
            try:
                module = importlib.import_module(f"{package}.{info.name}.{parts[4]}")
            except ImportError:
                continue
            other = getattr(module, cls.__name__, None)
            if isinstance(other, type) and dataclasses.is_dataclass(other):
                names |= field_names(other)
    gated = _GATED[cls] = frozenset(names - field_names(cls))
    return gated


def build(cls: type[Any], /, **fields: Any) -> Any:
    """Instantiate the kio entity ``cls`` from ``fields``.

    Fields ``cls``'s version lacks are dropped when they are version-gated (another
    version of the entity has them, see :func:`version_gated`).

    Raises
    ------
    UnknownFieldError
        For fields no version of the entity has.
    """
    names = field_names(cls)
    if fields.keys() <= names:
        return cls(**fields)
    absent = fields.keys() - names
    unknown = absent - version_gated(cls)
    if unknown:
        raise UnknownFieldError(cls, unknown)
    return cls(**{k: v for k, v in fields.items() if k in names})
