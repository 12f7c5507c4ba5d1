"""The versioned, watchable object store behind the embedded control plane.

Kubernetes apiserver semantics over plain dicts: uid, one global monotonic
resourceVersion, generation, optimistic concurrency, status written apart from
spec, graceful pod deletion, finalizers, watch with a bounded history (410 Gone
beyond it), and write-through SQLite persistence.

Used from one asyncio event-loop thread only; every method is synchronous and
every write is atomic: it is validated, admitted, persisted and only then made
visible (memory + watch events). Objects are kept as serialized JSON, so
nothing a caller holds can alias stored state.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import random
import sqlite3
import sys
import uuid
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from phalanx.api.manifest import MAX_DEPTH, ShapeError, normalize_json
from phalanx.api.registry import ResourceType, all_kinds, by_kind
from phalanx.objects.clock import Clock, format_time, parse_time
from phalanx.objects.errors import AlreadyExists, ApiError, BadRequest, Conflict, FieldError, Invalid, NotFound
from phalanx.objects.selectors import field_values, parse_field_selector, parse_label_selector, supported_fields
from phalanx.store import codec
from phalanx.store.decode import SharedEvent
from phalanx.store.patch import JsonPatchError, json_equal, json_patch, merge_patch
from phalanx.store.sqlite import DEFAULT_SYNCHRONOUS, SqliteBackend
from phalanx.store.watch import History, HistoryEvent, Watcher

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Admission = Callable[[Obj, "Obj | None"], Obj]
AdmissionPlugin = Callable[[str, Obj, "Obj | None"], "Obj | None"]

DEFAULT_POD_GRACE_SECONDS = 30
# The largest object a write may leave stored, as JSON: etcd's default request
# limit (--max-request-bytes, 1.5 MiB), which bounds every object of a real cluster.
MAX_OBJECT_BYTES = 1536 * 1024
_GENERATE_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apiserver's SimpleNameGenerator alphabet
_MAX_NAME_LENGTH = 253
# What the apiserver's create strategies put in a fresh object's status.
_INITIAL_STATUS = {"Pod": {"phase": "Pending"}, "Namespace": {"phase": "Active"}}


FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def gc_finalizers(policy: str | None, finalizers: list[str]) -> list[str]:
    """The finalizers a delete with ``policy`` leaves (apiserver
    deletionFinalizersForGarbageCollection): the policy's own, never both."""
    if policy is None:
        return list(finalizers)
    out = [f for f in finalizers if f not in (FOREGROUND_FINALIZER, ORPHAN_FINALIZER)]
    if policy == "Foreground":
        out.append(FOREGROUND_FINALIZER)
    elif policy == "Orphan":
        out.append(ORPHAN_FINALIZER)
    return out


class PatchRejected(Invalid):
    """A JSON patch that does not apply (e.g. a failed ``test``): 422 with the
    apiserver's generic message; ``cause`` says what failed, and the one
    field error (``patch[<operation>]``, the operation's path as the value)
    says where, in ``details.causes``."""

    def __init__(self, cause: str, index: int | None = None, pointer: str | None = None) -> None:
        ApiError.__init__(self, "the server rejected our request due to an error in our request")
        self.cause = cause
        field = "patch" if index is None else f"patch[{index}]"
        self.errors = [FieldError(field, "Invalid", cause, pointer if pointer is not None else "")]


class ObjectTooLarge(ApiError):
    """413: the object, decoded and defaulted, is larger than MAX_OBJECT_BYTES."""

    code = 413
    reason = "RequestEntityTooLarge"

    def __init__(self, rt: ResourceType, name: str, size: int) -> None:
        super().__init__(f'{rt.kind} "{name[:253]}" is too large: {size} bytes as stored, at most '
                         f"{MAX_OBJECT_BYTES} ({MAX_OBJECT_BYTES / 2**20:g} MiB) can be stored")


class PreconditionConflict(Conflict):
    """409 Conflict with a specific reason (uid precondition, binding)."""

    def __init__(self, resource: str, name: str, detail: str) -> None:
        ApiError.__init__(self, f'Operation cannot be fulfilled on {resource} "{name}": {detail}')


# Shared by every entry without labels; never mutated.
_NO_LABELS: dict[str, str] = {}


def _interned(v: Any) -> Any:
    return sys.intern(v) if v.__class__ is str else v


