"""Job controller cost per job (issue 9): which watch events enqueue a job, how many
rounds and writes a one-pod job's life takes, events of one round written together."""
from __future__ import annotations

import asyncio
import copy
import time

from phalanx.controller.job import Plan, ReconcileOptions
from phalanx.controller.job import controller as ctl
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.core import reconcile as core_reconcile
from phalanx.controller.job.inorder import in_order
from phalanx.objects.errors import NotFound
from tests.unit.test_job_controller import KEY, make, obj
from tests.unit.test_job_world import JOB_UID, pytorch_job

OWNER = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID,
          "controller": True, "blockOwnerDeletion": True}]


def drain(jc: JobController) -> list[str]:
    keys = []
    while len(jc.controller.queue):
        keys.append(jc.controller.queue._queue.popleft())
    jc.controller.queue._dirty.clear()
    return keys


def pod(**status) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pytest-master-0", "namespace": "default", "uid": "p1", "resourceVersion": "5",
                         "labels": {"training.kubeflow.org/replica-type": "master"}, "ownerReferences": OWNER},
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "pytorch"}]},
            "status": {"phase": "Pending", **status}}


def changed(o: dict, path: str, value) -> dict:
    """A copy of ``o`` with ``path`` (dotted) set to ``value`` and a new resourceVersion."""
    new = copy.deepcopy(o)
    new["metadata"]["resourceVersion"] = str(int(new["metadata"]["resourceVersion"]) + 1)
    *parents, last = path.split(".")
    cur = new
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[last] = value
    return new


def enqueued(jc: JobController, event_type: str, new: dict, old: dict | None) -> bool:
    drain(jc)
    jc._owned_handler(event_type, new, old)
    return drain(jc) == [KEY]


# ------------------------------------------------------------------- pod events


