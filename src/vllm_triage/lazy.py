"""Public names of a package imported on first use (PEP 562), so that importing one small module
of a package (the CLI reads a default from it) does not import the whole package with it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The package's `__getattr__`: `exports` maps each public name to the module defining it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
