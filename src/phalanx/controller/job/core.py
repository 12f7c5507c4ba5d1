"""The pure job reconciler: (job, pods, services, PodGroup, now) -> Plan.

Order (the original's ReconcileJobs, docs/REFERENCE.md §3.3, with the decisions of docs/SEMANTICS.md):

1. ``Created`` on first sight.
2. Finished job: cleanup (cleanPodPolicy on success, everything on failure;
   kept pods never restart again), PodGroup deleted, TTL.
3. Suspended: everything deleted, Running -> False, Suspended. Resume.
4. Restarts counted into the job's status: in-place restarts, failures as they
   are seen, Failed pods recreated, pods deleted from outside (Restarting);
   more restarts than backoffLimit, or activeDeadlineSeconds passed: Failed and cleanup.
5. Normal path: PodGroup created/synced; nothing else until Volcano admits it;
   one headless Service per slot; pods once every Service exists (locally:
   carries its allocated address and ports, needed for env); Failed pods
   restarted (delete, recreate) or failing the job (ExitCode permanent);
   replica statuses; startTime; the per-kind status rules, in a fixed order.
6. A job that finished in this very pass is cleaned up in the same plan.

Replica types are always walked in the framework's fixed order.
"""
from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from phalanx.api import kubeflow
from phalanx.api.constants import ANNOTATION_NO_RESTART, ANNOTATION_NO_RESTART_ON_FAILURE
from phalanx.api.pod import preemption_message, stopped_by_shutdown
from phalanx.controller.conditions import (
    CREATED,
    FAILED,
    RESTARTING,
    RUNNING,
    SUSPENDED,
    StatusWriter,
    get_condition,
    is_failed,
    is_finished,
    is_succeeded,
)
from phalanx.controller.fields import (
    as_dict,
    as_int,
    as_str,
    container_statuses,
    namespace,
    owner_reference,
    pod_phase,
    run_policy,
    status,
)
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, replicas_of
from phalanx.controller.job import podgroup as pg
from phalanx.controller.job.plan import Plan, ReconcileOptions
from phalanx.controller.job.pods import build_pod, build_service, replica_selector, slots
from phalanx.controller.job.restarts import (
    RestartBook,
    awaits_restart,
    exit_code,
    is_retryable_exit_code,
    restarts_in_place,
)
from phalanx.objects.clock import format_time, parse_time
from phalanx.objects.meta import Obj, annotations_of, is_deleting, metadata_of, name_of

MANAGED_BY_US = "kubeflow.org/training-operator"


@dataclass
class _Ctx:
    job: Obj
    fw: Framework
    options: ReconcileOptions
    now: datetime
    pods: list[Obj]
    services: list[Obj]
    podgroup: Obj | None
    st: StatusWriter
    others: list[Obj] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    preempted_gone: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Pods deleted in this pass so that they are made again (a restart, an eviction, a shutdown).
    recreate: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return name_of(self.job)

    @property
    def kind(self) -> str:
        return self.fw.kind


def with_defaults(job: Obj, kind: str) -> Obj:
    """``job`` with its kind's defaults applied in memory, as the original's
    ``Scheme.Default(job)`` before each reconcile: a plain apiserver stores the
    user's spec as written (admission is Phalanx's own API server only). The
    defaults go on a copy of the spec; they are never written back (only status
    is). A spec the defaulter cannot walk is reconciled as it is."""
    spec, api_kind = job.get("spec"), kubeflow.FRAMEWORKS.get(kind)
    if not isinstance(spec, dict) or api_kind is None:
        return job
    key = (kind, str(metadata_of(job).get("uid") or ""), name_of(job))
    hit = _DEFAULTED.get(key)
    if hit is not None and hit[0] == spec:  # the defaults depend on the spec only
        _DEFAULTED.move_to_end(key)
        return {**job, "spec": hit[1]}
    out = {**job, "spec": copy.deepcopy(spec)}
    try:
        kubeflow.default_job(out, api_kind)
    except (AttributeError, TypeError, KeyError):
        return job
    _DEFAULTED[key] = (copy.deepcopy(spec), out["spec"])
    while len(_DEFAULTED) > _DEFAULTED_MAX:
        _DEFAULTED.popitem(last=False)
    return out


