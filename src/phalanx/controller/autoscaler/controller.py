"""The embedded cluster's HorizontalPodAutoscaler controller (kube-controller-manager's), the I/O shell.

Each HPA is synced when it appears or its spec changes, then every ``Settings.sync_period`` seconds: its
target's scale is read from the job (the Worker replicas, ``.status.replicaStatuses.Worker.active``
and ``.selector``, as the CRDs' scale subresource maps them), the pods of the selector are listed and
measured (``usage``: the node's reading of their processes), ``decide`` says what to do, a new replica
count is written to the job's Worker replicas (an update with the job's resourceVersion, as a scale
update), then the status (when it changed) and the events. A key is reconciled level-triggered and
always asks to be called again after the sync period.
"""
from __future__ import annotations

import copy
import logging
import math
from datetime import datetime
from typing import Callable, Protocol

from phalanx.api.kubeflow import FRAMEWORKS
from phalanx.api.registry import RESOURCES, ResourceType
from phalanx.client.interface import Client
from phalanx.controller.autoscaler.decide import Decision, PodUsage, Scale, Settings, decide
from phalanx.controller.autoscaler.normalize import History
from phalanx.objects.clock import Clock
from phalanx.objects.errors import ApiError, NotFound
from phalanx.objects.meta import Obj, metadata_of, name_of, namespace_of, uid_of
from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.informer import Informer

log = logging.getLogger(__name__)

COMPONENT = "horizontal-pod-autoscaler"
WORKER = "Worker"
# The job kinds whose CRD has a scale subresource (the original's: the Worker replicas).
SCALE_KINDS = ("PyTorchJob", "PaddleJob", "JAXJob")


class Reading(Protocol):
    """A pod's measured use (``phalanx.node.cpuusage.CpuReading``): cores per running container."""

    @property
    def containers(self) -> dict[str, float]: ...
    @property
    def timestamp(self) -> datetime: ...
    @property
    def window(self) -> float: ...


UsageReader = Callable[[str], "Reading | None"]  # pod uid -> its reading, if any container runs


def _resource_type(kind: str, group: str) -> ResourceType | None:
    return next((rt for rt in RESOURCES if rt.kind == kind and rt.group == group), None)


def _group_of(api_version: str) -> str:
    if api_version.count("/") > 1:
        raise ValueError(f"unexpected GroupVersion string: {api_version}")
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _dict(v: object) -> Obj:
    return v if isinstance(v, dict) else {}


def scale_of(job: Obj, replica_specs_field: str) -> Scale:
    """The scale subresource the CRD maps: spec from the Worker replicas (0 when unset), status from its replicaStatuses."""
    worker = _dict(_dict(_dict(job.get("spec")).get(replica_specs_field)).get(WORKER))
    st = _dict(_dict(_dict(job.get("status")).get("replicaStatuses")).get(WORKER))
    replicas, active, selector = worker.get("replicas"), st.get("active"), st.get("selector")
    return Scale(replicas if isinstance(replicas, int) else 0, active if isinstance(active, int) else 0,
                 selector if isinstance(selector, str) else "")


