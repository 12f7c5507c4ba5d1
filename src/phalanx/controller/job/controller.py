"""The job controller shell: informers -> work queue -> pure ``reconcile`` -> Client writes.

Keys are ``<Kind>/<namespace>/<name>``. Pods, Services and PodGroups map to
the job named by their controller ownerReference.

Caches lag behind our own writes, so:
- names are deterministic, and AlreadyExists on create / NotFound on delete
  are success;
- the status is written first, with the job's resourceVersion; a Conflict
  means the plan was computed from a stale job, so nothing else of it is
  applied and the key is retried shortly;
- a job whose cached resourceVersion is older than the one our last status
  write returned is not reconciled: the watch event for that write is on its
  way and will trigger the next round.
"""
from __future__ import annotations

import copy
import inspect
import logging
from typing import Any, Iterable

from ...api.constants import ANNOTATION_NO_RESTART, ANNOTATION_NO_RESTART_ON_FAILURE
from ...api.errors import AlreadyExists, ApiError, Conflict, NotFound
from ...api.registry import JOB_KINDS
from ...clock import Clock
from ..events import EventRecorder
from ..frameworks import Framework, get_framework
from ..runtime import Controller, Informer, Result
from .core import reconcile
from .fields import as_dict, as_int, as_list, is_deleting, meta, name, namespace, uid
from .plan import Plan, ReconcileOptions

log = logging.getLogger(__name__)

OWNER_INDEX = "controller-uid"
CONFLICT_RETRY = 0.05  # seconds; the job's MODIFIED event usually arrives first
ERROR_RETRY = 1.0


def job_key(kind: str, ns: str, name_: str) -> str:
    return f"{kind}/{ns}/{name_}"