# The last defaulted spec of each job, with the spec it came from (a copy: compared by value, so a
# spec changed in place is defaulted again). A job is reconciled several times per spec version;
# the defaulted spec is read only, as every object the reconcile gets.
_DEFAULTED: OrderedDict[tuple[str, str, str], tuple[Obj, Obj]] = OrderedDict()
_DEFAULTED_MAX = 4096


def reconcile(
    job: Obj,
    pods: list[Obj],
    services: list[Obj],
    podgroup: Obj | None,
    now: datetime,
    framework: Framework,
    options: ReconcileOptions | None = None,
    others: list[Obj] | None = None,
    preempted_gone: dict[str, tuple[str, str]] | None = None,
) -> Plan:
    """Decide the next step for ``job``. ``pods``/``services``/``podgroup`` are
    the objects the job controls (the shell filters by controller ownerReference);
    ``others`` the other objects it controls, of ``framework.owned_kinds``;
    ``preempted_gone`` the pods of the job seen deleted carrying the scheduler's
    eviction mark (name -> (uid, message)), so one gone before it was seen being deleted is no restart."""
    options = options or ReconcileOptions()
    if not isinstance(job, dict) or not name_of(job):
        return Plan()
    managed_by = as_str(run_policy(job).get("managedBy"))
    if managed_by and managed_by != MANAGED_BY_US:
        return Plan()
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    job = with_defaults(job, framework.kind)
    ctx = _Ctx(
        job=job, fw=framework, options=options, now=now,
        pods=sorted((p for p in pods or [] if isinstance(p, dict) and name_of(p)), key=name_of),
        services=sorted((s for s in services or [] if isinstance(s, dict) and name_of(s)), key=name_of),
        podgroup=podgroup if isinstance(podgroup, dict) and not is_deleting(podgroup) else None,
        others=[o for o in others or [] if isinstance(o, dict) and name_of(o)],
        st=StatusWriter(framework.kind, name_of(job), namespace(job), status(job), now),
        preempted_gone=dict(preempted_gone or {}),
    )
    st = ctx.st
    if st.condition(CREATED) is None:
        st.set(CREATED, st.reason("Created"), f"{ctx.kind} {ctx.name} is created.", event="Normal")

    if is_finished(st.status):
        _cleanup_finished(ctx)
    elif run_policy(job).get("suspend") is True:
        _suspend(ctx)
    else:
        _run(ctx)

    new_status, events = st.finish()
    if not isinstance(new_status.get("replicaStatuses"), dict):
        new_status["replicaStatuses"] = {}
    if new_status != status(job):
        ctx.plan.status = new_status
    ctx.plan.events = _dedupe(events)
    return ctx.plan


def _dedupe(events: list[Any]) -> list[Any]:
    out, seen = [], set()
    for e in events:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


# ---- finished / suspended ------------------------------------------------------------


def _delete_podgroup(ctx: _Ctx) -> None:
    if ctx.podgroup is not None and not ctx.plan.podgroup_delete:
        ctx.plan.podgroup_delete = True
        ctx.st.event("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup")


def _cleanup_finished(ctx: _Ctx) -> None:
    """On success cleanPodPolicy decides, on failure every pod and service
    goes; kept pods are never restarted (docs/SEMANTICS.md S5); the PodGroup is deleted; TTL.
    ``Running`` judges a pod by the phase it ends with: one that only waits for an
    in-place restart is not restarted, so it ends Failed (or Succeeded) and is kept."""
    plan, st = ctx.plan, ctx.st
    plan.create_pods.clear()
    plan.create_services.clear()
    plan.podgroup_create = None
    plan.podgroup_update = None
    failed = is_failed(st.status)
    policy = as_str(run_policy(ctx.job).get("cleanPodPolicy")) or "None"
    delete_all = failed or policy == "All"
    # A finished job makes no pod again: a pod deleted for that is cleanPodPolicy's to judge.
    plan.delete_pods[:] = [n for n in plan.delete_pods if n not in ctx.recreate]
    doomed = set(plan.delete_pods)
    for pod in ctx.pods:
        n = name_of(pod)
        if is_deleting(pod) or n in doomed:
            continue
        running = pod_phase(pod) in ("Running", "Pending") and not awaits_restart(pod)
        if delete_all or (policy == "Running" and running):
            plan.delete_pods.append(n)
            doomed.add(n)
        elif pod_phase(pod) not in ("Succeeded", "Failed") and ANNOTATION_NO_RESTART not in annotations_of(pod):
            plan.stop_restarting.append(n)  # kept: runs to its end (or ends now), never restarted
    for svc in ctx.services:
        n = name_of(svc)
        if (delete_all or n in doomed) and n not in plan.delete_services:
            plan.delete_services.append(n)
    _delete_podgroup(ctx)
    st.set_completion_time()  # every finished job has one
    if is_succeeded(st.status):
        for rs in as_dict(st.status.get("replicaStatuses")).values():
            if isinstance(rs, dict) and (as_int(rs.get("active"), 0) or 0) > 0:
                rs["succeeded"] = (as_int(rs.get("succeeded"), 0) or 0) + rs.pop("active")
    ttl = as_int(run_policy(ctx.job).get("ttlSecondsAfterFinished"))
    if ttl is not None:
        done = _parse(st.status.get("completionTime")) or ctx.now
        left = (done - ctx.now).total_seconds() + ttl
        if left <= 0:
            plan.delete_job = True
        else:
            plan.requeue_at_most(left)


