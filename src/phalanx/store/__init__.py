"""Versioned, watchable object store with SQLite persistence (docs/ARCHITECTURE.md, layer store)."""
from phalanx.store.errors import PatchRejected, PreconditionConflict
from phalanx.store.rules import resource_name
from phalanx.store.store import Store
from phalanx.store.watch import Watcher

__all__ = ["Store", "Watcher", "PatchRejected", "PreconditionConflict", "resource_name"]
