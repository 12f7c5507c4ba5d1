"""The node agent: runs the pods bound to one node as local processes (a kubelet).

One worker task per pod: observe the runtime, ask the pure state machine
(``podstate.decide``) what to do, write the pod status when it changed, keep
the hosts file in step (a Service's names resolve once its pod is ready), set
the pod's volumes up before its first container starts (``volumes``: a missing
ConfigMap keeps it ContainerCreating, with FailedMount events, until it
exists), apply the actions, and sleep until a process exits, the pod or a
ConfigMap it mounts changes, or the back-off expires. A weird pod is marked
Failed with a reason; the agent never crashes on one.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import platform
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from phalanx import __version__
from phalanx.api.constants import ANNOTATION_ADDRESS, LABEL_JOB_NAME
from phalanx.client.interface import Client
from phalanx.node import podstate
from phalanx.node.gpus import RESOURCE as GPU_RESOURCE
from phalanx.node.gpus import GpuAllocator, gpu_count, node_devices
from phalanx.node.logs import pod_dir
from phalanx.node.names import check_dns_label, check_dns_subdomain, check_uid
from phalanx.node.network import LocalNetwork, pod_owner
from phalanx.node.podstate import BackoffConfig, DeletePod, KillPod, StartContainer
from phalanx.node.pyenv import PythonEnvironment
from phalanx.node.runtime import ProcessRuntime
from phalanx.node.statuswrite import write_pod_status
from phalanx.node.volumes import VolumePlan, VolumeSpecError, materialise, plan_volumes, refresh_config_maps
from phalanx.objects.clock import Clock, format_time
from phalanx.objects.errors import AlreadyExists, Conflict, NotFound
from phalanx.objects.meta import match_labels, resource_version
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.informer import Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]

HOST_IP = "127.0.0.1"
COMPONENT = "kubelet"
_FINISHED_MEMORY = 4096
# A volume that cannot be set up (its ConfigMap is missing) is tried again on
# the next sync: at once when the ConfigMap appears, else after this back-off.
MOUNT_RETRY_BASE = 1.0
MOUNT_RETRY_CAP = 16.0


@dataclass
class AgentConfig:
    """Timings and limits of the node agent (tests shrink the back-off)."""

    backoff_base: float = 10.0
    backoff_cap: float = 300.0
    backoff_reset: float | None = None  # a run this long forgets the back-off; default 2 x cap
    oom_poll_interval: float = 0.1
    state_dir: Path | None = None  # overrides NodeAgent's state_dir when set
    cgroups: str = "auto"  # "auto" | "v1" | "off": see phalanx.node.limits
    host_ip: str = HOST_IP
    shutdown_grace: float = 5.0  # grace for pods killed because the agent stops
    events: bool = True
    environments: tuple[PythonEnvironment, ...] = ()  # image pattern -> Python environment (pyenv)

    def backoff(self) -> BackoffConfig:
        reset = self.backoff_reset if self.backoff_reset is not None else 2 * self.backoff_cap
        return BackoffConfig(base=self.backoff_base, cap=self.backoff_cap, reset_after=reset)


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



class NodeAgent:
    """Runs the pods whose ``spec.nodeName`` is ``node_name``."""

    def __init__(self, client: Client, clock: Clock, node_name: str, state_dir: Path,
                 network: LocalNetwork, config: AgentConfig | None = None) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.config = config or AgentConfig()
        self.state_dir = Path(self.config.state_dir or state_dir)
        self.network = network
        self.backoff = self.config.backoff()
        self.runtime = ProcessRuntime(self.state_dir, clock, node_name=node_name, cgroups=self.config.cgroups,
                                      oom_poll_interval=self.config.oom_poll_interval, on_exit=self._on_exit,
                                      environments=self.config.environments)
        self.events = EventRecorder(client, COMPONENT, clock)
        # Pods of other nodes (or none yet) are kept as stubs: this agent only acts on its own.
        self.pods = Informer(client, "Pod", transform=_own_pods(node_name))
        self.services = Informer(client, "Service")
        self.configmaps = Informer(client, "ConfigMap", transform=_metadata_only)
        self.allocatable: dict[str, str] = {}
        self.gpus = GpuAllocator(0)
        self._workers: dict[str, _PodWorker] = {}
        # (namespace, job-name label) -> workers: a Service event wakes only the pods it can select.
        self._by_job: dict[tuple[str, str | None], dict[str, _PodWorker]] = {}
        self._finished: dict[str, None] = {}
        self._stop = asyncio.Event()
        self._stopping = False
        self._prepared = False

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Run until ``stop()``."""
        await self.prepare()
        if self._stopping:
            return
        self.services.add_index(SERVICE_INDEX, _service_index)
        self.services.add_handler(self._on_service)
        self.configmaps.add_handler(self._on_configmap)
        self.pods.add_handler(self._on_pod)
        await self.services.start()
        await self.configmaps.start()
        await self.pods.start()
        await self._stop.wait()

    async def stop(self, kill_pods: bool = True) -> None:
        """Stop watching; with ``kill_pods`` terminate every process first
        (SIGTERM, ``shutdown_grace``, SIGKILL). Without, the containers keep
        running under their shims and the next agent of this node adopts them."""
        self._stopping = True
        await self.pods.stop()
        await self.services.stop()
        await self.configmaps.stop()
        workers = list(self._workers.values())
        for w in workers:
            w.stopping = True
        if kill_pods:
            await self._mark_shutdown(workers)
            await self.runtime.shutdown(self.config.shutdown_grace)
        for w in workers:
            w.cancel()
        await asyncio.gather(*(w.task for w in workers if w.task is not None), return_exceptions=True)
        if kill_pods:  # anything a worker started while being stopped
            await self.runtime.shutdown(0)
        else:
            self.runtime.detach()
        self._workers.clear()
        self._by_job.clear()
        self._stop.set()

    async def _mark_shutdown(self, workers: list["_PodWorker"]) -> None:
        """Before the pods this agent runs are killed because it stops: mark
        each (Failed, DisruptionTarget TerminationByKubelet, as the kubelet's
        graceful node shutdown does) so the job controller recreates it at the
        next start instead of counting a failure. Marked first, so a crash
        while killing leaves the mark too."""
        async def mark(w: "_PodWorker") -> None:
            pod = w.pod
            if w.removed or (pod.get("metadata") or {}).get("deletionTimestamp") \
                    or (pod.get("status") or {}).get("phase") in podstate.TERMINAL_PHASES \
                    or not self.runtime.any_running(w.uid):
                return
            try:
                await write_pod_status(self.client, pod, podstate.shutdown_status(pod, self.clock.now()))
            except Exception as e:  # the store may be failing too: the kill goes on
                log.warning("node %s: pod %s/%s: marking it stopped by the shutdown failed: %s",
                            self.node_name, w.namespace, w.name, e)
        await asyncio.gather(*(mark(w) for w in workers))

    async def prepare(self) -> None:
        """Before any pod is synced: adopt what the shims of a previous agent of
        this node run or recorded, kill what belongs to pods that are gone, and
        forget network state of objects that vanished while no agent ran.
        Idempotent; ``run`` calls it, the cluster calls it first so that no
        other component acts on this node's pods before they are adopted."""
        if self._prepared:
            return
        try:
            nodes = (await self.client.list("Node")).items
        except Exception:
            nodes = []
        node = next((n for n in nodes if (n.get("metadata") or {}).get("name") == self.node_name), {})
        self.allocatable = dict((node.get("status") or {}).get("allocatable") or {})
        # Every node is this machine: each hands out device indices of its own.
        self.gpus = _Gpus(node_devices(nodes, self.node_name))
        # Each list is followed by its clean-up without an await in between, so
        # nothing created meanwhile can be taken for vanished.
        delay = 0.1
        while True:
            try:
                services = (await self.client.list("Service")).items
                self.network.sync_services(services)
                pods = (await self.client.list("Pod")).items
                break
            except Exception as e:  # without the pod list nothing can be adopted safely: retry
                if self._stopping:
                    return
                log.warning("node %s: listing pods for adoption failed (%s); retrying", self.node_name, e)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 2.0)
        mine = [p for p in pods if (p.get("spec") or {}).get("nodeName") == self.node_name]
        keep = {self.owner_of(p) for p in mine}
        self.network.retain(f"Pod/{self.node_name}/", keep)
        adoption = await self.runtime.adopt(mine)
        if adoption.running or adoption.exited or adoption.orphans_killed:
            log.info("node %s: adopted %d running containers, %d exits recorded while no agent ran; "
                     "killed %d of pods that are gone", self.node_name, sum(map(len, adoption.running.values())),
                     sum(map(len, adoption.exited.values())), adoption.orphans_killed)
        for p in mine:
            uid = (p.get("metadata") or {}).get("uid", "")
            for name, inst in self.runtime.instances(uid).items():
                if inst.gpus:  # a container keeps its devices across restarts, and across agents
                    self.gpus.claim((uid, name), inst.gpus)
            if not self.runtime.any_running(uid):  # it holds no name until it runs (and is ready) again
                self.network.unpublish_holder(self.owner_of(p))
        self._prepared = True

    def held_names(self, owner: str) -> set[tuple[str, str]]:
        """(namespace, service) of the hosts entries ``owner`` holds."""
        return self.network.held_by(owner)

    def owner_of(self, pod: Obj) -> str:
        m = pod.get("metadata") or {}
        return pod_owner(self.node_name, m.get("namespace") or "default", m.get("name", ""), m.get("uid", ""))

    # ------------------------------------------------------------------ events

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        worker = self._workers.get(uid)
        if type_ == "DELETED":
            if worker is not None:
                worker.removed = True
                worker.update(pod)
                worker.wake()
            return
        if (pod.get("spec") or {}).get("nodeName") != self.node_name:
            return
        if worker is None:
            if uid in self._finished or self._stopping:
                return
            worker = _PodWorker(self, pod)
            self._workers[uid] = worker
            worker.start()
        else:
            worker.update(pod)
        self._file_worker(worker)
        worker.wake()

    def _on_service(self, type_: str, svc: Obj, old: Obj | None) -> None:
        """Wake the pods the Service selects or selected (their hosts entries may
        change): those of the job its selector names, else all of its namespace."""
        ns = (svc.get("metadata") or {}).get("namespace")
        jobs: set[str] = set()
        for s in (svc, old):
            sel = ((s or {}).get("spec") or {}).get("selector")
            if not isinstance(sel, dict) or not sel:
                continue  # selects nothing
            job = sel.get(LABEL_JOB_NAME)
            if not isinstance(job, str):  # may select any pod of the namespace
                for w in self._workers.values():
                    if w.namespace == ns:
                        w.wake()
                return
            jobs.add(job)
        for job in jobs:
            for w in self._by_job.get((str(ns), job), {}).values():
                w.wake()

    def _file_worker(self, w: _PodWorker) -> None:
        """Keep ``w`` filed under its namespace and job-name label (see _on_service)."""
        labels = (w.pod.get("metadata") or {}).get("labels")
        job = labels.get(LABEL_JOB_NAME) if isinstance(labels, dict) else None
        key = (w.namespace, job if isinstance(job, str) else None)
        if key == w.filed_as:
            return
        self._unfile_worker(w)
        self._by_job.setdefault(key, {})[w.uid] = w
        w.filed_as = key

    def _unfile_worker(self, w: _PodWorker) -> None:
        group = self._by_job.get(w.filed_as) if w.filed_as is not None else None
        if group is not None:
            group.pop(w.uid, None)
            if not group:
                del self._by_job[w.filed_as]  # type: ignore[arg-type]
        w.filed_as = None

    def _on_configmap(self, type_: str, cm: Obj, old: Obj | None) -> None:
        """A ConfigMap a pod mounts changed: set up or refresh its volumes."""
        meta = cm.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name")
        for w in self._workers.values():
            if w.namespace == ns and w.config_map_changed(str(name), str(meta.get("resourceVersion") or "")):
                w.wake()

    def _on_exit(self, uid: str) -> None:
        w = self._workers.get(uid)
        if w is not None:
            w.wake()

    def _worker_done(self, uid: str) -> None:
        w = self._workers.pop(uid, None)
        if w is not None:
            self._unfile_worker(w)
        self._finished[uid] = None
        while len(self._finished) > _FINISHED_MEMORY:
            self._finished.pop(next(iter(self._finished)))

    # ------------------------------------------------------------------ helpers for workers

    def selecting_services(self, pod: Obj, services: list[Obj] | None = None) -> list[Obj]:
        """Services of the pod's namespace whose selector matches it and that carry
        a local address, headless ones first, then by name."""
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            labels = {}
        if services is not None:
            pool = services
        else:  # only the Services that can select it (O(1) in the namespace's Services)
            pool = self.services.by_index(SERVICE_INDEX, f"{ns}/*")
            job = labels.get(LABEL_JOB_NAME)
            if isinstance(job, str):
                pool += self.services.by_index(SERVICE_INDEX, f"{ns}/={job}")
        out = []
        for s in pool:
            sel = (s.get("spec") or {}).get("selector")
            ann = (s.get("metadata") or {}).get("annotations") or {}
            if ((s.get("metadata") or {}).get("namespace") or "default") != ns:
                continue
            if isinstance(sel, dict) and sel and match_labels(sel, labels) and ann.get(ANNOTATION_ADDRESS):
                out.append(s)
        out.sort(key=lambda s: ((s.get("spec") or {}).get("clusterIP") != "None", s["metadata"]["name"]))
        return out

    async def record(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        if self.config.events:
            await self.events.record(pod, type_, reason, message)


SERVICE_INDEX = "selects"


def _service_index(svc: Obj) -> list[str]:
    """Where a Service is filed for ``selecting_services``: ``<ns>/=<job>`` when
    its selector names a job (only that job's pods can match it), else
    ``<ns>/*``; a Service without a selector selects nothing."""
    meta = svc.get("metadata") or {}
    sel = (svc.get("spec") or {}).get("selector")
    if not isinstance(sel, dict) or not sel:
        return []
    ns = meta.get("namespace") or "default"
    job = sel.get(LABEL_JOB_NAME)
    return [f"{ns}/={job}" if isinstance(job, str) else f"{ns}/*"]


class _PodWorker:
    """The sync loop of one pod (by uid)."""

    def __init__(self, agent: NodeAgent, pod: Obj) -> None:
        self.agent = agent
        self.pod = pod
        meta = pod.get("metadata") or {}
        self.uid: str = meta["uid"]
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name", "")
        self.owner = agent.owner_of(pod)
        self.filed_as: tuple[str, str | None] | None = None  # NodeAgent._by_job
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
        self.volumes: VolumePlan | None = None
        self._mounted = False
        self._mount_failures = 0
        self._mount_retry_at: datetime | None = None
        self._cm_versions: dict[str, str] = {}  # ConfigMap name -> resourceVersion last read
        self._cm_dirty = False
        self._done = False
        self._writes = 0  # successful status writes
        self._rewrites = 0

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
                    log.exception("node %s: pod %s/%s: sync failed", self.agent.node_name, self.namespace, self.name)
                    again = False
                    await asyncio.sleep(min(5.0, 0.1 * 2 ** min(errors, 6)))
                if self._done or self.stopping:
                    break
                if again:
                    continue
                timeout = None
                if self.next_wakeup is not None:
                    timeout = max(0.0, (self.next_wakeup - self.agent.clock.now()).total_seconds())
                try:  # (asyncio.timeout: no task per wait, unlike wait_for)
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            if self._done:
                self.agent._worker_done(self.uid)

    async def _sync(self) -> bool:
        """One round; True when it should run again at once."""
        agent = self.agent
        if self.removed:
            await self._teardown()
            return False
        pod = self.pod
        problem = podstate.pod_problem(pod) or name_problem(pod)
        if problem:
            return await self._reject(pod, "InvalidPodSpec", problem)
        if self.volumes is None:
            try:
                self.volumes = plan_volumes(pod)
            except VolumeSpecError as e:
                return await self._reject(pod, "InvalidPodSpec", str(e))
        if not self._seeded:
            self._seeded = True
            # Instances on disk: a previous agent set the volumes up before starting them.
            self._mounted = bool(agent.runtime.instances(self.uid))
            # Containers the runtime knows nothing of (no shim record on disk)
            # but a previous agent reported: see podstate.observations_from_status.
            if (pod.get("status") or {}).get("containerStatuses"):
                agent.runtime.seed(pod, podstate.observations_from_status(pod, agent.clock.now()))
            self._announced.update(agent.runtime.instances(self.uid))
            if agent.runtime.any_running(self.uid):  # adopted: it holds the names it held
                self._published = agent.held_names(self.owner)
        if self.pod_ip is None:
            self.pod_ip = await self._choose_ip(pod)
        now = agent.clock.now()
        d = podstate.decide(pod, agent.runtime.observe(self.uid), now, pod_ip=self.pod_ip,
                            host_ip=agent.config.host_ip, backoff=agent.backoff)
        written_before = self._writes
        if not await self._write_status(d.status):
            return True
        # A written status can change the next decision (Error is shown before
        # CrashLoopBackOff): look again at once, a bounded number of times.
        rewrite = self._writes != written_before and self._rewrites < 3
        self._rewrites = self._rewrites + 1 if rewrite else 0
        await self._sync_hosts(d.status)
        if d.phase in podstate.TERMINAL_PHASES:
            agent.gpus.release_pod(self.uid)  # a finished pod holds no devices
        await self._report_backoff(d)
        if self._mounted and self._cm_dirty and d.phase not in podstate.TERMINAL_PHASES:
            await self._refresh_volumes(pod)
        acted = False
        mount_failed = False
        for a in d.actions:
            if isinstance(a, StartContainer):
                if mount_failed or not await self._mount_volumes(pod):
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
        if mount_failed and self._mount_retry_at is not None:
            self.next_wakeup = min(self.next_wakeup or self._mount_retry_at, self._mount_retry_at)
        return acted or rewrite

    # ------------------------------------------------------------------ volumes

    def config_map_changed(self, name: str, resource_version: str) -> bool:
        """Note a ConfigMap event; True when this pod mounts it and should look again."""
        if self.volumes is None or name not in self.volumes.config_maps:
            return False
        if self._cm_versions.get(name) == resource_version and resource_version:
            return False
        self._cm_dirty = True
        return True

    async def _read_config_maps(self, names: list[str]) -> dict[str, Obj | None]:
        out: dict[str, Obj | None] = {}
        for n in names:
            try:
                cm = await self.agent.client.get("ConfigMap", n, self.namespace)
            except NotFound:
                cm = None
            out[n] = cm
            self._cm_versions[n] = str(((cm or {}).get("metadata") or {}).get("resourceVersion") or "")
        return out

    def _pod_dir(self) -> Path:
        return pod_dir(self.agent.state_dir, self.namespace, self.name, self.uid)

    async def _mount_volumes(self, pod: Obj) -> bool:
        """Before the pod's first container starts: set its volumes up. False
        (a FailedMount event, a retry later) when one cannot be yet."""
        if self._mounted or not self.volumes:
            self._mounted = True
            return True
        agent = self.agent
        now = agent.clock.now()
        if self._mount_retry_at is not None and now < self._mount_retry_at and not self._cm_dirty:
            return False
        self._cm_dirty = False
        cms = await self._read_config_maps(self.volumes.config_maps)
        errors = materialise(self._pod_dir(), self.volumes, cms, now)
        if not errors:
            self._mounted = True
            self._mount_failures = 0
            self._mount_retry_at = None
            return True
        self._mount_failures += 1
        delay = min(MOUNT_RETRY_BASE * 2 ** min(self._mount_failures - 1, 16), MOUNT_RETRY_CAP)
        self._mount_retry_at = now + timedelta(seconds=delay)
        for e in errors:
            log.info("node %s: pod %s/%s: %s", agent.node_name, self.namespace, self.name, e.event_message)
            await agent.record(pod, "Warning", "FailedMount", e.event_message)
        return False

    async def _refresh_volumes(self, pod: Obj) -> None:
        """A mounted ConfigMap changed: rewrite its volumes (as the kubelet's sync does)."""
        self._cm_dirty = False
        if not self.volumes:
            return
        cms = await self._read_config_maps(self.volumes.config_maps)
        done = refresh_config_maps(self._pod_dir(), self.volumes, cms, self.agent.clock.now())
        if done:
            log.info("node %s: pod %s/%s: volumes %s updated", self.agent.node_name, self.namespace, self.name,
                     ", ".join(done))

    # ------------------------------------------------------------------ actions

    async def _start(self, a: StartContainer) -> None:
        agent = self.agent
        pod = self.pod
        if self.stopping:
            return
        container = next((c for c in (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]
                          if c.get("name") == a.name), {})
        extra = agent.network.resolver_env(self.name)
        if agent.gpus.total:
            want = gpu_count(container)
            devices = agent.gpus.allocate((self.uid, a.name), want)
            if devices is None:
                devices = []
                await agent.record(pod, "Warning", "UnexpectedAdmissionError",
                                   f"container {a.name}: {want} {GPU_RESOURCE} requested, not enough free on node "
                                   f"{agent.node_name}; starting without GPUs")
            extra["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in devices)
        inst = await agent.runtime.start(
            pod, a.name, backoff_count=a.backoff_count, pod_ip=self.pod_ip or "", host_ip=agent.config.host_ip,
            extra_env=extra, node_allocatable=agent.allocatable)
        if a.name not in self._announced:
            self._announced.add(a.name)
            image = container.get("image") or ""
            await agent.record(pod, "Normal", "LocalRuntime",
                               f'Container image "{image}" is not pulled: the local runtime runs the '
                               "container's command on this host")
        if inst.termination is not None and inst.started_at is None:
            await agent.record(pod, "Warning", "Failed", f"Error: {inst.termination.message}")
            return
        await agent.record(pod, "Normal", "Created", f"Created container: {a.name}")
        await agent.record(pod, "Normal", "Started", f"Started container {a.name}")

    def _kill(self, a: KillPod) -> None:
        if self._kill_task is not None and not self._kill_task.done():
            if self._kill_grace is not None and a.grace_seconds >= self._kill_grace:
                return
        self._kill_grace = a.grace_seconds
        self._kill_task = asyncio.create_task(self._do_kill(a), name=f"kill-{self.namespace}-{self.name}")

    async def _do_kill(self, a: KillPod) -> None:
        pod = self.pod
        for name, inst in self.agent.runtime.instances(self.uid).items():
            if inst.running:
                await self.agent.record(pod, "Normal", "Killing", f"Stopping container {name}")
        if a.reason == podstate.DEADLINE_EXCEEDED:
            await self.agent.record(pod, "Normal", podstate.DEADLINE_EXCEEDED, podstate.DEADLINE_MESSAGE)
        await self.agent.runtime.kill_pod(self.uid, a.grace_seconds)
        self.wake()

    async def _delete(self) -> None:
        await self._unpublish_all()
        try:
            await self.agent.client.delete("Pod", self.name, self.namespace, grace_period_seconds=0)
        except NotFound:
            pass
        await self._teardown()

    async def _teardown(self) -> None:
        """The pod object is gone (or about to be): stop processes, free the
        address, forget the records. Logs stay on disk."""
        agent = self.agent
        if agent.runtime.any_running(self.uid):
            await agent.runtime.kill_pod(self.uid, podstate.grace_seconds(self.pod))
        await self._unpublish_all()
        agent.network.release(self.owner)
        agent.gpus.release_pod(self.uid)
        await agent.runtime.forget_async(self.uid)
        self._done = True
        self.removed = True

    async def _reject(self, pod: Obj, reason: str, message: str) -> bool:
        """A pod the agent cannot run: Failed with the reason, processes stopped."""
        agent = self.agent
        if agent.runtime.any_running(self.uid):
            await agent.runtime.kill_pod(self.uid, 0)
        status = podstate.rejected_status(pod, agent.clock.now(), reason, message, host_ip=agent.config.host_ip)
        old = pod.get("status") or {}
        if old.get("phase") != "Failed" or old.get("reason") != reason or old.get("message") != message:
            log.warning("node %s: pod %s/%s cannot run: %s", agent.node_name, self.namespace, self.name, message)
            if not await self._write_status(status):
                return True
            await agent.record(pod, "Warning", reason, message)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete()
        return False

    # ------------------------------------------------------------------ status

    async def _write_status(self, status: Obj) -> bool:
        """Write the status unless unchanged. False when the pod moved under us
        (Conflict: refreshed, decide again) or vanished."""
        outcome, obj = await write_pod_status(self.agent.client, self.pod, status)
        if outcome == "gone":
            self.removed = True
        elif outcome == "moved":
            self.pod = obj
        elif outcome == "written":
            self.update(obj)
            self._writes += 1
        return outcome in ("unchanged", "written")

    async def _choose_ip(self, pod: Obj) -> str:
        """The address of the headless Service selecting the pod (the job
        controller creates it first), else a fresh one for the pod."""
        agent = self.agent
        services = agent.selecting_services(pod)
        if not any((s.get("spec") or {}).get("clusterIP") == "None" for s in services):
            try:
                # Our informer may lag the job controller's create: ask the store, for this job's Services when
                # the pod names its job (the job controller's Services carry their selector as labels).
                job = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_NAME)
                sel = {LABEL_JOB_NAME: job} if isinstance(job, str) and job else None
                listed = (await agent.client.list("Service", self.namespace, label_selector=sel)).items
                if sel is not None and not agent.selecting_services(pod, listed):
                    listed = (await agent.client.list("Service", self.namespace)).items
                services = agent.selecting_services(pod, listed)
            except Exception as e:
                log.debug("listing services failed: %s", e)
        for s in services:
            if (s.get("spec") or {}).get("clusterIP") == "None":
                return s["metadata"]["annotations"][ANNOTATION_ADDRESS]
        return agent.network.allocate_address(self.owner)

    async def _sync_hosts(self, status: Obj) -> None:
        """Publish the names of the Services selecting this pod while it is ready
        (like DNS for a headless Service with ready endpoints); unpublish otherwise."""
        agent = self.agent
        ready = status.get("phase") == "Running" and not (self.pod.get("metadata") or {}).get("deletionTimestamp") \
            and any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        want: set[tuple[str, str]] = set()
        addresses: dict[tuple[str, str], str] = {}
        if ready:
            for s in agent.selecting_services(self.pod):
                key = (self.namespace, s["metadata"]["name"])
                want.add(key)
                addresses[key] = s["metadata"]["annotations"][ANNOTATION_ADDRESS]
        if want == self._published:
            return
        for ns, name in self._published - want:
            agent.network.unpublish(name, ns, holder=self.owner)
        for key in want - self._published:
            try:
                agent.network.publish(key[1], key[0], addresses[key], holder=self.owner)
            except ValueError as e:
                log.warning("cannot publish %s/%s: %s", key[0], key[1], e)
        self._published = want

    async def _unpublish_all(self) -> None:
        for ns, name in self._published:
            self.agent.network.unpublish(name, ns, holder=self.owner)
        self._published = set()

    async def _report_backoff(self, d: podstate.Decision) -> None:
        for name, delay in d.backing_off.items():
            inst = self.agent.runtime.instances(self.uid).get(name)
            key = (name, inst.restart_count if inst else -1)
            if key in self._backoff_reported:
                continue
            self._backoff_reported.add(key)
            await self.agent.record(self.pod, "Warning", "BackOff",
                                    f"Back-off restarting failed container {name} in pod {podstate.pod_ref(self.pod)}")


def _metadata_only(obj: Obj) -> Obj:
    """What the agent keeps of a ConfigMap: enough to notice it changed."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}}


def _own_pods(node_name: str):
    def transform(pod: Obj) -> Obj:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") == node_name:
            return pod
        stub = _metadata_only(pod)
        stub["spec"] = {"nodeName": spec.get("nodeName")} if spec.get("nodeName") else {}
        return stub
    return transform


class _Gpus(GpuAllocator):
    """The node's allocator, plus taking back the devices adopted containers use."""

    def claim(self, key: tuple[str, str], devices: list[int]) -> None:
        self._owned[key] = [d for d in devices if d in self.devices]


# --------------------------------------------------------------------------- node registration


def _os_image() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def _arch() -> str:
    m = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(m, m)


def node_object(name: str, capacity: dict[str, str], now: datetime, host_ip: str = HOST_IP) -> Obj:
    """A v1 Node as a kubelet registers it, for this machine."""
    ts = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "kubernetes.io/arch": _arch()}},
        "spec": {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status", "lastHeartbeatTime": ts,
                            "lastTransitionTime": ts}],
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": platform.release(),
                         "osImage": _os_image(), "containerRuntimeVersion": f"phalanx://{__version__}",
                         "kubeletVersion": f"v{__version__}", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": _arch()},
        },
    }


async def ensure_node(client: Client, name: str, capacity: dict[str, str], clock: Clock | None = None,
                      host_ip: str = HOST_IP) -> Obj:
    """Create or refresh the Node object: capacity/allocatable, addresses, Ready."""
    check_dns_subdomain(name, "node name")
    now = (clock or Clock()).now()
    want = node_object(name, capacity, now, host_ip)
    try:
        current = await client.create(copy.deepcopy(want))
    except AlreadyExists:
        current = await client.get("Node", name)
    for _ in range(5):
        status = copy.deepcopy(want["status"])
        old_ready = next((c for c in (current.get("status") or {}).get("conditions") or []
                          if c.get("type") == "Ready"), None)
        if old_ready and old_ready.get("status") == "True":
            status["conditions"][0]["lastTransitionTime"] = old_ready.get("lastTransitionTime") or format_time(now)
        obj = copy.deepcopy(current)
        obj["status"] = status
        try:
            return await client.update_status(obj)
        except Conflict:
            current = await client.get("Node", name)
    raise Conflict("nodes", name)
