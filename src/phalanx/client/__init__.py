"""The one object-API interface every component uses (DESIGN.md "client/")."""
from .interface import Client, ObjectList, WatchEvent

__all__ = ["Client", "ObjectList", "WatchEvent"]
