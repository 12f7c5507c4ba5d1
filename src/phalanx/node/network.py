"""The local network of the embedded runtime: loopback addresses, host ports, names.

Pods share this machine's port space, so every declared Service port gets a
host port unique on the machine (the declared number when it is free), and
every Service / pod a loopback address ``127.x.y.z``. Allocations live in
``<state>/network/allocations.json`` so a restart keeps them. Names resolve
through ``<state>/network/hosts``, read by nss_wrapper when it is installed
(``LD_PRELOAD=libnss_wrapper.so NSS_WRAPPER_HOSTS=...``) and by
``phalanx.node.initwait``.
"""
from __future__ import annotations

import contextlib
import ctypes.util
import fcntl
import ipaddress
import json
import logging
import os
import platform
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

from ..api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from ..api.errors import FieldError, Invalid
from .names import is_dns_label

log = logging.getLogger(__name__)

Obj = dict[str, Any]

FIRST_ADDRESS = "127.0.1.2"
LAST_ADDRESS = "127.255.255.254"
# Host ports handed out when the declared one is taken: the NodePort range,
# below Linux's ephemeral range (32768-60999) so outgoing connections do not
# grab them.
PORT_RANGE = (30000, 32767)

_LIB_DIRS = (
    "/usr/lib/{multiarch}", "/lib/{multiarch}", "/usr/lib64", "/lib64", "/usr/lib", "/lib",
    "/usr/local/lib", "/usr/local/lib64",
)


def find_nss_wrapper() -> str | None:
    """Path of libnss_wrapper.so, or None. ``PHALANX_NSS_WRAPPER`` overrides
    (set it to an empty string to disable)."""
    env = os.environ.get("PHALANX_NSS_WRAPPER")
    if env is not None:
        return env if env and os.path.isfile(env) else None
    multiarch = f"{platform.machine()}-linux-gnu"
    for d in _LIB_DIRS:
        for name in ("libnss_wrapper.so", "libnss_wrapper.so.0"):
            p = os.path.join(d.format(multiarch=multiarch), name)
            if os.path.isfile(p):
                return p
    found = ctypes.util.find_library("nss_wrapper")
    if found:
        for d in _LIB_DIRS:
            p = os.path.join(d.format(multiarch=multiarch), found)
            if os.path.isfile(p):
                return p
    return None


def nss_wrapper_available() -> bool:
    return find_nss_wrapper() is not None


def host_names(name: str, namespace: str) -> list[str]:
    """The names a Service answers to, as cluster DNS would give them."""
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def port_free(port: int, protocol: str = "TCP") -> bool:
    """Whether a program could bind ``0.0.0.0:port`` now (SO_REUSEADDR, as
    servers set it, so sockets in TIME_WAIT do not count)."""
    kind = socket.SOCK_DGRAM if protocol.upper() == "UDP" else socket.SOCK_STREAM
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _empty_table() -> Obj:
    return {"version": 1, "cursor": FIRST_ADDRESS, "portCursor": PORT_RANGE[0],
            "addresses": {}, "ports": {}, "published": {}}


