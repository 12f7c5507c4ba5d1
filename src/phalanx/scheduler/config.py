"""Scheduler configuration: actions, plugin tiers and plugin arguments.

Mirrors Volcano's default ``volcano-scheduler.conf``: tier 1 priority, gang,
conformance; tier 2 overcommit, predicates, proportion, nodeorder, binpack
(drf is not implemented: its ordering is replaced by creation time). The
actions differ on purpose: "enqueue, allocate, preempt, reclaim, backfill"
(Volcano's default leaves preempt and reclaim out). Without them a queue that
borrowed idle capacity never gives it back and a high-priority job waits
behind low-priority ones; with them, preemption and reclaim are gang-safe
(plugins/gang) and stop at each queue's deserved share (plugins/proportion),
and a cluster with one queue and one priority sees no eviction at all.

Default weights differ from Volcano's in one place, on purpose: binpack
weight 10 instead of 1. With Volcano's 1/1/1 (binpack, leastrequested,
balancedresource) the spreading scores win: a 4 x 1 cpu/100Mi gang on two
empty 16-cpu nodes lands 2+2 (Volcano issues #2158, #3773). Weight 10 is what
Volcano's binpack guide uses, and it provably dominates the two spreading
scores (each moves by at most a tenth of binpack's change), so a gang packs
onto the fullest node that fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.api.constants import DEFAULT_QUEUE, SCHEDULER_NAME

DEFAULT_ACTIONS: tuple[str, ...] = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
VOLCANO_DEFAULT_ACTIONS: tuple[str, ...] = ("enqueue", "allocate", "backfill")
DEFAULT_TIERS: tuple[tuple[str, ...], ...] = (
    ("priority", "gang", "conformance"),
    ("overcommit", "predicates", "proportion", "nodeorder", "binpack"),
)


@dataclass
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    tiers: tuple[tuple[str, ...], ...] = DEFAULT_TIERS
    # binpack (plugins/binpack): weight 0 disables the plugin.
    binpack_weight: float = 10.0
    binpack_cpu: float = 1.0
    binpack_memory: float = 1.0
    binpack_resources: dict[str, float] = field(default_factory=dict)  # e.g. {"nvidia.com/gpu": 1}
    # nodeorder (plugins/nodeorder), Volcano's defaults.
    leastrequested_weight: float = 1.0
    mostrequested_weight: float = 0.0
    balancedresource_weight: float = 1.0
    nodeaffinity_weight: float = 2.0
    # overcommit: values below 1 fall back to 1.2, as Volcano.
    overcommit_factor: float = 1.2
    default_queue: str = DEFAULT_QUEUE
    # The pods placed are those whose spec.schedulerName is ``scheduler_name``
    # or one of ``extra_scheduler_names`` (Volcano's --scheduler-name is a
    # list); the first is also the name the scheduler reports events under.
    scheduler_name: str = SCHEDULER_NAME
    extra_scheduler_names: tuple[str, ...] = ()
    # Volcano --minimum-feasible-nodes / --minimum-percentage-nodes-to-find /
    # --percentage-nodes-to-find (0 = adaptive).
    minimum_feasible_nodes: int = 100
    minimum_percentage_nodes_to_find: int = 5
    percentage_nodes_to_find: int = 0

    @property
    def scheduler_names(self) -> frozenset[str]:
        """Every schedulerName whose pods this scheduler places."""
        return frozenset((self.scheduler_name, *self.extra_scheduler_names))

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """Volcano util.CalculateNumOfFeasibleNodesToFind (kube's percentageOfNodesToScore)."""
        if num_all_nodes <= self.minimum_feasible_nodes or self.percentage_nodes_to_find >= 100:
            return num_all_nodes
        pct = self.percentage_nodes_to_find
        if pct <= 0:
            pct = 50 - num_all_nodes // 125
            if pct < self.minimum_percentage_nodes_to_find:
                pct = self.minimum_percentage_nodes_to_find
        n = num_all_nodes * pct // 100
        return max(n, self.minimum_feasible_nodes)


# Volcano's own defaults, for comparison and tests.
VOLCANO_DEFAULT_WEIGHTS = dict(binpack_weight=1.0, leastrequested_weight=1.0, balancedresource_weight=1.0)
