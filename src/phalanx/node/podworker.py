"""The sync loop of one pod on this node (``PodWorker``): observe the runtime, ``podstate.decide``, write the
status, keep the hosts file in step, set the volumes up, apply the actions, sleep until something changes.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from phalanx.api.constants import ANNOTATION_ADDRESS, LABEL_JOB_NAME
from phalanx.client.interface import Client
from phalanx.node import podstate
from phalanx.node.gpus import RESOURCE as GPU_RESOURCE
from phalanx.node.gpus import GpuAllocator, gpu_count
from phalanx.node.logs import pod_dir
from phalanx.node.metrics import NodeMetrics, PodStartTracker
from phalanx.node.names import check_dns_label, check_dns_subdomain, check_uid
from phalanx.node.network import LocalNetwork
from phalanx.node.podmounts import PodMounts
from phalanx.node.podstate import BackoffConfig, DeletePod, KillPod, StartContainer
from phalanx.node.processes import ProcessRuntime
from phalanx.node.reported import observations_from_status
from phalanx.node.statuswrite import write_pod_status
from phalanx.node.volumes import VolumeSpecError, plan_volumes
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound
from phalanx.objects.meta import resource_version

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class PodHost(Protocol):
    """What a pod worker uses of its node host."""

    client: Client
    clock: Clock
    node_name: str
    state_dir: Path
    host_ip: str
    backoff: BackoffConfig
    runtime: ProcessRuntime
    network: LocalNetwork
    gpus: GpuAllocator
    allocatable: dict[str, str]
    metrics: NodeMetrics | None

    async def record(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        """An event about ``pod``."""

    def selecting_services(self, pod: Obj, services: list[Obj] | None = None) -> list[Obj]:
        """The Services that select ``pod`` and carry a local address."""

    def held_names(self, owner: str) -> set[tuple[str, str]]:
        """(namespace, service) of the hosts entries ``owner`` holds."""

    def owner_of(self, pod: Obj) -> str:
        """The owner key of the pod's address and hosts-entry claims."""

    def worker_done(self, uid: str) -> None:
        """The worker of pod ``uid`` is finished (the pod is gone): forget it."""


def name_problem(pod: Obj) -> str | None:
    """Names that would become paths must be DNS names; say which is not."""
    meta = pod.get("metadata") or {}
    try:
        check_dns_label(meta.get("namespace") or "default", "metadata.namespace")
        check_dns_subdomain(meta.get("name"), "metadata.name")
        check_uid(meta.get("uid"))
        spec = pod.get("spec") or {}
        for field_name in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(field_name) or []):
                check_dns_label(c.get("name") if isinstance(c, dict) else None, f"spec.{field_name}[{i}].name")
    except ValueError as e:
        return str(e)
    return None


