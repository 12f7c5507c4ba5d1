"""Builders of the object dicts the scheduler reads, for tests and benchmarks.

Shapes follow what a real apiserver returns for these kinds.
"""
from __future__ import annotations

import copy
from typing import Any

from phalanx.api.constants import ANNOTATION_GROUP_NAME, ANNOTATION_TASK_SPEC
from phalanx.scheduler.snapshot import Snapshot

T0 = "2026-01-01T00:00:00Z"


def node(name: str, cpu: str = "16", memory: str = "64Gi", pods: str = "110", *, ready: bool = True,
         unschedulable: bool = False, labels: dict[str, str] | None = None,
         taints: list[dict] | None = None, extra: dict[str, str] | None = None) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"node-{name}", "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def queue(name: str = "default", weight: int = 1, capability: dict | None = None, *, parent: str | None = None,
          state: str | None = None, priority: int | None = None, guarantee: dict | None = None,
          created: str = T0, status: dict | None = None) -> dict:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": name != "root"}
    if capability is not None:
        spec["capability"] = capability
    if parent:
        spec["parent"] = parent
    if priority is not None:
        spec["priority"] = priority
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    obj: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                           "metadata": {"name": name, "uid": f"queue-{name}", "creationTimestamp": created},
                           "spec": spec}
    st = dict(status or {})
    if state:
        st["state"] = state
    if st:
        obj["status"] = st
    return obj


def podgroup(name: str, min_member: int = 4, *, namespace: str = "default", queue: str | None = "default",
             min_resources: dict | None = None, phase: str | None = None, priority_class: str | None = None,
             created: str = T0, min_task_member: dict[str, int] | None = None, status: dict | None = None) -> dict:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    if min_resources is not None:
        spec["minResources"] = min_resources
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    obj: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{namespace}-{name}",
                                        "creationTimestamp": created, "resourceVersion": "1"},
                           "spec": spec}
    st = dict(status or {})
    if phase:
        st["phase"] = phase
    if st:
        obj["status"] = st
    return obj


def pod(name: str, group: str | None, cpu: str | None = "1", memory: str | None = "100Mi", *,
        namespace: str = "default", node_name: str | None = None, phase: str = "Pending",
        scheduler: str = "volcano", created: str = T0, deleting: bool = False, priority: int | None = None,
        role: str | None = None, node_selector: dict | None = None, tolerations: list | None = None,
        gpu: int | None = None, requests: bool = False, conditions: list | None = None) -> dict:
    """A pod shaped like the job controller's: limits only (requests default to them)."""
    res: dict[str, Any] = {}
    if cpu is not None:
        res["cpu"] = cpu
    if memory is not None:
        res["memory"] = memory
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    resources = {"requests": res} if requests else ({"limits": res} if res else {})
    ann = {ANNOTATION_GROUP_NAME: group} if group else {}
    if role:
        ann[ANNOTATION_TASK_SPEC] = role
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"pod-{namespace}-{name}",
                            "creationTimestamp": created, "annotations": ann, "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = T0
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    status: dict[str, Any] = {"phase": phase}
    if conditions:
        status["conditions"] = conditions
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def gang(job: str, n: int = 4, *, cpu: str = "1", memory: str = "100Mi", namespace: str = "default",
         node_name: str | None = None, phase: str = "Pending", created: str = T0) -> list[dict]:
    """Pods of the seed PyTorchJob shape: <job>-master-0, <job>-worker-0..n-2."""
    names = [f"{job}-master-0"] + [f"{job}-worker-{i}" for i in range(n - 1)]
    return [pod(nm, job, cpu, memory, namespace=namespace, node_name=node_name, phase=phase, created=created)
            for nm in names]


class World:
    """Objects of a simulated cluster and what the shell would write into it:
    ``apply`` binds pods (PodScheduled=True, as the binding subresource does),
    stores PodGroup/Queue status and pod conditions. For multi-session tests."""

    def __init__(self, nodes: list[dict], queues: list[dict], podgroups: list[dict], pods: list[dict]) -> None:
        self.nodes = copy.deepcopy(nodes)
        self.queues = copy.deepcopy(queues)
        self.podgroups = copy.deepcopy(podgroups)
        self.pods = copy.deepcopy(pods)

    def snapshot(self, **kw: Any) -> Snapshot:
        return Snapshot.build(self.nodes, self.queues, self.podgroups, self.pods, **kw)

    def pod(self, name: str, namespace: str = "default") -> dict:
        return next(p for p in self.pods if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace)

    def podgroup(self, name: str, namespace: str = "default") -> dict:
        return next(p for p in self.podgroups
                    if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace)

    def queue(self, name: str) -> dict:
        return next(q for q in self.queues if q["metadata"]["name"] == name)

    def apply(self, result: Any) -> None:
        pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in self.pods}
        for ns, name, node_name in result.bindings:
            p = pods[(ns, name)]
            assert not p["spec"].get("nodeName"), f"{ns}/{name} bound twice"
            p["spec"]["nodeName"] = node_name
            conds = [c for c in p["status"].get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True"})
            p["status"]["conditions"] = conds
        for (ns, name), status in result.podgroup_status.items():
            self.podgroup(name, ns)["status"] = status
        for name, status in result.queue_status.items():
            self.queue(name)["status"] = status
        for (ns, name), cond in result.pod_conditions.items():
            p = pods[(ns, name)]
            conds = [c for c in p["status"].get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append(cond)
            p["status"]["conditions"] = conds
        for name, changes in result.queue_annotations.items():
            ann = self.queue(name)["metadata"].setdefault("annotations", {})
            for k, v in changes.items():
                if v is None:
                    ann.pop(k, None)
                else:
                    ann[k] = v
        for e in result.evictions:
            p = pods[(e.namespace, e.name)]
            assert not p["metadata"].get("deletionTimestamp"), f"{e.namespace}/{e.name} evicted twice"
            p["metadata"]["deletionTimestamp"] = T0
            conds = [c for c in p["status"].get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            conds.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                          "message": e.message})
            p["status"]["conditions"] = conds

    def finish_evicted_pods(self) -> list[dict]:
        """The node agents' part: evicted pods end and are removed; returns them."""
        gone = [p for p in self.pods if p["metadata"].get("deletionTimestamp")]
        self.pods = [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]
        return gone

    def start_bound_pods(self) -> None:
        """The node agents' part: bound pods start running."""
        for p in self.pods:
            if p["spec"].get("nodeName") and p["status"].get("phase") == "Pending":
                p["status"]["phase"] = "Running"
