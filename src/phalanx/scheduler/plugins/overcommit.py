"""Plugin overcommit: admit PodGroups up to ``factor`` x the cluster.

Volcano plugins/overcommit: ``idle = total allocatable x factor - sum(node
used)``; a job with minResources is admitted while ``inqueue + minReq <= idle``
on minReq's dimensions, ``inqueue`` being what admitted jobs may still claim
(their minResources not yet allocated). It bounds how many PodGroups are
Inqueue, hence how many pods the job controllers create.

Phalanx: what preempt and reclaim could free for the job (lower-priority jobs
of its queue, other queues' holdings above their shares: Session.preemptable_resources,
reclaimable_resources)
counts as idle, or a job that would take resources back could never be
admitted on a full cluster, and its pods (which the job controllers create
only once admitted) never exist to preempt anything.
"""
from __future__ import annotations

from phalanx.scheduler import resources as R
from phalanx.scheduler.info import JobInfo
from phalanx.scheduler.plugins.proportion import NOT_ENOUGH_RESOURCES
from phalanx.scheduler.session import PERMIT, REJECT, Plugin, Session

DEFAULT_FACTOR = 1.2


class OvercommitPlugin(Plugin):
    name = "overcommit"

    def on_session_open(self, ssn: Session) -> None:
        factor = self.config.overcommit_factor
        if factor < 1.0:
            factor = DEFAULT_FACTOR
        dims = ssn.dims
        used = dims.zero()
        for n in ssn.nodes:
            R.add(used, n.used)
        scaled = [t * factor for t in ssn.total_resource]
        idle = R.minus(scaled, used)
        inqueue = dims.zero()
        for key in sorted(ssn.jobs):
            claim = ssn.jobs[key].inqueue_claim()
            if claim is not None:
                R.add(inqueue, claim)
        for name in sorted(ssn.snapshot.settled):
            R.add(inqueue, ssn.snapshot.settled[name].inqueue)

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return PERMIT
            want = R.plus(inqueue, job.min_resources)
            if R.less_equal_on(want, idle, job.min_resources):
                return PERMIT
            freeable = R.plus(ssn.preemptable_resources(job), ssn.reclaimable_resources(job))
            if R.less_equal_on(want, R.plus(idle, freeable), job.min_resources):
                return PERMIT
            short = R.failing_dims(want, idle, job.min_resources)
            ssn.record_podgroup_event(job, "Normal", "Unschedulable",
                                      "resource in cluster is overused: " +
                                      ", ".join(f"overused {dims.names[i]}" for i in short))
            parts = [f"{dims.names[i]} needed {dims.fmt(i, job.min_resources[i])}, "
                     f"available {dims.fmt(i, max(idle[i] - inqueue[i], 0.0))} "
                     f"(allocatable {dims.fmt(i, ssn.total_resource[i])} x overcommit-factor {factor:g}, "
                     f"used {dims.fmt(i, used[i])}, inqueue {dims.fmt(i, inqueue[i])})"
                     for i in short]
            msg = "cluster resources insufficient: " + "; ".join(parts)
            job.admission = (NOT_ENOUGH_RESOURCES, msg)
            job.job_fit_errors = msg
            return REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                R.add(inqueue, job.min_resources)

        ssn.add_job_enqueueable_fn(enqueueable)
        ssn.add_job_enqueued_fn(enqueued)
