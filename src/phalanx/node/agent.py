"""The node agent: runs the pods bound to one node as local processes (a kubelet).

It watches Pods, Services and ConfigMaps, adopts what a previous agent left
running, and runs one ``podworker.PodWorker`` per pod of its node: the worker
observes the runtime, asks the pure state machine (``podstate.decide``) what to
do, writes the pod status when it changed, keeps the hosts file in step (a
Service's names resolve once its pod is ready), sets the pod's volumes up before
its first container starts (``podmounts``: a missing ConfigMap keeps it
ContainerCreating, with FailedMount events, until it exists), applies the
actions, and sleeps until a process exits, the pod or a ConfigMap it mounts
changes, or the back-off expires. A weird pod is marked Failed with a reason;
the agent never crashes on one. It also registers the Node object.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import platform
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from phalanx import __version__
from phalanx.api.constants import ANNOTATION_ADDRESS, LABEL_JOB_NAME
from phalanx.client.interface import Client
from phalanx.node import podstate
from phalanx.node.gpus import GpuAllocator, node_devices
from phalanx.node.metrics import NodeMetrics
from phalanx.node.names import check_dns_subdomain
from phalanx.node.network import LocalNetwork, pod_owner
from phalanx.node.podstate import BackoffConfig
from phalanx.node.podworker import PodWorker
from phalanx.node.processes import ProcessRuntime
from phalanx.node.pyenv import PythonEnvironment
from phalanx.node.statuswrite import write_pod_status
from phalanx.objects.clock import Clock, format_time
from phalanx.objects.errors import AlreadyExists, Conflict
from phalanx.objects.meta import match_labels, resource_version
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.informer import Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]

HOST_IP = "127.0.0.1"
COMPONENT = "kubelet"
_FINISHED_MEMORY = 4096


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


class NodeAgent:
    """Runs the pods whose ``spec.nodeName`` is ``node_name``."""

    def __init__(self, client: Client, clock: Clock, node_name: str, state_dir: Path,
                 network: LocalNetwork, config: AgentConfig | None = None, metrics: NodeMetrics | None = None) -> None:
        self.client = client
        self.metrics = metrics  # kubelet's pod start latencies; None: not measured
        self.clock = clock
        self.node_name = node_name
        self.config = config or AgentConfig()
        self.state_dir = Path(self.config.state_dir or state_dir)
        self.network = network
        self.backoff = self.config.backoff()
        self.host_ip = self.config.host_ip
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
        self._workers: dict[str, PodWorker] = {}
        # (namespace, job-name label) -> workers: a Service event wakes only the pods it can select.
        self._by_job: dict[tuple[str, str | None], dict[str, PodWorker]] = {}
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
        self.services.add_index(SERVICE_INDEX, service_index)
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

    async def _mark_shutdown(self, workers: list[PodWorker]) -> None:
        """Before the pods this agent runs are killed because it stops: mark
        each (Failed, DisruptionTarget TerminationByKubelet, as the kubelet's
        graceful node shutdown does) so the job controller recreates it at the
        next start instead of counting a failure. Marked first, so a crash
        while killing leaves the mark too."""
        async def mark(w: PodWorker) -> None:
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
        self.gpus = GpuAllocator(node_devices(nodes, self.node_name))
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
            worker = PodWorker(self, pod)
            self._workers[uid] = worker
            worker.start()
        else:
            # A version no newer than the one held is the worker's own status write
            # coming back (or one its write or re-read already included): not news.
            stale = 0 < resource_version(pod) <= resource_version(worker.pod)  # (0: no number to compare)
            worker.update(pod)
            if stale:
                return
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

    def _file_worker(self, w: PodWorker) -> None:
        """Keep ``w`` filed under its namespace and job-name label (see _on_service)."""
        labels = (w.pod.get("metadata") or {}).get("labels")
        job = labels.get(LABEL_JOB_NAME) if isinstance(labels, dict) else None
        key = (w.namespace, job if isinstance(job, str) else None)
        if key == w.filed_as:
            return
        self._unfile_worker(w)
        self._by_job.setdefault(key, {})[w.uid] = w
        w.filed_as = key

    def _unfile_worker(self, w: PodWorker) -> None:
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

    def worker_done(self, uid: str) -> None:
        """The worker of pod ``uid`` is finished (the pod is gone): forget it."""
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


def service_index(svc: Obj) -> list[str]:
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
