"""What the scheduler shell keeps of a pod, and which changes of a pod or a node can alter a decision.

``trim_pod`` is the pod informer's transform; the signatures decide whether a change wakes the loop.
"""
from __future__ import annotations

from typing import Any

from phalanx.objects.meta import Obj, meta


def trim_pod(pod: Obj) -> Obj:
    """Keep what scheduling reads (saves memory in the pod informer)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}

    def container(c: Any) -> Any:
        if not isinstance(c, dict):
            return c
        out = {"name": c.get("name"), "resources": c.get("resources") or {}}
        if c.get("restartPolicy"):
            out["restartPolicy"] = c["restartPolicy"]
        return out

    keep_spec = {k: spec[k] for k in ("schedulerName", "nodeName", "priority", "priorityClassName",
                                      "preemptionPolicy", "nodeSelector", "affinity", "tolerations", "overhead")
                 if k in spec}
    keep_spec["containers"] = [container(c) for c in spec.get("containers") or []]
    if spec.get("initContainers"):
        keep_spec["initContainers"] = [container(c) for c in spec["initContainers"]]
    keep_status: dict[str, Any] = {"phase": status.get("phase")}
    conds = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "PodScheduled"]
    if conds:
        keep_status["conditions"] = conds
    return {"apiVersion": pod.get("apiVersion", "v1"), "kind": pod.get("kind", "Pod"),
            "metadata": pod.get("metadata") or {}, "spec": keep_spec, "status": keep_status}


def pod_signature(pod: Obj | None) -> tuple[Any, ...]:
    """What of a pod can change a scheduling decision."""
    if pod is None:
        return ()
    spec = pod.get("spec") or {}
    m = meta(pod)
    return ((pod.get("status") or {}).get("phase"), spec.get("nodeName"), m.get("deletionTimestamp"),
            m.get("generation"), (m.get("annotations") or {}).get("scheduling.k8s.io/group-name"))


def node_signature(node: Obj | None) -> tuple[Any, ...]:
    """What of a node can change a scheduling decision."""
    if node is None:
        return ()
    st = node.get("status") or {}
    ready = [c.get("status") for c in st.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"]
    spec = node.get("spec") or {}
    return (repr(st.get("allocatable")), repr(st.get("capacity")), tuple(ready), spec.get("unschedulable"),
            repr(spec.get("taints")), repr(meta(node).get("labels")))
