"""Module attributes imported at first use (PEP 562), for packages whose names are costly to import."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module``: each name of ``homes`` is imported from the module it maps to.

    A name is imported once, at its first read, and kept in ``module``'s namespace, so later reads do
    not come here; any other name is an ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