def _suspend(ctx: _Ctx) -> None:
    plan, st = ctx.plan, ctx.st
    for pod in ctx.pods:
        if not is_deleting(pod):
            plan.delete_pods.append(name_of(pod))
    plan.delete_services.extend(name_of(s) for s in ctx.services)
    _delete_podgroup(ctx)
    for rs in as_dict(st.status.get("replicaStatuses")).values():
        if isinstance(rs, dict):
            rs.pop("active", None)
    book = RestartBook(st.status)
    book.forget_all()  # deleted on purpose: none of them is a restart
    book.write(st.status)
    msg = f"{ctx.kind} {ctx.name} is suspended."
    if st.has(RUNNING):
        st.set(RUNNING, st.reason("Suspended"), msg, value="False")
    if not st.has(SUSPENDED):
        st.set(SUSPENDED, st.reason("Suspended"), msg, event="Normal")


# ---- the running job -----------------------------------------------------------------


def _parse(value: object) -> datetime | None:
    try:
        t = parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None
    if t is not None and t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def _fail(ctx: _Ctx, reason: str, message: str) -> None:
    """Backoff limit or deadline: Failed (before cleanup, as v1.9.4), then cleanup."""
    st = ctx.st
    st.set_completion_time()
    st.set(FAILED, reason, message, event="Normal", event_reason=st.reason("Failed"))
    _cleanup_finished(ctx)


