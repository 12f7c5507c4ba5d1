"""`kubectl describe`-style text for Pods, jobs, PodGroups, Queues, Nodes, Services, ...:
``describe()`` picks the describer of the object's kind (one module per kind family).

Pure: the object, the related objects (its events, a job's PodGroup, a node's
pods, ...) and ``now`` come in, text goes out. Layout follows kubectl 1.32's
describers (k8s.io/kubectl/pkg/describe). For a job or PodGroup that waits for
admission or resources, a ``Waiting:`` line (not in kubectl) says why, from the
PodGroup's Unschedulable condition; ``Last Preempted:`` / ``Last Reclaimed:`` lines
give its PodGroup's latest such event, and a Queue's ``Sharing:`` block its share.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Callable

from phalanx.api.columns import cell
from phalanx.api.registry import JOB_KINDS
from phalanx.cli.describe.common import Obj
from phalanx.cli.describe.core import describe_namespace, describe_priorityclass, describe_service
from phalanx.cli.describe.jobs import describe_job
from phalanx.cli.describe.nodes import describe_node
from phalanx.cli.describe.pods import describe_pod
from phalanx.cli.describe.unstructured import describe_unstructured
from phalanx.cli.describe.volcano import describe_podgroup, describe_queue

__all__ = ["describe"]

Describer = Callable[[Obj, dict, datetime], str]

_DESCRIBERS: dict[str, Describer] = {
    "Pod": describe_pod,
    "Node": describe_node,
    "Service": describe_service,
    "Namespace": describe_namespace,
    "PriorityClass": describe_priorityclass,
    "PodGroup": describe_podgroup,
    "Queue": describe_queue,
    **{kind: describe_job for kind in JOB_KINDS},
}


def describe(obj: Obj, related: dict | None = None, now: datetime | None = None) -> str:
    """`kubectl describe` text for one object.

    ``related`` may hold: ``events`` (Event dicts about the object; None hides the
    section; a job's include its PodGroup's), ``podgroup`` (a job's PodGroup, to say why it waits), ``pods``
    (a Node's pods, or a Service's selected pods for Endpoints), ``endpoints``
    (a Service's ready ``ip:port`` strings), ``history`` (a job's state history records, for its
    ``Timeline:`` section).
    """
    now = now or datetime.now(timezone.utc)
    related = related or {}
    if not isinstance(obj, dict):
        return json.dumps(obj) + "\n"
    fn = _DESCRIBERS.get(cell(obj.get("kind")), describe_unstructured)
    return fn(obj, related, now)