class _Entry:
    """One stored object: its JSON plus what selectors need, pre-extracted.
    Label and field strings are interned (most repeat across objects) and the
    field values are a tuple in ``supported_fields(kind)`` order: thousands of
    entries, so every small dict and duplicate string counts."""

    __slots__ = ("raw", "rv", "labels", "field_values")

    def __init__(self, raw: str, rv: int, labels: dict[str, str], field_values: tuple[str, ...]) -> None:
        self.raw = raw
        self.rv = rv
        self.labels = labels
        self.field_values = field_values

    def fields(self, kind: str) -> dict[str, str]:
        """The selectable field values by field name (what FieldSelector matches)."""
        return dict(zip(supported_fields(kind), self.field_values))


def resource_name(rt: ResourceType) -> str:
    """How the apiserver names a resource in messages: ``pods``, ``pytorchjobs.kubeflow.org``."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _tracks_generation(rt: ResourceType) -> bool:
    # Custom resources and (since 1.32) Pods carry metadata.generation; the other
    # built-in v1 kinds we serve (Node, Namespace, Service, Event) do not.
    return bool(rt.group) or rt.kind == "Pod"


# uids: random version-4 UUIDs, as the apiserver's. A PRNG seeded from the OS
# (os.urandom per uid cost ~25 us on these VMs); uniqueness is all a uid needs,
# it guards nothing.
_uid_rng = random.Random()
os.register_at_fork(after_in_child=_uid_rng.seed)  # a forked child must not repeat the parent's uids


def _random_uid() -> str:
    return str(uuid.UUID(int=_uid_rng.getrandbits(128), version=4))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _invalid(rt: ResourceType, name: str, *errors: FieldError) -> Invalid:
    return Invalid(list(errors), prefix=f'{rt.kind} "{name}" is invalid: ')


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
    ) -> None:
        # ``uid_factory`` / ``name_rng``: where uids and generateName suffixes come
        # from (default: random version-4 uuids and the module's random); a simulation passes
        # deterministic ones so the same inputs give the same objects.
        self._clock = clock
        self._new_uid = uid_factory or _random_uid
        self._name_rng = name_rng
        self._admission = admission
        self._admission_copies = bool(getattr(admission, "returns_fresh_copy", False))
        self._plugins: list[AdmissionPlugin] = []
        self._data: dict[str, dict[str | None, dict[str, _Entry]]] = {k: {} for k in all_kinds()}
        # Weak: a watch its consumer dropped without closing disappears by itself.
        # A WeakKeyDictionary (not a WeakSet) so events reach watchers in the
        # order they started watching, not in an order of memory addresses:
        # same inputs, same interleaving (deterministic simulations).
        # The value: the resourceVersion the watch started after (see _emit).
        self._watchers: dict[str, weakref.WeakKeyDictionary[Watcher, int]] = {
            k: weakref.WeakKeyDictionary() for k in all_kinds()}
        self._max_pending = max_pending
        # The last SharedEvent pushed per object (kind, namespace, name): weakened
        # when a newer version is pushed (see _emit, SharedEvent).
        self._latest_shared: dict[tuple[str, str | None, str], SharedEvent] = {}
        self._rv = 0
        # ``synchronous``: FULL (default) fsyncs each commit, see store/sqlite.py.
        self._db = SqliteBackend(db_path, synchronous) if db_path is not None else None
        if self._db is not None:
            self._load()
        # After a restart the history is empty: watches must start at or after the
        # reloaded resourceVersion.
        self._history = History(history_size, horizon=self._rv)
        # Group commit (``group_commit``, used under an event loop by LocalClient):
        # a write changes memory at once and is staged; one worker-thread
        # transaction (one fsync) commits every write staged meanwhile; only then
        # are its watch events sent and its writers (``await flush()``) answered.
        # Without a running loop, or without it, each write commits at once.
        self._group_commit = group_commit and self._db is not None
        self._staged: list[tuple[str, str | None, str, int, str | None]] = []
        self._staged_events: list[HistoryEvent] = []
        self._durable_rv = self._rv
        self._committer: asyncio.Task[None] | None = None
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ set-up

    def add_admission_plugin(self, fn: AdmissionPlugin) -> None:
        """Register ``fn(op, obj, old) -> obj``, run after admission on create and
        update (incl. status and patch). It may change and return the object or
        raise ApiError to refuse. On removal it is called with op "delete" (the
        last state, old=None) so it can release what it allocated; its errors are
        then logged, not raised."""
        self._plugins.append(fn)

    def _load(self) -> None:
        assert self._db is not None
        counter, rows = self._db.load()
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
            self._data[kind].setdefault(nsk, {})[name] = self._entry(kind, obj, raw, int(rv))
        self._rv = counter

    def close(self) -> None:
        """Commit what is staged, close the database and end every open watch."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)  # a batch in flight ends first
            self._executor = None
        if self._db is not None and self._staged:
            try:
                self._db.write_batch(self._staged)
            except sqlite3.Error as e:
                log.error("store: cannot persist %d writes at close: %s", len(self._staged), e)
            self._staged.clear()
        for ws in self._watchers.values():
            for w in list(ws):
                w.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    # ------------------------------------------------------------------ group commit

    async def flush(self) -> None:
        """Return once every write made so far is durable and its watch events
        sent; raise ApiError when the storage refused them."""
        if not self._group_commit or self._durable_rv >= self._rv and not self._staged:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((self._rv, fut))
        self._start_committer()
        await fut

    def _stage(self, op: tuple[str, str | None, str, int, str | None], ev: HistoryEvent) -> bool:
        """Stage a write for the next group commit; False when it must commit now."""
        if not self._group_commit:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._staged.append(op)
        self._staged_events.append(ev)
        self._start_committer()
        return True

    def _start_committer(self) -> None:
        if self._committer is None or self._committer.done():
            self._committer = asyncio.get_running_loop().create_task(self._commit_loop(), name="store-commit")

    async def _commit_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-commit")
        delay = 0.01
        while self._staged:
            ops, events = self._staged, self._staged_events
            self._staged, self._staged_events = [], []
            db = self._db
            try:
                if db is None:
                    raise sqlite3.ProgrammingError("the store is closed")
                await loop.run_in_executor(self._executor, db.write_batch, ops)
            except (sqlite3.Error, RuntimeError) as e:
                # Memory already holds these writes: keep them staged (the disk catches
                # up once it can) and tell their writers the write is not durable.
                log.error("store: cannot persist %d writes: %s", len(ops), e)
                self._staged[:0], self._staged_events[:0] = ops, events
                err = ApiError(f"Internal error occurred: storage write failed: {e}")
                self._answer(ops[-1][3], err)
                if db is None:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.01
            self._durable_rv = ops[-1][3]
            for ev in events:
                self._emit(ev)
            self._answer(self._durable_rv, None)
        self._answer(self._durable_rv, None)

    def _answer(self, rv: int, err: ApiError | None) -> None:
        keep = []
        for target, fut in self._flush_waiters:
            if fut.done():
                continue
            if err is not None:
                fut.set_exception(err)
            elif target <= rv:
                fut.set_result(None)
            else:
                keep.append((target, fut))
        self._flush_waiters = keep

    # ------------------------------------------------------------------ reads

    def current_rv(self) -> str:
        return str(self._rv)

    def get(self, kind: str, ns: str | None, name: str) -> Obj:
        rt = self._rt(kind)
        ns = self._ns(rt, ns)
        entry = self._lookup(rt, ns, name)
        return codec.loads(entry.raw)

    def list(
        self,
        kind: str,
        ns: str | None = None,
        label_selector: Any = None,
        field_selector: Any = None,
    ) -> tuple[list[Obj], str]:
        """Objects of ``kind`` (in ``ns``, or everywhere when None), sorted by
        namespace and name, and the resourceVersion to watch from."""
        rt = self._rt(kind)
        lsel = parse_label_selector(label_selector)
        fsel = parse_field_selector(field_selector, kind)
        buckets = self._data[kind]
        if rt.namespaced and ns:
            namespaces = [ns] if ns in buckets else []
        else:
            namespaces = sorted(buckets, key=lambda n: n or "")
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

    def watch(self, kind: str, ns: str | None = None, since_rv: str | None = None, *,
              shared: bool = False) -> Watcher:
        """Events of ``kind`` after ``since_rv`` (exclusive). Without one (or "0"),
        a synthetic ADDED for every current object comes first, then live events.
        Raises Gone when ``since_rv`` is older than the history. ``shared``: the
        consumer treats objects as read-only, so it gets the one decoded object
        every shared watcher of the event gets (see store/decode.py)."""
        rt = self._rt(kind)
        ns = ns if (rt.namespaced and ns) else None
        w = Watcher(kind, ns, self._max_pending, self._unregister, shared=shared)
        start = self._rv  # staged (group commit) events up to here are already in what w got
        if since_rv in (None, "", "0", 0):
            buckets = self._data[kind]
            names = [ns] if ns is not None else sorted(buckets, key=lambda n: n or "")
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

    def create(self, obj: Obj) -> Obj:
        obj = self._own_copy(obj)
        rt = self._rt_of(obj)
        meta = self._meta(rt, obj)
        self._check_api_version(rt, obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(rt, meta)
        name = meta.get("name")
        if not name:
            raise _invalid(rt, "", FieldError("metadata.name", "Required", "name or generateName is required"))
        self._check_name(rt, name)
        if not rt.namespaced:
            meta.pop("namespace", None)
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            meta.pop(f, None)
        if rt.has_status and rt.kind != "Node":
            # Status is written through update_status only. Nodes keep theirs: a
            # kubelet registers with its capacity (golden 12).
            obj.pop("status", None)
        if rt.kind in _INITIAL_STATUS:
            obj["status"] = dict(_INITIAL_STATUS[rt.kind])
        stamp = self._creation_stamp(rt)
        meta.update(stamp)

        obj = self._admit(obj, None)
        if not isinstance(obj.get("metadata"), dict):
            raise ApiError("Internal error occurred: admission removed metadata")
        ns = self._object_ns(rt, obj, name)  # after admission, which may default it
        self._check_identity(rt, obj, ns, name)
        if name in self._data[rt.kind].get(ns, {}):
            raise AlreadyExists(resource_name(rt), name)
        obj = self._run_plugins("create", obj, None)
        try:
            self._check_identity(rt, obj, ns, name)
            obj["metadata"].update(stamp)
            rv = self._rv + 1
            obj["metadata"]["resourceVersion"] = str(rv)
            raw = self._serialize(obj)
            self._check_size(rt, name, raw)
            self._commit_put(rt, ns, name, obj, raw, rv, "ADDED")
        except BaseException:
            self._notify_delete(obj)  # release what the plugins allocated
            raise
        return codec.loads(raw)

    def update(self, obj: Obj) -> Obj:
        """Replace spec and metadata (status too for kinds without a status
        subresource). A set, stale ``metadata.resourceVersion`` raises Conflict."""
        obj = self._own_copy(obj)
        rt = self._rt_of(obj)
        meta = self._meta(rt, obj)
        self._check_api_version(rt, obj)
        name = self._required_name(rt, meta)
        ns = self._object_ns(rt, obj, name)
        entry = self._lookup(rt, ns, name)
        old = codec.loads(entry.raw)
        self._check_preconditions(rt, name, meta, old)
        self._keep_system_fields(rt, obj, old)
        self._check_finalizers(rt, name, obj, old)

        obj = self._admit(obj, codec.loads(entry.raw))
        self._check_identity(rt, obj, ns, name)
        obj = self._run_plugins("update", obj, self._plugin_old(entry, old))
        self._check_identity(rt, obj, ns, name)
        self._keep_system_fields(rt, obj, old)
        return self._finish_update(rt, ns, name, old, obj)

    def update_status(self, obj: Obj) -> Obj:
        """Replace only ``status``; spec and metadata stay as stored. For kinds
        without a status subresource (PodGroup, Event) this is ``update``."""
        if not isinstance(obj, dict):
            raise BadRequest("the object must be a JSON object")
        rt = self._rt_of(obj)
        if not rt.has_status:
            return self.update(obj)
        # Only metadata (read) and status (copied by _checked_status) are used:
        # no deep copy of the rest, which the status subresource ignores.
        obj = dict(obj)
        meta = self._meta(rt, obj)
        name = self._required_name(rt, meta)
        ns = self._object_ns(rt, obj, name)
        entry = self._lookup(rt, ns, name)
        old = codec.loads(entry.raw)
        self._check_preconditions(rt, name, meta, old)
        new = codec.loads(entry.raw)
        if "status" in obj:
            new["status"] = self._checked_status(rt, name, obj["status"])
        else:
            new.pop("status", None)
        new = self._run_plugins("update", new, self._plugin_old(entry, old))
        self._check_identity(rt, new, ns, name)
        status = new.get("status")
        new = codec.loads(entry.raw)  # plugins may only change status here
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        return self._finish_update(rt, ns, name, old, new, status_only=True)

    def patch(
        self,
        kind: str,
        ns: str | None,
        name: str,
        patch: Any,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        """Apply a merge (RFC 7386) or JSON (RFC 6902) patch, then update (or
        update_status for ``subresource="status"``). Unconditional unless the
        patch sets ``metadata.resourceVersion``."""
        rt = self._rt(kind)
        ns = self._ns(rt, ns)
        if subresource not in (None, "", "status"):
            raise BadRequest(f'unsupported subresource "{subresource}" (supported: "status")')
        current = codec.loads(self._lookup(rt, ns, name).raw)
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise BadRequest("merge patch must be a JSON object")
            patched = merge_patch(current, patch)
        elif patch_type == "json":
            try:
                patched = json_patch(current, patch)
            except JsonPatchError as e:
                raise PatchRejected(str(e), e.index, e.pointer) from None
        else:
            raise BadRequest(f'unsupported patch type "{patch_type}" (supported: "merge", "json")')
        if not isinstance(patched, dict):
            raise BadRequest("the patched object must be a JSON object")
        if patched.get("kind") != rt.kind:
            raise BadRequest(f'the patch may not change kind (from "{rt.kind}" to {patched.get("kind")!r})')
        pmeta = patched.get("metadata")
        if not isinstance(pmeta, dict):
            raise _invalid(rt, name, FieldError("metadata", "Required"))
        if pmeta.get("name") != name:
            raise BadRequest(f"the name of the object ({pmeta.get('name')}) does not match the name on the URL ({name})")
        if rt.namespaced and pmeta.get("namespace") != ns:
            raise BadRequest(
                f"the namespace of the object ({pmeta.get('namespace')}) does not match the namespace on the URL ({ns})")
        if subresource == "status":
            return self.update_status(patched)
        return self.update(patched)

    def delete(
        self,
        kind: str,
        ns: str | None,
        name: str,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        *,
        return_deleted: bool = False,
        propagation_policy: str | None = None,
    ) -> Obj | None:
        """Delete. Returns the object when it stays (graceful pod deletion,
        finalizers), None when it is gone at once - or, with ``return_deleted``,
        its last state (what the HTTP API answers: golden 65, 67).

        ``propagation_policy`` as the apiserver applies it: Foreground adds the
        ``foregroundDeletion`` finalizer (the garbage collector deletes the
        dependents, then removes it: golden 35), Orphan the ``orphan``
        finalizer (the collector unlinks the dependents); Background removes
        both; None keeps the finalizers as they are."""
        rt = self._rt(kind)
        ns = self._ns(rt, ns)
        if grace_period_seconds is not None and (
                isinstance(grace_period_seconds, bool) or not isinstance(grace_period_seconds, int)):
            raise BadRequest(f"gracePeriodSeconds: Invalid value: {grace_period_seconds!r}: must be an integer")
        if propagation_policy not in (None, *PROPAGATION_POLICIES):
            raise BadRequest(f'propagationPolicy: Unsupported value: "{propagation_policy}": supported values: '
                             + ", ".join(f'"{p}"' for p in PROPAGATION_POLICIES))
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
        grace = self._pod_grace(obj, grace_period_seconds) if rt.kind == "Pod" else 0

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
            self._bump_generation(rt, meta)
            return self._write_modified(rt, ns, name, obj)
        if rt.kind == "Pod":
            # The apiserver marks even an immediately deleted pod, so the DELETED
            # event shows deletionTimestamp and a zero grace period.
            meta["deletionTimestamp"] = format_time(now)
            meta["deletionGracePeriodSeconds"] = 0
            self._bump_generation(rt, meta)
        raw = self._commit_remove(rt, ns, name, obj)
        return codec.loads(raw) if return_deleted else None

    def bind(self, ns: str, name: str, node: str) -> None:
        """pods/binding: set ``spec.nodeName`` of an unbound pod and mark it
        PodScheduled=True, as the apiserver's binding subresource does."""
        rt = by_kind("Pod")
        ns = self._ns(rt, ns)
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
        if _tracks_generation(rt):
            gen = old_meta.get("generation") if isinstance(old_meta.get("generation"), int) else 1
            changed = not status_only and self._spec_changed(rt, old, new)
            meta["generation"] = gen + 1 if changed else gen
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old and json_equal(new, old):
            # Nothing changed: no new resourceVersion and no event, as the apiserver
            # does; controllers rewriting the same status do not wake each other.
            return codec.loads(self._data[rt.kind][ns][name].raw)
        if self._should_delete_during_update(old_meta, meta):
            return codec.loads(self._commit_remove(rt, ns, name, new))
        return self._write_modified(rt, ns, name, new, check_size=True)

    def _write_modified(self, rt: ResourceType, ns: str | None, name: str, obj: Obj,
                        check_size: bool = False) -> Obj:
        """Commit ``obj``. Client writes (``check_size``) are held to MAX_OBJECT_BYTES;
        the store's own (deletion marks, bindings) are not, so anything stored can be deleted."""
        rv = self._rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = self._serialize(obj)
        if check_size:
            self._check_size(rt, name, raw)
        self._commit_put(rt, ns, name, obj, raw, rv, "MODIFIED")
        return codec.loads(raw)

    def _commit_put(self, rt: ResourceType, ns: str | None, name: str, obj: Obj, raw: str, rv: int, type_: str) -> None:
        entry = self._entry(rt.kind, obj, raw, rv)
        ev = HistoryEvent(rv, rt.kind, ns, type_, raw, name)
        staged = self._stage((rt.kind, ns, name, rv, raw), ev)
        if self._db is not None and not staged:
            try:
                self._db.put(rt.kind, ns, name, rv, raw)
            except sqlite3.Error as e:
                log.error("store: cannot persist %s %s/%s: %s", rt.kind, ns, name, e)
                raise ApiError(f"Internal error occurred: storage write failed: {e}") from e
        self._rv = rv
        self._data[rt.kind].setdefault(ns, {})[name] = entry
        if not staged:
            self._emit(ev)

    def _commit_remove(self, rt: ResourceType, ns: str | None, name: str, last: Obj) -> str:
        """Remove the object; returns the JSON of its last state (the DELETED event's)."""
        rv = self._rv + 1
        last["metadata"]["resourceVersion"] = str(rv)
        raw = self._serialize(last)
        ev = HistoryEvent(rv, rt.kind, ns, "DELETED", raw, name)
        staged = self._stage((rt.kind, ns, name, rv, None), ev)
        if self._db is not None and not staged:
            try:
                self._db.delete(rt.kind, ns, name, rv)
            except sqlite3.Error as e:
                log.error("store: cannot persist deletion of %s %s/%s: %s", rt.kind, ns, name, e)
                raise ApiError(f"Internal error occurred: storage write failed: {e}") from e
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
        # still behind (see SharedEvent).
        prev = self._latest_shared.pop(key, None)
        if prev is not None:
            prev.weaken()
        watchers = self._watchers[ev.kind]
        if not watchers:
            return
        shared = SharedEvent(ev.raw)  # decoded once for every shared watcher
        takers = 0
        for w, start in tuple(watchers.items()):
            if ev.rv > start and (w.namespace is None or w.namespace == ev.namespace):
                takers += w.push(ev.type, shared)
        if not takers or ev.type == "DELETED":
            shared.hold(takers)
            return
        shared.hold(takers)
        if prev is not None:
            shared.follow(prev)
        self._latest_shared[key] = shared

    def _entry(self, kind: str, obj: Obj, raw: str, rv: int) -> _Entry:
        labels = obj.get("metadata", {}).get("labels")
        labels = {sys.intern(k): _interned(v) for k, v in labels.items()} \
            if isinstance(labels, dict) and labels else _NO_LABELS
        return _Entry(raw, rv, labels, tuple(_interned(v) for v in field_values(kind, obj).values()))

    @staticmethod
    def _checked_status(rt: ResourceType, name: str, status: Any) -> Any:
        """A status written apart from admission still gets admission's shape
        rules (depth, value count, integer size), refused naming the field;
        returns a fresh copy of it."""
        try:
            return normalize_json({"status": status}, strip_nulls=False, max_depth=MAX_DEPTH)["status"]
        except ShapeError as e:
            raise _invalid(rt, name, FieldError(e.path or "status", "Invalid", e.detail, e.value_type)) from None

    @staticmethod
    def _check_size(rt: ResourceType, name: str, raw: str) -> None:
        size = len(raw.encode("utf-8")) if not raw.isascii() else len(raw)
        if size > MAX_OBJECT_BYTES:
            raise ObjectTooLarge(rt, name, size)

    @staticmethod
    def _serialize(obj: Obj) -> str:
        try:
            return codec.dumps(obj)
        except (TypeError, ValueError, RecursionError) as e:
            raise ApiError(f"Internal error occurred: object is not JSON-serializable: {e}") from e

    # ------------------------------------------------------------------ admission

    def _admit(self, obj: Obj, old: Obj | None) -> Obj:
        if self._admission is None:
            return obj
        try:
            res = self._admission(obj, old)
        except ApiError:
            raise
        except Exception as e:  # a bug in admission must not look like a crash to the caller
            log.exception("store: admission failed on %s", obj.get("kind"))
            raise ApiError(f"Internal error occurred: admission: {e}") from e
        if res is None or res is obj:
            # Not the fresh copy _own_copy counts on (Phalanx's admission always
            # returns one): copy here, so nothing below can reach the caller's object.
            return self._copy_in(obj)
        if not isinstance(res, dict):
            raise ApiError("Internal error occurred: admission returned a non-object")
        return res

    def _run_plugins(self, op: str, obj: Obj, old: Obj | None) -> Obj:
        done: list[AdmissionPlugin] = []
        for p in self._plugins:
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

    def _plugin_old(self, entry: _Entry, old: Obj) -> Obj:
        # Plugins get their own copy, so nothing they do can skew our comparisons.
        return codec.loads(entry.raw) if self._plugins else old

    def _notify_delete(self, obj: Obj, plugins: list[AdmissionPlugin] | None = None) -> None:
        for p in self._plugins if plugins is None else plugins:
            try:
                p("delete", obj, None)
            except Exception:
                log.exception("store: admission plugin failed on delete of %s", obj.get("kind"))

    # ------------------------------------------------------------------ checks

    def _rt(self, kind: str) -> ResourceType:
        try:
            return by_kind(kind)
        except (KeyError, TypeError):
            raise BadRequest(f'unknown kind "{kind}"') from None

    def _rt_of(self, obj: Obj) -> ResourceType:
        kind = obj.get("kind")
        if not kind or not isinstance(kind, str):
            raise BadRequest("Object 'Kind' is missing in the object")
        return self._rt(kind)

    def _own_copy(self, obj: Any) -> Obj:
        """What create/update may change before admission. With an admission that
        never changes its input and returns a deep, checked copy (Phalanx's,
        ``returns_fresh_copy``), only the top level and metadata are copied (the
        store changes nothing deeper before it); otherwise all of it."""
        if not self._admission_copies or not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return self._copy_in(obj)
        out = dict(obj)
        out["metadata"] = dict(obj["metadata"])
        return out

    @staticmethod
    def _copy_in(obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise BadRequest("the object must be a JSON object")
        try:
            return json.loads(_dumps(obj))
        except (TypeError, ValueError, RecursionError) as e:
            raise BadRequest(f"the object is not valid JSON: {e}") from None

    @staticmethod
    def _check_api_version(rt: ResourceType, obj: Obj) -> None:
        av = obj.get("apiVersion")
        if av is None:
            obj["apiVersion"] = rt.api_version
        elif av != rt.api_version:
            raise BadRequest(f'apiVersion "{av}" is not served for kind {rt.kind} (expected "{rt.api_version}")')

    def _meta(self, rt: ResourceType, obj: Obj) -> dict[str, Any]:
        """metadata, type-checked where the store itself relies on it."""
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        name = name if isinstance(name, str) else ""
        if not isinstance(meta, dict):
            raise _invalid(rt, name, FieldError("metadata", "Invalid", "must be an object", "<non-object>"))
        errors: list[FieldError] = []
        for f in ("name", "namespace", "generateName"):
            if meta.get(f) is not None and not isinstance(meta[f], str):
                errors.append(FieldError(f"metadata.{f}", "Invalid", "must be a string", meta[f]))
        for f in ("labels", "annotations"):
            v = meta.get(f)
            if v is None:
                continue
            if not isinstance(v, dict):
                errors.append(FieldError(f"metadata.{f}", "Invalid", "must be a map of strings", str(v)))
                continue
            for k, val in v.items():
                if not isinstance(val, str):
                    errors.append(FieldError(f"metadata.{f}[{k}]", "Invalid", "must be a string", val))
        fin = meta.get("finalizers")
        if fin is not None and (not isinstance(fin, list) or not all(isinstance(x, str) for x in fin)):
            errors.append(FieldError("metadata.finalizers", "Invalid", "must be a list of strings", str(fin)))
        refs = meta.get("ownerReferences")
        if refs is not None:
            if not isinstance(refs, list):
                errors.append(FieldError("metadata.ownerReferences", "Invalid", "must be a list", str(refs)))
            else:
                for i, r in enumerate(refs):
                    if not isinstance(r, dict):
                        errors.append(FieldError(f"metadata.ownerReferences[{i}]", "Invalid", "must be an object", str(r)))
                        continue
                    for f in ("apiVersion", "kind", "name", "uid"):
                        if not isinstance(r.get(f), str) or not r.get(f):
                            errors.append(FieldError(f"metadata.ownerReferences[{i}].{f}", "Required"))
        if errors:
            raise _invalid(rt, name, *errors)
        return meta

    @staticmethod
    def _check_name(rt: ResourceType, name: str) -> None:
        problem = None
        if len(name) > _MAX_NAME_LENGTH:
            problem = f"must be no more than {_MAX_NAME_LENGTH} characters"
        elif name in (".", ".."):
            problem = f'may not be "{name}"'
        elif "/" in name or "%" in name:
            problem = "may not contain '/' or '%'"
        if problem:
            raise _invalid(rt, name, FieldError("metadata.name", "Invalid", problem, name))

    def _required_name(self, rt: ResourceType, meta: dict[str, Any]) -> str:
        name = meta.get("name")
        if not name:
            raise _invalid(rt, "", FieldError("metadata.name", "Required", "name is required"))
        return name

    def _object_ns(self, rt: ResourceType, obj: Obj, name: str) -> str | None:
        """The object's namespace: required for namespaced kinds, dropped otherwise."""
        meta = obj["metadata"]
        if not rt.namespaced:
            meta.pop("namespace", None)
            return None
        ns = meta.get("namespace")
        if not ns:
            raise _invalid(rt, name, FieldError("metadata.namespace", "Required",
                                                f"{rt.kind} is a namespaced kind"))
        return ns

    def _ns(self, rt: ResourceType, ns: str | None) -> str | None:
        if not rt.namespaced:
            return None
        if not ns or not isinstance(ns, str):
            raise BadRequest(f"a namespace is required for {resource_name(rt)}")
        return ns

    def _lookup(self, rt: ResourceType, ns: str | None, name: str) -> _Entry:
        entry = self._data[rt.kind].get(ns, {}).get(name) if isinstance(name, str) else None
        if entry is None:
            raise NotFound(resource_name(rt), str(name))
        return entry

    @staticmethod
    def _check_identity(rt: ResourceType, obj: Obj, ns: str | None, name: str) -> None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if (not isinstance(meta, dict) or obj.get("kind") != rt.kind or meta.get("name") != name
                or (rt.namespaced and meta.get("namespace") != ns)):
            raise ApiError("Internal error occurred: admission changed the identity of the object")

    def _check_preconditions(self, rt: ResourceType, name: str, meta: dict[str, Any], old: Obj) -> None:
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != old["metadata"].get("resourceVersion"):
            raise Conflict(resource_name(rt), name)
        uid = meta.get("uid")
        if uid not in (None, "") and uid != old["metadata"].get("uid"):
            raise PreconditionConflict(
                resource_name(rt), name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata'].get('uid')}")

    @staticmethod
    def _keep_system_fields(rt: ResourceType, obj: Obj, old: Obj) -> None:
        """What a client cannot change through update: identity stamps, deletion
        state, generation (recomputed) and, with a status subresource, status."""
        meta, old_meta = obj["metadata"], old["metadata"]
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if f in old_meta:
                meta[f] = old_meta[f]
            else:
                meta.pop(f, None)
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace")
        if rt.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)

    @staticmethod
    def _check_finalizers(rt: ResourceType, name: str, obj: Obj, old: Obj) -> None:
        if not old["metadata"].get("deletionTimestamp"):
            return
        before = set(old["metadata"].get("finalizers") or [])
        added = [f for f in obj["metadata"].get("finalizers") or [] if f not in before]
        if added:
            raise _invalid(rt, name, FieldError(
                "metadata.finalizers", "Forbidden", "no new finalizers can be added if the object is being deleted"))

    @staticmethod
    def _should_delete_during_update(old_meta: dict[str, Any], meta: dict[str, Any]) -> bool:
        # apiserver ShouldDeleteDuringUpdate: the last finalizer of an object being
        # deleted (with no grace period pending) was just removed.
        if meta.get("finalizers") or not old_meta.get("finalizers"):
            return False
        if not meta.get("deletionTimestamp"):
            return False
        grace = meta.get("deletionGracePeriodSeconds")
        return not (isinstance(grace, int) and grace > 0)

    @staticmethod
    def _spec_changed(rt: ResourceType, old: Obj, new: Obj) -> bool:
        if rt.has_status:
            return not json_equal(old.get("spec"), new.get("spec"))
        # Without a status subresource every change outside metadata counts,
        # as for a CRD (PodGroup status writes bump generation in Kubernetes).
        keys = (set(old) | set(new)) - {"metadata"}
        return any(not json_equal(old.get(k), new.get(k)) for k in keys)

    @staticmethod
    def _bump_generation(rt: ResourceType, meta: dict[str, Any]) -> None:
        if _tracks_generation(rt) and isinstance(meta.get("generation"), int):
            meta["generation"] += 1

    def _creation_stamp(self, rt: ResourceType) -> dict[str, Any]:
        stamp: dict[str, Any] = {
            "uid": self._new_uid(),
            "creationTimestamp": format_time(self._clock.now()),
        }
        if _tracks_generation(rt):
            stamp["generation"] = 1
        return stamp

    def _generate_name(self, rt: ResourceType, meta: dict[str, Any]) -> str:
        base = meta["generateName"][: _MAX_NAME_LENGTH - 5]
        ns = meta.get("namespace") if rt.namespaced else None
        taken = self._data[rt.kind].get(ns, {})
        for _ in range(16):
            name = base + "".join((self._name_rng or random).choices(_GENERATE_NAME_CHARS, k=5))
            if name not in taken:
                return name
        return name  # AlreadyExists will tell the client, as the apiserver does

    @staticmethod
    def _pod_grace(pod: Obj, requested: int | None) -> int:
        """The apiserver's pod CheckGracefulDelete: the effective grace period."""
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
        if requested is not None:
            period = requested
        else:
            t = spec.get("terminationGracePeriodSeconds")
            period = t if isinstance(t, int) and not isinstance(t, bool) else DEFAULT_POD_GRACE_SECONDS
        if not spec.get("nodeName"):
            period = 0
        if status.get("phase") in ("Succeeded", "Failed"):
            period = 0
        if period < 0:
            period = 1
        return period
