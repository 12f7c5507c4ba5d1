"""The cluster as one scheduling session sees it: Volcano's ClusterInfo.

``Snapshot.build`` turns plain object dicts (Nodes, Queues, PodGroups, Pods)
into NodeInfo / QueueInfo / JobInfo / TaskInfo (``builder``). It never mutates
the dicts and never raises on a bad object: the object is skipped and the
reason is kept in ``Snapshot.skipped`` (the shell logs it). A snapshot is
consumed by one session, which updates task statuses and node accounting in
place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from phalanx.api.constants import DEFAULT_QUEUE, SCHEDULER_NAME
from phalanx.scheduler import resources as R
from phalanx.scheduler.builder import ObjectCache, SnapshotBuilder, scheduling_dims
from phalanx.scheduler.info import JobInfo, NodeInfo, QueueInfo, QueueTotals


@dataclass(eq=False)
class Snapshot:
    dims: R.Dims
    nodes: list[NodeInfo]
    queues: dict[str, QueueInfo]
    jobs: dict[tuple[str, str], JobInfo]
    skipped: list[str] = field(default_factory=list)
    consumed: bool = False
    # Jobs left out of ``jobs`` because a session would not change them
    # (SnapshotCache); their tasks are already counted on the nodes.
    settled: dict[str, QueueTotals] = field(default_factory=dict)
    # Parses the settled jobs (each once): for a session that needs them after all (preemption
    # victims). Their tasks are not added to the nodes again.
    load_settled: Callable[[], list[JobInfo]] | None = None

    def release(self) -> None:
        """Done with: every job's tasks dropped (``JobInfo.release``)."""
        for job in self.jobs.values():
            job.release()
        self.jobs.clear()

    @property
    def node_map(self) -> dict[str, NodeInfo]:
        return {n.name: n for n in self.nodes}

    @classmethod
    def build(
        cls,
        nodes: list[dict[str, Any]],
        queues: list[dict[str, Any]],
        podgroups: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        priority_classes: dict[str, int] | None = None,
        default_queue: str = DEFAULT_QUEUE,
        scheduler_names: frozenset[str] = frozenset({SCHEDULER_NAME}),
        object_cache: ObjectCache | None = None,
    ) -> Snapshot:
        """``object_cache`` (kept by the shell across sessions) saves re-parsing
        the quantities of pods and nodes that did not change."""
        b = SnapshotBuilder(priority_classes or {}, default_queue, frozenset(scheduler_names), object_cache)
        nodes = b.objects("node", nodes)
        queues = b.objects("queue", queues)
        podgroups = b.objects("podgroup", podgroups)
        pods = b.objects("pod", pods)
        dims = scheduling_dims(nodes, queues, podgroups, pods)
        node_list = b.parse_nodes(nodes, dims)
        queue_map = b.parse_queues(queues, dims)
        jobs = b.parse_jobs(podgroups, queue_map, dims)
        b.parse_pods(pods, dims, jobs, {n.name: n for n in node_list})
        return cls(dims=dims, nodes=node_list, queues=queue_map, jobs=jobs, skipped=b.skipped)