class LocalNetwork:
    """Address and port allocation plus the hosts file, shared by all local agents.

    Safe across threads (the store may run admission plugins in a worker
    thread) and processes (a file lock guards every read-modify-write).
    """

    def __init__(self, state_dir: Path, *, first_address: str = FIRST_ADDRESS,
                 port_range: tuple[int, int] = PORT_RANGE, check_bind: bool = True) -> None:
        self.dir = Path(state_dir) / "network"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.table_path = self.dir / "allocations.json"
        self.hosts_path = self.dir / "hosts"
        self._lock_path = self.dir / ".lock"
        self._first = int(ipaddress.IPv4Address(first_address))
        self._last = int(ipaddress.IPv4Address(LAST_ADDRESS))
        self.port_range = port_range
        self.check_bind = check_bind
        self._mutex = threading.RLock()
        with self._transaction() as t:
            self._write_hosts(t)

    # ------------------------------------------------------------------ storage

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Obj]:
        with self._mutex, open(self._lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                table = self._load()
                before = json.dumps(table, sort_keys=True)
                yield table
                if json.dumps(table, sort_keys=True) != before:
                    _atomic_write(self.table_path, json.dumps(table, indent=1, sort_keys=True) + "\n")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> Obj:
        try:
            data = json.loads(self.table_path.read_text())
        except FileNotFoundError:
            return _empty_table()
        except (OSError, ValueError) as e:
            log.warning("local network table %s unreadable (%s); starting a new one", self.table_path, e)
            return _empty_table()
        table = _empty_table()
        if isinstance(data, dict):
            for k in table:
                if k in data and isinstance(data[k], type(table[k])):
                    table[k] = data[k]
        return table

    def snapshot(self) -> Obj:
        """A copy of the allocation table (for tests and diagnostics)."""
        with self._transaction() as t:
            return json.loads(json.dumps(t))

    # ------------------------------------------------------------------ addresses

    def allocate_address(self, owner: str) -> str:
        """The owner's address, allocated on first call (idempotent)."""
        with self._transaction() as t:
            return self._allocate_address(t, owner)

    def _allocate_address(self, t: Obj, owner: str) -> str:
        if owner in t["addresses"]:
            return t["addresses"][owner]
        used = set(t["addresses"].values())
        start = int(ipaddress.IPv4Address(t.get("cursor") or FIRST_ADDRESS))
        if not self._first <= start <= self._last:
            start = self._first
        span = self._last - self._first + 1
        for i in range(span):
            n = self._first + (start - self._first + i) % span
            if n & 0xFF in (0, 255):
                continue
            ip = str(ipaddress.IPv4Address(n))
            if ip not in used:
                t["addresses"][owner] = ip
                t["cursor"] = str(ipaddress.IPv4Address(self._first + (n - self._first + 1) % span))
                return ip
        raise Invalid([FieldError("metadata.annotations", "Invalid", "no free loopback address left",
                                  ANNOTATION_ADDRESS)])

    def address_of(self, owner: str) -> str | None:
        with self._transaction() as t:
            return t["addresses"].get(owner)

    def release(self, owner: str) -> None:
        """Give back the owner's address and host ports."""
        with self._transaction() as t:
            t["addresses"].pop(owner, None)
            t["ports"].pop(owner, None)

    def retain(self, prefix: str, keep: set[str]) -> list[str]:
        """Release every owner starting with ``prefix`` that is not in ``keep``
        (allocations whose objects vanished while we were not looking)."""
        with self._transaction() as t:
            gone = sorted({o for o in list(t["addresses"]) + list(t["ports"])
                           if o.startswith(prefix) and o not in keep})
            for o in gone:
                t["addresses"].pop(o, None)
                t["ports"].pop(o, None)
            return gone

    # ------------------------------------------------------------------ ports

    def allocate_ports(self, owner: str, ports: list[tuple[str, int, str]]) -> dict[str, int]:
        """Host ports for ``(key, declared port, protocol)`` triples: the declared
        number when free (in our table and for a real bind), else the next free
        one in the range. Keys already allocated to the owner keep their port;
        keys no longer declared are released."""
        with self._transaction() as t:
            return self._allocate_ports(t, owner, ports)

    def _allocate_ports(self, t: Obj, owner: str, ports: list[tuple[str, int, str]]) -> dict[str, int]:
        mine: dict[str, int] = dict(t["ports"].get(owner) or {})
        keys = [k for k, _, _ in ports]
        mine = {k: v for k, v in mine.items() if k in keys}
        taken = {p for o, m in t["ports"].items() if o != owner for p in m.values()}
        taken |= set(mine.values())
        result: dict[str, int] = {}
        for key, declared, protocol in ports:
            if key in mine:
                result[key] = mine[key]
                continue
            if 0 < declared < 65536 and declared not in taken and self._bindable(declared, protocol):
                port = declared
            else:
                port = self._next_free_port(t, taken, protocol)
            taken.add(port)
            result[key] = port
        t["ports"][owner] = result
        return result

    def _bindable(self, port: int, protocol: str) -> bool:
        return not self.check_bind or port_free(port, protocol)

    def _next_free_port(self, t: Obj, taken: set[int], protocol: str) -> int:
        lo, hi = self.port_range
        span = hi - lo + 1
        start = t.get("portCursor") or lo
        if not lo <= start <= hi:
            start = lo
        for i in range(span):
            port = lo + (start - lo + i) % span
            if port not in taken and self._bindable(port, protocol):
                t["portCursor"] = lo + (port - lo + 1) % span
                return port
        raise Invalid([FieldError("spec.ports", "Invalid", f"no free host port left in {lo}-{hi}", None)])

    def ports_of(self, owner: str) -> dict[str, int]:
        with self._transaction() as t:
            return dict(t["ports"].get(owner) or {})

    # ------------------------------------------------------------------ services

    def admission_plugin(self, op: str, obj: Obj | None, old: Obj | None) -> Obj | None:
        """Store admission plugin: Services get ``phalanx.dev/address`` and
        ``phalanx.dev/host-ports`` on create (kept on update), released on delete."""
        subject = obj if obj is not None else old
        if not isinstance(subject, dict) or subject.get("kind") != "Service":
            return obj
        meta = subject.get("metadata") or {}
        name, ns = meta.get("name"), meta.get("namespace") or "default"
        if not is_dns_label(name):
            if op == "delete":
                return obj
            raise Invalid([FieldError("metadata.name", "Invalid", "a Service name must be a DNS label", name)])
        if not is_dns_label(ns):
            if op == "delete":
                return obj
            raise Invalid([FieldError("metadata.namespace", "Invalid", "must be a DNS label", ns)])
        owner = service_owner(ns, name)
        if op == "delete":
            with self._transaction() as t:
                t["addresses"].pop(owner, None)
                t["ports"].pop(owner, None)
                if t["published"].pop(f"{ns}/{name}", None) is not None:
                    self._write_hosts(t)
            return obj
        if op not in ("create", "update") or obj is None:
            return obj
        ports = _declared_ports(obj)
        with self._transaction() as t:
            address = self._allocate_address(t, owner)
            host_ports = self._allocate_ports(t, owner, ports)
        annotations = obj.setdefault("metadata", {}).get("annotations")
        if not isinstance(annotations, dict):
            annotations = {}
            obj["metadata"]["annotations"] = annotations
        annotations[ANNOTATION_ADDRESS] = address
        annotations[ANNOTATION_HOST_PORTS] = json.dumps(host_ports)
        return obj

    def sync_services(self, services: list[Obj]) -> list[str]:
        """Release allocations and hosts entries of Services that no longer exist."""
        keep = set()
        for s in services:
            m = s.get("metadata") or {}
            keep.add(service_owner(m.get("namespace") or "default", m.get("name", "")))
        gone = self.retain("Service/", keep)
        with self._transaction() as t:
            stale = [k for k in t["published"] if service_owner(*k.split("/", 1)) not in keep]
            for k in stale:
                del t["published"][k]
            if stale:
                self._write_hosts(t)
        return gone

    # ------------------------------------------------------------------ hosts file

    def publish(self, name: str, namespace: str, address: str, holder: str | None = None) -> None:
        """Make ``name`` (and its namespace-qualified forms) resolve to ``address``.
        With ``holder``, the entry stays until every holder unpublished it."""
        if not is_dns_label(name) or not is_dns_label(namespace):
            raise ValueError(f"cannot publish {namespace!r}/{name!r}: names must be DNS labels")
        address = str(ipaddress.IPv4Address(address))
        key = f"{namespace}/{name}"
        with self._transaction() as t:
            entry = t["published"].get(key)
            if entry is None or entry.get("address") != address:
                entry = {"address": address, "holders": []}
            holders = set(entry.get("holders") or [])
            holders.add(holder or "")
            entry["holders"] = sorted(holders)
            changed = t["published"].get(key) != entry
            t["published"][key] = entry
            if changed:
                self._write_hosts(t)

    def unpublish(self, name: str, namespace: str, holder: str | None = None) -> None:
        """Drop ``holder``'s claim on the entry (every claim when holder is None)."""
        key = f"{namespace}/{name}"
        with self._transaction() as t:
            entry = t["published"].get(key)
            if entry is None:
                return
            if holder is None:
                del t["published"][key]
            else:
                holders = set(entry.get("holders") or []) - {holder}
                if holders:
                    entry["holders"] = sorted(holders)
                    return
                del t["published"][key]
            self._write_hosts(t)

    def unpublish_holder(self, holder: str) -> None:
        """Drop ``holder``'s claims on every entry (a pod that no longer runs)."""
        with self._transaction() as t:
            changed = False
            for key in list(t["published"]):
                entry = t["published"][key]
                holders = set(entry.get("holders") or [])
                if holder not in holders:
                    continue
                holders.discard(holder)
                if holders:
                    entry["holders"] = sorted(holders)
                else:
                    del t["published"][key]
                    changed = True
            if changed:
                self._write_hosts(t)

    def published(self) -> dict[str, str]:
        """``namespace/name`` -> address of every published entry."""
        with self._transaction() as t:
            return {k: v["address"] for k, v in t["published"].items()}

    def _write_hosts(self, t: Obj) -> None:
        # No comment lines: nss_wrapper refuses a hosts file that has any.
        lines: list[str] = []
        for key in sorted(t["published"]):
            ns, name = key.split("/", 1)
            if not (is_dns_label(ns) and is_dns_label(name)):
                continue
            address = t["published"][key]["address"]
            names = host_names(name, ns)
            lines.append(" ".join([address, *names]))
            mapped = v4_mapped(address)
            if mapped:
                lines.append(" ".join([mapped, *names]))
        content = "".join(line + "\n" for line in lines)
        try:
            if self.hosts_path.read_text() == content:
                return
        except OSError:
            pass
        _atomic_write(self.hosts_path, content)

    # ------------------------------------------------------------------ nss_wrapper

    def nss_wrapper_available(self) -> bool:
        return nss_wrapper_available()

    def resolver_env(self, hostname: str) -> dict[str, str]:
        """Environment that makes a process resolve the published names."""
        env = {"PHALANX_HOSTS_FILE": str(self.hosts_path)}
        lib = find_nss_wrapper()
        if lib:
            env.update(LD_PRELOAD=lib, NSS_WRAPPER_HOSTS=str(self.hosts_path), NSS_WRAPPER_HOSTNAME=hostname)
        return env


def v4_mapped(address: str) -> str | None:
    """``::ffff:a.b.c.d`` for an IPv4 address, else None.

    nss_wrapper ignores ``AI_V4MAPPED``: without this line an IPv6 lookup of
    the name fails (EAI_FAMILY), and torch's TCPStore client looks up IPv6
    first and retries that until it times out, so MASTER_ADDR never connects.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return f"::ffff:{ip}" if ip.version == 4 else None


def service_owner(namespace: str, name: str) -> str:
    return f"Service/{namespace}/{name}"


def pod_owner(node: str, namespace: str, name: str, uid: str = "") -> str:
    """Owner key of a pod's own address (and of its claims on hosts entries);
    prefixed by the node so each agent cleans up only its own."""
    return f"Pod/{node}/{namespace}/{name}/{uid}"


def _declared_ports(svc: Obj) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    for p in (svc.get("spec") or {}).get("ports") or []:
        if not isinstance(p, dict):
            continue
        port = p.get("port")
        if isinstance(port, bool) or not isinstance(port, int):
            continue
        key = p.get("name") or str(port)
        out.append((str(key), port, str(p.get("protocol") or "TCP")))
    return out


def _atomic_write(path: Path, content: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
