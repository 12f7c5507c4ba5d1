"""Deferred loading for the CLI's entry module: a module or a rich Console that is
only imported when first used, so a command that never needs it does not pay for it."""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module whose code runs on first attribute access
    (``importlib.util.LazyLoader``); the loaded module if it already is."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


class LazyConsole:
    """A ``rich.console.Console`` made with these arguments when first used."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The Console itself, made now if it is not yet."""
        if self._console is None:
            from rich.console import Console  # lazy for start-up speed: rich is the CLI's heaviest import

            self._console = Console(**self._kwargs)
        return self._console

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.console, attr)