def _run(ctx: _Ctx) -> None:
    job, fw, st, plan, options = ctx.job, ctx.fw, ctx.st, ctx.plan, ctx.options
    if st.has(SUSPENDED):
        st.set(SUSPENDED, st.reason("Resumed"), f"{ctx.kind} {ctx.name} is resumed.", value="False", event="Normal")
        st.status["startTime"] = format_time(ctx.now)

    specs = fw.replica_specs(job)
    layout = []  # (rtype, rspec, replicas, pod slots, service slots)
    for rtype, rspec in specs:
        n = replicas_of(rspec)
        layout.append((rtype, rspec, n, slots(ctx.pods, rtype, n), slots(ctx.services, rtype, n)))

    # Restarts are counted (into the status) before anything else decides.
    book = RestartBook(st.status)
    for pod_name, (uid, message) in sorted(ctx.preempted_gone.items()):
        book.preempted_unseen(pod_name, uid, message)
    victims: list[tuple[str, str]] = []  # (pod, eviction message) of the pods the scheduler evicted
    evicting = False  # one of them is being deleted, has ended or is gone
    running_kept: dict[str, int] = {}  # per replica type, pods running and not evicted
    for rtype, rspec, n, pslots, _ in layout:
        policy = fw.restart_policy(rspec)
        for index, slot in enumerate(pslots):
            if index >= n:
                for pod in slot:
                    book.deleted_by_job(pod)  # scaled down: deleted below, on purpose
                continue
            if len(slot) != 1:
                continue
            pod = slot[0]
            preempted = preemption_message(pod)
            if preempted is not None:
                book.preempted(pod, rtype, preempted)  # recreated once gone, no restart
                victims.append((name_of(pod), preempted))
                evicting = evicting or is_deleting(pod) or pod_phase(pod) in ("Succeeded", "Failed")
            book.observe(pod, rtype)
            if preempted is None and pod_phase(pod) == "Running" and not is_deleting(pod):
                running_kept[rtype] = running_kept.get(rtype, 0) + 1
            if preempted is not None:
                pass
            elif _stopped_by_shutdown(pod):
                book.deleted_by_job(pod)  # recreated below, no restart
            elif _needs_recreate(fw, policy, pod):
                book.count_failure(pod, rtype)
    book.vanished({name_of(p) for p in ctx.pods}, _rtype_of(fw, job, [t for t, *_ in layout]))
    book.write(st.status)
    victims.extend(book.preempted_gone)
    evicting = evicting or bool(book.preempted_gone)

    rp = run_policy(job)
    given_limit = as_int(rp.get("backoffLimit"))
    defaulted = given_limit is None or given_limit < 0
    limit = options.default_backoff_limit if given_limit is None or given_limit < 0 else given_limit
    if book.total > limit:
        given = f"backoffLimit {limit}" + (" (default)" if defaulted else "")
        cause = _failure_cause(layout, book)
        _fail(ctx, "BackoffLimitExceeded",
              f"Job {ctx.name} has failed because it has reached the specified backoff limit "
              f"({given}, restartCount {book.total}){cause}")
        return
    deadline = _deadline_left(ctx)
    if deadline is not None and deadline <= 0:
        _fail(ctx, "DeadlineExceeded",
              f"Job {ctx.name} has failed because it was active longer than specified deadline")
        return

    # No restart left (backoffLimit N grants N restarts): the node agent must not restart
    # a failure in place, the failure then fails the job; pods are marked, new ones born so.
    # A pod waiting for a restart that was granted is marked once it restarted.
    exhausted = book.total >= limit
    if exhausted:
        for pod in ctx.pods:
            if restarts_in_place(pod) and annotations_of(pod).get(ANNOTATION_NO_RESTART_ON_FAILURE) != "true" \
                    and not book.restart_pending(pod):
                plan.stop_failure_restarts.append(name_of(pod))

    for rtype in book.deleted_types:  # a pod deleted from outside is recreated: a restart
        st.set(RESTARTING, st.reason("Restarting"),
               f"job {ctx.name} is restarting because {rtype} replica(s) were deleted.", event="Warning")

    if options.gang_scheduler:
        if ctx.podgroup is None:
            plan.podgroup_create = pg.new_podgroup(job, fw)
            return
        plan.podgroup_update = pg.updated_podgroup(job, fw, ctx.podgroup)
        if not pg.admitted(ctx.podgroup):
            return

    _sync_owned_objects(ctx)
    by_name = {name_of(s): s for s in ctx.services}
    addressing = Addressing(job, by_name, fw, options.local_runtime, options.resolvable_names, options.cluster_domain)
    services_ready = not fw.creates_services or all(
        addressing.ready(rtype, i) for rtype, _, n, _, _ in layout for i in range(n))

    states: list[ReplicaState] = []
    for rtype, rspec, n, pslots, sslots in layout:
        policy = fw.restart_policy(rspec)
        active = succeeded = failed = 0
        slot_pods: list[Obj | None] = []
        for index, slot in enumerate(pslots):
            if index >= n:  # out of range: scaled down
                plan.delete_pods.extend(name_of(p) for p in slot if not is_deleting(p))
                continue
            if not slot:
                slot_pods.append(None)
                if services_ready:
                    pod, events = build_pod(fw, job, rtype, index, rspec, addressing, options)
                    if exhausted and pod["spec"].get("restartPolicy") in ("OnFailure", "Always"):
                        pod["metadata"].setdefault("annotations", {})[ANNOTATION_NO_RESTART_ON_FAILURE] = "true"
                    plan.create_pods.append(pod)
                    for e in events:
                        st.event(*e)
                continue
            if len(slot) > 1:  # more than one pod claims this slot: leave them alone
                slot_pods.append(None)
                continue
            pod = slot[0]
            slot_pods.append(pod)
            phase = pod_phase(pod)
            if phase == "Running" and not is_deleting(pod):
                active += 1
            elif preemption_message(pod) is not None:
                # Evicted by the scheduler: whatever its end, neither succeeded nor failed; recreated once gone.
                if phase in ("Succeeded", "Failed") and not is_deleting(pod):
                    _delete_to_recreate(ctx, pod)
            elif phase == "Succeeded":
                succeeded += 1
            elif phase == "Failed" and _stopped_by_shutdown(pod):
                if not is_deleting(pod):
                    _delete_to_recreate(ctx, pod)
                    st.event("Normal", "PodStoppedByShutdown",
                             f"Pod {name_of(pod)} was stopped when the control plane shut down; it is recreated "
                             "(not counted as a restart)")
            elif phase == "Failed":
                failed += 1
                _handle_failed_pod(ctx, rtype, policy, pod)
        for index, slot in enumerate(sslots):
            if index >= n or not fw.creates_services:
                plan.delete_services.extend(name_of(s) for s in slot)
            elif not slot:
                plan.create_services.append(build_service(fw, job, rtype, index, rspec))
        states.append(ReplicaState(rtype, n, policy, active, succeeded, failed, tuple(slot_pods)))

    replica_statuses = {}
    for r in states:
        rs: Obj = {}
        if r.active:
            rs["active"] = r.active
        if r.succeeded:
            rs["succeeded"] = r.succeeded
        if r.failed:
            rs["failed"] = r.failed
        if fw.sets_replica_selector:
            rs["selector"] = replica_selector(fw, job, r.rtype)
        if book.per_type.get(r.rtype):
            rs["restarts"] = book.per_type[r.rtype]
        replica_statuses[r.rtype] = rs
    st.status["replicaStatuses"] = replica_statuses
    st.set_start_time()
    fw.update_status(job, states, st)
    if not is_finished(st.status) and not fw.runs_on_without_evicted(job, running_kept):
        _preemption_restarting(ctx, victims if evicting else [], states)

    if is_finished(st.status):
        _cleanup_finished(ctx)
        return
    plan.requeue_at_most(_deadline_left(ctx))


