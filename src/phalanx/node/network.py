"""The local network of the embedded runtime: loopback addresses, host ports, names.

Pods share this machine's port space, so every declared Service port gets a
host port unique on the machine (the declared number when it is free), and
every Service / pod a loopback address ``127.N.y.z`` from the home's own block ``127.N.0.0/16`` (the host
port and the block claimed machine-wide: ``node/machineclaims.py``). Allocations live in
``<state>/network/allocations.json`` plus the journal of changes since
(``allocations.journal``, one JSON line per change) so a restart keeps them.
Names resolve through ``<state>/network/hosts``, read by nss_wrapper when it
is installed (``LD_PRELOAD=libnss_wrapper.so NSS_WRAPPER_HOSTS=...``) and by
``phalanx.node.initwait``; it shows a change within ``HOSTS_FLUSH_INTERVAL``.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.node.alloctable import AllocationTable, ip_of, readopt
from phalanx.node.hostsfile import render_hosts
from phalanx.node.machineclaims import MachineClaims, port_free
from phalanx.node.nsswrapper import find_nss_wrapper, nss_wrapper_available
from phalanx.objects.errors import FieldError, Invalid
from phalanx.objects.names import is_dns_label

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# Block 0 (127.0.0.0/16, the host's own 127.0.0.1 in it) is for homes made before blocks: their addresses
# start at 127.0.1.2. A new home takes a block of 1..255 and its addresses 127.N.0.1-127.N.255.254.
FIRST_ADDRESS = "127.0.1.2"
# Host ports handed out when the declared one is taken: below Linux's
# ephemeral range (32768-60999) so outgoing connections do not grab them, and
# wide enough for every Service of a few thousand stored jobs (wider than
# Kubernetes' NodePort range). A port in use by another program is skipped.
PORT_RANGE = (10000, 32767)

# The hosts file is rewritten at most once per this many seconds while names
# change (a burst of publishes shares one write); a change after a quiet spell
# is written before the call returns. Readers poll it (initwait every 50 ms).
HOSTS_FLUSH_INTERVAL = 0.01
# The journal is folded into allocations.json once it outgrows this and twice
# the table: a rewrite of O(N) every Omega(N) operations, O(1) amortised.
COMPACT_MIN_BYTES = 256 * 1024
class LocalNetwork:
    """Address and port allocation plus the hosts file, shared by all local agents.

    Safe across threads (the store may run admission plugins in a worker
    thread) and processes sharing the state directory: a file lock guards
    every read-modify-write. Each process keeps the table in memory and, under
    the lock, reads only what other processes appended to the journal since it
    last looked, so an operation costs O(1) amortised in the number of
    allocations (the journal is folded into ``allocations.json`` now and then).
    Nothing is fsynced: after a machine crash the pods are gone too, and
    ``sync_services`` re-derives Service allocations from their annotations.
    """

    def __init__(self, state_dir: Path, *, port_range: tuple[int, int] = PORT_RANGE, check_bind: bool = True,
                 hosts_interval: float = HOSTS_FLUSH_INTERVAL, claims_path: Path | None = None) -> None:
        self.dir = Path(state_dir) / "network"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.table_path = self.dir / "allocations.json"
        self.journal_path = self.dir / "allocations.journal"
        self.hosts_path = self.dir / "hosts"
        self._lock_path = self.dir / ".lock"
        self.claims = MachineClaims(claims_path)
        self.block: int | None = None  # the address block this instance claimed (on first use)
        self._first = self._last = 0
        self.port_range = port_range
        self.check_bind = check_bind
        self.hosts_interval = hosts_interval
        self._mutex = threading.RLock()
        self._pid = -1  # the process the files were opened in
        self._lock_file: Any = None
        self._journal: Any = None
        self._table: AllocationTable | None = None
        self._generation = -1  # compactions seen (kept in the lock file)
        self._snapshot_stamp: tuple[int, int, int] | None = None
        self._snapshot_bytes = 0
        self._offset = 0  # journal bytes applied (up to the last complete line)
        self._journal_size = 0
        self._timer: threading.Timer | None = None
        self._last_flush = float("-inf")
        with self._transaction() as t:
            content = render_hosts(t)
            try:
                current = self.hosts_path.read_text()
            except OSError:
                current = None
            if current != content:
                _atomic_write(self.hosts_path, content)

    # ------------------------------------------------------------------ storage

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[AllocationTable]:
        """The table, up to date, under the lock; its change is journaled on exit."""
        with self._mutex:
            self._open()
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            try:
                t = self._sync()
                if self.block is None:
                    self._take_block(t)
                try:
                    yield t
                except BaseException:
                    t.rollback()
                    raise
                change = t.commit()
                if change:
                    try:
                        self._append(change)
                    except BaseException:
                        self._table = None  # memory is ahead of the disk: read it all again
                        raise
                    if "published" in change:
                        self._hosts_changed(t)
            finally:
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def _open(self) -> None:
        if self._pid == os.getpid():
            return
        # First use, or a forked child: a lock shared with the parent would exclude nothing.
        for f in (self._lock_file, self._journal):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self._lock_file = os.fdopen(os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644), "r+b", buffering=0)
        self._journal = os.fdopen(os.open(self.journal_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644),
                                  "r+b", buffering=0)
        self._pid = os.getpid()
        self._table = None
        self._timer = None  # a parent's timer thread does not exist here

    def _sync(self) -> AllocationTable:
        """Catch up with other processes (under the lock): the journal's new lines,
        or everything again after a compaction."""
        generation = self._read_generation()
        stamp = _stamp(self.table_path)
        if self._table is None or generation != self._generation or stamp != self._snapshot_stamp:
            return self._reload(generation, stamp)
        size = os.fstat(self._journal.fileno()).st_size
        if size < self._offset:
            return self._reload(generation, stamp)
        self._journal_size = size
        if size > self._offset:
            self._read_journal(self._table, size)
        return self._table

    def _reload(self, generation: int, stamp: tuple[int, int, int] | None) -> AllocationTable:
        t = AllocationTable(FIRST_ADDRESS, self.port_range[0])
        try:
            raw = self.table_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        except OSError as e:
            log.warning("local network table %s unreadable (%s); starting a new one", self.table_path, e)
            raw = b""
        if raw:
            try:
                data = json.loads(raw)
            except ValueError as e:
                log.warning("local network table %s unreadable (%s); starting a new one", self.table_path, e)
                data = None
            if isinstance(data, dict):
                t.apply(data)
        self._table, self._generation, self._snapshot_stamp = t, generation, stamp
        self._snapshot_bytes, self._offset = len(raw), 0
        self._journal_size = os.fstat(self._journal.fileno()).st_size
        if self._journal_size:
            self._read_journal(t, self._journal_size)
        for port in t.port_owner:  # the home's ports stay its own while it runs (a restart claims them again)
            self.claims.claim_port(port)
        return t

    def _take_block(self, t: AllocationTable) -> None:
        """Claim this instance's address block: the one the table's cursor is in (a home keeps its block across
        restarts), else a free one. A home whose block another home holds now takes a free one for its new
        addresses; the addresses it has keep theirs."""
        known = bool(t.addresses) or t.cursor != FIRST_ADDRESS
        preferred = int(ipaddress.IPv4Address(t.cursor)) >> 16 & 0xFF if known else None
        block = self.claims.claim_block(preferred, str(self.dir.resolve()))
        if block is None:
            block = preferred if preferred is not None else 1
            log.warning("every loopback address block is held by another home: %s allocates from 127.%d.0.0/16 "
                        "unclaimed (its addresses may collide with another home's)", self.dir, block)
        self.block = block
        self._first = int(ipaddress.IPv4Address(FIRST_ADDRESS if block == 0 else f"127.{block}.0.1"))
        self._last = int(ipaddress.IPv4Address(f"127.{block}.255.254"))

    def _read_journal(self, t: AllocationTable, end: int) -> None:
        """Apply the complete lines between the offset and ``end``; a partial
        last line (a writer died mid-append) is left for truncation."""
        fd = self._journal.fileno()
        chunks, pos = [], self._offset
        while pos < end:
            chunk = os.pread(fd, end - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        data = b"".join(chunks)
        last = data.rfind(b"\n")
        if last < 0:
            return
        for line in data[:last + 1].splitlines():
            if not line.strip():
                continue
            try:
                change = json.loads(line)
            except ValueError:
                log.warning("local network journal %s: skipping a damaged line", self.journal_path)
                continue
            if isinstance(change, dict):
                t.apply(change)
        self._offset += last + 1

    def _append(self, change: Obj) -> None:
        line = (json.dumps(change, separators=(",", ":"), sort_keys=True) + "\n").encode()
        fd = self._journal.fileno()
        if self._journal_size != self._offset:  # a partial line left by a writer that died
            os.ftruncate(fd, self._offset)
        written = os.write(fd, line)
        if written != len(line):
            os.ftruncate(fd, self._offset)
            raise OSError(f"short write to {self.journal_path}")
        self._offset += written
        self._journal_size = self._offset
        if self._offset > max(COMPACT_MIN_BYTES, 2 * self._snapshot_bytes):
            self._compact()

    def _compact(self) -> None:
        """Fold the journal into ``allocations.json``. Each step leaves a state
        that replays to the same table: the journal's entries are absolute
        values, so replaying them over the new snapshot changes nothing."""
        assert self._table is not None
        raw = (json.dumps(self._table.to_dict(), separators=(",", ":"), sort_keys=True) + "\n").encode()
        try:
            _atomic_write(self.table_path, raw.decode())
            self._snapshot_stamp, self._snapshot_bytes = _stamp(self.table_path), len(raw)
            self._write_generation(self._generation + 1)  # others reload before reading the journal again
            self._generation += 1
            os.ftruncate(self._journal.fileno(), 0)
            self._offset = self._journal_size = 0
        except OSError as e:
            log.warning("compacting the local network journal failed (%s); it keeps growing", e)
            self._table = None  # re-read the disk, whatever step failed

    def _read_generation(self) -> int:
        raw = os.pread(self._lock_file.fileno(), 32, 0)
        try:
            return int(raw.strip() or b"0")
        except ValueError:
            return 0

    def _write_generation(self, generation: int) -> None:
        data = f"{generation}\n".encode()
        fd = self._lock_file.fileno()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))

    def snapshot(self) -> Obj:
        """A copy of the allocation table (for tests and diagnostics)."""
        with self._transaction() as t:
            return t.to_dict()

    def close(self) -> None:
        """Write a pending hosts change and close the files (reopened on next use)."""
        with self._mutex:
            if self._pid == os.getpid() and self._timer is not None:
                self.flush()
            for f in (self._lock_file, self._journal):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
            self._lock_file = self._journal = None
            self._pid = -1
            self.claims.close()
            self.block = None

    # ------------------------------------------------------------------ addresses

    def allocate_address(self, owner: str) -> str:
        """The owner's address, allocated on first call (idempotent)."""
        with self._transaction() as t:
            return self._allocate_address(t, owner)

    def _allocate_address(self, t: AllocationTable, owner: str) -> str:
        have = t.addresses.get(owner)
        if have is not None:
            return have
        start = int(ipaddress.IPv4Address(t.cursor))
        if not self._first <= start <= self._last:
            start = self._first
        span = self._last - self._first + 1
        for i in range(span):
            n = self._first + (start - self._first + i) % span
            if n & 0xFF in (0, 255):
                continue
            ip = ip_of(n)
            if ip not in t.address_owner:
                t.put("addresses", owner, ip)
                t.set_cursor("cursor", ip_of(self._first + (n - self._first + 1) % span))
                return ip
        raise Invalid([FieldError("metadata.annotations", "Invalid", "no free loopback address left",
                                  ANNOTATION_ADDRESS)])

    def address_of(self, owner: str) -> str | None:
        with self._transaction() as t:
            return t.addresses.get(owner)

    def release(self, owner: str) -> None:
        """Give back the owner's address and host ports."""
        with self._transaction() as t:
            t.put("addresses", owner, None)
            self._put_ports(t, owner, None)

    def retain(self, prefix: str, keep: set[str]) -> list[str]:
        """Release every owner starting with ``prefix`` that is not in ``keep``
        (allocations whose objects vanished while we were not looking)."""
        with self._transaction() as t:
            return self._retain(t, prefix, keep)

    def _retain(self, t: AllocationTable, prefix: str, keep: set[str]) -> list[str]:
        gone = sorted({o for o in [*t.addresses, *t.ports] if o.startswith(prefix) and o not in keep})
        for o in gone:
            t.put("addresses", o, None)
            self._put_ports(t, o, None)
        return gone

    # ------------------------------------------------------------------ ports

    def allocate_ports(self, owner: str, ports: list[tuple[str, int, str]]) -> dict[str, int]:
        """Host ports for ``(key, declared port, protocol)`` triples: the declared
        number when free (in our table and for a real bind), else the next free
        one in the range. Keys already allocated to the owner keep their port;
        keys no longer declared are released."""
        with self._transaction() as t:
            return self._allocate_ports(t, owner, ports)

    def _allocate_ports(self, t: AllocationTable, owner: str, ports: list[tuple[str, int, str]]) -> dict[str, int]:
        keys = {k for k, _, _ in ports}
        mine = {k: v for k, v in (t.ports.get(owner) or {}).items() if k in keys}
        used = set(mine.values())

        def taken(port: int) -> bool:
            holder = t.port_owner.get(port)
            return port in used or (holder is not None and holder != owner)

        result: dict[str, int] = {}
        for key, declared, protocol in ports:
            if key in mine:
                result[key] = mine[key]
                continue
            if 0 < declared < 65536 and not taken(declared) and self._usable(declared, protocol):
                port = declared
            else:
                port = self._next_free_port(t, taken, protocol)
            used.add(port)
            result[key] = port
        self._put_ports(t, owner, result)
        return result

    def _put_ports(self, t: AllocationTable, owner: str, ports: dict[str, int] | None) -> None:
        """Set (None: drop) the owner's host ports, giving back the machine-wide claims of those it no longer has."""
        kept = set((ports or {}).values())
        for port in (t.ports.get(owner) or {}).values():
            if port not in kept:
                self.claims.release_port(port)
        t.put("ports", owner, ports)

    def _usable(self, port: int, protocol: str) -> bool:
        """Free on the machine: no program binds it and no other home claimed it (the claim is then ours)."""
        return (not self.check_bind or port_free(port, protocol)) and self.claims.claim_port(port)

    def _next_free_port(self, t: AllocationTable, taken: Any, protocol: str) -> int:
        lo, hi = self.port_range
        span = hi - lo + 1
        start = t.port_cursor or lo
        if not lo <= start <= hi:
            start = lo
        for i in range(span):
            port = lo + (start - lo + i) % span
            if not taken(port) and self._usable(port, protocol):
                t.set_cursor("portCursor", lo + (port - lo + 1) % span)
                return port
        raise Invalid([FieldError("spec.ports", "Invalid", f"no free host port left in {lo}-{hi}", None)])

    def ports_of(self, owner: str) -> dict[str, int]:
        with self._transaction() as t:
            return dict(t.ports.get(owner) or {})

    # ------------------------------------------------------------------ services

    def admission_plugin(self, op: str, obj: Obj | None, old: Obj | None) -> Obj | None:
        """Store admission plugin: Services get ``phalanx.dev/address`` and
        ``phalanx.dev/host-ports`` on create (kept on update), released on delete."""
        subject = obj if obj is not None else old
        if not isinstance(subject, dict) or subject.get("kind") != "Service":
            return obj
        meta = subject.get("metadata") or {}
        name, ns = meta.get("name"), meta.get("namespace") or "default"
        if not isinstance(name, str) or not is_dns_label(name):
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
                t.put("addresses", owner, None)
                self._put_ports(t, owner, None)
                t.put("published", f"{ns}/{name}", None)
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
        """Release allocations and hosts entries of Services that no longer exist,
        and take back from their annotations the allocations of those that do
        but that the table lost (it is not fsynced)."""
        owners: dict[str, Obj] = {}
        for s in services:
            m = s.get("metadata") or {}
            owners[service_owner(m.get("namespace") or "default", m.get("name", ""))] = s
        with self._transaction() as t:
            gone = self._retain(t, "Service/", set(owners))
            for k in [k for k in t.published if service_owner(*k.partition("/")[::2]) not in owners]:
                t.put("published", k, None)
            for owner, s in owners.items():
                had_ports = owner in t.ports
                readopt(t, owner, s)
                if not had_ports:
                    for port in (t.ports.get(owner) or {}).values():
                        self.claims.claim_port(port)
        return gone

    # ------------------------------------------------------------------ hosts file

    def publish(self, name: str, namespace: str, address: str, holder: str | None = None) -> None:
        """Make ``name`` (and its namespace-qualified forms) resolve to ``address``.
        With ``holder``, the entry stays until every holder unpublished it.
        The hosts file shows it within ``hosts_interval`` (see ``flush``)."""
        if not is_dns_label(name) or not is_dns_label(namespace):
            raise ValueError(f"cannot publish {namespace!r}/{name!r}: names must be DNS labels")
        address = str(ipaddress.IPv4Address(address))
        key = f"{namespace}/{name}"
        with self._transaction() as t:
            entry = t.published.get(key)
            holders = set(entry.get("holders") or []) if entry and entry.get("address") == address else set()
            holders.add(holder or "")
            t.put("published", key, {"address": address, "holders": sorted(holders)})

    def unpublish(self, name: str, namespace: str, holder: str | None = None) -> None:
        """Drop ``holder``'s claim on the entry (every claim when holder is None)."""
        with self._transaction() as t:
            self._drop_claim(t, f"{namespace}/{name}", holder)

    def unpublish_holder(self, holder: str) -> None:
        """Drop ``holder``'s claims on every entry (a pod that no longer runs)."""
        with self._transaction() as t:
            for key in list(t.held.get(holder, ())):
                self._drop_claim(t, key, holder)

    @staticmethod
    def _drop_claim(t: AllocationTable, key: str, holder: str | None) -> None:
        entry = t.published.get(key)
        if entry is None:
            return
        holders = [] if holder is None else [h for h in entry.get("holders") or [] if h != holder]
        t.put("published", key, {"address": entry["address"], "holders": holders} if holders else None)

    def published(self) -> dict[str, str]:
        """``namespace/name`` -> address of every published entry."""
        with self._transaction() as t:
            return {k: v["address"] for k, v in t.published.items()}

    def held_by(self, holder: str) -> set[tuple[str, str]]:
        """(namespace, name) of the entries ``holder`` has a claim on."""
        with self._transaction() as t:
            return {(k.partition("/")[0], k.partition("/")[2]) for k in t.held.get(holder, ()) if "/" in k}

    def flush(self) -> None:
        """Write the hosts file now (a pending coalesced write included)."""
        with self._transaction() as t:
            self._write_hosts(t)

    def _hosts_changed(self, t: AllocationTable) -> None:
        """Names changed (under the lock): write the hosts file now after a quiet
        spell, else once the interval since the last write is over."""
        if self._timer is not None:
            return  # a write is due soon and will include this change
        wait = self._last_flush + self.hosts_interval - time.monotonic()
        if wait <= 0:
            try:
                self._write_hosts(t)
                return
            except OSError as e:  # the change is in the table: the timer tries again
                log.warning("writing the hosts file %s failed: %s", self.hosts_path, e)
                wait = self.hosts_interval
        # Not a daemon: a process that exits normally still writes its last change.
        timer = threading.Timer(wait, self._flush_when_due)
        timer.daemon = False
        try:
            timer.start()
        except RuntimeError:  # no new threads (interpreter shutting down): write now
            with contextlib.suppress(OSError):
                self._write_hosts(t)
            return
        self._timer = timer

    def _flush_when_due(self) -> None:
        try:
            with self._mutex:
                if self._timer is not threading.current_thread():
                    return  # flushed (or closed) meanwhile
                with self._transaction() as t:
                    self._write_hosts(t)
        except Exception as e:  # nothing to report to: the next change or flush writes it
            log.warning("writing the hosts file %s failed: %s", self.hosts_path, e)

    def _write_hosts(self, t: AllocationTable) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        _atomic_write(self.hosts_path, render_hosts(t))
        self._last_flush = time.monotonic()

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


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a rewritten file apart (rewrites are renames: a new inode)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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
