"""The one object-API interface every component uses (DESIGN.md "client/")."""
from phalanx.client.interface import Client, ObjectList
from phalanx.objects.watch import WatchEvent

__all__ = ["Client", "ObjectList", "WatchEvent"]
