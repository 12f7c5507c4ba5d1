"""The one object-API interface every component uses (docs/ARCHITECTURE.md, layer client)."""
from phalanx.client.interface import Client, ObjectList
from phalanx.objects.watch import WatchEvent

__all__ = ["Client", "ObjectList", "WatchEvent"]
