"""Plugin proportion: queue fairness and queue capability.

Volcano plugins/proportion/proportion.go. Per queue with
jobs: ``allocated`` (tasks holding resources), ``request`` (allocated +
pending), ``inqueue`` (what admitted jobs may still claim), ``elastic`` (what
jobs hold beyond their minResources), ``realCapability = (cluster total -
all guarantees) + own guarantee``, clamped to ``spec.capability``.

- deserved: weighted water-filling of the cluster total, each queue capped by
  its realCapability and its request, floored at its guarantee;
- enqueue gate: ``minReq + allocated + inqueue - elastic <= realCapability``
  on the dimensions minResources names (Phalanx: less what preempt could free
  for the job in its queue, Session.preemptable_resources); a closed queue
  admits nothing;
- allocation gate: ``allocated + task request <= deserved`` on the task's
  dimensions; a queue whose deserved is all allocated is overused and skipped;
- queue order: spec.priority descending, then share ascending;
- reclaim: a queue may take back for a task while ``allocated + request <=
  deserved`` (Preemptive); a victim's queue must be above its deserved share
  in some dimension when the victim is taken (Reclaimable), so reclaim stops
  once it is back at its share; ReclaimPossible: another reclaimable queue is
  above its share;
- at close, each queue's deserved share (annotation ``phalanx.dev/deserved``)
  and whether it is reclaiming (``phalanx.dev/reclaiming``: below its share in
  some dimension, with waiting pods, while another reclaimable queue is above
  its own).

On refusal, besides Volcano's event ("queue resource quota insufficient:
insufficient cpu"), the job carries a readable reason:
``queue "default" capability exceeded: cpu needed 4, allowed 2 (allocated 0, inqueue 0)``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from phalanx.api.constants import ANNOTATION_DESERVED, ANNOTATION_RECLAIMING
from phalanx.scheduler import resources as R
from phalanx.scheduler.info import (
    ALLOCATED_STATUS,
    PENDING,
    JobInfo,
    QueueInfo,
    TaskInfo,
)
from phalanx.scheduler.session import PERMIT, REJECT, Plugin, Session

QUEUE_CAPABILITY_EXCEEDED = "QueueCapabilityExceeded"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
QUEUE_CLOSED = "QueueClosed"
MAX_ROUNDS = 1000


@dataclass
class QueueAttr:
    queue: QueueInfo
    allocated: list[float]
    request: list[float]
    inqueue: list[float]
    elastic: list[float]
    deserved: list[float]
    real_capability: list[float] = field(default_factory=list)
    cluster_capability: list[float] = field(default_factory=list)
    share: float = 0.0


def water_fill(dims: R.Dims, total: list[float], attrs: dict[str, QueueAttr],
               requests: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Each queue's deserved share: weighted water-filling of ``total``, capped by its real
    capability and its request (``requests`` overrides some), floored at its guarantee."""
    requests = requests or {}
    deserved = {name: dims.zero() for name in attrs}
    remaining = list(total)
    meet: set[str] = set()
    order = sorted(attrs)
    for _ in range(MAX_ROUNDS):
        total_weight = sum(attrs[n].queue.weight for n in order if n not in meet)
        if total_weight == 0:
            break
        old_remaining = list(remaining)
        increased = dims.zero()
        decreased = dims.zero()
        for name in order:
            if name in meet:
                continue
            attr = attrs[name]
            request = requests.get(name, attr.request)
            old = deserved[name]
            frac = attr.queue.weight / total_weight
            d = [x + r * frac for x, r in zip(old, remaining)]
            d = [min(x, c) for x, c in zip(d, attr.real_capability)]
            d = [min(x, r) for x, r in zip(d, request)]
            d = [max(x, g) for x, g in zip(d, attr.queue.guarantee)]
            deserved[name] = d
            if R.less_equal(request, d) or R.equal(d, old):
                meet.add(name)
            for i, (x, o) in enumerate(zip(d, old)):
                if x > o:
                    increased[i] += x - o
                elif x < o:
                    decreased[i] += o - x
        remaining = R.clamp0([r - i + d for r, i, d in zip(remaining, increased, decreased)])
        if R.is_empty(remaining) or remaining == old_remaining:
            break
    return deserved


