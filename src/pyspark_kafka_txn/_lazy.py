"""Lazy re-exports: a package names its public objects without importing their modules.

``client`` and ``reader`` re-export names whose modules are costly (kio, pyarrow) or belong
to one side only (the executor's read path, the driver's planning). Each package passes
its name and a table *public name → defining module* to :func:`lazy_exports` and binds the
two functions it returns as its module-level ``__getattr__`` and ``__dir__`` (PEP 562).
A name is imported on its first use, then stored in the package, so later look-ups do not
come back here. This module imports nothing of the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build a package's ``__getattr__`` and ``__dir__`` for its lazily loaded names.

    Parameters
    ----------
    package
        The package's ``__name__``; it must already be in :data:`sys.modules` (call this
        from the package's ``__init__``).
    homes
        Each public name and the dotted name of the module that defines it.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)``: the first imports a name's module on first use and
        raises :class:`AttributeError` for names not in ``homes``; the second lists the
        package's names, loaded or not.
    """
    namespace = sys.modules[package].__dict__

    def get_attribute(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # later look-ups find it without calling this function
        return value

    def list_names() -> list[str]:
        return sorted({*namespace, *homes})

    return get_attribute, list_names
