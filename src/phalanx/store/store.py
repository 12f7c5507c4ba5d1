"""The versioned, watchable object store behind the embedded control plane.

Kubernetes apiserver semantics over plain dicts: uid, one global monotonic
resourceVersion, generation, optimistic concurrency, status written apart from
spec, graceful pod deletion, finalizers, watch with a bounded history (410 Gone
beyond it), and SQLite persistence. The rules of each write are in
``store/rules.py``; how writes reach the disk is ``store/commit.py``.

Used from one asyncio event-loop thread only; every method is synchronous and
every write is atomic: it is validated and admitted before anything changes.
Then, by default (or without a running event loop), it is persisted, and only
then made visible (memory, then watch events); a storage failure changes
nothing. With ``group_commit`` under a running loop it is made visible to
reads (``get``/``list``) at once and staged; its watch events are sent, and
``flush`` returns, only once its batch is on disk. Objects are kept as
serialized JSON, so nothing a caller holds can alias stored state.

Long because the Store is one class whose write paths share its indexes and
history; the rules themselves already live in ``store/rules.py``.
"""
from __future__ import annotations

import asyncio
import logging
import random
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from phalanx.api.registry import ResourceType, all_kinds, by_kind
from phalanx.objects.clock import Clock, format_time, parse_time
from phalanx.objects.errors import AlreadyExists, ApiError, BadRequest, FieldError, NotFound
from phalanx.objects.selectors import parse_field_selector, parse_label_selector
from phalanx.store import codec
from phalanx.store.commit import Committer
from phalanx.store.compact import Packer
from phalanx.store.decode import Interner, SharedEvent
from phalanx.store.entry import Entry, make_entry
from phalanx.store.errors import PatchRejected, PreconditionConflict
from phalanx.store.patch import json_equal
from phalanx.store.rules import (
    GENERATE_NAME_CHARS,
    GENERATE_NAME_SUFFIX,
    INITIAL_STATUS,
    MAX_NAME_LENGTH,
    bump_generation,
    check_api_version,
    check_deletable,
    check_delete_options,
    check_finalizers,
    check_identity,
    check_name,
    check_preconditions,
    check_size,
    checked_meta,
    checked_status,
    copy_in,
    gc_finalizers,
    invalid,
    keep_system_fields,
    object_namespace,
    patched,
    pod_grace,
    random_uid,
    request_namespace,
    required_name,
    resource_name,
    resource_type,
    resource_type_of,
    serialize,
    should_delete_during_update,
    spec_changed,
    tracks_generation,
)
from phalanx.store.sqlite import DEFAULT_SYNCHRONOUS, SqliteBackend
from phalanx.store.watch import History, HistoryEvent, Watcher

