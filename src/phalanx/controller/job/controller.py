"""The job controller shell: informers -> work queue -> pure ``reconcile`` -> Client writes.

Keys are ``<Kind>/<namespace>/<name>``. Pods, Services and PodGroups map to
the job named by their controller ownerReference, to the jobs of their name
and to the jobs waiting for them to go (``claim``: only what a job controls is
its; orphans it selects are adopted, other owners' objects block their names).

Caches lag behind our own writes, so:
- names are deterministic, and AlreadyExists on create / NotFound on delete
  are success;
- the status is written first, with the job's resourceVersion; a Conflict
  means the plan was computed from a stale job, so nothing else of it is
  applied and the key is retried shortly;
- a job whose cached resourceVersion is older than the one our last status
  write returned is not reconciled: the watch event for that write is on its
  way and will trigger the next round;
- a job with pods, Services or a PodGroup it created that its caches have not
  seen yet is not reconciled either (``Expectations``): their watch events
  trigger the next round (a two-phase flow's second phase too), which would
  otherwise create them again.

Watch events that cannot change the plan do not enqueue the job (see
``_job_handler``/``_owned_handler``): our own status write coming back, a
pod's binding or IP/conditions, a PodGroup status change that keeps it on the
same side of admission. The writes of one plan after the status are made
concurrently (started eagerly in plan order: same order of requests, one round
trip of waiting), and so are its events.
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Coroutine, Iterable, Iterator, NamedTuple

from phalanx.api.constants import ANNOTATION_NO_RESTART, ANNOTATION_NO_RESTART_ON_FAILURE
from phalanx.api.pod import preemption_message, stopped_by_shutdown
from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client
from phalanx.controller.conditions import Event, is_finished
from phalanx.controller.fields import as_dict, as_int, namespace, pod_phase
from phalanx.controller.frameworks import Framework, get_framework
from phalanx.controller.job import claim
from phalanx.controller.job import podgroup as pg
from phalanx.controller.job.claim import OWNER_INDEX, controlled_by, owner_index
from phalanx.controller.job.core import reconcile
from phalanx.controller.job.expectations import Expectations
from phalanx.controller.job.hpa import reconcile_hpa
from phalanx.controller.job.inorder import in_order
from phalanx.controller.job.plan import Plan, ReconcileOptions
from phalanx.controller.metrics import OperatorMetrics
from phalanx.objects.clock import Clock
from phalanx.objects.errors import AlreadyExists, ApiError, Conflict, NotFound
from phalanx.objects.meta import Obj, controller_ref, is_deleting, metadata_of, name_of, uid_of
from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.informer import SharedInformer, SharedInformers

log = logging.getLogger(__name__)

CONFLICT_RETRY = 0.05  # seconds; the job's MODIFIED event usually arrives first
ERROR_RETRY = 1.0
PREEMPTED_GONE_KEPT = 600.0  # seconds a deleted preempted pod's last state is remembered for its job
EXPECTATIONS_TIMEOUT = 300.0  # seconds a created object is awaited in the caches (client-go's ExpectationsTimeout)


def job_key(kind: str, ns: str, name_: str) -> str:
    return f"{kind}/{ns}/{name_}"


class JobController:
    """Reconciles every job kind in ``kinds`` through one work queue."""

    def __init__(
        self,
        client: Client,
        clock: Clock,
        options: ReconcileOptions | None = None,
        kinds: Iterable[str] | None = None,
        recorder: EventRecorder | None = None,
        workers: int = 1,
        metrics: OperatorMetrics | None = None,
        informers: SharedInformers | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics if metrics is not None else OperatorMetrics()  # what was written, counted
        # Writes of one round are started eagerly, in order, only on the in-process client: driving a
        # coroutine from another task breaks clients whose calls are bound to their task (HTTP, anyio).
        self._eager_writes = getattr(client, "shares_watch_objects", False) is True
        self.clock = clock
        self.options = options or ReconcileOptions()
        self.frameworks: dict[str, Framework] = {k: get_framework(k) for k in (JOB_KINDS if kinds is None else kinds)}
        self._recorder = recorder
        self._recorders: dict[str, EventRecorder] = {}
        informers = informers if informers is not None else SharedInformers(client)
        self.jobs = {k: informers.informer(k) for k in self.frameworks}
        self.metrics.job_objects = self._cached_jobs
        self.pods = informers.informer("Pod")
        self.services = informers.informer("Service")
        self.podgroups = informers.informer("PodGroup") if self.options.gang_scheduler else None
        owned = sorted({k for fw in self.frameworks.values() for k in fw.owned_kinds(self.options)})
        self.owned = {k: informers.informer(k) for k in owned}  # Framework.owned_objects (MPI's ConfigMap)
        for inf in (self.pods, self.services, *self.owned.values()):
            inf.add_index(OWNER_INDEX, owner_index)  # a job's objects without scanning the namespace
        for inf in (self.pods, self.services):
            inf.add_index(claim.ORPHAN_INDEX, claim.orphan_index)  # the orphans a job may adopt
        self.claimants = claim.Claimants()
        self.controller = Controller("job-controller", self.reconcile, workers=workers)
        self._written_rv: dict[str, int] = {}
        self._stale_skipped: set[str] = set()  # keys skipped as stale: our write's event must enqueue them
        self._last_write: dict[str, tuple[Any, dict]] = {}  # key -> (resourceVersion written on, status)
        self._deleting_podgroups: set[tuple[str, str, str]] = set()  # (ns, name, job uid) we delete
        # key -> {pod: (uid, eviction message, seen at)}: preempted pods seen deleted, so one gone
        # before a round saw it being deleted is no restart (the core matches them by uid).
        self._preempted_gone: dict[str, dict[str, tuple[str, str, float]]] = {}
        self.expectations = Expectations(EXPECTATIONS_TIMEOUT)  # created, not yet seen in a cache

    # ---- wiring -----------------------------------------------------------------------

    def _informers(self) -> list[SharedInformer]:
        return [*self.jobs.values(), self.pods, self.services, *([self.podgroups] if self.podgroups is not None else []),
                *self.owned.values()]

    async def run(self) -> None:
        for kind, inf in self.jobs.items():
            inf.add_handler(self._job_handler(kind))
        for owned in (self.pods, self.services, self.podgroups, *self.owned.values()):
            if owned is not None:
                owned.add_handler(self._owned_handler)
        for inf in self._informers():
            await inf.start()
        for inf in self._informers():
            if not await inf.wait_synced():
                return  # stopped before the caches were whole
        for kind, inf in self.jobs.items():
            for job in inf.list():
                self.controller.queue.add(job_key(kind, namespace(job), name_of(job)))
        await self.controller.run()

    def _cached_jobs(self) -> Iterator[tuple[str, Obj]]:
        """Every job of the caches, with its kind (the metrics' jobs by state)."""
        for kind, inf in self.jobs.items():
            for job in inf.list():
                yield kind, job

    def synced(self) -> bool:
        """Every informer has listed (readiness: reconciles see the whole state)."""
        infs = self._informers()
        return bool(infs) and all(getattr(inf, "synced", True) is True for inf in infs)

    async def drain(self, timeout: float) -> bool:
        """Let the jobs queued now be reconciled (their status writes and Events
        recorded) before a stop, at most ``timeout`` seconds."""
        return await self.controller.wait_idle(timeout)

    async def stop(self) -> None:
        await self.controller.stop()
        for inf in self._informers():
            await inf.stop()

    def _job_handler(self, kind: str):
        def handler(event_type: str, obj: Obj, old: Obj | None = None) -> None:
            if isinstance(obj, dict) and name_of(obj):
                key = job_key(kind, namespace(obj), name_of(obj))
                if event_type == "MODIFIED" and isinstance(old, dict) and self._own_write(key, obj, old):
                    return
                self.controller.queue.add(key)
        return handler

    def _own_write(self, key: str, obj: Obj, old: Obj) -> bool:
        """``obj`` is what our last status write made of ``old`` (the version it was
        computed from; only the status changed, to ours): the plan it came from already
        acted on everything else (Plan: idempotence), so it needs no round, unless a
        round was skipped while waiting for it (stale). Content, not the returned
        resourceVersion, decides: the event may arrive before the write returns."""
        written = self._last_write.get(key)
        if written is None or key in self._stale_skipped:
            return False
        base_rv, st = written
        if metadata_of(old).get("resourceVersion") != base_rv or obj.get("status") != st:
            return False
        return not _differs({**old, "status": None}, {**obj, "status": None}, _META_IGNORED)

    def _owned_handler(self, event_type: str, obj: Obj, old: Obj | None = None) -> None:
        if not isinstance(obj, dict):
            return
        if event_type == "MODIFIED" and isinstance(old, dict) and not _may_change_plan(obj, old):
            return
        if event_type == "DELETED" and obj.get("kind") == "PodGroup" and self._own_podgroup_delete(obj):
            return
        keys = set()
        for o in (obj, old):
            ref = controller_ref(o) if isinstance(o, dict) else None
            if ref and ref.get("kind") in self.frameworks and ref.get("name"):
                keys.add(job_key(ref["kind"], namespace(o), ref["name"]))
        keys |= self.claimants.keys(event_type, obj, self._jobs_named)
        if self.expectations:
            self.expectations.observed(keys, (obj.get("kind", ""), namespace(obj), name_of(obj)))
        if event_type == "DELETED" and obj.get("kind") == "Pod":
            self._remember_preempted(keys, obj)
        for k in sorted(keys):
            self.controller.queue.add(k)

    def _jobs_named(self, ns: str, name_: str) -> list[str]:
        return [job_key(k, ns, name_) for k, inf in self.jobs.items() if inf.get(ns, name_) is not None]

    def _cached(self, kind: str, ns: str, name_: str) -> Obj | None:
        inf = {**self.owned, "Pod": self.pods, "Service": self.services, "PodGroup": self.podgroups}.get(kind)
        return inf.get(ns, name_) if inf is not None else None

    def _remember_preempted(self, keys: set[str], pod: Obj) -> None:
        """A deleted pod that carried the scheduler's eviction mark, kept for its job's
        rounds a while (PREEMPTED_GONE_KEPT); older memories are dropped."""
        message = preemption_message(pod)
        now = self.clock.monotonic()
        for k in list(self._preempted_gone):
            kept = {n: v for n, v in self._preempted_gone[k].items() if now - v[2] < PREEMPTED_GONE_KEPT}
            if kept:
                self._preempted_gone[k] = kept
            else:
                del self._preempted_gone[k]
        if message is None or not uid_of(pod):
            return
        for k in keys:
            self._preempted_gone.setdefault(k, {})[name_of(pod)] = (uid_of(pod), message, now)

    def _own_podgroup_delete(self, obj: Obj) -> bool:
        """A PodGroup we deleted ourselves: only finished or suspended jobs delete theirs,
        and neither looks at it again (a resume is a job change, which enqueues)."""
        ref = controller_ref(obj)
        mark = (namespace(obj), name_of(obj), ref.get("uid") if ref else None)
        if mark not in self._deleting_podgroups:
            return False
        self._deleting_podgroups.discard(mark)
        return True

    def _recorder_for(self, kind: str) -> EventRecorder:
        if self._recorder is not None:
            return self._recorder
        if kind not in self._recorders:
            self._recorders[kind] = EventRecorder(self.client, self.frameworks[kind].controller_name, self.clock)
        return self._recorders[kind]

    # ---- one round ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        try:
            kind, ns, jname = key.split("/", 2)
        except ValueError:
            return None
        fw = self.frameworks.get(kind)
        if fw is None:
            return None
        job = self.jobs[kind].get(ns, jname)
        if job is None:
            self._preempted_gone.pop(key, None)
            self._written_rv.pop(key, None)
            self._last_write.pop(key, None)
            self._stale_skipped.discard(key)
            self.expectations.forget(key)
            self.claimants.wait(key, ns, ())
            return None
        if is_deleting(job):
            return None
        if self._stale(key, job):
            self._stale_skipped.add(key)
            return None
        awaited = self.expectations.pending(key, self.clock.monotonic(), self._cached)
        if awaited is not None:
            return Result(requeue_after=awaited)
        self._stale_skipped.discard(key)
        juid = uid_of(job)
        pods = sorted(self.pods.by_index(OWNER_INDEX, juid), key=name_of) if juid else []
        services = sorted(self.services.by_index(OWNER_INDEX, juid), key=name_of) if juid else []
        group = self.podgroups.get(ns, jname) if self.podgroups is not None else None
        if group is not None and not controlled_by(group, juid):
            group = None
        others = [o for k in fw.owned_kinds(self.options) for o in self.owned[k].by_index(OWNER_INDEX, juid)] \
            if juid else []
        await reconcile_hpa(self.client, fw, self.options, job, self._cached)  # first, as the original's ReconcileHPA
        gone = {n: (uid, msg) for n, (uid, msg, _) in self._preempted_gone.get(key, {}).items()}
        plan = reconcile(job, pods, services, group, self.clock.now(), fw, self.options, others, gone)
        orphans = [o for inf in (self.pods, self.services) for o in inf.by_index(claim.ORPHAN_INDEX, f"{ns}/{jname}")]
        self.claimants.wait(key, ns, claim.claim(job, fw, plan, self._cached, orphans, self.clock.now()))
        return await self.apply(key, kind, job, plan)

    def _stale(self, key: str, job: Obj) -> bool:
        seen = as_int(metadata_of(job).get("resourceVersion"))
        written = self._written_rv.get(key)
        return seen is not None and written is not None and seen < written

    async def apply(self, key: str, kind: str, job: Obj, plan: Plan) -> Result | None:
        """Apply ``plan`` in order: status; then adoptions, PodGroup, deletions, services,
        pods (started in that order, waited for together); then its events (likewise)."""
        c, ns, jname = self.client, namespace(job), name_of(job)
        rec = self._recorder_for(kind)
        events: list[Event] = []
        retry: float | None = None

        if plan.status is not None:
            before = job.get("status")
            obj = {**job, "metadata": dict(metadata_of(job)), "status": plan.status}  # the client copies it in
            self._last_write[key] = (metadata_of(job).get("resourceVersion"), plan.status)
            try:
                updated = await c.update_status(obj)
            except Conflict:
                self._last_write.pop(key, None)
                return Result(requeue_after=CONFLICT_RETRY)
            except NotFound:
                self._last_write.pop(key, None)
                return None
            rv = as_int(metadata_of(as_dict(updated)).get("resourceVersion"))
            if rv is not None:
                self._written_rv[key] = rv
            job = updated if isinstance(updated, dict) else obj
            self.metrics.status_written(kind, ns, before, plan.status)

        writes: list[Coroutine[Any, Any, _Outcome]] = [self._adopt(job, o) for o in plan.adopt]
        if plan.podgroup_delete:
            writes.append(self._delete_podgroup(jname, ns, uid_of(job)))
        if plan.podgroup_create is not None:
            writes.append(self._create_podgroup(key, plan.podgroup_create))
        if plan.podgroup_update is not None:
            writes.append(self._update_podgroup(plan.podgroup_update))
        writes.extend(self._apply_object(obj) for obj in plan.apply_objects)
        finished = is_finished(as_dict(plan.status if plan.status is not None else job.get("status")))
        writes.extend(self._delete("Pod", n, ns, "Pod", "pod", restart=not finished and self._failed_pod(ns, n))
                      for n in plan.delete_pods)
        writes.extend(self._delete("Service", n, ns, "Service", "service") for n in plan.delete_services)
        writes.extend(self._mark(n, ns, ANNOTATION_NO_RESTART) for n in plan.stop_restarting)
        writes.extend(self._mark(n, ns, ANNOTATION_NO_RESTART_ON_FAILURE) for n in plan.stop_failure_restarts)
        writes.extend(self._create(key, o, "Service", "service") for o in plan.create_services)
        writes.extend(self._create(key, o, "Pod", "pod") for o in plan.create_pods)
        for outcome in await in_order(writes, self._eager_writes):
            events.extend(outcome.events)
            retry = _earliest(retry, outcome.retry)

        await in_order([self._record(rec, job, key, *e) for e in [*events, *plan.events]], self._eager_writes)

        if plan.delete_job:
            try:
                await c.delete(kind, jname, ns)
                self.metrics.job_deleted(kind, ns)
                await rec.record(job, "Normal", "SuccessfulDeleteJob", f"Deleted job: {jname}")
            except NotFound:
                pass
            except ApiError as e:
                await rec.record(job, "Warning", "FailedDeleteJob", f"Error deleting: {e.message}")
                retry = ERROR_RETRY

        after = _earliest(plan.requeue_after, retry)
        return Result(requeue_after=after) if after is not None else None

    # ---- one write each: what it adds to the round (events, retry) ----------------------

    def _failed_pod(self, ns: str, n: str) -> bool:
        """The cached pod is Failed by itself (not stopped by a shutdown, not evicted by the
        scheduler): deleting it is a restart."""
        pod = self.pods.get(ns, n)
        return isinstance(pod, dict) and pod_phase(pod) == "Failed" and not stopped_by_shutdown(pod) \
            and preemption_message(pod) is None

    async def _delete(self, kind_: str, n: str, ns: str, noun: str, what: str, restart: bool = False) -> _Outcome:
        try:
            await self.client.delete(kind_, n, ns)
            if kind_ == "Pod":
                self.metrics.deleted_pods.inc()
                if restart:
                    self.metrics.failed_pods.inc()
            return _Outcome((("Normal", f"SuccessfulDelete{noun}", f"Deleted {what}: {n}"),))
        except NotFound:
            return _DONE
        except ApiError as e:
            return _Outcome((("Warning", f"FailedDelete{noun}", f"Error deleting: {e.message}"),), ERROR_RETRY)

    async def _adopt(self, job: Obj, orphan: Obj) -> _Outcome:
        return _Outcome(retry=await claim.adopt(self.client, job, orphan, CONFLICT_RETRY, ERROR_RETRY))

    async def _delete_podgroup(self, n: str, ns: str, job_uid: str) -> _Outcome:
        mark = (ns, n, job_uid)
        self._deleting_podgroups.add(mark)  # before the call: its watch event may come first
        try:
            await self.client.delete("PodGroup", n, ns)
            self.metrics.deleted_pod_groups.inc()
            return _Outcome((("Normal", "SuccessfulDeletePodGroup", f"Deleted PodGroup: {n}"),))
        except NotFound:
            self._deleting_podgroups.discard(mark)  # not our deletion
            return _DONE
        except ApiError as e:
            self._deleting_podgroups.discard(mark)
            return _Outcome((("Warning", "FailedDeletePodGroup", f"Error deleting: {e.message}"),), ERROR_RETRY)

    async def _create(self, key: str, obj: Obj, kind_: str, what: str) -> _Outcome:
        try:
            await self._create_awaited(key, obj, kind_)
            if kind_ == "Pod":
                self.metrics.created_pods.inc()
            return _Outcome((("Normal", f"SuccessfulCreate{kind_}", f"Created {what}: {name_of(obj)}"),))
        except AlreadyExists:
            return _DONE
        except ApiError as e:
            return _Outcome((("Warning", f"FailedCreate{kind_}", f"Error creating: {e.message}"),), ERROR_RETRY)

    async def _create_podgroup(self, key: str, obj: Obj) -> _Outcome:
        try:
            await self._create_awaited(key, obj, "PodGroup")
            self.metrics.created_pod_groups.inc()
            return _DONE
        except AlreadyExists:
            return _DONE
        except ApiError as e:
            log.warning("creating PodGroup %s/%s: %s", namespace(obj), name_of(obj), e.message)
            return _Outcome(retry=ERROR_RETRY)

    async def _create_awaited(self, key: str, obj: Obj, kind_: str) -> None:
        """Create ``obj``, awaited by ``key`` in the caches from before the request
        (its watch event may be handled before the reply) unless the call fails."""
        ref = (kind_, namespace(obj), name_of(obj))
        self.expectations.expect(key, ref, self.clock.monotonic())
        try:
            await self.client.create(obj)
        except BaseException:
            self.expectations.observed((key,), ref)  # not created by this call
            raise

    async def _update_podgroup(self, obj: Obj) -> _Outcome:
        try:
            await self.client.update(obj)
            return _DONE
        except (Conflict, NotFound):
            return _Outcome(retry=CONFLICT_RETRY)
        except ApiError as e:
            log.warning("updating PodGroup %s/%s: %s", namespace(obj), name_of(obj), e.message)
            return _Outcome(retry=ERROR_RETRY)

    async def _mark(self, n: str, ns: str, annotation: str) -> _Outcome:
        try:
            await self.client.patch("Pod", n, ns, {"metadata": {"annotations": {annotation: "true"}}})
            return _DONE
        except NotFound:
            return _DONE
        except ApiError as e:
            log.warning("marking pod %s/%s %s: %s", ns, n, annotation, e.message)
            return _Outcome(retry=ERROR_RETRY)

    @staticmethod
    async def _record(rec: EventRecorder, job: Obj, key: str, etype: str, reason: str, message: str) -> None:
        try:
            await rec.record(job, etype, reason, message)
        except Exception:  # an event is never worth failing a reconcile
            log.exception("recording event %s on %s", reason, key)

    async def _apply_object(self, obj: Obj) -> _Outcome:
        """Create ``obj``, or replace the existing one's content (keeping its metadata
        but labels); a retry delay when the write failed."""
        c, kind_, n, ns = self.client, obj.get("kind", ""), name_of(obj), namespace(obj)
        try:
            await c.create(obj)
            return _Outcome((("Normal", f"SuccessfulCreate{kind_}", f"Created {kind_.lower()}: {n}"),))
        except AlreadyExists:
            pass
        except ApiError as e:
            return _Outcome((("Warning", f"FailedCreate{kind_}", f"Error creating: {e.message}"),), ERROR_RETRY)
        try:
            have = await c.get(kind_, n, ns)
            merged = {**copy.deepcopy(have), **{k: v for k, v in obj.items() if k != "metadata"}}
            labels_ = as_dict(metadata_of(obj).get("labels"))
            if labels_:
                merged["metadata"].setdefault("labels", {}).update(labels_)
            await c.update(merged)
        except (Conflict, NotFound):
            return _Outcome(retry=CONFLICT_RETRY)
        except ApiError as e:
            log.warning("updating %s %s/%s: %s", kind_, ns, n, e.message)
            return _Outcome(retry=ERROR_RETRY)
        return _DONE


class _Outcome(NamedTuple):
    """One write's share of a round: events to record, a retry delay."""

    events: tuple[Event, ...] = ()
    retry: float | None = None


_DONE = _Outcome()


_POD_IGNORED = {
    "metadata": frozenset({"resourceVersion", "managedFields", "generation"}),
    "spec": frozenset({"nodeName"}),
    "status": frozenset({"conditions", "podIP", "podIPs", "hostIP", "hostIPs", "startTime", "qosClass",
                         "nominatedNodeName", "containerStatuses", "initContainerStatuses"}),
}
_META_IGNORED = {"metadata": frozenset({"resourceVersion", "managedFields", "generation"})}


def _may_change_plan(obj: Obj, old: Obj) -> bool:
    """False when ``obj`` differs from ``old`` only where the core does not look: for
    pods the fields above; for PodGroups and HPAs their status (another controller's), but a
    PodGroup's side of admission (``podgroup.admitted``); for other kinds the resourceVersion and managedFields."""
    kind = obj.get("kind")
    if kind == "Pod":
        if _differs(old, obj, _POD_IGNORED) or preemption_message(old) != preemption_message(obj):
            return True
        a, b = as_dict(old.get("status")), as_dict(obj.get("status"))
        return any(_container_view(a.get(k)) != _container_view(b.get(k))
                   for k in ("containerStatuses", "initContainerStatuses"))
    if kind == "PodGroup" and pg.admitted(obj) != pg.admitted(old):
        return True
    if kind in ("PodGroup", "HorizontalPodAutoscaler"):
        return _differs({**old, "status": None}, {**obj, "status": None}, _META_IGNORED)
    return _differs(old, obj, _META_IGNORED)


def _container_view(statuses: Any) -> Any:
    """What restarts.py and the frameworks read of container statuses: name,
    restartCount, the current termination, whether it waits in CrashLoopBackOff, the
    last state. An entry with none of these (a container being created or running
    for the first time) changes no decision and is left out."""
    out: list[Any] = []
    if not isinstance(statuses, list):
        return out  # read as no statuses (fields.container_statuses)
    for cs in statuses:
        if not isinstance(cs, dict):
            out.append(cs)
            continue
        state = cs.get("state")
        if isinstance(state, dict):
            waiting = state.get("waiting")
            crash = isinstance(waiting, dict) and waiting.get("reason") == "CrashLoopBackOff"
            state = (state.get("terminated"), crash)
        view = (cs.get("name"), cs.get("restartCount"), state, cs.get("lastState"))
        if view[1] or view[3] or state not in ((None, False), None):
            out.append(view)
    return out


def _differs(a: Obj, b: Obj, ignored: dict[str, frozenset[str]]) -> bool:
    """Whether ``a`` and ``b`` differ outside ``ignored`` (top-level key -> its subkeys)."""
    for k in a.keys() | b.keys():
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        skip = ignored.get(k)
        if skip is None or not isinstance(x, dict) or not isinstance(y, dict):
            return True
        for kk in x.keys() | y.keys():
            if kk not in skip and x.get(kk) != y.get(kk):
                return True
    return False


def _earliest(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
