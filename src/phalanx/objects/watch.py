"""Watch events: what a watch yields, in the store, the clients and the informers.

``type`` is ADDED, MODIFIED, DELETED or BOOKMARK; ``object`` the JSON-shaped object.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: dict[str, Any]
