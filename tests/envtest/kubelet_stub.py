"""In place of a kubelet on a cluster without one: fake Nodes, and pod statuses written by hand
(Running when bound, then Succeeded or Failed) in the shapes a kubelet writes (golden 47, 49)."""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools

from phalanx.objects.errors import AlreadyExists, ApiError, NotFound


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fake_node(name: str, cpu: int = 16, memory: str = "64Gi", pods: int = 110) -> dict:
    """A Node as a kubelet registers it: capacity = allocatable, Ready."""
    resources = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    now = _now()
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                                       "lastTransitionTime": now}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kubeletVersion": "v1.36.3", "containerRuntimeVersion": "containerd://2.0.0",
                                    "architecture": "amd64", "operatingSystem": "linux", "osImage": "envtest",
                                    "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                                    "bootID": ""}}}


async def add_nodes(client, nodes: list[dict]) -> None:
    """Create the Nodes (one that exists is kept), then clear the not-ready taint admission puts
    on a new Node (the node lifecycle controller clears it once the Node reports Ready; none runs here)."""
    for node in nodes:
        with contextlib.suppress(AlreadyExists):
            await client.create(node)
        await client.patch("Node", node["metadata"]["name"], None, {"spec": {"taints": None}})


def _condition(type_: str, status: str, now: str, reason: str | None = None) -> dict:
    c = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        c["reason"] = reason
    return c


def running_status(pod: dict, pod_ip: str) -> dict:
    """The status patch of a started pod: init containers Completed, containers running and ready."""
    now = _now()
    spec = pod["spec"]
    return {"status": {
        "phase": "Running", "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}], "startTime": now,
        "conditions": [_condition(t, "True", now) for t in
                       ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "initContainerStatuses": [
            {"name": c["name"], "ready": True, "restartCount": 0, "started": False, "image": c["image"],
             "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                                     "finishedAt": now}}}
            for c in spec.get("initContainers") or []],
        "containerStatuses": [
            {"name": c["name"], "ready": True, "restartCount": 0, "started": True, "image": c["image"],
             "imageID": "", "state": {"running": {"startedAt": now}}}
            for c in spec["containers"]]}}


def finished_status(pod: dict, exit_code: int = 0) -> dict:
    """The status patch of a pod whose containers exited with ``exit_code`` (0: Succeeded)."""
    now = _now()
    reason = "Completed" if exit_code == 0 else "Error"
    return {"status": {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [_condition("PodReadyToStartContainers", "False", now),
                       _condition("Initialized", "True", now, "PodCompleted"),
                       _condition("Ready", "False", now, "PodCompleted"),
                       _condition("ContainersReady", "False", now, "PodCompleted"),
                       _condition("PodScheduled", "True", now)],
        "containerStatuses": [
            {"name": c["name"], "ready": False, "restartCount": 0, "started": False, "image": c["image"],
             "imageID": "", "state": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": now,
                                                     "finishedAt": now}}}
            for c in pod["spec"]["containers"]]}}


class KubeletStub:
    """Plays the kubelet of every fake Node: a pod bound to one is marked Running; a pod being
    deleted gracefully is removed (as a kubelet confirms the deletion once its containers stop)."""

    def __init__(self, client, namespace: str = "default") -> None:
        self.client = client
        self.namespace = namespace
        self._ips = (f"10.1.{i // 250}.{i % 250 + 2}" for i in itertools.count())
        self._started: set[str] = set()
        self._task: asyncio.Task | None = None
        self.errors: list[str] = []
        self.first_seen: dict[str, dict] = {}  # each pod name's first version (as its creator wrote it)

    async def start(self) -> None:
        rv = (await self.client.list("Pod", self.namespace)).resource_version
        for pod in (await self.client.list("Pod", self.namespace)).items:
            await self._handle(pod)
        self._task = asyncio.create_task(self._run(rv))

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self, rv: str) -> None:
        async for ev in self.client.watch("Pod", self.namespace, resource_version=rv):
            if ev.type in ("ADDED", "MODIFIED"):
                await self._handle(ev.object)

    async def _handle(self, pod: dict) -> None:
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        self.first_seen.setdefault(meta["name"], pod)
        try:
            if meta.get("deletionTimestamp"):
                with contextlib.suppress(NotFound):
                    await self.client.delete("Pod", meta["name"], self.namespace, grace_period_seconds=0,
                                             preconditions_uid=meta["uid"])
            elif spec.get("nodeName") and status.get("phase") == "Pending" and meta["uid"] not in self._started:
                self._started.add(meta["uid"])
                await self.client.patch("Pod", meta["name"], self.namespace, running_status(pod, next(self._ips)),
                                        subresource="status")
        except ApiError as e:
            self.errors.append(f"pod {meta['name']}: {e}")

    async def finish(self, name: str, exit_code: int = 0) -> dict:
        """Write the pod's containers as exited with ``exit_code``."""
        pod = await self.client.get("Pod", name, self.namespace)
        return await self.client.patch("Pod", name, self.namespace, finished_status(pod, exit_code),
                                       subresource="status")