class HPAController:
    """Syncs every HorizontalPodAutoscaler (one worker: a sync is a few reads and at most two writes)."""

    def __init__(self, client: Client, clock: Clock, usage: UsageReader, settings: Settings | None = None) -> None:
        self.client = client
        self.clock = clock
        self.usage = usage
        self.settings = settings or Settings()
        self.informer = Informer(client, "HorizontalPodAutoscaler")
        self.informer.add_handler(self._on_event)
        self.controller: Controller[str] = Controller("horizontal-pod-autoscaler", self.reconcile)
        self.recorder = EventRecorder(client, COMPONENT, clock)
        self.histories: dict[str, History] = {}

    def _on_event(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "MODIFIED" and isinstance(old, dict) and old.get("spec") == obj.get("spec"):
            return  # a status write (ours): the next sync comes at its period
        self.controller.enqueue(f"{namespace_of(obj) or ''}/{name_of(obj)}")

    async def run(self) -> None:
        await self.informer.start()
        try:
            await self.controller.run()
        finally:
            await self.informer.stop()

    async def stop(self) -> None:
        await self.informer.stop()
        await self.controller.stop()

    async def reconcile(self, key: str) -> Result | None:
        ns, _, name = key.partition("/")
        hpa = self.informer.get(ns, name)
        if hpa is None:
            self.histories.pop(key, None)
            return None
        history = self.histories.setdefault(key, History())
        target, scale = await self._read_scale(hpa)
        pods, usage = await self._pods(ns, scale) if isinstance(scale, Scale) else ([], {})
        now = self.clock.now()
        d = decide(hpa, scale, pods, usage, history, self.settings, now)
        if d.rescale_to is not None and target is not None:
            await self._rescale(d, hpa, target, history)
        await self._finish(hpa, d)
        if d.error:
            log.info("horizontal pod autoscaler %s: %s", key, d.error)
        return Result(requeue_after=self.settings.sync_period)

    async def _read_scale(self, hpa: Obj) -> tuple[Obj | None, Scale | str]:
        """The target job and its scale, or why there is none (the upstream controller's errors)."""
        ref = _dict(_dict(hpa.get("spec")).get("scaleTargetRef"))
        kind, target = str(ref.get("kind") or ""), str(ref.get("name") or "")
        try:
            group = _group_of(str(ref.get("apiVersion") or ""))
        except ValueError as e:
            return None, str(e)
        rt = _resource_type(kind, group)
        if rt is None:
            return None, f'no matches for kind "{kind}" in group "{group}"'
        if rt.kind not in FRAMEWORKS:
            return None, "the server could not find the requested resource"
        try:
            job = await self.client.get(rt.kind, target, namespace_of(hpa))
        except ApiError as e:
            return None, e.message
        if rt.kind not in SCALE_KINDS:  # a CRD without a scale subresource answers its /scale with 404
            return None, NotFound(f"{rt.plural}.{rt.group}", target).message
        return job, scale_of(job, FRAMEWORKS[rt.kind].replica_specs_field)

    async def _pods(self, ns: str, scale: Scale) -> tuple[list[Obj], dict[str, PodUsage]]:
        if not scale.selector:
            return [], {}
        try:
            pods = list((await self.client.list("Pod", ns, label_selector=scale.selector)).items)
        except ApiError:
            return [], {}  # a selector the store refuses: decide says it is invalid
        usage: dict[str, PodUsage] = {}
        for pod in pods:
            reading = self.usage(uid_of(pod)) if _dict(pod.get("status")).get("phase") == "Running" else None
            if reading is not None:
                usage[name_of(pod)] = PodUsage({c: math.ceil(cores * 1000) for c, cores in reading.containers.items()},
                                               reading.timestamp, reading.window)
        return pods, usage

    async def _rescale(self, d: Decision, hpa: Obj, job: Obj, history: History) -> None:
        """The scale update: the job's Worker replicas, with the resourceVersion read."""
        field = FRAMEWORKS[str(job.get("kind"))].replica_specs_field
        new = copy.deepcopy(job)
        new.setdefault("spec", {}).setdefault(field, {}).setdefault(WORKER, {})["replicas"] = d.rescale_to
        now = self.clock.now()
        try:
            await self.client.update(new)
        except ApiError as e:
            d.rescale_failed(e.message, now)
            return
        d.rescaled(history, _dict(hpa.get("spec")).get("behavior"), now)

    async def _finish(self, hpa: Obj, d: Decision) -> None:
        if d.status != _dict(hpa.get("status")):
            try:
                await self.client.update_status({**hpa, "metadata": dict(metadata_of(hpa)), "status": d.status})
            except ApiError as e:
                d.events.append(("Warning", "FailedUpdateStatus", e.message))
        for etype, reason, message in d.events:
            await self.recorder.record(hpa, etype, reason, message)


__all__ = ["COMPONENT", "HPAController", "SCALE_KINDS", "UsageReader", "scale_of"]
