"""Why a task fits nowhere, worded as Volcano words it (api/unschedule_info.go).

Reasons are kept as a histogram (reason -> node count) instead of one entry
per node: the node index evaluates whole classes of identical nodes at once.
"""
from __future__ import annotations

# Node reasons (Volcano and the kube-scheduler filters it wraps).
NODE_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"

# Pod condition reasons.
POD_REASON_UNSCHEDULABLE = "Unschedulable"
POD_REASON_SCHEDULABLE = "Schedulable"

POD_GROUP_NOT_READY = "pod group is not ready"
POD_GROUP_READY = "pod group is ready"


def insufficient(resource: str) -> str:
    """Volcano WrapInsufficientResourceReason: only the first short resource is named."""
    return "Insufficient " + resource


def untolerated_taint(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def sorted_histogram(counts: dict[str, int]) -> list[str]:
    """Go's sort.Strings over "<count> <reason>" strings (byte order)."""
    return sorted(f"{v} {k}" for k, v in counts.items())


class FitErrors:
    """Volcano FitErrors: either per-node reasons or one preset message."""

    __slots__ = ("reasons", "nodes", "err")

    def __init__(self, err: str = "") -> None:
        self.reasons: dict[str, int] = {}
        self.nodes = 0
        self.err = err

    def add(self, reason: str, count: int = 1) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + count
        self.nodes += count

    def error(self) -> str:
        err = self.err or f"0/{self.nodes} nodes are unavailable"
        if self.nodes == 0:
            return err
        return f"{err}: {', '.join(sorted_histogram(self.reasons))}."