class PodWorker:
    """The sync loop of one pod (by uid)."""

    def __init__(self, host: PodHost, pod: Obj) -> None:
        self.host = host
        self.pod = pod
        meta = pod.get("metadata") or {}
        self.uid: str = meta["uid"]
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name", "")
        self.owner = host.owner_of(pod)
        self.filed_as: tuple[str, str | None] | None = None  # where the agent files it (by namespace and job)
        self.removed = False
        self.stopping = False
        self.pod_ip: str | None = None
        self.next_wakeup: datetime | None = None
        self.task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._kill_task: asyncio.Task[None] | None = None
        self._kill_grace: float | None = None
        self._published: set[tuple[str, str]] = set()
        self._announced: set[str] = set()
        self._backoff_reported: set[tuple[str, int]] = set()
        self._seeded = False
        self.mounts = PodMounts(host.client, host.clock, pod_dir(host.state_dir, self.namespace, self.name, self.uid),
                                self.namespace, f"node {host.node_name}: pod {self.namespace}/{self.name}", host.record)
        self._done = False
        self._writes = 0  # successful status writes
        self._rewrites = 0
        self._start_latency = PodStartTracker(host.metrics, pod, host.clock.now())

    def start(self) -> None:
        self.task = asyncio.create_task(self._loop(), name=f"pod-{self.namespace}-{self.name}")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def wake(self) -> None:
        self._wake.set()

    def update(self, pod: Obj) -> None:
        if (pod.get("metadata") or {}).get("uid") != self.uid:
            return
        if resource_version(pod) >= resource_version(self.pod) or self.removed:
            self.pod = pod

    # ------------------------------------------------------------------ loop

    async def _loop(self) -> None:
        errors = 0
        try:
            while not self.stopping and not self._done:
                self._wake.clear()
                try:
                    again = await self._sync()
                    errors = 0
                except asyncio.CancelledError:
                    raise
                except Exception:
                    errors += 1
                    log.exception("node %s: pod %s/%s: sync failed", self.host.node_name, self.namespace, self.name)
                    again = False
                    await asyncio.sleep(min(5.0, 0.1 * 2 ** min(errors, 6)))
                if self._done or self.stopping:
                    break
                if again:
                    continue
                timeout = None
                if self.next_wakeup is not None:
                    timeout = max(0.0, (self.next_wakeup - self.host.clock.now()).total_seconds())
                try:  # (asyncio.timeout: no task per wait, unlike wait_for)
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            if self._done:
                self.host.worker_done(self.uid)

    async def _sync(self) -> bool:
        """One round; True when it should run again at once."""
        host = self.host
        if self.removed:
            await self._teardown()
            return False
        pod = self.pod
        problem = podstate.pod_problem(pod) or name_problem(pod)
        if problem:
            return await self._reject(pod, "InvalidPodSpec", problem)
        if self.mounts.plan is None:
            try:
                self.mounts.plan = plan_volumes(pod)
            except VolumeSpecError as e:
                return await self._reject(pod, "InvalidPodSpec", str(e))
        if not self._seeded:
            self._seeded = True
            # Instances on disk: a previous agent set the volumes up before starting them.
            self.mounts.mounted = bool(host.runtime.instances(self.uid))
            # Containers the runtime knows nothing of (no shim record on disk)
            # but a previous agent reported: see reported.observations_from_status.
            if (pod.get("status") or {}).get("containerStatuses"):
                host.runtime.seed(pod, observations_from_status(pod, host.clock.now()))
            self._announced.update(host.runtime.instances(self.uid))
            if host.runtime.any_running(self.uid):  # adopted: it holds the names it held
                self._published = host.held_names(self.owner)
        if self.pod_ip is None:
            self.pod_ip = await self._choose_ip(pod)
        now = host.clock.now()
        d = podstate.decide(pod, host.runtime.observe(self.uid), now, pod_ip=self.pod_ip,
                            host_ip=host.host_ip, backoff=host.backoff)
        written_before = self._writes
        if not await self._write_status(d.status):
            return True
        # A written status can change the next decision (Error is shown before
        # CrashLoopBackOff): look again at once, a bounded number of times.
        rewrite = self._writes != written_before and self._rewrites < 3
        self._rewrites = self._rewrites + 1 if rewrite else 0
        await self._sync_hosts(d.status)
        if d.phase in podstate.TERMINAL_PHASES:
            host.gpus.release_pod(self.uid)  # a finished pod holds no devices
        await self._report_backoff(d)
        if self.mounts.mounted and self.mounts.dirty and d.phase not in podstate.TERMINAL_PHASES:
            await self.mounts.refresh()
        acted = False
        mount_failed = False
        for a in d.actions:
            if isinstance(a, StartContainer):
                if mount_failed or not await self.mounts.mount(pod):
                    mount_failed = True  # the pod waits in ContainerCreating
                    continue
                await self._start(a)
                acted = True
            elif isinstance(a, KillPod):
                self._kill(a)
            elif isinstance(a, DeletePod):
                await self._delete()
                return False
        self.next_wakeup = d.next_wakeup
        retry_at = self.mounts.retry_at
        if mount_failed and retry_at is not None:
            self.next_wakeup = min(self.next_wakeup or retry_at, retry_at)
        return acted or rewrite

    # ------------------------------------------------------------------ volumes

    def config_map_changed(self, name: str, version: str) -> bool:
        """Note a ConfigMap event; True when this pod mounts it and should look again."""
        return self.mounts.config_map_changed(name, version)

    # ------------------------------------------------------------------ actions

    async def _start(self, a: StartContainer) -> None:
        host = self.host
        pod = self.pod
        if self.stopping:
            return
        container: Obj = next((c for c in (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]
                          if c.get("name") == a.name), {})
        extra = host.network.resolver_env(self.name)
        if host.gpus.total:
            want = gpu_count(container)
            devices = host.gpus.allocate((self.uid, a.name), want)
            if devices is None:
                devices = []
                await host.record(pod, "Warning", "UnexpectedAdmissionError",
                                   f"container {a.name}: {want} {GPU_RESOURCE} requested, not enough free on node "
                                   f"{host.node_name}; starting without GPUs")
            extra["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in devices)
        inst = await host.runtime.start(
            pod, a.name, backoff_count=a.backoff_count, pod_ip=self.pod_ip or "", host_ip=host.host_ip,
            extra_env=extra, node_allocatable=host.allocatable)
        if a.name not in self._announced:
            self._announced.add(a.name)
            image = container.get("image") or ""
            await host.record(pod, "Normal", "LocalRuntime",
                               f'Container image "{image}" is not pulled: the local runtime runs the '
                               "container's command on this host")
        if inst.termination is not None and inst.started_at is None:
            await host.record(pod, "Warning", "Failed", f"Error: {inst.termination.message}")
            return
        await host.record(pod, "Normal", "Created", f"Created container: {a.name}")
        await host.record(pod, "Normal", "Started", f"Started container {a.name}")

    def _kill(self, a: KillPod) -> None:
        if self._kill_task is not None and not self._kill_task.done():
            if self._kill_grace is not None and a.grace_seconds >= self._kill_grace:
                return
        self._kill_grace = a.grace_seconds
        self._kill_task = asyncio.create_task(self._do_kill(a), name=f"kill-{self.namespace}-{self.name}")

    async def _do_kill(self, a: KillPod) -> None:
        pod = self.pod
        for name, inst in self.host.runtime.instances(self.uid).items():
            if inst.running:
                await self.host.record(pod, "Normal", "Killing", f"Stopping container {name}")
        if a.reason == podstate.DEADLINE_EXCEEDED:
            await self.host.record(pod, "Normal", podstate.DEADLINE_EXCEEDED, podstate.DEADLINE_MESSAGE)
        await self.host.runtime.kill_pod(self.uid, a.grace_seconds)
        self.wake()

    async def _delete(self) -> None:
        await self._unpublish_all()
        try:
            await self.host.client.delete("Pod", self.name, self.namespace, grace_period_seconds=0)
        except NotFound:
            pass
        await self._teardown()

    async def _teardown(self) -> None:
        """The pod object is gone (or about to be): stop processes, free the
        address, forget the records. Logs stay on disk."""
        host = self.host
        if host.runtime.any_running(self.uid):
            await host.runtime.kill_pod(self.uid, podstate.grace_seconds(self.pod))
        await self._unpublish_all()
        host.network.release(self.owner)
        host.gpus.release_pod(self.uid)
        await host.runtime.forget_async(self.uid)
        self._done = True
        self.removed = True

    async def _reject(self, pod: Obj, reason: str, message: str) -> bool:
        """A pod the agent cannot run: Failed with the reason, processes stopped."""
        host = self.host
        if host.runtime.any_running(self.uid):
            await host.runtime.kill_pod(self.uid, 0)
        status = podstate.rejected_status(pod, host.clock.now(), reason, message, host_ip=host.host_ip)
        old = pod.get("status") or {}
        if old.get("phase") != "Failed" or old.get("reason") != reason or old.get("message") != message:
            log.warning("node %s: pod %s/%s cannot run: %s", host.node_name, self.namespace, self.name, message)
            if not await self._write_status(status):
                return True
            await host.record(pod, "Warning", reason, message)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete()
        return False

    # ------------------------------------------------------------------ status

    async def _write_status(self, status: Obj) -> bool:
        """Write the status unless unchanged. False when the pod moved under us
        (Conflict: refreshed, decide again) or vanished."""
        outcome, obj = await write_pod_status(self.host.client, self.pod, status)
        if outcome == "gone":
            self.removed = True
        elif outcome == "moved" and obj is not None:
            self.pod = obj
        elif outcome == "written" and obj is not None:
            self.update(obj)
            self._writes += 1
            containers = len((self.pod.get("spec") or {}).get("containers") or [])
            self._start_latency.written(status, containers, self.host.clock.now())
        return outcome in ("unchanged", "written")

    async def _choose_ip(self, pod: Obj) -> str:
        """The address of the headless Service selecting the pod (the job
        controller creates it first), else a fresh one for the pod."""
        host = self.host
        services = host.selecting_services(pod)
        if not any((s.get("spec") or {}).get("clusterIP") == "None" for s in services):
            try:
                # Our informer may lag the job controller's create: ask the store, for this job's Services when
                # the pod names its job (the job controller's Services carry their selector as labels).
                job = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_NAME)
                sel = {LABEL_JOB_NAME: job} if isinstance(job, str) and job else None
                listed = (await host.client.list("Service", self.namespace, label_selector=sel)).items
                if sel is not None and not host.selecting_services(pod, listed):
                    listed = (await host.client.list("Service", self.namespace)).items
                services = host.selecting_services(pod, listed)
            except Exception as e:
                log.debug("listing services failed: %s", e)
        for s in services:
            if (s.get("spec") or {}).get("clusterIP") == "None":
                return s["metadata"]["annotations"][ANNOTATION_ADDRESS]
        return host.network.allocate_address(self.owner)

    async def _sync_hosts(self, status: Obj) -> None:
        """Publish the names of the Services selecting this pod while it is ready
        (like DNS for a headless Service with ready endpoints); unpublish otherwise."""
        host = self.host
        ready = status.get("phase") == "Running" and not (self.pod.get("metadata") or {}).get("deletionTimestamp") \
            and any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        want: set[tuple[str, str]] = set()
        addresses: dict[tuple[str, str], str] = {}
        if ready:
            for s in host.selecting_services(self.pod):
                key = (self.namespace, s["metadata"]["name"])
                want.add(key)
                addresses[key] = s["metadata"]["annotations"][ANNOTATION_ADDRESS]
        if want == self._published:
            return
        for ns, name in self._published - want:
            host.network.unpublish(name, ns, holder=self.owner)
        for key in want - self._published:
            try:
                host.network.publish(key[1], key[0], addresses[key], holder=self.owner)
            except ValueError as e:
                log.warning("cannot publish %s/%s: %s", key[0], key[1], e)
        self._published = want

    async def _unpublish_all(self) -> None:
        for ns, name in self._published:
            self.host.network.unpublish(name, ns, holder=self.owner)
        self._published = set()

    async def _report_backoff(self, d: podstate.Decision) -> None:
        for name, delay in d.backing_off.items():
            inst = self.host.runtime.instances(self.uid).get(name)
            key = (name, inst.restart_count if inst else -1)
            if key in self._backoff_reported:
                continue
            self._backoff_reported.add(key)
            await self.host.record(self.pod, "Warning", "BackOff",
                                    f"Back-off restarting failed container {name} in pod {podstate.pod_ref(self.pod)}")


