"""Versioned, watchable object store with SQLite persistence (DESIGN.md "store/")."""
from phalanx.store.store import PatchRejected, PreconditionConflict, Store, resource_name
from phalanx.store.watch import Watcher

__all__ = ["Store", "Watcher", "PatchRejected", "PreconditionConflict", "resource_name"]
