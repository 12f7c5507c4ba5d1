"""In place of a kubelet on a cluster without one: fake Nodes, and pod statuses written by hand
(Running when bound, crashed and restarted in place, Succeeded or Failed) in a kubelet's shapes (golden 47, 49, 50)."""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools

from phalanx.objects.errors import AlreadyExists, ApiError, NotFound

# The kubelet's crash-loop back-off: none before the first restart, then 10 s doubling to 300 s.
BACKOFF_BASE, BACKOFF_CAP = 10, 300


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


def _not_ready(now: str, containers: list[str]) -> list[dict]:
    """The pod conditions while ``containers`` are not ready (golden 50)."""
    conds = []
    for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
        c = _condition(t, "True", now)
        if t in ("Ready", "ContainersReady"):
            c.update(status="False", reason="ContainersNotReady",
                     message=f"containers with unready status: [{' '.join(containers)}]")
        conds.append(c)
    return conds


def _in_place_status(pod: dict, container: str, state: dict, last_state: dict | None, restart_count: int,
                     running: bool) -> dict:
    """The status patch of a Running pod whose ``container`` has ``state`` (the others kept)."""
    status = pod["status"]
    statuses = []
    for cs in status["containerStatuses"]:
        if cs["name"] == container:
            cs = {**cs, "ready": running, "started": running, "restartCount": restart_count, "state": state}
            if last_state is not None:
                cs["lastState"] = last_state
        statuses.append(cs)
    unready = [cs["name"] for cs in statuses if not cs["ready"]]
    now = _now()
    conditions = _not_ready(now, unready) if unready else \
        [_condition(t, "True", now) for t in
         ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {"status": {"phase": "Running", "conditions": conditions, "containerStatuses": statuses}}


def _container_status(pod: dict, container: str) -> dict:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs["name"] == container:
            return cs
    raise AssertionError(f"pod {pod['metadata']['name']} has no status of container {container!r}")


class KubeletStub:
    """Plays the kubelet of every fake Node: a pod bound to one is marked Running; a pod being
    deleted gracefully is removed (as a kubelet confirms the deletion once its containers stop).
    The test ends containers: ``finish`` (the pod Succeeded or Failed), ``crash`` then ``restart``
    (an in-place restart under restartPolicy OnFailure or Always)."""

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

    async def crash(self, name: str, exit_code: int = 1, container: str | None = None) -> dict:
        """``container`` (the first by default) of a Running pod whose restartPolicy restarts it
        exits with ``exit_code``: terminated (reason Error), the pod stays Running and not Ready;
        after a restart already made it waits in CrashLoopBackOff (the back-off before the next),
        its termination as lastState. ``restart`` ends the back-off."""
        pod = await self.client.get("Pod", name, self.namespace)
        policy = pod["spec"].get("restartPolicy") or "Always"
        assert policy in ("OnFailure", "Always") and pod["status"]["phase"] == "Running", (name, policy)
        container = container or pod["spec"]["containers"][0]["name"]
        cs = _container_status(pod, container)
        started = (cs["state"].get("running") or {}).get("startedAt")
        assert started, f"{name}/{container} is not running: {cs['state']}"
        n = cs["restartCount"]
        terminated = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                     "startedAt": started, "finishedAt": _now()}}
        pod = await self.client.patch("Pod", name, self.namespace,
                                      _in_place_status(pod, container, terminated, None, n, False),
                                      subresource="status")
        if n == 0:
            return pod  # the first restart comes without back-off
        backoff = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (n - 1))
        waiting = {"waiting": {"reason": "CrashLoopBackOff",
                               "message": f"back-off {backoff}s restarting failed container={container} "
                                          f"pod={name}_{self.namespace}({pod['metadata']['uid']})"}}
        return await self.client.patch("Pod", name, self.namespace,
                                       _in_place_status(pod, container, waiting, terminated, n, False),
                                       subresource="status")

    async def restart(self, name: str, container: str | None = None) -> dict:
        """The exited ``container`` runs again in place: restartCount + 1, running and ready, its
        termination kept as lastState; same pod (uid), phase Running."""
        pod = await self.client.get("Pod", name, self.namespace)
        assert not pod["metadata"].get("deletionTimestamp"), f"{name} is being deleted: a kubelet starts nothing"
        container = container or pod["spec"]["containers"][0]["name"]
        cs = _container_status(pod, container)
        last = cs["state"] if "terminated" in cs["state"] else cs.get("lastState")
        assert last and "terminated" in last, f"{name}/{container} has not exited: {cs['state']}"
        return await self.client.patch("Pod", name, self.namespace,
                                       _in_place_status(pod, container, {"running": {"startedAt": _now()}}, last,
                                                        cs["restartCount"] + 1, True),
                                       subresource="status")
