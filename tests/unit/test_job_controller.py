"""The job controller shell: plan application, caches that lag, owner mapping, and
one end-to-end round over the in-memory store (no processes)."""
from __future__ import annotations

import asyncio
import copy
import json
import time

import pytest

from phalanx.controller.job import Plan, ReconcileOptions, claim
from phalanx.controller.job import controller as ctl
from phalanx.controller.job.controller import CONFLICT_RETRY, ERROR_RETRY, JobController
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import AlreadyExists, Conflict, NotFound
from tests.unit.test_job_world import JOB_UID, pytorch_job

KEY = "PyTorchJob/default/pytest"


class FakeInformer:
    def __init__(self, *objs: dict) -> None:
        self.objs = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}

    def get(self, ns, name):
        return self.objs.get((ns, name))

    def list(self, ns=None, label_selector=None):
        return [o for (n, _), o in self.objs.items() if ns is None or n == ns]

    def by_index(self, index, value):
        fn = {ctl.OWNER_INDEX: ctl.owner_index, claim.ORPHAN_INDEX: claim.orphan_index}[index]
        return [o for o in self.objs.values() if value in fn(o)]


class FakeClient:
    """Records calls; ``fail[(op, kind, name)] = exception`` makes a call raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.fail: dict[tuple[str, str, str], Exception] = {}
        self.rv = 100

    def _do(self, op: str, kind: str, name: str) -> None:
        self.calls.append((op, kind, name))
        err = self.fail.get((op, kind, name))
        if err is not None:
            raise err

    async def update_status(self, obj):
        self._do("update_status", obj["kind"], obj["metadata"]["name"])
        self.rv += 1
        out = copy.deepcopy(obj)
        out["metadata"]["resourceVersion"] = str(self.rv)
        return out

    async def update(self, obj):
        self._do("update", obj["kind"], obj["metadata"]["name"])
        return obj

    async def create(self, obj):
        self._do("create", obj["kind"], obj["metadata"]["name"])
        return obj

    async def delete(self, kind, name, namespace=None, grace_period_seconds=None):
        self._do("delete", kind, name)
        return None


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def record(self, obj, type, reason, message):
        self.events.append((type, reason, message))


def make(job: dict | None = None) -> tuple[JobController, FakeClient, FakeRecorder]:
    client, rec = FakeClient(), FakeRecorder()
    jc = JobController(client, FakeClock(), ReconcileOptions(), kinds=("PyTorchJob",), recorder=rec)
    jc.jobs = {"PyTorchJob": FakeInformer(*([job] if job else []))}
    jc.pods, jc.services, jc.podgroups = FakeInformer(), FakeInformer(), FakeInformer()
    return jc, client, rec


def obj(kind: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}}


def full_plan() -> Plan:
    return Plan(
        status={"conditions": []}, podgroup_delete=True,
        delete_pods=["p-old"], delete_services=["s-old"],
        create_services=[obj("Service", "s-new")], create_pods=[obj("Pod", "p-new")],
        events=[("Normal", "PyTorchJobRunning", "PyTorchJob pytest is running.")],
    )


# ------------------------------------------------------------------------- apply


async def test_plan_is_applied_status_first_then_podgroup_deletions_services_pods():
    jc, client, rec = make()
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), full_plan())
    assert client.calls == [("update_status", "PyTorchJob", "pytest"), ("delete", "PodGroup", "pytest"),
                            ("delete", "Pod", "p-old"), ("delete", "Service", "s-old"),
                            ("create", "Service", "s-new"), ("create", "Pod", "p-new")]
    assert rec.events == [
        ("Normal", "SuccessfulDeletePodGroup", "Deleted PodGroup: pytest"),
        ("Normal", "SuccessfulDeletePod", "Deleted pod: p-old"),
        ("Normal", "SuccessfulDeleteService", "Deleted service: s-old"),
        ("Normal", "SuccessfulCreateService", "Created service: s-new"),
        ("Normal", "SuccessfulCreatePod", "Created pod: p-new"),
        ("Normal", "PyTorchJobRunning", "PyTorchJob pytest is running."),
    ]
    assert res is None  # the creations' watch events drive the next round
    assert jc.expectations.awaited(KEY) == {("Service", "default", "s-new"): 1300.0, ("Pod", "default", "p-new"): 1300.0}


async def test_status_conflict_stops_the_plan_and_retries_shortly():
    jc, client, rec = make()
    client.fail[("update_status", "PyTorchJob", "pytest")] = Conflict("pytorchjobs", "pytest")
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), full_plan())
    assert client.calls == [("update_status", "PyTorchJob", "pytest")]
    assert rec.events == [] and res.requeue_after == CONFLICT_RETRY


async def test_already_exists_and_not_found_count_as_done():
    jc, client, rec = make()
    client.fail[("create", "Pod", "p-new")] = AlreadyExists("pods", "p-new")
    client.fail[("create", "Service", "s-new")] = AlreadyExists("services", "s-new")
    client.fail[("delete", "Pod", "p-old")] = NotFound("pods", "p-old")
    plan = full_plan()
    plan.status = None
    plan.events = []
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert [e[1] for e in rec.events] == ["SuccessfulDeletePodGroup", "SuccessfulDeleteService"]
    assert res is None  # nothing new was created: the watch events will drive the next round


async def test_a_failed_create_is_reported_and_retried():
    jc, client, rec = make()
    client.fail[("create", "Pod", "p-new")] = Conflict("pods", "p-new")
    plan = Plan(create_pods=[obj("Pod", "p-new")], requeue_after=30)
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert rec.events[0][:2] == ("Warning", "FailedCreatePod")
    assert rec.events[0][2].startswith("Error creating: Operation cannot be fulfilled")
    assert res.requeue_after == ERROR_RETRY


async def test_requeue_after_of_the_plan_is_returned():
    jc, _, _ = make()
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(requeue_after=12.5))
    assert res.requeue_after == 12.5


async def test_ttl_deletes_the_job():
    jc, client, rec = make()
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(delete_job=True))
    assert client.calls == [("delete", "PyTorchJob", "pytest")]
    assert rec.events == [("Normal", "SuccessfulDeleteJob", "Deleted job: pytest")]


# ----------------------------------------------------------------- expectations


def created_pod(name: str) -> dict:
    return {**obj("Pod", name), "metadata": {
        "name": name, "namespace": "default", "uid": f"uid-{name}",
        "ownerReferences": [{"kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID, "controller": True}]}}


async def test_a_job_is_not_reconciled_until_its_caches_have_seen_what_it_created():
    job = pytorch_job()
    jc, client, _ = make(job)
    plan = Plan(create_pods=[created_pod("pytest-master-0"), created_pod("pytest-worker-0")])
    assert await jc.apply(KEY, "PyTorchJob", job, plan) is None
    client.calls.clear()
    jc.clock.advance(10)
    res = await jc.reconcile(KEY)  # the pods' events are still on their way: nothing is created again
    assert client.calls == [] and res.requeue_after == ctl.EXPECTATIONS_TIMEOUT - 10
    jc._owned_handler("ADDED", created_pod("pytest-master-0"), None)
    assert await jc.reconcile(KEY) is not None and client.calls == []  # one is still awaited
    jc.pods = FakeInformer(created_pod("pytest-worker-0"))  # in the cache: seen, whatever became of its event
    assert jc.expectations.pending(KEY, jc.clock.monotonic(), jc._cached) is None and not jc.expectations
    jc.pods = FakeInformer()
    jc.expectations.expect(KEY, ("Pod", "default", "pytest-worker-0"), jc.clock.monotonic() - 10)
    jc._owned_handler("ADDED", created_pod("pytest-worker-0"), None)
    assert not jc.expectations
    assert jc.controller.queue._queue.count(KEY) == 1  # the last event enqueued the job once
    await jc.reconcile(KEY)
    assert ("update_status", "PyTorchJob", "pytest") in client.calls  # a round again


async def test_an_awaited_creation_lapses_after_the_timeout():
    job = pytorch_job()
    jc, client, _ = make(job)
    await jc.apply(KEY, "PyTorchJob", job, Plan(create_pods=[created_pod("pytest-master-0")]))
    client.calls.clear()
    jc.clock.advance(ctl.EXPECTATIONS_TIMEOUT)  # its event was lost (a relist after it was deleted)
    await jc.reconcile(KEY)
    assert ("update_status", "PyTorchJob", "pytest") in client.calls  # a round again
    assert ("Pod", "default", "pytest-master-0") not in jc.expectations.awaited(KEY)


async def test_a_failed_or_refused_create_is_not_awaited():
    job = pytorch_job()
    jc, client, _ = make(job)
    client.fail[("create", "Pod", "p-a")] = AlreadyExists("pods", "p-a")
    client.fail[("create", "Pod", "p-b")] = Conflict("pods", "p-b")
    client.fail[("create", "PodGroup", "pytest")] = Conflict("podgroups", "pytest")
    plan = Plan(create_pods=[obj("Pod", "p-a"), obj("Pod", "p-b")], podgroup_create=obj("PodGroup", "pytest"))
    await jc.apply(KEY, "PyTorchJob", job, plan)
    assert not jc.expectations
    await jc.apply(KEY, "PyTorchJob", job, Plan(podgroup_create=obj("PodGroup", "pg")))
    assert jc.expectations.awaited(KEY) == {("PodGroup", "default", "pg"): 1300.0}
    jc.expectations.expect("PyTorchJob/default/gone", ("Pod", "default", "x"), 1000.0)
    await jc.reconcile("PyTorchJob/default/gone")  # a deleted job's expectations go with it
    assert jc.expectations.awaited("PyTorchJob/default/gone") == {}


# -------------------------------------------------------------------- reconcile


async def test_a_job_older_in_the_cache_than_our_last_status_write_is_not_reconciled():
    job = pytorch_job()
    jc, client, _ = make(job)
    await jc.reconcile(KEY)  # writes Created (rv 101) and creates the PodGroup
    assert ("update_status", "PyTorchJob", "pytest") in client.calls
    client.calls.clear()
    assert await jc.reconcile(KEY) is None  # the cache still holds rv 1
    assert client.calls == []
    job["metadata"]["resourceVersion"] = "101"
    job["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                                     "message": "PyTorchJob pytest is created.", "lastUpdateTime": "x",
                                     "lastTransitionTime": "x"}], "replicaStatuses": {}}
    await jc.reconcile(KEY)
    assert client.calls == []  # the PodGroup it created is awaited, not created again


async def test_only_objects_controlled_by_the_job_are_handed_to_the_core(monkeypatch):
    job = pytorch_job()
    jc, _, _ = make(job)
    mine = {**obj("Pod", "pytest-master-0"), "metadata": {
        "name": "pytest-master-0", "namespace": "default",
        "ownerReferences": [{"kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID, "controller": True}]}}
    stranger = copy.deepcopy(mine)
    stranger["metadata"]["name"] = "pytest-worker-0"
    stranger["metadata"]["ownerReferences"][0]["uid"] = "other-uid"
    jc.pods = FakeInformer(mine, stranger)
    seen = {}

    def spy(job, pods, services, podgroup, now, fw, options, others=None, preempted_gone=None):
        seen["pods"] = [p["metadata"]["name"] for p in pods]
        return Plan()

    monkeypatch.setattr(ctl, "reconcile", spy)
    await jc.reconcile(KEY)
    assert seen["pods"] == ["pytest-master-0"]


async def test_deleted_or_deleting_jobs_are_not_reconciled():
    jc, client, _ = make()
    assert await jc.reconcile(KEY) is None
    job = pytorch_job()
    job["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    jc, client, _ = make(job)
    assert await jc.reconcile(KEY) is None and client.calls == []
    assert await jc.reconcile("garbage") is None


MARK = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": 'volcano: reclaiming for queue "b" (below its deserved share): default/b-0 of job default/b'}


def owned_pod(name: str, uid: str = "pod-uid", conditions: list | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "uid": uid,
        "ownerReferences": [{"kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID, "controller": True}]},
        "status": {"phase": "Running", "conditions": list(conditions or [])}}


def test_the_schedulers_eviction_mark_is_a_pod_change_that_enqueues_other_conditions_are_not():
    pod = owned_pod("pytest-worker-0", conditions=[{"type": "Ready", "status": "True"}])
    ready_false = copy.deepcopy(pod)
    ready_false["status"]["conditions"][0]["status"] = "False"
    marked = copy.deepcopy(pod)
    marked["status"]["conditions"].append(MARK)
    assert not ctl._may_change_plan(ready_false, pod)
    assert ctl._may_change_plan(marked, pod)


async def test_a_preempted_pod_seen_deleted_is_handed_to_the_core_by_uid(monkeypatch):
    jc, _, _ = make(pytorch_job())
    seen = []

    def spy(job, pods, services, podgroup, now, fw, options, others=None, preempted_gone=None):
        seen.append(preempted_gone)
        return Plan()

    monkeypatch.setattr(ctl, "reconcile", spy)
    jc._owned_handler("DELETED", owned_pod("pytest-worker-1", uid="u1"), None)  # no mark: forgotten
    jc._owned_handler("DELETED", owned_pod("pytest-worker-0", uid="u0", conditions=[MARK]), None)
    await jc.reconcile(KEY)
    assert seen == [{"pytest-worker-0": ("u0", MARK["message"])}]
    jc.clock.advance(ctl.PREEMPTED_GONE_KEPT + 1)
    jc._owned_handler("DELETED", owned_pod("pytest-worker-2", uid="u2"), None)  # prunes the old memory
    await jc.reconcile(KEY)
    assert seen[-1] == {}


def test_deleting_a_failed_preempted_pod_is_no_restart():
    jc, _, _ = make()
    failed = owned_pod("pytest-worker-0")
    failed["status"]["phase"] = "Failed"
    preempted = owned_pod("pytest-worker-1", conditions=[MARK])
    preempted["status"]["phase"] = "Failed"
    jc.pods = FakeInformer(failed, preempted)
    assert jc._failed_pod("default", "pytest-worker-0") and not jc._failed_pod("default", "pytest-worker-1")


def test_owned_object_events_map_to_the_controlling_job():
    jc, _, _ = make()
    pod = {"metadata": {"name": "p", "namespace": "ns1", "ownerReferences": [
        {"kind": "PyTorchJob", "name": "j1", "controller": True, "uid": "u"},
        {"kind": "TFJob", "name": "j2", "controller": False, "uid": "v"}]}}
    moved = copy.deepcopy(pod)
    moved["metadata"]["ownerReferences"][0]["name"] = "j3"
    jc._owned_handler("MODIFIED", moved, pod)
    orphan = {"metadata": {"name": "q", "namespace": "ns1"}}
    jc._owned_handler("ADDED", orphan, None)
    other_kind = {"metadata": {"name": "r", "namespace": "ns1",
                               "ownerReferences": [{"kind": "MPIJob", "name": "m", "controller": True}]}}
    jc._owned_handler("DELETED", other_kind, None)
    keys = []
    while len(jc.controller.queue):
        keys.append(jc.controller.queue._queue.popleft())
    assert keys == ["PyTorchJob/ns1/j1", "PyTorchJob/ns1/j3"]


# ------------------------------------------------------------------- end to end


@pytest.fixture
async def store_client():
    from phalanx.api.admission import admit
    from phalanx.client.local import LocalClient
    from phalanx.store.store import Store

    clock = FakeClock()
    store = Store(None, clock, admission=admit)
    port = iter(range(23456, 24000))

    def network(op, o, old):  # stands in for the local network: an address and host ports
        if op == "create" and isinstance(o, dict) and o.get("kind") == "Service":
            ann = o["metadata"].setdefault("annotations", {})
            ann["phalanx.dev/address"] = "127.0.1.9"
            ann["phalanx.dev/host-ports"] = json.dumps({p["name"]: next(port) for p in o["spec"].get("ports", [])})
        return o

    store.add_admission_plugin(network)
    client = LocalClient(store)
    try:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    except AlreadyExists:
        pass
    yield client, clock
    store.close()


async def wait_for(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = await predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_end_to_end_podgroup_then_services_then_pods_then_running(store_client):
    client, clock = store_client
    jc = JobController(client, clock, ReconcileOptions(init_container_command=["initwait"]), kinds=("PyTorchJob",))
    task = asyncio.create_task(jc.run())
    try:
        job = pytorch_job()
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            job["metadata"].pop(k)
        await client.create(job)

        async def podgroup():
            items = (await client.list("PodGroup", "default")).items
            return items[0] if items else None

        pg = await wait_for(podgroup, what="PodGroup")
        assert pg["spec"]["minMember"] == 4
        await asyncio.sleep(0.05)
        assert (await client.list("Pod", "default")).items == []  # gated until admitted
        pg["status"] = {"phase": "Inqueue"}
        await client.update(pg)

        async def pods():
            items = (await client.list("Pod", "default")).items
            return items if len(items) == 4 else None

        items = {p["metadata"]["name"]: p for p in await wait_for(pods, what="4 pods")}
        env = {e["name"]: e["value"] for e in items["pytest-worker-2"]["spec"]["containers"][0]["env"]}
        assert (env["MASTER_PORT"], env["RANK"]) == ("23456", "3")
        assert items["pytest-worker-0"]["spec"]["initContainers"][0]["command"] == ["initwait", "pytest-master-0"]
        assert len((await client.list("Service", "default")).items) == 4

        master = items["pytest-master-0"]
        master["status"] = {"phase": "Running", "containerStatuses": [
            {"name": "pytorch", "restartCount": 0, "state": {"running": {}}}]}
        await client.update_status(master)

        async def running():
            j = await client.get("PyTorchJob", "pytest", "default")
            conds = (j.get("status") or {}).get("conditions") or []
            return conds and conds[-1]["type"] == "Running"

        await wait_for(running, what="job Running")
        events = (await client.list("Event", "default")).items
        reasons = {e["reason"] for e in events}
        assert {"SuccessfulCreatePod", "SuccessfulCreateService", "PyTorchJobRunning"} <= reasons
        assert {e["source"]["component"] for e in events} == {"pytorchjob-controller"}
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_pods_are_marked_by_patch_no_restart_for_s5_and_no_failure_restart_for_s3():
    jc, client, rec = make()
    patches: list[tuple[str, str, dict]] = []

    async def patch(kind, name, namespace, body):
        client._do("patch", kind, name)
        patches.append((kind, name, body))
        return {}
    client.patch = patch
    client.fail[("patch", "Pod", "gone")] = NotFound("pods", "gone")
    plan = Plan(stop_restarting=["kept"], stop_failure_restarts=["w-0", "gone"])
    assert not plan.is_empty()
    res = await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert patches == [
        ("Pod", "kept", {"metadata": {"annotations": {"phalanx.dev/no-restart": "true"}}}),
        ("Pod", "w-0", {"metadata": {"annotations": {"phalanx.dev/no-restart-on-failure": "true"}}}),
    ]
    assert res is None and rec.events == []  # a pod gone meanwhile needs nothing
