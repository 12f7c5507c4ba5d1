"""Plugin nodeorder: kube-scheduler's node scores, weighted and summed.

Volcano plugins/nodeorder wraps the upstream score plugins and adds
``weight * score`` for each (no normalisation). Implemented here:

- leastrequested (NodeResourcesFit LeastAllocated, cpu and memory weighted
  equally): per resource ``(allocatable - requested) * 100 // allocatable``
  (0 when over), averaged with integer division; ``requested`` is the node's
  non-zero requests plus the task's (100m cpu / 200Mi for containers that
  request nothing), in millicores and bytes, as kube does in int64;
- mostrequested (MostAllocated): ``requested * 100 // allocatable``, same inputs;
- balancedresource (BalancedAllocation over cpu, memory, nvidia.com/gpu):
  fractions ``min(requested / allocatable, 1)`` of the resources the node
  has (a scalar only when the task requests it), ``int((1 - std) * 100)``;
  ``requested`` is actual requests (node's used plus the task's);
- nodeaffinity: the sum of the weights of the task's matching
  preferredDuringScheduling terms.

Pod affinity, taint-toleration, image-locality and topology-spread scores are
not implemented (nothing in Phalanx sets them).
"""
from __future__ import annotations

import math

from phalanx.scheduler.info import NodeInfo, TaskInfo
from phalanx.scheduler.plugins.predicates import match_node_selector_term
from phalanx.scheduler.session import Plugin, Session

GPU = "nvidia.com/gpu"


class NodeOrderPlugin(Plugin):
    name = "nodeorder"

    def on_session_open(self, ssn: Session) -> None:
        c = self.config
        wl, wm, wb, wa = (c.leastrequested_weight, c.mostrequested_weight,
                          c.balancedresource_weight, c.nodeaffinity_weight)
        gpu = ssn.dims.index.get(GPU)

        def score(task: TaskInfo, node: NodeInfo) -> float:
            s = 0.0
            if wl or wm:
                least = most = 0
                wsum = 0
                for alloc, req in ((node.allocatable[0], node.nz_cpu + task.nz_cpu),
                                   (node.allocatable[1], node.nz_mem + task.nz_mem)):
                    a = int(alloc)
                    if a == 0:
                        continue
                    r = int(req)
                    wsum += 1
                    if r <= a:
                        least += (a - r) * 100 // a
                        most += r * 100 // a
                if wsum:
                    s += wl * (least // wsum) + wm * (most // wsum)
            if wb:
                fractions = []
                idx = [0, 1] if gpu is None or task.resreq[gpu] == 0 else [0, 1, gpu]
                for i in idx:
                    total = node.allocatable[i]
                    if total == 0:
                        continue
                    f = (node.used[i] + task.resreq[i]) / total
                    fractions.append(1.0 if f > 1 else f)
                std = 0.0
                if len(fractions) == 2:
                    std = abs((fractions[0] - fractions[1]) / 2)
                elif len(fractions) > 2:
                    mean = sum(fractions) / len(fractions)
                    std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
                s += wb * int((1 - std) * 100)
            if wa:
                terms = task_preferred_terms(task)
                if terms:
                    s += wa * sum(w for w, term in terms if match_node_selector_term(term, node))
            return s

        ssn.add_node_order_fn(score)


def task_preferred_terms(task: TaskInfo) -> list[tuple[int, dict]]:
    aff = ((task.pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    out = []
    for p in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if not isinstance(p, dict):
            continue
        w = p.get("weight", 0)
        if isinstance(w, int) and not isinstance(w, bool) and w > 0:
            out.append((w, p.get("preference") or {}))
    return out
