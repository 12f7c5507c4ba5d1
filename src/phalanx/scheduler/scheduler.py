"""The scheduler shell: watch, run a session when something relevant changes,
write the session's decisions back.

- Informers on Nodes, Queues, PodGroups and Pods feed the snapshots. A change
  that can alter a decision wakes the loop; bursts are coalesced (``debounce``,
  5 ms, or as long as the last session took, whichever is longer: under a
  storm of changes sessions take at most half the loop, and each one handles
  more of them) and a safety tick runs a session every ``period`` (1 s)
  regardless (Volcano only ticks every second).
- The ``root`` and ``default`` queues are created at start when missing.
- A session's decisions are written in the background (``WriteBack``), so the
  next session never waits for the API server: bindings first (``client.bind``
  also marks the pod PodScheduled=True, as the apiserver's binding subresource
  does; each followed by its ``Scheduled`` event), then PodGroup status
  (whole-object update: the CRD has no status subresource), Queue status and
  PodScheduled=False conditions. Status writes retry on Conflict with a fresh
  read.
- Decided is as good as written for the next session: a pod is assumed bound
  from the moment its binding is queued, and a status queued for writing is
  what the snapshot shows, until the informers show the result (a refused bind
  or a failed write is forgotten, and the next session decides again). So a
  session that runs before the writes or the watch caught up neither re-binds
  a pod nor rewrites a status.
- Evictions (preempt, reclaim): the victim gets the ``DisruptionTarget``
  condition (reason ``PreemptionByScheduler``, the session's message), then a
  graceful DELETE (uid precondition). From the moment it is queued the next
  snapshot sees the pod terminating (Releasing), until the watch shows it so,
  so no session takes the same victim twice.
- The Queue annotations a session wants (deserved share, reclaiming) are
  merge-patched onto the Queue's metadata when they change.
- PriorityClasses are watched: a PodGroup's priority is its class's value, or
  the globalDefault class's, else 0 (Volcano's).
- Identical events (same object, reason and message as last time) are not
  emitted again; events are written in the background (``EventSink``), so a
  slow API server delays them, never a binding.
- A bad object or a failed write is logged and skipped, never fatal.
- Volcano's metrics (``scheduler.metrics``): sessions, their timings and figures, bindings.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import OrderedDict
from typing import Any, Callable

from phalanx.api.constants import (
    CONDITION_DISRUPTION_TARGET,
    DEFAULT_QUEUE,
    REASON_PREEMPTION_BY_SCHEDULER,
    ROOT_QUEUE,
    VOLCANO_VERSION,
)
from phalanx.client.interface import Client
from phalanx.objects.clock import Clock, format_time, parse_time
from phalanx.objects.errors import AlreadyExists, ApiError, Conflict, NotFound
from phalanx.objects.meta import Obj, meta, name_of, namespace_of, resource_version, serves
from phalanx.runtime.events import EventRecorder, EventSink
from phalanx.runtime.informer import SharedInformers
from phalanx.scheduler.cache import SnapshotCache
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.framework import EvictionResult, SessionResult, check_config, run_session
from phalanx.scheduler.info import BIND_IN_FLIGHT
from phalanx.scheduler.metrics import SchedulerMetrics
from phalanx.scheduler.podview import node_signature, pod_signature, trim_pod
from phalanx.scheduler.snapshot import Snapshot
from phalanx.scheduler.writeback import WriteBack

log = logging.getLogger(__name__)

MAX_RETRIES = 5
EVENT_MEMORY = 8192
WRITE_CONCURRENCY = 128


def _monotonic() -> float:
    """The running event loop's time: ``time.monotonic()`` on a real loop, virtual
    seconds in a simulation (phalanx.sim), where a wall-clock read would make the
    assumed-bind TTL and the queue-creation deadline depend on real time."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class Scheduler:
    """``await Scheduler(client, clock).run()`` until ``stop()``."""

    def __init__(self, client: Client, clock: Clock | None = None, config: SchedulerConfig | None = None,
                 name: str = "volcano", *, debounce: float = 0.005, period: float = 1.0, pace: float = 1.0,
                 priority_classes: dict[str, int] | None = None,
                 informer_factory: Callable[[Client, str], Any] | None = None,
                 metrics: SchedulerMetrics | None = None, informers: SharedInformers | None = None) -> None:
        self.client = client
        self._shared = informers
        self.metrics = metrics if metrics is not None else SchedulerMetrics()
        self.clock = clock or Clock()
        self.config = config or SchedulerConfig(scheduler_name=name)
        check_config(self.config)
        self.name = name
        self.debounce = debounce
        # the pause after a wake is at least pace x the last session's (wall) duration; 0 in a
        # simulation, where wall time must not steer virtual time
        self.pace = pace
        self.period = period
        self.priority_classes = dict(priority_classes or {})
        self._informer_factory = informer_factory
        self._informers: dict[str, Any] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._sink: EventSink | None = None
        self._cache = SnapshotCache(self.priority_classes, self.config.default_queue, self.config.scheduler_names)
        # (ns, pod) -> (uid, node, answered): bound by us, binding sent (answered: accepted by the server)
        self._assumed: dict[tuple[str, str], tuple[str, str, bool]] = {}
        # (ns, pod) -> (uid, when): eviction queued; seen as terminating until the watch says so
        self._evicting: dict[tuple[str, str], tuple[str, str]] = {}
        self._written: dict[tuple[str, str | None, str], Obj] = {}         # objects as we last wrote them
        # status (PodGroup, Queue) or PodScheduled condition (Pod) queued for writing: key -> (uid, value)
        self._pending: dict[tuple[str, str | None, str], tuple[str, dict]] = {}
        self._writes = WriteBack(WRITE_CONCURRENCY)
        self._event_memory: OrderedDict[Any, dict[tuple[str, str], str]] = OrderedDict()
        self.sessions = 0
        self.last_result: SessionResult | None = None
        self.last_session_seconds = 0.0

    # ---------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stopping = False
        try:
            if not await self._start_informers():
                return  # stopped before the caches were whole
            await self.ensure_default_queues()
            while not self._stopping:
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=self.period)
                    pause = max(self.debounce, self.pace * self.last_session_seconds)
                    if pause > 0:
                        await asyncio.sleep(pause)  # coalesce a burst of changes
                except asyncio.TimeoutError:
                    pass  # the periodic safety tick
                if self._stopping:
                    break
                self._wake.clear()
                try:
                    self._cycle()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("scheduler: session failed")
        finally:
            await self._writes.stop()
            await self._stop_informers()
            await self.flush_events(stop=True)

    async def settle(self) -> None:
        """Wait until the decisions made so far are written."""
        await self._writes.settle()

    async def flush_events(self, stop: bool = False) -> None:
        """Wait until the events emitted so far are written (``stop``: and end the writers)."""
        if self._sink is not None:
            await (self._sink.stop() if stop else self._sink.flush())

    async def stop(self) -> None:
        """Ask ``run`` to return after the current session (at once while the caches still list)."""
        self._stopping = True
        self._wake.set()
        if not self.synced():
            await self._stop_informers()

    async def _start_informers(self) -> bool:
        """Start and sync the informers; False when stopped before they synced."""
        factory = self._informer_factory
        if factory is None:
            shared = self._shared if self._shared is not None else SharedInformers(self.client)

            def factory(client: Client, kind: str) -> Any:
                return shared.informer(kind, trim=trim_pod if kind == "Pod" else None)
        for kind in ("Node", "Queue", "PodGroup", "Pod"):
            inf = factory(self.client, kind)
            inf.add_handler(self._handler(kind))
            self._informers[kind] = inf
        classes = factory(self.client, "PriorityClass")
        classes.add_handler(lambda _type, _obj, _old: self._priority_classes_changed())
        self._informers["PriorityClass"] = classes
        queues = self._informers["Queue"]
        self.metrics.queue_objects = lambda: [self._fresh("Queue", q) for q in queues.list()]
        for inf in self._informers.values():
            await inf.start()
        for inf in self._informers.values():
            if not await inf.wait_synced():
                return False
        # The informers' handlers fed the cache as they listed; feed what they
        # hold once more for informers that do not replay their first list.
        for kind, inf in self._informers.items():
            if kind == "PriorityClass":
                self._priority_classes_changed()
                continue
            for obj in inf.list():
                self._refeed(kind, namespace_of(obj) if kind in ("Pod", "PodGroup") else None, name_of(obj))
        return True

    def _priority_classes_changed(self) -> None:
        """Every PodGroup's priority is read again from the PriorityClasses (and the default)."""
        inf = self._informers.get("PriorityClass")
        values = dict(self.priority_classes)
        for pc in inf.list() if inf is not None else ():
            value = pc.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            values[name_of(pc)] = value
            if pc.get("globalDefault") is True:
                values[""] = value
        if self._cache.set_priority_classes(values):
            self._wake.set()

    def synced(self) -> bool:
        """Every informer has listed (readiness: sessions see the whole cluster)."""
        infs = list(self._informers.values())
        return len(infs) == 5 and all(getattr(inf, "synced", True) is True for inf in infs)

    async def _stop_informers(self) -> None:
        for inf in self._informers.values():
            try:
                await inf.stop()
            except Exception:  # pragma: no cover - defensive
                log.exception("scheduler: stopping an informer failed")

    def _handler(self, kind: str) -> Callable[[str, Obj, Obj | None], None]:
        def on_event(type_: str, obj: Obj, old: Obj | None) -> None:
            self._refeed(kind, namespace_of(obj) if kind in ("Pod", "PodGroup") else None, name_of(obj))
            if self._relevant(kind, type_, obj, old):
                self._wake.set()
        return on_event

    def _refeed(self, kind: str, ns: str | None, name: str) -> None:
        """Give the snapshot cache the object as the next session must see it:
        the informer's copy, or what we wrote if the watch has not caught up,
        and for a pod we bound, the node we bound it to (until the watch shows
        it bound, or the pod gone or replaced: a bind the server accepted is
        never undone)."""
        inf = self._informers.get(kind)
        obj = inf.get(ns, name) if inf is not None else None
        if obj is None:
            if kind == "Pod":
                self._assumed.pop((ns or "default", name), None)
                self._evicting.pop((ns or "default", name), None)
            self._pending.pop((kind, ns, name), None)
            self._cache.delete(kind, ns, name)
            return
        obj = self._fresh(kind, obj)
        if kind == "Pod":
            key = (ns or "default", name)
            assumed = self._assumed.get(key)
            if assumed is not None:
                uid, node, answered = assumed
                if meta(obj).get("uid") != uid or (obj.get("spec") or {}).get("nodeName"):
                    del self._assumed[key]
                else:
                    obj = {**obj, "spec": {**(obj.get("spec") or {}), "nodeName": node}}
                    if not answered:
                        obj[BIND_IN_FLIGHT] = True
            evicting = self._evicting.get(key)
            if evicting is not None:
                uid, when = evicting
                m = meta(obj)
                if m.get("uid") != uid or m.get("deletionTimestamp"):
                    del self._evicting[key]
                else:
                    obj = {**obj, "metadata": {**m, "deletionTimestamp": when}}
        self._cache.put(kind, obj)

    def _relevant(self, kind: str, type_: str, obj: Obj, old: Obj | None) -> bool:
        """Changes that can alter a decision; status churn from node agents and
        our own status writes do not wake the loop."""
        if type_ != "MODIFIED" or old is None:
            if kind == "Pod":
                spec = obj.get("spec") or {}
                return serves(self._cache.scheduler_names, spec.get("schedulerName")) or bool(spec.get("nodeName"))
            return True
        if kind == "Pod":
            return pod_signature(obj) != pod_signature(old)
        if kind == "Node":
            return node_signature(obj) != node_signature(old)
        if kind == "PodGroup":
            return (obj.get("spec") != old.get("spec")
                    or meta(obj).get("deletionTimestamp") != meta(old).get("deletionTimestamp"))
        if kind == "Queue":
            return (obj.get("spec") != old.get("spec")
                    or (obj.get("status") or {}).get("state") != (old.get("status") or {}).get("state"))
        return True

    async def ensure_default_queues(self) -> None:
        """Volcano newDefaultAndRootQueue: root (not reclaimable) then default,
        retried for up to 60 s."""
        wanted: list[Obj] = [
            {"apiVersion": VOLCANO_VERSION, "kind": "Queue", "metadata": {"name": ROOT_QUEUE},
             "spec": {"weight": 1, "reclaimable": False}},
            {"apiVersion": VOLCANO_VERSION, "kind": "Queue", "metadata": {"name": DEFAULT_QUEUE},
             "spec": {"weight": 1, "reclaimable": True, "parent": ROOT_QUEUE}},
        ]
        deadline = _monotonic() + 60
        for q in wanted:
            delay = 0.05
            while not self._stopping:
                try:
                    await self.client.create(copy.deepcopy(q))
                    break
                except AlreadyExists:
                    break
                except Exception as e:
                    if _monotonic() > deadline:
                        log.error("scheduler: could not create queue %s: %s", q["metadata"]["name"], e)
                        break
                    log.warning("scheduler: creating queue %s failed (%s); retrying", q["metadata"]["name"], e)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)

    def trigger(self) -> None:
        """Ask for a session soon (e.g. after a configuration change)."""
        self._wake.set()

    # ---------------------------------------------------------------- one cycle
    def build_snapshot(self) -> Snapshot:
        """The next session's snapshot, from the incremental cache (only jobs
        that changed since the last session are parsed again)."""
        snap = self._cache.build()
        self._cache.object_cache.sweep()
        for why in snap.skipped:
            log.warning("scheduler: skipped %s", why)
        return snap

    def _fresh(self, kind: str, obj: Obj) -> Obj:
        """The informer's copy, or what we wrote if the watch has not caught up;
        with the status (or pod condition) we queued for writing, if any."""
        key = (kind, namespace_of(obj), name_of(obj))
        mine = self._written.get(key)
        if mine is not None:
            if meta(mine).get("uid") == meta(obj).get("uid") and resource_version(mine) > resource_version(obj):
                obj = mine
            else:
                del self._written[key]
        pending = self._pending.get(key)
        if pending is None:
            return obj
        uid, value = pending
        if uid != meta(obj).get("uid"):
            del self._pending[key]
            return obj
        if kind != "Pod":
            return {**obj, "status": value}
        status = obj.get("status") or {}
        conds = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") != "PodScheduled"]
        return {**obj, "status": {**status, "conditions": [*conds, value]}}

    async def run_once(self) -> SessionResult:
        """Build a snapshot, run one session, write its result (and wait for the writes)."""
        result = self._cycle()
        await self.settle()
        return result

    def _cycle(self) -> SessionResult:
        """Build a snapshot, run one session, queue its writes."""
        t_snap = time.perf_counter()
        snap = self.build_snapshot()
        t0 = time.perf_counter()
        result = run_session(snap, self.config, self.clock.now(), observer=self.metrics, snapshot_seconds=t0 - t_snap)
        # The snapshot (every waiting job's tasks and the pods they were parsed
        # from) is not needed to apply the result: not kept alive for the whole
        # of a long apply (100,000 binds of a burst).
        snap.release()
        del snap
        t1 = time.perf_counter()
        self.last_session_seconds = t1 - t_snap
        self.metrics.session(t1 - t_snap, result.stats)
        result.stats = None  # its lists are the metrics' now
        self.sessions += 1
        self.last_result = result
        self.apply(result)
        log.debug("scheduler: session %d: %d bindings, %d status writes; snapshot %.1f ms, session %.1f ms; "
                  "%d writes queued", self.sessions, len(result.bindings),
                  len(result.podgroup_status) + len(result.queue_status) + len(result.pod_conditions),
                  (t0 - t_snap) * 1000, (t1 - t0) * 1000, self._writes.pending())
        return result

    # ---------------------------------------------------------------- apply
    def apply(self, result: SessionResult) -> None:
        """Queue the session's writes; what they will write is what the next
        snapshot shows from now on."""
        for ns, name, node in result.bindings:
            self._queue_bind(ns, name, node)
        for (ns, name), st in result.podgroup_status.items():
            self._queue_status("PodGroup", ns, name, st, self._write_podgroup)
        for qname, st in result.queue_status.items():
            self._queue_status("Queue", None, qname, st, self._write_queue)
        for (ns, name), cond in result.pod_conditions.items():
            self._queue_status("Pod", ns, name, cond, self._write_pod_condition)
        for eviction in result.evictions:
            self._queue_evict(eviction)
        for qname, changes in result.queue_annotations.items():
            self._queue_annotations(qname, changes)
        for ref, type_, reason, message in result.events:
            self._event(ref, type_, reason, message)

    def _queue_bind(self, ns: str, name: str, node: str) -> None:
        pod = self._informers["Pod"].get(ns, name) if "Pod" in self._informers else None
        assumed = (meta(pod).get("uid") or "" if pod else "", node, False)
        self._assumed[(ns, name)] = assumed
        self._refeed("Pod", ns, name)
        self._writes.bind(lambda: self._bind(ns, name, node, pod, assumed))

    def _queue_evict(self, e: EvictionResult) -> None:
        key = (e.namespace, e.name)
        entry = (e.uid, format_time(self.clock.now()))
        self._evicting[key] = entry
        self._refeed("Pod", e.namespace, e.name)

        async def send() -> None:
            try:
                await self._evict(e)
            except Exception as err:  # the next session decides again
                log.warning("scheduler: evicting %s/%s failed: %s", e.namespace, e.name, err)
                if self._evicting.get(key) == entry:
                    del self._evicting[key]
                    self._refeed("Pod", e.namespace, e.name)
        self._writes.bind(send)

    async def _evict(self, e: EvictionResult) -> None:
        """The DisruptionTarget condition, then a graceful delete of that very pod."""
        current = await self._get("Pod", e.name, e.namespace)
        for _ in range(MAX_RETRIES):
            if current is None or meta(current).get("uid") != e.uid or meta(current).get("deletionTimestamp"):
                return
            obj = copy.deepcopy(current)
            status = obj.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)
                     and c.get("type") != CONDITION_DISRUPTION_TARGET]
            conds.append({"type": CONDITION_DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                          "message": e.message, "lastProbeTime": None,
                          "lastTransitionTime": format_time(self.clock.now())})
            status["conditions"] = conds
            try:
                await self.client.update_status(obj)
                break
            except Conflict:
                current = await self._get("Pod", e.name, e.namespace)
        try:
            await self.client.delete("Pod", e.name, e.namespace, preconditions_uid=e.uid)
        except (NotFound, Conflict):
            return
        log.info("scheduler: evicted %s/%s (%s): %s", e.namespace, e.name, e.action, e.message)

    def _queue_annotations(self, name: str, changes: dict[str, str | None]) -> None:
        async def send() -> None:
            try:
                written = await self.client.patch("Queue", name, None, {"metadata": {"annotations": changes}})
            except NotFound:
                return
            except ApiError as err:
                log.warning("scheduler: annotating queue %s failed: %s", name, err)
                return
            self._remember("Queue", written)
        self._writes.put(("QueueAnnotations", None, name), send)

    def _queue_status(self, kind: str, ns: str | None, name: str, value: dict,
                      write: Callable[[str | None, str, dict], Any]) -> None:
        current = self._current(kind, ns, name)
        if current is None:
            return
        key = (kind, ns, name)
        entry = (meta(current).get("uid") or "", value)
        self._pending[key] = entry

        async def send() -> None:
            try:
                await write(ns, name, value)
            finally:
                if self._pending.get(key) is entry:
                    del self._pending[key]
                    self._refeed(kind, ns, name)

        self._refeed(kind, ns, name)
        self._writes.put(key, send)

    async def _bind(self, ns: str, name: str, node: str, pod: Obj | None, assumed: tuple[str, str, bool]) -> None:
        start = time.perf_counter()
        try:
            await self.client.bind(ns, name, node)
        except Exception as e:
            self.metrics.bind_failed()
            if isinstance(e, (Conflict, NotFound)):
                log.info("scheduler: binding %s/%s to %s refused: %s", ns, name, node, e)
            else:
                log.warning("scheduler: binding %s/%s to %s failed: %s", ns, name, node, e)
            if self._assumed.get((ns, name)) == assumed:
                del self._assumed[(ns, name)]
                self._refeed("Pod", ns, name)
            return
        if self._assumed.get((ns, name)) == assumed:
            self._assumed[(ns, name)] = (assumed[0], node, True)
            self._refeed("Pod", ns, name)
        self.metrics.bound(self._age(pod), time.perf_counter() - start)
        ref = {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name, "uid": assumed[0]}
        self._event(ref, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node}")

    def _age(self, pod: Obj | None) -> float | None:
        """Seconds since the pod's creationTimestamp, by the scheduler's clock."""
        try:
            created = parse_time(meta(pod).get("creationTimestamp")) if pod else None
        except (TypeError, ValueError, AttributeError):
            created = None
        return None if created is None else max(0.0, (self.clock.now() - created).total_seconds())

    async def _write_podgroup(self, ns: str | None, name: str, status: dict) -> None:
        # Volcano's PodGroup CRD has no status subresource: the whole object is written.
        await self._write_status("PodGroup", ns, name, status, self.client.update)

    async def _write_queue(self, ns: str | None, name: str, status: dict) -> None:
        await self._write_status("Queue", None, name, status, self.client.update_status)

    async def _write_status(self, kind: str, ns: str | None, name: str, status: dict, write) -> None:
        """Write ``status`` onto the current object, re-reading on Conflict."""
        current = self._current(kind, ns, name)
        if current is None:
            return
        uid = meta(current).get("uid")
        where = f"{ns}/{name}" if ns else name
        for _ in range(MAX_RETRIES):
            obj = {**current, "metadata": dict(meta(current)), "status": status}  # the client copies it in
            try:
                written = await write(obj)
                self._remember(kind, written)
                return
            except Conflict:
                current = await self._get(kind, name, ns)
                if current is None or meta(current).get("uid") != uid:
                    return
            except NotFound:
                return
            except ApiError as e:
                log.warning("scheduler: writing %s %s status failed: %s", kind, where, e)
                return
        log.warning("scheduler: %s %s kept conflicting; status not written", kind, where)

    async def _write_pod_condition(self, ns: str | None, name: str, cond: dict) -> None:
        current = await self._get("Pod", name, ns)  # full object: the informer's copy is trimmed
        for _ in range(MAX_RETRIES):
            if current is None or (current.get("spec") or {}).get("nodeName"):
                return
            obj = copy.deepcopy(current)
            status = obj.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") != "PodScheduled"]
            conds.append(cond)
            status["conditions"] = conds
            try:
                written = await self.client.update_status(obj)
                self._remember("Pod", trim_pod(written))
                return
            except Conflict:
                current = await self._get("Pod", name, ns)
            except NotFound:
                return
            except ApiError as e:
                log.warning("scheduler: writing PodScheduled of %s/%s failed: %s", ns, name, e)
                return

    def _current(self, kind: str, ns: str | None, name: str) -> Obj | None:
        inf = self._informers.get(kind)
        obj = inf.get(ns, name) if inf is not None else None
        return self._fresh(kind, obj) if obj is not None else None

    async def _get(self, kind: str, name: str, ns: str | None) -> Obj | None:
        try:
            return await self.client.get(kind, name, ns)
        except NotFound:
            return None
        except ApiError as e:
            log.warning("scheduler: reading %s %s/%s failed: %s", kind, ns, name, e)
            return None

    def _remember(self, kind: str, obj: Obj | None) -> None:
        if not obj:
            return
        ns = namespace_of(obj) if kind != "Queue" else None
        self._written[(kind, ns, name_of(obj))] = obj
        self._refeed(kind, ns, name_of(obj))

    def _event(self, ref: dict, type_: str, reason: str, message: str) -> None:
        """Emit (written in the background, off the binding path) unless it
        repeats the object's last event of that type and reason; an event with
        another reason resets the object's memory, so a problem that comes back
        after being solved is reported again."""
        key = ref.get("uid") or (ref.get("kind"), ref.get("namespace"), ref.get("name"))
        last = self._event_memory.get(key)
        if last is not None and last.get((type_, reason)) == message:
            self._event_memory.move_to_end(key)
            return
        if last is None or any(r != reason for _, r in last):
            last = {k: v for k, v in (last or {}).items() if k[1] == reason}
        last[(type_, reason)] = message
        self._event_memory[key] = last
        self._event_memory.move_to_end(key)
        while len(self._event_memory) > EVENT_MEMORY:
            self._event_memory.popitem(last=False)
        obj = {"apiVersion": ref.get("apiVersion", "v1"), "kind": ref.get("kind", ""),
               "metadata": {k: v for k, v in (("name", ref.get("name")), ("namespace", ref.get("namespace")),
                                              ("uid", ref.get("uid"))) if v}}
        if self._sink is None:
            self._sink = EventSink(EventRecorder(self.client, self.name, self.clock))
        self._sink.emit(obj, type_, reason, message)