class ProportionPlugin(Plugin):
    name = "proportion"

    def on_session_open(self, ssn: Session) -> None:
        dims = ssn.dims
        attrs: dict[str, QueueAttr] = {}
        self.attrs = attrs
        total_guarantee = dims.zero()
        for q in ssn.queues.values():
            R.add(total_guarantee, q.guarantee)
        for key in sorted(ssn.jobs):
            job = ssn.jobs[key]
            q = ssn.queues[job.queue]
            attr = attrs.get(q.name)
            if attr is None:
                attr = attrs[q.name] = QueueAttr(q, dims.zero(), dims.zero(), dims.zero(), dims.zero(), dims.zero())
            for status, tasks in job.index.items():
                if status in ALLOCATED_STATUS:
                    for t in tasks.values():
                        R.add(attr.allocated, t.resreq)
                        R.add(attr.request, t.resreq)
                elif status == PENDING:
                    for t in tasks.values():
                        R.add(attr.request, t.resreq)
            claim = job.inqueue_claim()
            if claim is not None:
                R.add(attr.inqueue, claim)
            R.add(attr.elastic, R.exceeded_part(job.allocated, job.min_resources or dims.zero()))
        for name in sorted(ssn.snapshot.settled):
            queue = ssn.queues.get(name)
            if queue is None:
                continue
            tot = ssn.snapshot.settled[name]
            attr = attrs.get(name)
            if attr is None:
                attr = attrs[name] = QueueAttr(queue, dims.zero(), dims.zero(), dims.zero(), dims.zero(), dims.zero())
            R.add(attr.allocated, tot.allocated)
            R.add(attr.request, tot.request)
            R.add(attr.inqueue, tot.inqueue)
            R.add(attr.elastic, tot.elastic)
        base = R.exceeded_part(ssn.total_resource, total_guarantee)
        for attr in attrs.values():
            attr.cluster_capability = R.plus(base, attr.queue.guarantee)
            cap = attr.queue.capability
            attr.real_capability = (list(attr.cluster_capability) if cap is None
                                    else [min(a, c) for a, c in zip(attr.cluster_capability, cap)])
        self._water_fill(ssn)
        for attr in attrs.values():
            self._update_share(attr)

        ssn.add_queue_order_key(lambda q: (-q.priority, attrs[q.name].share if q.name in attrs else 0.0))
        ssn.add_overused_fn(self._overused)
        ssn.add_allocatable_fn(self._allocatable)
        ssn.add_job_enqueueable_fn(lambda job: self._enqueueable(ssn, job))
        ssn.add_job_enqueued_fn(self._enqueued)
        ssn.add_event_handler(allocate=self._on_allocate, deallocate=self._on_deallocate)
        ssn.add_preemptive_fn(self._preemptive)
        ssn.add_reclaimable_fn(self._reclaimable)
        ssn.add_reclaim_possible_fn(lambda job: any(self._above_share(a) for n, a in attrs.items() if n != job.queue))
        if "reclaim" in ssn.config.actions:
            ssn.add_reclaimable_resources_fn(lambda job: self._reclaimable_for(ssn, job))

    def on_session_close(self, ssn: Session) -> None:
        for name in sorted(ssn.queues):
            attr = self.attrs.get(name)
            if attr is None:
                ssn.queue_annotations[name] = {ANNOTATION_DESERVED: None, ANNOTATION_RECLAIMING: None}
                continue
            deserved = json.dumps(ssn.dims.to_resource_list(attr.deserved), sort_keys=True, separators=(",", ":"))
            below = any(d - a >= R.EPS for a, d in zip(attr.allocated, attr.deserved))
            waiting = any(r - a >= R.EPS for a, r in zip(attr.allocated, attr.request))
            reclaiming = below and waiting and any(self._above_share(o) for n, o in self.attrs.items() if n != name)
            ssn.queue_annotations[name] = {ANNOTATION_DESERVED: deserved,
                                           ANNOTATION_RECLAIMING: "true" if reclaiming else None}

    def _reclaimable_for(self, ssn: Session, job: JobInfo) -> list[float] | None:
        """What reclaim could take back for a job awaiting admission: its queue's share with the
        job's minResources requested (less what the queue holds and has admitted), up to what the
        other reclaimable queues hold above their shares."""
        own = self.attrs.get(job.queue)
        if own is None or job.min_resources is None:
            return None
        request = R.plus(own.request, job.min_resources)
        deserved = water_fill(ssn.dims, ssn.total_resource, self.attrs, {job.queue: request})
        room = R.clamp0(R.minus(deserved[job.queue], R.plus(own.allocated, own.inqueue)))
        above = ssn.dims.zero()
        for name, attr in self.attrs.items():
            if name != job.queue and attr.queue.reclaimable:
                R.add(above, R.clamp0(R.minus(attr.allocated, deserved[name])))
        return [min(r, a) for r, a in zip(room, above)]

    @staticmethod
    def _above_share(attr: QueueAttr) -> bool:
        return attr.queue.reclaimable and not R.less_equal(attr.allocated, attr.deserved)

    def _preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        return R.less_equal_on(R.plus(attr.allocated, task.resreq), attr.deserved, task.resreq)

    def _reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's proportion Reclaimable: walk the candidates, each queue's allocation going
        down as its tasks are taken, while that queue is above its deserved share."""
        allocations: dict[str, list[float]] = {}
        victims = []
        for t in candidates:
            attr = self.attrs.get(t.job.queue)
            if attr is None:
                continue
            allocated = allocations.get(attr.queue.name)
            if allocated is None:
                allocated = allocations[attr.queue.name] = list(attr.allocated)
            if any(r > 0 and a < r for a, r in zip(allocated, reclaimer.resreq)):
                continue  # holds less than the reclaimer asks for
            if not R.less_equal(allocated, attr.deserved):
                R.sub(allocated, t.resreq)
                victims.append(t)
        return victims

    # ---- deserved ----
    def _water_fill(self, ssn: Session) -> None:
        for name, deserved in water_fill(ssn.dims, ssn.total_resource, self.attrs).items():
            self.attrs[name].deserved = deserved

    def _update_share(self, attr: QueueAttr) -> None:
        attr.share = max((R.share(a, d) for a, d in zip(attr.allocated, attr.deserved)), default=0.0)

    def deserved(self, queue: str) -> list[float] | None:
        a = self.attrs.get(queue)
        return None if a is None else a.deserved

    # ---- hooks ----
    def is_overused(self, queue: QueueInfo) -> bool:
        """Whether the queue has all its deserved share allocated (Volcano's queue_overused)."""
        return self._overused(queue)

    def _overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs.get(queue.name)
        # Phalanx: a queue whose jobs request nothing (containers without requests,
        # e.g. PyTorch workers whose only requests are the init container's) has an
        # empty deserved share; that is not "overused", or such gangs never place.
        if attr is None or R.is_empty(attr.deserved):
            return False
        return R.less_equal(attr.deserved, attr.allocated)

    def _allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if not queue.is_open():
            return False
        future = R.plus(attr.allocated, task.resreq)
        return R.less_equal_on(future, attr.deserved, task.resreq)

    def _enqueueable(self, ssn: Session, job: JobInfo) -> int:
        q = ssn.queues[job.queue]
        attr = self.attrs.get(q.name)
        if not q.is_open():
            job.admission = (QUEUE_CLOSED, f'queue "{q.name}" is {q.state}: it admits no new PodGroups')
            return REJECT
        if job.min_resources is None or attr is None:
            return PERMIT
        min_req = job.min_resources
        want = R.minus(R.plus(R.plus(min_req, attr.allocated), attr.inqueue), attr.elastic)
        if R.less_equal_on(want, attr.real_capability, min_req):
            return PERMIT
        # what preempt could free in the queue for this job counts as free (Phalanx)
        if R.less_equal_on(R.minus(want, ssn.preemptable_resources(job)), attr.real_capability, min_req):
            return PERMIT
        dims = ssn.dims
        short = R.failing_dims(want, attr.real_capability, min_req)
        names = [dims.names[i] for i in short]
        ssn.record_podgroup_event(job, "Normal", "Unschedulable",
                                  "queue resource quota insufficient: " + ", ".join(f"insufficient {n}" for n in names))
        by_cap = [i for i in short if attr.real_capability[i] < attr.cluster_capability[i]]
        parts = []
        for i in short:
            extra = f", elastic {dims.fmt(i, attr.elastic[i])}" if attr.elastic[i] > 0 else ""
            parts.append(f"{dims.names[i]} needed {dims.fmt(i, min_req[i])}, allowed {dims.fmt(i, attr.real_capability[i])} "
                         f"(allocated {dims.fmt(i, attr.allocated[i])}, inqueue {dims.fmt(i, attr.inqueue[i])}{extra})")
        if by_cap:
            head, reason = f'queue "{q.name}" capability exceeded: ', QUEUE_CAPABILITY_EXCEEDED
        else:
            head, reason = f'queue "{q.name}" resources insufficient: ', NOT_ENOUGH_RESOURCES
        msg = head + "; ".join(parts)
        job.admission = (reason, msg)
        job.job_fit_errors = msg
        return REJECT

    def _enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            R.add(attr.inqueue, job.min_resources)

    def _on_allocate(self, task: TaskInfo) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is not None:
            R.add(attr.allocated, task.resreq)
            self._update_share(attr)

    def _on_deallocate(self, task: TaskInfo) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is not None:
            R.sub(attr.allocated, task.resreq)
            self._update_share(attr)