def _preemption_prefix(ctx: _Ctx) -> str:
    return f"{ctx.kind} {namespace(ctx.job)}/{ctx.name} is restarting because "


def _preemption_restarting(ctx: _Ctx, victims: list[tuple[str, str]], states: list[ReplicaState]) -> None:
    """Pods the scheduler evicted (``victims``, non-empty once one of them is being
    deleted, has ended or is gone): Restarting, ``<Kind> <ns>/<name> is restarting
    because <n> pods were preempted: <the first one's eviction message>``, with a
    Warning event; a Restarting of another cause current gets this message. A
    preemption's Restarting stays, Running kept away, until every replica runs
    (or has succeeded) again."""
    st, prefix = ctx.st, _preemption_prefix(ctx)
    reason = st.reason("Restarting")
    held = get_condition(st.before, RESTARTING)
    if held is not None and held.get("status") == "True" and _is_preemption(prefix, held):
        if victims or not all(r.active + r.succeeded >= r.replicas for r in states):
            st.set(RESTARTING, as_str(held.get("reason")) or reason, as_str(held.get("message")))
        return
    if not victims:
        return
    n, first = len(victims), victims[0][1]
    msg = prefix + (f"{n} pods were preempted" if n > 1 else "1 pod was preempted") + (f": {first}" if first else "")
    current = st.condition(RESTARTING)
    if current is not None and current.get("status") == "True" and current.get("reason") == reason:
        current["message"] = msg  # the same condition, now naming the preemption
        current["lastUpdateTime"] = format_time(ctx.now)
        st.event("Warning", reason, msg)
        return
    st.set(RESTARTING, reason, msg, event="Warning")


def _is_preemption(prefix: str, cond: Obj) -> bool:
    msg = as_str(cond.get("message"))
    return msg.startswith(prefix) and (" pods were preempted" in msg or " pod was preempted" in msg)


def _rtype_of(fw: Framework, job: Obj, rtypes: list[str]) -> Callable[[str], str | None]:
    """Pod name -> its replica type (``fw.pod_name``: ``<job>-<rt>-<index>``, or
    one name for every index, as MPI's launcher), None if none matches."""
    exact: dict[str, str] = {}
    prefixes: list[tuple[str, str]] = []
    for t in rtypes:
        first, second = fw.pod_name(job, t, 0), fw.pod_name(job, t, 1)
        if first == second:
            exact[first] = t
        else:
            prefixes.append((first[:-1], t))

    def rtype_of(pod_name: str) -> str | None:
        if pod_name in exact:
            return exact[pod_name]
        for prefix, t in prefixes:
            if pod_name.startswith(prefix) and pod_name[len(prefix):].isdigit():
                return t
        return None
    return rtype_of


