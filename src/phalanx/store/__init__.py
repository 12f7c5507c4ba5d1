"""Versioned, watchable object store with SQLite persistence (DESIGN.md "store/")."""
from .store import PatchRejected, PreconditionConflict, Store, resource_name
from .watch import Watcher

__all__ = ["Store", "Watcher", "PatchRejected", "PreconditionConflict", "resource_name"]