def test_pod_changes_the_core_never_reads_do_not_enqueue_the_job():
    jc, _, _ = make()
    p = pod()
    bound = changed(changed(p, "spec.nodeName", "las1"), "status.conditions",
                    [{"type": "PodScheduled", "status": "True"}])
    assert not enqueued(jc, "MODIFIED", bound, p)
    started = changed(bound, "status.podIP", "10.0.0.1")
    started["status"].update(hostIP="10.0.0.1", startTime="2026-01-01T00:00:00Z", containerStatuses=[
        {"name": "pytorch", "restartCount": 0, "ready": False, "image": "busybox", "imageID": "",
         "state": {"waiting": {"reason": "ContainerCreating"}}}])
    assert not enqueued(jc, "MODIFIED", started, bound)
    ready = changed(started, "status.containerStatuses", [
        {"name": "pytorch", "restartCount": 0, "ready": True, "containerID": "local://1",
         "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}])
    assert not enqueued(jc, "MODIFIED", ready, started)


def test_pod_changes_that_can_change_the_plan_enqueue_the_job():
    jc, _, _ = make()
    p = pod(containerStatuses=[{"name": "pytorch", "restartCount": 0, "state": {"running": {}}}])
    for path, value in [
        ("status.phase", "Running"),
        ("status.reason", "Evicted"),
        ("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"),
        ("metadata.annotations", {"phalanx.dev/no-restart": "true"}),
        ("metadata.labels", {"training.kubeflow.org/replica-type": "worker"}),
        ("metadata.ownerReferences", []),
        ("spec.restartPolicy", "Never"),
        ("status.containerStatuses", [{"name": "pytorch", "restartCount": 1, "state": {"running": {}}}]),
        ("status.containerStatuses", [{"name": "pytorch", "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 1}}}]),
        ("status.containerStatuses", [{"name": "pytorch", "restartCount": 0, "state": {
            "waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1}}}]),
        ("status.initContainerStatuses", [{"name": "init", "restartCount": 2, "state": {"running": {}}}]),
    ]:
        assert enqueued(jc, "MODIFIED", changed(p, path, value), p), path
    assert enqueued(jc, "ADDED", p, None) and enqueued(jc, "DELETED", p, p)


# -------------------------------------------------------------- PodGroup events


def podgroup(phase: str | None = None) -> dict:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pytest", "namespace": "default", "uid": "g1", "resourceVersion": "3",
                       "generation": 1, "ownerReferences": OWNER},
          "spec": {"minMember": 1, "queue": "default"}}
    if phase is not None:
        pg["status"] = {"phase": phase}
    return pg


def test_podgroup_status_enqueues_only_across_admission():
    jc, _, _ = make()
    pending, inqueue = podgroup("Pending"), podgroup("Inqueue")
    assert enqueued(jc, "MODIFIED", changed(pending, "status.phase", "Inqueue"), pending)  # admitted
    assert enqueued(jc, "MODIFIED", changed(inqueue, "status.phase", "Pending"), inqueue)
    for phase in ("Running", "Completed"):  # scheduler bookkeeping of an admitted gang
        new = changed(changed(inqueue, "status.phase", phase), "metadata.generation", 2)
        new["status"]["conditions"] = [{"type": "Scheduled", "status": "True", "transitionID": "x"}]
        assert not enqueued(jc, "MODIFIED", new, inqueue), phase
    assert enqueued(jc, "MODIFIED", changed(inqueue, "spec.minMember", 2), inqueue)
    assert enqueued(jc, "MODIFIED", changed(inqueue, "metadata.deletionTimestamp", "x"), inqueue)
    assert enqueued(jc, "DELETED", inqueue, inqueue)  # deleted by someone else: recreated


async def test_our_own_podgroup_deletion_does_not_enqueue_the_job():
    jc, client, rec = make()
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(podgroup_delete=True))
    assert ("delete", "PodGroup", "pytest") in client.calls
    assert rec.events == [("Normal", "SuccessfulDeletePodGroup", "Deleted PodGroup: pytest")]
    assert not enqueued(jc, "DELETED", podgroup("Completed"), podgroup("Completed"))
    assert enqueued(jc, "DELETED", podgroup("Completed"), podgroup("Completed"))  # only that one deletion
    client.fail[("delete", "PodGroup", "pytest")] = NotFound("podgroups", "pytest")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(podgroup_delete=True))
    assert enqueued(jc, "DELETED", podgroup(), podgroup())  # gone before we deleted it: not ours


# ------------------------------------------------------------------- job events


def record_writes(client) -> list[dict]:
    """What the fake client's ``update_status`` returned, in order."""
    out: list[dict] = []
    inner = client.update_status

    async def update_status(o):
        res = await inner(o)
        out.append(copy.deepcopy(res))
        return res
    client.update_status = update_status
    return out


async def test_our_own_status_write_coming_back_does_not_enqueue_the_job():
    job = pytorch_job()
    jc, client, _ = make(job)
    written = record_writes(client)
    handler = jc._job_handler("PyTorchJob")
    await jc.reconcile(KEY)
    [ours] = written  # rv 101, the status of the plan
    drain(jc)
    handler("MODIFIED", ours, job)
    assert drain(jc) == []
    # The same status with anything else changed, or another status: enqueued.
    spec_too = copy.deepcopy(ours)
    spec_too["spec"]["runPolicy"]["suspend"] = True
    other = copy.deepcopy(ours)
    other["status"]["conditions"] = []
    for new in (spec_too, other):
        handler("MODIFIED", new, job)
        assert drain(jc) == [KEY]
    handler("MODIFIED", ours, ours)  # not a change of the version we wrote on
    assert drain(jc) == [KEY]
    handler("ADDED", ours, None)
    assert drain(jc) == [KEY]


async def test_a_round_skipped_as_stale_is_run_when_our_write_comes_back():
    job = pytorch_job()
    jc, client, _ = make(job)
    written = record_writes(client)
    handler = jc._job_handler("PyTorchJob")
    await jc.reconcile(KEY)  # writes rv 101; the cache still holds rv 1
    [ours] = written
    assert await jc.reconcile(KEY) is None  # a pod event meanwhile: skipped, the cache is stale
    drain(jc)
    handler("MODIFIED", ours, job)
    assert drain(jc) == [KEY]  # that skipped round must happen now


# ----------------------------------------------------------- events of a round


async def test_the_events_of_a_round_are_written_together_in_plan_order():
    jc, client, rec = make()
    jc._eager_writes = True  # as on the in-process LocalClient
    started: list[str] = []
    gate = asyncio.Event()

    async def slow_record(o, type, reason, message):
        started.append(reason)
        await gate.wait()
        rec.events.append((type, reason, message))
    rec.record = slow_record
    plan = Plan(create_pods=[obj("Pod", "p-1"), obj("Pod", "p-2")],
                events=[("Normal", "PyTorchJobRunning", "PyTorchJob pytest is running.")])
    task = asyncio.create_task(jc.apply(KEY, "PyTorchJob", pytorch_job(), plan))
    deadline = time.monotonic() + 5
    while len(started) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert started == ["SuccessfulCreatePod", "SuccessfulCreatePod", "PyTorchJobRunning"]  # all in flight
    gate.set()
    await asyncio.wait_for(task, 5)
    assert [e[2] for e in rec.events] == ["Created pod: p-1", "Created pod: p-2", "PyTorchJob pytest is running."]


# -------------------------------------------------------- a one-pod job's life


async def test_one_pod_job_life_costs_few_rounds_and_no_idle_writes(store_client, monkeypatch):
    """Scheduler and node agent played by hand, one step at a time, the controller idle
    between steps (no coalescing): rounds, job writes and events over the whole life."""
    client, clock = store_client
    plans: list[Plan] = []

    def core(*args, **kw):
        plans.append(core_reconcile(*args, **kw))
        return plans[-1]
    monkeypatch.setattr(ctl, "reconcile", core)
    jc = JobController(client, clock, ReconcileOptions(init_container_command=["initwait"]), kinds=("PyTorchJob",))
    rounds: list[str] = []
    inner = jc.controller._reconcile
    busy = [0]

    async def counting(key):
        rounds.append(key)
        busy[0] += 1
        try:
            return await inner(key)
        finally:
            busy[0] -= 1
    jc.controller._reconcile = counting
    writes: list[dict] = []
    real_update_status = client.update_status

    async def spy_update_status(o):
        if o.get("kind") == "PyTorchJob":
            writes.append(copy.deepcopy(o.get("status")))
        return await real_update_status(o)
    client.update_status = spy_update_status

    async def settle(what: str):
        # Idle: nothing queued, running or timed, and no new round for a while.
        deadline, quiet_since, seen = time.monotonic() + 10, time.monotonic(), len(rounds)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            q = jc.controller.queue
            if len(rounds) != seen or len(q) or busy[0] or q.pending_timers():
                seen, quiet_since = len(rounds), time.monotonic()
            elif time.monotonic() - quiet_since > 0.15:
                return
        raise AssertionError(f"controller not idle after {what}")

    task = asyncio.create_task(jc.run())
    try:
        job = pytorch_job(workers=None, policy="Never")
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            job["metadata"].pop(k)
        await client.create(job)
        await settle("create")
        [pg] = (await client.list("PodGroup", "default")).items
        pg["status"] = {"phase": "Inqueue"}  # the scheduler admits the gang
        pg = await client.update(pg)
        await settle("admission")
        pg["status"]["conditions"] = [{"type": "Scheduled", "status": "True"}]
        pg = await client.update(pg)
        [p] = (await client.list("Pod", "default")).items
        await client.bind("default", p["metadata"]["name"], "las1")
        await settle("binding")
        p = await client.get("Pod", p["metadata"]["name"], "default")
        p["status"] = {"phase": "Pending", "podIP": "127.0.0.1", "hostIP": "127.0.0.1", "containerStatuses": [
            {"name": "pytorch", "restartCount": 0, "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        p = await client.update_status(p)
        await settle("container creating")
        p["status"].update(phase="Succeeded", containerStatuses=[
            {"name": "pytorch", "restartCount": 0, "ready": False,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}])
        await client.update_status(p)
        await settle("pod succeeded")
        pg = await client.get("PodGroup", "pytest", "default") if (await client.list("PodGroup", "default")).items \
            else None
        assert pg is None  # deleted by the finished job

        final = await client.get("PyTorchJob", "pytest", "default")
        assert final["status"]["conditions"][-1]["type"] == "Succeeded"
        # Every status write changed the status.
        assert all(a != b for a, b in zip(writes, writes[1:])) and len(writes) <= 4, writes
        # The old shell took 13 rounds here, 11 of them through the core, 5 planning nothing
        # (every watch event enqueued the job). Left: two rounds skipped as stale, and the
        # round right after each creation (apply's requeue_after=0) before the cache has it.
        assert len(rounds) <= 9, rounds
        assert len(plans) <= 7 and sum(p.is_empty() for p in plans) <= 1, plans
        reasons = sorted(e["reason"] for e in (await client.list("Event", "default")).items)
        assert reasons == sorted(["PyTorchJobCreated", "SuccessfulCreateService", "SuccessfulCreatePod",
                                  "JobTerminated", "SuccessfulDeletePodGroup", "PyTorchJobSucceeded"])
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# ------------------------------------------------------ writes started eagerly


async def test_a_plan_whose_writes_need_no_waiting_is_applied_in_one_step():
    # An in-memory store answers at once: the whole plan (writes, then events) is applied
    # without yielding to the event loop, as when the writes were awaited one by one.
    jc, client, rec = make()
    ran: list[bool] = []
    asyncio.get_running_loop().call_soon(ran.append, True)
    plan = Plan(status={"conditions": []}, podgroup_delete=True, delete_pods=["p-old"],
                create_services=[obj("Service", "s-new")], create_pods=[obj("Pod", "p-new")],
                events=[("Normal", "PyTorchJobRunning", "PyTorchJob pytest is running.")])
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert ran == [] and len(client.calls) == 5 and len(rec.events) == 5
    await asyncio.sleep(0)
    assert ran == [True]


async def test_an_unexpected_error_stops_the_writes_after_it():
    jc, client, rec = make()
    client.fail[("delete", "Pod", "p-old")] = RuntimeError("boom")
    plan = Plan(podgroup_delete=True, delete_pods=["p-old"], delete_services=["s-old"],
                create_pods=[obj("Pod", "p-new")])
    try:
        await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    except RuntimeError as e:
        assert str(e) == "boom"
    else:
        raise AssertionError("the error must fail the round")
    assert client.calls == [("delete", "PodGroup", "pytest"), ("delete", "Pod", "p-old")]
    assert rec.events == []  # as before: a failed round records nothing, it is retried


async def test_writes_that_wait_overlap_and_keep_their_order():
    jc, client, rec = make()
    jc._eager_writes = True  # as on the in-process LocalClient
    gate = asyncio.Event()
    inner = client.create

    async def slow_create(o):
        res = await inner(o)  # the request is made (recorded) first, then the answer waits
        await gate.wait()
        return res
    client.create = slow_create
    plan = Plan(create_services=[obj("Service", "s-1")], create_pods=[obj("Pod", "p-1"), obj("Pod", "p-2")])
    task = asyncio.create_task(jc.apply(KEY, "PyTorchJob", pytorch_job(), plan))
    deadline = time.monotonic() + 5
    while len(client.calls) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert client.calls == [("create", "Service", "s-1"), ("create", "Pod", "p-1"), ("create", "Pod", "p-2")]
    assert rec.events == [] and not task.done()
    gate.set()
    res = await asyncio.wait_for(task, 5)
    assert [e[2] for e in rec.events] == ["Created service: s-1", "Created pod: p-1", "Created pod: p-2"]
    assert res is None  # the creations' events drive the next round


# ------------------------------------------------------------------ core cost


async def test_without_an_in_process_client_the_writes_of_a_round_run_one_after_the_other():
    # An HTTP client's calls are bound to the task that starts them (anyio cancel scopes): no eager start.
    order: list[str] = []

    async def call(name: str) -> str:
        order.append(f"start {name}")
        await asyncio.sleep(0)
        order.append(f"end {name}")
        return name

    assert await in_order([call("a"), call("b")], eager=False) == ["a", "b"]
    assert order == ["start a", "end a", "start b", "end b"]
    jc, _, _ = make()
    assert jc._eager_writes is False  # FakeClient does not say it is in-process