def controller_ref(obj: dict) -> dict | None:
    for ref in as_list(meta(obj).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


class JobController:
    """Reconciles every job kind in ``kinds`` through one work queue."""

    def __init__(
        self,
        client: Any,
        clock: Clock,
        options: ReconcileOptions | None = None,
        kinds: Iterable[str] | None = None,
        recorder: EventRecorder | None = None,
        workers: int = 1,
    ) -> None:
        self.client = client
        self.clock = clock
        self.options = options or ReconcileOptions()
        self.frameworks: dict[str, Framework] = {k: get_framework(k) for k in (JOB_KINDS if kinds is None else kinds)}
        self._recorder = recorder
        self._recorders: dict[str, EventRecorder] = {}
        self.jobs = {k: Informer(client, k) for k in self.frameworks}
        self.pods = Informer(client, "Pod")
        self.services = Informer(client, "Service")
        self.podgroups = Informer(client, "PodGroup") if self.options.gang_scheduler else None
        owned = sorted({k for fw in self.frameworks.values() for k in fw.owned_kinds(self.options)})
        self.owned = {k: Informer(client, k) for k in owned}  # Framework.owned_objects (MPI's ConfigMap)
        for inf in (self.pods, self.services, *self.owned.values()):
            inf.add_index(OWNER_INDEX, _controller_uid)  # a job's objects without scanning the namespace
        self.controller = Controller("job-controller", self.reconcile, workers=workers)
        self._written_rv: dict[str, int] = {}

    # ---- wiring -----------------------------------------------------------------------

    def _informers(self) -> list[Informer]:
        return [*self.jobs.values(), self.pods, self.services, *([self.podgroups] if self.podgroups is not None else []),
                *self.owned.values()]

    async def run(self) -> None:
        for kind, inf in self.jobs.items():
            inf.add_handler(self._job_handler(kind))
        for inf in (self.pods, self.services, self.podgroups, *self.owned.values()):
            if inf is not None:
                inf.add_handler(self._owned_handler)
        for inf in self._informers():
            await inf.start()
        for inf in self._informers():
            await inf.wait_synced()
        for kind, inf in self.jobs.items():
            for job in inf.list():
                self.controller.queue.add(job_key(kind, namespace(job), name(job)))
        await self.controller.run()

    async def stop(self) -> None:
        for target in (self.controller, *self._informers()):
            stop = getattr(target, "stop", None)
            if stop is None:
                continue
            res = stop()
            if inspect.isawaitable(res):
                await res

    def _job_handler(self, kind: str):
        def handler(event_type: str, obj: dict, old: dict | None = None) -> None:
            if isinstance(obj, dict) and name(obj):
                self.controller.queue.add(job_key(kind, namespace(obj), name(obj)))
        return handler

    def _owned_handler(self, event_type: str, obj: dict, old: dict | None = None) -> None:
        keys = set()
        for o in (obj, old):
            ref = controller_ref(o) if isinstance(o, dict) else None
            if ref and ref.get("kind") in self.frameworks and ref.get("name"):
                keys.add(job_key(ref["kind"], namespace(o), ref["name"]))
        for k in sorted(keys):
            self.controller.queue.add(k)

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
            self._written_rv.pop(key, None)
            return None
        if is_deleting(job) or self._stale(key, job):
            return None
        juid = uid(job)
        pods = sorted(self.pods.by_index(OWNER_INDEX, juid), key=name) if juid else []
        services = sorted(self.services.by_index(OWNER_INDEX, juid), key=name) if juid else []
        group = self.podgroups.get(ns, jname) if self.podgroups is not None else None
        if group is not None and not _controlled_by(group, juid):
            group = None
        others = [o for k in fw.owned_kinds(self.options) for o in self.owned[k].by_index(OWNER_INDEX, juid)] \
            if juid else []
        plan = reconcile(job, pods, services, group, self.clock.now(), fw, self.options, others)
        return await self.apply(key, kind, job, plan)

    def _stale(self, key: str, job: dict) -> bool:
        seen = as_int(meta(job).get("resourceVersion"))
        written = self._written_rv.get(key)
        return seen is not None and written is not None and seen < written

    async def apply(self, key: str, kind: str, job: dict, plan: Plan) -> Result | None:
        """Apply ``plan`` in order: status, PodGroup, deletions, services, pods, events."""
        c, ns, jname = self.client, namespace(job), name(job)
        rec = self._recorder_for(kind)
        events: list[tuple[str, str, str]] = []
        retry: float | None = None
        created = False

        if plan.status is not None:
            obj = copy.deepcopy(job)
            obj["status"] = plan.status
            try:
                updated = await c.update_status(obj)
            except Conflict:
                return Result(requeue_after=CONFLICT_RETRY)
            except NotFound:
                return None
            rv = as_int(meta(as_dict(updated)).get("resourceVersion"))
            if rv is not None:
                self._written_rv[key] = rv
            job = updated if isinstance(updated, dict) else obj

        if plan.podgroup_delete:
            try:
                await c.delete("PodGroup", jname, ns)
                events.append(("Normal", "SuccessfulDeletePodGroup", f"Deleted PodGroup: {jname}"))
            except NotFound:
                pass
            except ApiError as e:
                events.append(("Warning", "FailedDeletePodGroup", f"Error deleting: {e.message}"))
                retry = ERROR_RETRY
        if plan.podgroup_create is not None:
            try:
                await c.create(plan.podgroup_create)
                created = True
            except AlreadyExists:
                pass
            except ApiError as e:
                log.warning("creating PodGroup %s/%s: %s", ns, jname, e.message)
                retry = ERROR_RETRY
        if plan.podgroup_update is not None:
            try:
                await c.update(plan.podgroup_update)
            except (Conflict, NotFound):
                retry = CONFLICT_RETRY
            except ApiError as e:
                log.warning("updating PodGroup %s/%s: %s", ns, jname, e.message)
                retry = ERROR_RETRY

        for obj in plan.apply_objects:
            retry = _earliest(retry, await self._apply_object(obj, events))

        for kind_, names, what in (("Pod", plan.delete_pods, "pod"), ("Service", plan.delete_services, "service")):
            for n in names:
                try:
                    await c.delete(kind_, n, ns)
                    events.append(("Normal", f"SuccessfulDelete{kind_}", f"Deleted {what}: {n}"))
                except NotFound:
                    pass
                except ApiError as e:
                    events.append(("Warning", f"FailedDelete{kind_}", f"Error deleting: {e.message}"))
                    retry = ERROR_RETRY

        for names, annotation in ((plan.stop_restarting, ANNOTATION_NO_RESTART),
                                  (plan.stop_failure_restarts, ANNOTATION_NO_RESTART_ON_FAILURE)):
            for n in names:
                try:
                    await c.patch("Pod", n, ns, {"metadata": {"annotations": {annotation: "true"}}})
                except NotFound:
                    pass
                except ApiError as e:
                    log.warning("marking pod %s/%s %s: %s", ns, n, annotation, e.message)
                    retry = ERROR_RETRY

        for kind_, objs, what in (("Service", plan.create_services, "service"), ("Pod", plan.create_pods, "pod")):
            for o in objs:
                try:
                    await c.create(o)
                    created = True
                    events.append(("Normal", f"SuccessfulCreate{kind_}", f"Created {what}: {name(o)}"))
                except AlreadyExists:
                    pass
                except ApiError as e:
                    events.append(("Warning", f"FailedCreate{kind_}", f"Error creating: {e.message}"))
                    retry = ERROR_RETRY

        for etype, reason, message in [*events, *plan.events]:
            try:
                await rec.record(job, etype, reason, message)
            except Exception:  # an event is never worth failing a reconcile
                log.exception("recording event %s on %s", reason, key)

        if plan.delete_job:
            try:
                await c.delete(kind, jname, ns)
                await rec.record(job, "Normal", "SuccessfulDeleteJob", f"Deleted job: {jname}")
            except NotFound:
                pass
            except ApiError as e:
                await rec.record(job, "Warning", "FailedDeleteJob", f"Error deleting: {e.message}")
                retry = ERROR_RETRY

        # Two-phase flows (Services, then pods that need their ports) go on at once.
        after = _earliest(plan.requeue_after, retry, 0.0 if created else None)
        return Result(requeue_after=after) if after is not None else None


    async def _apply_object(self, obj: dict, events: list[tuple[str, str, str]]) -> float | None:
        """Create ``obj``, or replace the existing one's content (keeping its metadata
        but labels); a retry delay when the write failed."""
        c, kind_, n, ns = self.client, obj.get("kind", ""), name(obj), namespace(obj)
        try:
            await c.create(obj)
            events.append(("Normal", f"SuccessfulCreate{kind_}", f"Created {kind_.lower()}: {n}"))
            return None
        except AlreadyExists:
            pass
        except ApiError as e:
            events.append(("Warning", f"FailedCreate{kind_}", f"Error creating: {e.message}"))
            return ERROR_RETRY
        try:
            have = await c.get(kind_, n, ns)
            merged = {**copy.deepcopy(have), **{k: v for k, v in obj.items() if k != "metadata"}}
            labels_ = as_dict(meta(obj).get("labels"))
            if labels_:
                merged["metadata"].setdefault("labels", {}).update(labels_)
            await c.update(merged)
        except (Conflict, NotFound):
            return CONFLICT_RETRY
        except ApiError as e:
            log.warning("updating %s %s/%s: %s", kind_, ns, n, e.message)
            return ERROR_RETRY
        return None


def _controller_uid(obj: dict) -> list[str]:
    ref = controller_ref(obj)
    return [ref["uid"]] if ref is not None and isinstance(ref.get("uid"), str) and ref["uid"] else []


def _controlled_by(obj: dict, job_uid: str) -> bool:
    ref = controller_ref(obj) if isinstance(obj, dict) else None
    return bool(job_uid) and ref is not None and ref.get("uid") == job_uid


def _earliest(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