def _sync_owned_objects(ctx: _Ctx) -> None:
    """``Framework.owned_objects``: create what is missing, replace what differs
    (compared on the fields the framework gives, labels as a subset)."""
    existing = {(as_str(o.get("kind")), name_of(o)): o for o in ctx.others}
    for want in ctx.fw.owned_objects(ctx.job, ctx.pods, ctx.options):
        want = dict(want)
        meta_ = dict(as_dict(want.get("metadata")))
        meta_.setdefault("namespace", namespace(ctx.job))
        meta_["ownerReferences"] = [owner_reference(ctx.job)]
        want["metadata"] = meta_
        have = existing.get((as_str(want.get("kind")), name_of(want)))
        if have is None or not _same_content(want, have):
            ctx.plan.apply_objects.append(want)


def _same_content(want: Obj, have: Obj) -> bool:
    for key, value in want.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if have.get(key) != value:
            return False
    have_labels = as_dict(as_dict(have.get("metadata")).get("labels"))
    return all(have_labels.get(k) == v for k, v in as_dict(as_dict(want.get("metadata")).get("labels")).items())


def _failure_cause(layout: list[Any], book: RestartBook) -> str:
    """``: <the failure that was one too many>`` for the Failed message: the
    first failed container (replica, pod, container, exit code, reason), a
    pod-level failure (Evicted, ...), or the replica types deleted from outside."""
    for rtype, _, n, pslots, _ in layout:
        for slot in pslots[:n]:
            for pod in slot:
                for cs in container_statuses(pod, init=True) + container_statuses(pod):
                    state = as_dict(cs.get("state"))
                    term = as_dict(state.get("terminated"))
                    if not term and as_dict(state.get("waiting")).get("reason") == "CrashLoopBackOff":
                        term = as_dict(as_dict(cs.get("lastState")).get("terminated"))
                    code = as_int(term.get("exitCode"))
                    if term and code != 0:
                        why = as_str(term.get("reason")) or "Error"
                        msg = as_str(term.get("message"))
                        return (f": {rtype} pod {name_of(pod)}, container {as_str(cs.get('name'))}, exited with code "
                                f"{code} ({why}{': ' + msg if msg else ''})")
                if pod_phase(pod) == "Failed":
                    why = as_str(status(pod).get("reason")) or "Failed"
                    msg = as_str(status(pod).get("message"))
                    return f": {rtype} pod {name_of(pod)} failed ({why}{': ' + msg if msg else ''})"
    if book.deleted_types:
        return f": {', '.join(book.deleted_types)} replica(s) deleted"
    return ""


def _stopped_by_shutdown(pod: Obj) -> bool:
    """A Failed pod the node stopped because it shut down (not a failure of the
    pod's own): deleted and recreated, whatever the restart policy, uncounted."""
    return pod_phase(pod) == "Failed" and stopped_by_shutdown(pod)


def _needs_recreate(fw: Framework, policy: str, pod: Obj) -> bool:
    """A Failed pod the operator deletes and recreates: OnFailure/Always, or ExitCode with a retryable code."""
    if pod_phase(pod) != "Failed":
        return False
    if policy in ("OnFailure", "Always"):
        return True
    return policy == "ExitCode" and is_retryable_exit_code(exit_code(pod, fw.default_container_name))


def _delete_to_recreate(ctx: _Ctx, pod: Obj) -> None:
    ctx.plan.delete_pods.append(name_of(pod))
    ctx.recreate.add(name_of(pod))


def _handle_failed_pod(ctx: _Ctx, rtype: str, policy: str, pod: Obj) -> None:
    st = ctx.st
    if _needs_recreate(ctx.fw, policy, pod):
        if not is_deleting(pod):
            _delete_to_recreate(ctx, pod)
        msg = f"job {ctx.name} is restarting because {rtype} replica(s) failed."
        st.set(RESTARTING, st.reason("Restarting"), msg, event="Warning")
    elif policy == "ExitCode":
        msg = f'job "{ctx.name}" is failing because "{rtype}" replica(s) failed.'
        st.set_completion_time()  # the original forgets it here; TTL needs it
        st.set(FAILED, st.reason("Failed"), msg, event="Warning")


def _deadline_left(ctx: _Ctx) -> float | None:
    """Seconds until activeDeadlineSeconds passes, counted from startTime."""
    ads = as_int(run_policy(ctx.job).get("activeDeadlineSeconds"))
    start = _parse(ctx.st.status.get("startTime"))
    if ads is None or start is None:
        return None
    return (start - ctx.now).total_seconds() + ads