__all__ = ["Admission", "AdmissionPlugin", "PatchRejected", "Store"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Admission = Callable[[Obj, "Obj | None"], Obj]
AdmissionPlugin = Callable[[str, Obj, "Obj | None"], "Obj | None"]
Plugins = list[AdmissionPlugin]


def _ns_key(namespace: str | None) -> str:
    return namespace or ""


class Store:
    """See the module docstring. ``db_path=None`` keeps everything in memory."""

    def __init__(
        self,
        db_path: Path | None,
        clock: Clock,
        admission: Admission | None = None,
        *,
        history_size: int = 10_000,
        max_pending: int = 50_000,
        synchronous: str = DEFAULT_SYNCHRONOUS,
        uid_factory: Callable[[], str] | None = None,
        name_rng: random.Random | None = None,
        group_commit: bool = False,
        interner: Interner | None = None,
        watch_backlog: int | None = None,
        packer: Packer | None = None,
    ) -> None:
        # ``uid_factory`` / ``name_rng``: where uids and generateName suffixes come
        # from (default: random version-4 uuids and the module's random); a simulation passes
        # deterministic ones so the same inputs give the same objects.
        # ``interner``: hash-conses what shared watchers get (see store/decode.py).
        self._interner = interner
        # ``watch_backlog``: a write's ``flush`` lets the watches' consumers run once when
        # one of them is more than this many events behind, so a burst of writes made
        # without waiting (a simulation, with no I/O to interleave them) does not queue
        # every event at once. A consumer that cannot catch up only costs a turn a write.
        self._watch_backlog = watch_backlog
        self._backlogged = False
        self._packer = packer  # stored JSON packed (store/compact.py); the history's stays as it is
        self._clock = clock
        self._new_uid = uid_factory or random_uid
        self._name_rng = name_rng
        self._admission = admission
        self._admission_copies = bool(getattr(admission, "returns_fresh_copy", False))
        self._admission_trusts = bool(getattr(admission, "accepts_trusted", False))
        self._plugins: Plugins = []
        self._status_plugins: Plugins = []  # those that also run on status writes
        self._data: dict[str, dict[str | None, dict[str, Entry]]] = {k: {} for k in all_kinds()}
        # Weak: a watch its consumer dropped without closing disappears by itself.
        # A WeakKeyDictionary (not a WeakSet) so events reach watchers in the
        # order they started watching, not in an order of memory addresses:
        # same inputs, same interleaving (deterministic simulations).
        # The value: the resourceVersion the watch started after (see _emit).
        self._watchers: dict[str, weakref.WeakKeyDictionary[Watcher, int]] = {
            k: weakref.WeakKeyDictionary() for k in all_kinds()}
        self._max_pending = max_pending
        # The last SharedEvent pushed per object (kind, namespace, name): weakened
        # when a newer version is pushed, where backlogs are unbounded (see _emit, SharedEvent).
        self._latest_shared: dict[tuple[str, str | None, str], SharedEvent] = {}
        self._rv = 0
        # ``synchronous``: FULL (default) fsyncs each commit, see store/sqlite.py.
        self._db = SqliteBackend(db_path, synchronous) if db_path is not None else None
        if self._db is not None:
            self._load(self._db)
        # After a restart the history is empty: watches must start at or after the
        # reloaded resourceVersion.
        self._history = History(history_size, horizon=self._rv)
        # ``group_commit``: used under an event loop by the embedded control plane
        # (see the module docstring and store/commit.py).
        self._committer = Committer(self._db, self._emit, group_commit=group_commit, durable_rv=self._rv)

    # ------------------------------------------------------------------ set-up

    def add_admission_plugin(self, fn: AdmissionPlugin, *, status_writes: bool = True) -> None:
        """Register ``fn(op, obj, old) -> obj``, run after admission on create and
        update (incl. status and patch). It may change and return the object or
        raise ApiError to refuse; ``old`` (the stored object) it reads, never changes. On removal it is called with op "delete" (the
        last state, old=None) so it can release what it allocated; its errors are
        then logged, not raised. ``status_writes=False``: ``fn`` has nothing to do
        on a status write (as kube-apiserver's plugins that return at once for a
        subresource) and is not called for one."""
        self._plugins.append(fn)
        if status_writes:
            self._status_plugins.append(fn)

    def _load(self, db: SqliteBackend) -> None:
        counter, rows = db.load()
        for kind, ns, name, rv, raw in rows:
            if kind not in self._data:
                log.warning("store: skipping stored object of unknown kind %s %s/%s", kind, ns, name)
                continue
            try:
                obj = codec.loads(raw)
            except ValueError:
                log.error("store: skipping unreadable stored object %s %s/%s", kind, ns, name)
                continue
            rt = by_kind(kind)
            nsk = (ns or None) if rt.namespaced else None
            self._data[kind].setdefault(nsk, {})[name] = make_entry(kind, obj, raw, int(rv), self._packer)
        self._rv = counter

    def close(self) -> None:
        """Commit what is staged, close the database and end every open watch."""
        self._committer.close()
        self._db = None
        for ws in self._watchers.values():
            for w in list(ws):
                w.close()

    async def flush(self) -> None:
        """Return once every write made so far is durable and its watch events
        sent; raise ApiError when the storage refused them."""
        await self._committer.flush(self._rv)
        if self._backlogged:
            self._backlogged = False
            await asyncio.sleep(0)  # the consumers' turn: each drains what is queued for it

    # ------------------------------------------------------------------ reads

    def current_rv(self) -> str:
        return str(self._rv)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        rt = resource_type(kind)
        ns = request_namespace(rt, namespace)
        entry = self._lookup(rt, ns, name)
        return codec.loads(entry.raw)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: Any = None,
        field_selector: Any = None,
    ) -> tuple[list[Obj], str]:
        """Objects of ``kind`` (in ``namespace``, or everywhere when None), sorted by
        namespace and name, and the resourceVersion to watch from."""
        rt = resource_type(kind)
        lsel = parse_label_selector(label_selector)
        fsel = parse_field_selector(field_selector, kind)
        buckets = self._data[kind]
        namespaces: list[str | None]
        if rt.namespaced and namespace:
            namespaces = [namespace] if namespace in buckets else []
        else:
            namespaces = sorted(buckets, key=_ns_key)
        out: list[Obj] = []
        for n in namespaces:
            bucket = buckets[n]
            for name in sorted(bucket):
                e = bucket[name]
                if lsel.requirements and not lsel.matches(e.labels):
                    continue
                if fsel.requirements and not fsel.matches(e.fields(kind)):
                    continue
                out.append(codec.loads(e.raw))
        return out, str(self._rv)

    def watch(self, kind: str, namespace: str | None = None, since_rv: str | None = None, *,
              shared: bool = False) -> Watcher:
        """Events of ``kind`` after ``since_rv`` (exclusive). Without one (or "0"),
        a synthetic ADDED for every current object comes first, then live events.
        Raises Gone when ``since_rv`` is older than the history. ``shared``: the
        consumer treats objects as read-only, so it gets the one decoded object
        every shared watcher of the event gets (see store/decode.py)."""
        rt = resource_type(kind)
        ns = namespace if (rt.namespaced and namespace) else None
        w = Watcher(kind, ns, self._max_pending, self._unregister, shared=shared)
        start = self._rv  # staged (group commit) events up to here are already in what w got
        if since_rv in (None, "", "0", 0):
            buckets = self._data[kind]
            names: list[str | None] = [ns] if ns is not None else sorted(buckets, key=_ns_key)
            for n in names:
                bucket = buckets.get(n, {})
                for name in sorted(bucket):
                    w.push("ADDED", bucket[name].raw)
        else:
            try:
                rv = int(str(since_rv))
                if rv < 0:
                    raise ValueError
            except ValueError:
                raise BadRequest(f'resourceVersion: Invalid value: "{since_rv}": must be a non-negative integer') from None
            w.push_many((ev.type, ev.raw) for ev in self._history.since(rv, kind, ns))
            start = rv
        self._watchers[kind][w] = start
        return w

    def _unregister(self, w: Watcher) -> None:
        ws = self._watchers.get(w.kind)
        if ws is not None:
            ws.pop(w, None)

    # ------------------------------------------------------------------ writes

    def create(self, obj: Obj, *, trusted: bool = False) -> Obj:
        """Store a new object. ``trusted``: written by the control plane's own
        components (admission then skips the schema decoding, see ``admit``)."""
        obj = self._own_copy(obj)
        rt = resource_type_of(obj)
        meta = checked_meta(rt, obj)
        check_api_version(rt, obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(rt, meta)
        name = meta.get("name")
        if not name:
            raise invalid(rt, "", FieldError("metadata.name", "Required", "name or generateName is required"))
        check_name(rt, name)
        if not rt.namespaced:
            meta.pop("namespace", None)
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            meta.pop(f, None)
        if rt.has_status and rt.kind != "Node":
            # Status is written through update_status only. Nodes keep theirs: a
            # kubelet registers with its capacity (docs/REFERENCE.md golden 12).
            obj.pop("status", None)
        if rt.kind in INITIAL_STATUS:
            obj["status"] = dict(INITIAL_STATUS[rt.kind])
        stamp = self._creation_stamp(rt)
        meta.update(stamp)

        obj = self._admit(obj, None, trusted)
        if not isinstance(obj.get("metadata"), dict):
            raise ApiError("Internal error occurred: admission removed metadata")
        ns = object_namespace(rt, obj, name)  # after admission, which may default it
        check_identity(rt, obj, ns, name)
        if name in self._data[rt.kind].get(ns, {}):
            raise AlreadyExists(resource_name(rt), name)
        obj = self._run_plugins("create", obj, None)
        try:
            check_identity(rt, obj, ns, name)
            obj["metadata"].update(stamp)
            rv = self._rv + 1
            obj["metadata"]["resourceVersion"] = str(rv)
            raw = serialize(obj)
            check_size(rt, name, raw)
            self._commit_put(rt, ns, name, obj, raw, rv, "ADDED")
        except BaseException:
            self._notify_delete(obj)  # release what the plugins allocated
            raise
        return obj  # the store keeps only ``raw``: this private copy is the caller's

    def update(self, obj: Obj, *, trusted: bool = False) -> Obj:
        """Replace spec and metadata (status too for kinds without a status
        subresource). A set, stale ``metadata.resourceVersion`` raises Conflict.
        ``trusted`` as for ``create``."""
        obj = self._own_copy(obj)
        rt = resource_type_of(obj)
        meta = checked_meta(rt, obj)
        check_api_version(rt, obj)
        name = required_name(rt, meta)
        ns = object_namespace(rt, obj, name)
        entry = self._lookup(rt, ns, name)
        old = codec.loads(entry.raw)
        check_preconditions(rt, name, meta, old)
        keep_system_fields(rt, obj, old)
        check_finalizers(rt, name, obj, old)

        obj = self._admit(obj, old, trusted)  # admission never changes ``old``
        check_identity(rt, obj, ns, name)
        obj = self._run_plugins("update", obj, old)
        check_identity(rt, obj, ns, name)
        keep_system_fields(rt, obj, old)
        return self._finish_update(rt, ns, name, old, obj)

    def update_status(self, obj: Obj, *, trusted: bool = False) -> Obj:
        """Replace only ``status``; spec and metadata stay as stored. For kinds
        without a status subresource (PodGroup, Event) this is ``update``."""
        if not isinstance(obj, dict):
            raise BadRequest("the object must be a JSON object")
        rt = resource_type_of(obj)
        if not rt.has_status:
            return self.update(obj, trusted=trusted)
        # Only metadata (read) and status (copied by checked_status) are used:
        # no deep copy of the rest, which the status subresource ignores.
        obj = dict(obj)
        meta = checked_meta(rt, obj)
        name = required_name(rt, meta)
        ns = object_namespace(rt, obj, name)
        raw = self._lookup(rt, ns, name).raw
        old = codec.loads(raw)
        check_preconditions(rt, name, meta, old)
        status = checked_status(rt, name, obj["status"]) if "status" in obj else None
        if self._status_plugins:
            new = codec.loads(raw)  # the plugins' own whole object, of which only the status is kept
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            new = self._run_plugins("update", new, old, self._status_plugins)
            check_identity(rt, new, ns, name)
            status = new.get("status")
        # Only status changes here: the rest is the stored object's (``old``, a private
        # copy; only the new metadata dict is written to below).
        new = {**old, "metadata": dict(old["metadata"])}
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        return self._finish_update(rt, ns, name, old, new, status_only=True)

    def patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: str = "merge",
        subresource: str | None = None,
        *,
        trusted: bool = False,
    ) -> Obj:
        """Apply a merge (RFC 7386) or JSON (RFC 6902) patch, then update (or
        update_status for ``subresource="status"``). Unconditional unless the
        patch sets ``metadata.resourceVersion``. ``trusted`` as for ``create``."""
        rt = resource_type(kind)
        ns = request_namespace(rt, namespace)
        if subresource not in (None, "", "status"):
            raise BadRequest(f'unsupported subresource "{subresource}" (supported: "status")')
        current = codec.loads(self._lookup(rt, ns, name).raw)
        new = patched(rt, ns, name, current, patch, patch_type)
        if subresource == "status":
            return self.update_status(new, trusted=trusted)
        return self.update(new, trusted=trusted)

    def delete(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        propagation_policy: str | None = None,
        *,
        return_deleted: bool = False,
    ) -> Obj | None:
        """Delete. Returns the object when it stays (graceful pod deletion,
        finalizers), None when it is gone at once - or, with ``return_deleted``,
        its last state (what the HTTP API answers: docs/REFERENCE.md golden 65, 67).

        ``propagation_policy`` as the apiserver applies it: Foreground adds the
        ``foregroundDeletion`` finalizer (the garbage collector deletes the
        dependents, then removes it: docs/REFERENCE.md golden 35), Orphan the ``orphan``
        finalizer (the collector unlinks the dependents); Background removes
        both; None keeps the finalizers as they are."""
        rt = resource_type(kind)
        ns = request_namespace(rt, namespace)
        check_deletable(rt, name)
        check_delete_options(grace_period_seconds, propagation_policy)
        entry = self._lookup(rt, ns, name)
        obj = codec.loads(entry.raw)
        meta = obj["metadata"]
        if preconditions_uid is not None and meta.get("uid") != preconditions_uid:
            raise PreconditionConflict(
                resource_name(rt), name,
                f"Precondition failed: UID in precondition: {preconditions_uid}, UID in object meta: {meta.get('uid')}")
        now = self._clock.now()
        old_finalizers = list(meta.get("finalizers") or [])
        finalizers = gc_finalizers(propagation_policy, old_finalizers)
        if finalizers != old_finalizers:
            if finalizers:
                meta["finalizers"] = finalizers
            else:
                meta.pop("finalizers", None)
        grace = pod_grace(obj, grace_period_seconds) if rt.kind == "Pod" else 0

        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds")
            changed = finalizers != old_finalizers
            if isinstance(current, int) and grace < current:
                requested = (parse_time(meta["deletionTimestamp"]) or now) - timedelta(seconds=current)
                meta["deletionTimestamp"] = format_time(requested + timedelta(seconds=grace))
                meta["deletionGracePeriodSeconds"] = current = grace
                changed = True
            if not changed:
                return obj  # deletion already pending; only a shorter grace or other finalizers change it
            if current in (0, None) and not finalizers:
                raw = self._commit_remove(rt, ns, name, obj)
                return codec.loads(raw) if return_deleted else None
            return self._write_modified(rt, ns, name, obj)

        if grace > 0 or finalizers:
            meta["deletionTimestamp"] = format_time(now + timedelta(seconds=grace))
            meta["deletionGracePeriodSeconds"] = grace
            bump_generation(rt, meta)
            return self._write_modified(rt, ns, name, obj)
        if rt.kind == "Pod":
            # The apiserver marks even an immediately deleted pod, so the DELETED
            # event shows deletionTimestamp and a zero grace period.
            meta["deletionTimestamp"] = format_time(now)
            meta["deletionGracePeriodSeconds"] = 0
            bump_generation(rt, meta)
        raw = self._commit_remove(rt, ns, name, obj)
        return codec.loads(raw) if return_deleted else None

    def bind(self, namespace: str, name: str, node: str) -> None:
        """pods/binding: set ``spec.nodeName`` of an unbound pod and mark it
        PodScheduled=True, as the apiserver's binding subresource does."""
        rt = by_kind("Pod")
        ns = request_namespace(rt, namespace)
        if not isinstance(node, str) or not node:
            raise BadRequest("binding target: a node name is required")
        pod = codec.loads(self._lookup(rt, ns, name).raw)
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            spec = pod["spec"] = {}
        if pod["metadata"].get("deletionTimestamp"):
            raise PreconditionConflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise PreconditionConflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        spec["nodeName"] = node
        status = pod.get("status")
        if not isinstance(status, dict):
            status = pod["status"] = {}
        conds = [c for c in (status.get("conditions") or []) if isinstance(c, dict)]
        cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                "lastTransitionTime": format_time(self._clock.now())}
        for i, c in enumerate(conds):
            if c.get("type") == "PodScheduled":
                if c.get("status") == "True":
                    cond = c
                conds[i] = cond
                break
        else:
            conds.append(cond)
        status["conditions"] = conds
        self._write_modified(rt, ns, name, pod)

    # ------------------------------------------------------------------ write helpers

    def _finish_update(self, rt: ResourceType, ns: str | None, name: str, old: Obj, new: Obj,
                       status_only: bool = False) -> Obj:
        """Generation, no-op detection, deletion once finalizers are gone, commit.
        ``status_only``: ``new`` is the stored object with another status (a
        status subresource write), so its spec cannot have changed."""
        meta = new["metadata"]
        old_meta = old["metadata"]
        if tracks_generation(rt):
            gen = old_meta.get("generation") if isinstance(old_meta.get("generation"), int) else 1
            changed = not status_only and spec_changed(rt, old, new)
            meta["generation"] = gen + 1 if changed else gen
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old and json_equal(new, old):
            # Nothing changed: no new resourceVersion and no event, as the apiserver
            # does; controllers rewriting the same status do not wake each other.
            return codec.loads(self._data[rt.kind][ns][name].raw)
        if should_delete_during_update(old_meta, meta):
            return codec.loads(self._commit_remove(rt, ns, name, new))
        return self._write_modified(rt, ns, name, new, limit_size=True)

    def _write_modified(self, rt: ResourceType, ns: str | None, name: str, obj: Obj,
                        limit_size: bool = False) -> Obj:
        """Commit ``obj``. Client writes (``limit_size``) are held to MAX_OBJECT_BYTES;
        the store's own (deletion marks, bindings) are not, so anything stored can be deleted."""
        rv = self._rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = serialize(obj)
        if limit_size:
            check_size(rt, name, raw)
        self._commit_put(rt, ns, name, obj, raw, rv, "MODIFIED")
        return obj  # as in create: the caller's, the store keeps ``raw``

    def _commit_put(self, rt: ResourceType, ns: str | None, name: str, obj: Obj, raw: str, rv: int, type_: str) -> None:
        entry = make_entry(rt.kind, obj, raw, rv, self._packer)
        ev = HistoryEvent(rv, rt.kind, ns, type_, raw, name)
        staged = self._committer.persist((rt.kind, ns, name, rv, raw), ev)
        self._rv = rv
        self._data[rt.kind].setdefault(ns, {})[name] = entry
        if not staged:
            self._emit(ev)

    def _commit_remove(self, rt: ResourceType, ns: str | None, name: str, last: Obj) -> str:
        """Remove the object; returns the JSON of its last state (the DELETED event's)."""
        rv = self._rv + 1
        last["metadata"]["resourceVersion"] = str(rv)
        raw = serialize(last)
        ev = HistoryEvent(rv, rt.kind, ns, "DELETED", raw, name)
        staged = self._committer.persist((rt.kind, ns, name, rv, None), ev)
        self._rv = rv
        bucket = self._data[rt.kind][ns]
        del bucket[name]
        if not bucket:
            del self._data[rt.kind][ns]
        self._notify_delete(last)
        if not staged:
            self._emit(ev)
        return raw

    def _emit(self, ev: HistoryEvent) -> None:
        self._history.append(ev)
        key = (ev.kind, ev.namespace, ev.name)
        # The previous version of this object need not stay decoded for watchers
        # still behind (see SharedEvent), unless their backlogs are bounded: then
        # holding it costs at most a backlog's worth of objects, and dropping it
        # means each of them decodes (and interns) it again.
        prev = self._latest_shared.pop(key, None)
        if prev is not None and self._watch_backlog is None:
            prev.weaken()
        watchers = self._watchers[ev.kind]
        if not watchers:
            return
        shared = SharedEvent(ev.raw, self._interner)  # decoded once for every shared watcher
        takers = 0
        limit = self._watch_backlog
        for w, start in tuple(watchers.items()):
            if ev.rv > start and (w.namespace is None or w.namespace == ev.namespace):
                takers += w.push(ev.type, shared)
                if limit is not None and w.pending() > limit:
                    self._backlogged = True
        if not takers or ev.type == "DELETED":
            shared.hold(takers)
            return
        shared.hold(takers)
        if prev is not None:
            shared.follow(prev)
        self._latest_shared[key] = shared

    # ------------------------------------------------------------------ admission

    def _admit(self, obj: Obj, old: Obj | None, trusted: bool = False) -> Obj:
        if self._admission is None:
            return obj
        try:
            if trusted and self._admission_trusts:
                res = self._admission(obj, old, trusted=True)  # type: ignore[call-arg]
            else:
                res = self._admission(obj, old)
        except ApiError:
            raise
        except Exception as e:  # a bug in admission must not look like a crash to the caller
            log.exception("store: admission failed on %s", obj.get("kind"))
            raise ApiError(f"Internal error occurred: admission: {e}") from e
        if res is None or res is obj:
            # Not the fresh copy _own_copy counts on (Phalanx's admission always
            # returns one): copy here, so nothing below can reach the caller's object.
            return copy_in(obj)
        if not isinstance(res, dict):
            raise ApiError("Internal error occurred: admission returned a non-object")
        return res

    def _run_plugins(self, op: str, obj: Obj, old: Obj | None, plugins: Plugins | None = None) -> Obj:
        done: Plugins = []
        for p in self._plugins if plugins is None else plugins:
            try:
                res = p(op, obj, old)
                if res is not None and not isinstance(res, dict):
                    raise ApiError("Internal error occurred: admission plugin returned a non-object")
            except BaseException as e:
                if op == "create":
                    self._notify_delete(obj, done)  # release what earlier plugins took
                if isinstance(e, ApiError) or not isinstance(e, Exception):
                    raise
                log.exception("store: admission plugin failed on %s", obj.get("kind"))
                raise ApiError(f"Internal error occurred: admission plugin: {e}") from e
            if res is not None:
                obj = res
            done.append(p)
        return obj

    def _notify_delete(self, obj: Obj, plugins: Plugins | None = None) -> None:
        for p in self._plugins if plugins is None else plugins:
            try:
                p("delete", obj, None)
            except Exception:
                log.exception("store: admission plugin failed on delete of %s", obj.get("kind"))

    def _own_copy(self, obj: Any) -> Obj:
        """What create/update may change before admission. With an admission that
        never changes its input and returns a deep, checked copy (Phalanx's,
        ``returns_fresh_copy``), only the top level and metadata are copied (the
        store changes nothing deeper before it); otherwise all of it."""
        if not self._admission_copies or not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return copy_in(obj)
        out = dict(obj)
        out["metadata"] = dict(obj["metadata"])
        return out

    # ------------------------------------------------------------------ identity

    def _lookup(self, rt: ResourceType, ns: str | None, name: str) -> Entry:
        entry = self._data[rt.kind].get(ns, {}).get(name) if isinstance(name, str) else None
        if entry is None:
            raise NotFound(resource_name(rt), str(name))
        return entry

    def _creation_stamp(self, rt: ResourceType) -> dict[str, Any]:
        stamp: dict[str, Any] = {
            "uid": self._new_uid(),
            "creationTimestamp": format_time(self._clock.now()),
        }
        if tracks_generation(rt):
            stamp["generation"] = 1
        return stamp

    def _generate_name(self, rt: ResourceType, meta: dict[str, Any]) -> str:
        base = meta["generateName"][: MAX_NAME_LENGTH - GENERATE_NAME_SUFFIX]
        ns = meta.get("namespace") if rt.namespaced else None
        taken = self._data[rt.kind].get(ns, {})
        for _ in range(16):
            name = base + "".join((self._name_rng or random).choices(GENERATE_NAME_CHARS, k=GENERATE_NAME_SUFFIX))
            if name not in taken:
                return name
        return name  # AlreadyExists will tell the client, as the apiserver does
