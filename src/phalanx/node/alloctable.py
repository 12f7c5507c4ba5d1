"""The local network's allocation table in memory: addresses, host ports and hosts entries by owner, with
reverse indexes (every lookup O(1)) and the change of the transaction in progress.
"""
from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
from typing import Any

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS

Obj = dict[str, Any]

SECTIONS = ("addresses", "ports", "published")


def ip_of(n: int) -> str:
    return socket.inet_ntoa(n.to_bytes(4, "big"))


def valid_entry(section: str, value: Any) -> bool:
    """Whether a value read from disk fits its section (a damaged entry is skipped)."""
    if section == "addresses":
        return isinstance(value, str)
    if section == "ports":
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(p, int) and not isinstance(p, bool) for k, p in value.items())
    if not (isinstance(value, dict) and isinstance(value.get("address"), str)
            and isinstance(value.get("holders", []), list)
            and all(isinstance(h, str) for h in value.get("holders", []))):
        return False
    try:  # it goes into the hosts file verbatim
        ipaddress.IPv4Address(value["address"])
    except ValueError:
        return False
    return True


class AllocationTable:
    """The allocation table in memory, with reverse indexes so that every lookup
    is O(1), and the change of the transaction in progress: journaled when it
    commits, undone when it raises."""

    def __init__(self, cursor: str, port_cursor: int) -> None:
        self.addresses: dict[str, str] = {}
        self.ports: dict[str, dict[str, int]] = {}
        self.published: dict[str, Obj] = {}
        self.cursor = cursor
        self.port_cursor = port_cursor
        self.address_owner: dict[str, str] = {}
        self.port_owner: dict[int, str] = {}
        self.held: dict[str, set[str]] = {}  # holder -> published keys it holds
        self.hosts_blocks: dict[str, str] = {}  # published key -> its hosts lines (cache)
        self._change: dict[str, Any] = {}
        self._before: dict[tuple[str, str], Any] = {}

    # -------------------------------------------------------------- changes

    def put(self, section: str, key: str, value: Any) -> None:
        """Set (None: drop) one entry, recording the change."""
        current = getattr(self, section).get(key)
        if current == value:
            return
        self._before.setdefault((section, key), current)
        self._set(section, key, value)
        self._change.setdefault(section, {})[key] = value

    def set_cursor(self, name: str, value: Any) -> None:
        attr = "cursor" if name == "cursor" else "port_cursor"
        if getattr(self, attr) == value:
            return
        self._before.setdefault((name, ""), getattr(self, attr))
        setattr(self, attr, value)
        self._change[name] = value

    def commit(self) -> Obj | None:
        change, self._change, self._before = self._change, {}, {}
        return change or None

    def rollback(self) -> None:
        for (section, key), old in reversed(list(self._before.items())):
            if section in SECTIONS:
                self._set(section, key, old)
            else:
                setattr(self, "cursor" if section == "cursor" else "port_cursor", old)
        self._change, self._before = {}, {}

    def _set(self, section: str, key: str, value: Any) -> None:
        """Set or drop an entry and keep the indexes in step."""
        if section == "addresses":
            old = self.addresses.pop(key, None)
            if old is not None and self.address_owner.get(old) == key:
                del self.address_owner[old]
            if value is not None:
                self.addresses[key] = value
                self.address_owner[value] = key
        elif section == "ports":
            for p in (self.ports.pop(key, None) or {}).values():
                if self.port_owner.get(p) == key:
                    del self.port_owner[p]
            if value is not None:
                self.ports[key] = value
                for p in value.values():
                    self.port_owner[p] = key
        else:
            self.hosts_blocks.pop(key, None)
            for h in (self.published.pop(key, None) or {}).get("holders") or []:
                keys = self.held.get(h)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.held[h]
            if value is not None:
                self.published[key] = value
                for h in value.get("holders") or []:
                    self.held.setdefault(h, set()).add(key)

    # -------------------------------------------------------------- disk

    def apply(self, data: Obj) -> None:
        """Apply a snapshot or a journal line (entries set, None drops them);
        entries of the wrong shape are skipped."""
        for section in SECTIONS:
            entries = data.get(section)
            if not isinstance(entries, dict):
                continue
            for key, value in entries.items():
                if value is None or valid_entry(section, value):
                    self._set(section, key, value)
        cursor = data.get("cursor")
        if isinstance(cursor, str):
            with contextlib.suppress(ValueError):
                self.cursor = str(ipaddress.IPv4Address(cursor))
        port_cursor = data.get("portCursor")
        if isinstance(port_cursor, int) and not isinstance(port_cursor, bool):
            self.port_cursor = port_cursor

    def to_dict(self) -> Obj:
        """The table as ``allocations.json`` holds it (a deep copy)."""
        return {"version": 1, "cursor": self.cursor, "portCursor": self.port_cursor,
                "addresses": dict(self.addresses),
                "ports": {o: dict(m) for o, m in self.ports.items()},
                "published": {k: {"address": e["address"], "holders": list(e.get("holders") or [])}
                              for k, e in self.published.items()}}


def readopt(t: AllocationTable, owner: str, svc: Obj) -> None:
    """Record a Service's allocation from its annotations when the table has
    none for it and nobody else holds those numbers (a table lost in a crash)."""
    ann = (svc.get("metadata") or {}).get("annotations")
    if not isinstance(ann, dict):
        return
    address = ann.get(ANNOTATION_ADDRESS)
    if owner not in t.addresses and isinstance(address, str):
        with contextlib.suppress(ValueError):
            ip = str(ipaddress.IPv4Address(address))
            if ip not in t.address_owner:
                t.put("addresses", owner, ip)
    raw = ann.get(ANNOTATION_HOST_PORTS)
    if owner not in t.ports and isinstance(raw, str):
        try:
            declared = json.loads(raw)
        except ValueError:
            return
        if isinstance(declared, dict):
            ports = {str(k): p for k, p in declared.items()
                     if isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536
                     and t.port_owner.get(p) in (None, owner)}
            if ports and len(set(ports.values())) == len(ports):
                t.put("ports", owner, ports)
