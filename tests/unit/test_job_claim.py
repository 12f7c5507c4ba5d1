"""Claiming the objects of a job's names (controller/job/claim.py): another uid's PodGroup, Service
or pod is never used and blocks its name (event, Created message) until it is gone; orphans the
job's selector matches are adopted. Pure rounds, the shell over fakes, and the in-memory store."""
from __future__ import annotations

import asyncio
import copy

from phalanx.api.constants import LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from phalanx.controller.conditions import get_condition
from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import Plan, ReconcileOptions, claim
from phalanx.controller.job import controller as ctl
from phalanx.controller.job.claim import Blocked, Claimants
from phalanx.controller.job.controller import JobController
from tests.unit.test_job_controller import KEY, FakeInformer, make, wait_for
from tests.unit.test_job_world import JOB_UID, World, pytorch_job

FW = get_framework("PyTorchJob")
OLD = "00000000-0000-0000-0000-0000000000ld"
CREATED = "PyTorchJob pytest is created."
WAITING = CREATED + " Waiting for objects of its names that it does not manage to be deleted: "
HELD = f"controlled by PyTorchJob pytest, uid {OLD}"


def ref(uid: str = OLD, kind: str = "PyTorchJob", name: str = "pytest", controller: bool = True) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "name": name, "uid": uid, "controller": controller,
            "blockOwnerDeletion": True}


def thing(kind: str, name: str, *refs: dict, labels: dict | None = None, **meta) -> dict:
    md = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7", **meta}
    if refs:
        md["ownerReferences"] = list(refs)
    if labels is not None:
        md["labels"] = labels
    api = "scheduling.volcano.sh/v1beta1" if kind == "PodGroup" else "v1"
    return {"apiVersion": api, "kind": kind, "metadata": md, "spec": {}}


def job_labels(rtype: str = "master", index: int = 0) -> dict:
    return {LABEL_OPERATOR_NAME: "pytorchjob-controller", LABEL_JOB_NAME: "pytest",
            LABEL_REPLICA_TYPE: rtype, LABEL_REPLICA_INDEX: str(index)}


def claimed(world: World, *cached: dict, orphans: tuple = ()) -> tuple[Plan, list[Blocked]]:
    """One round of ``world``'s job, its plan fitted to ``cached`` (what the informers hold)."""
    plan = world.reconcile()
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in cached}
    blocked = claim.claim(world.job, FW, plan, lambda k, ns, n: by_name.get((k, n)), list(orphans), world.now)
    return plan, blocked


def created_message(status: dict | None) -> str:
    return get_condition(status or {}, "Created")["message"]


def exists_events(plan: Plan) -> list[str]:
    return [m for t, r, m in plan.events if (t, r) == ("Warning", "ErrResourceExists")]


# ------------------------------------------------------------------------ pure rounds


def test_s14_a_podgroup_of_another_uid_blocks_the_job_until_it_is_gone():
    world = World(pytorch_job())
    foreign = thing("PodGroup", "pytest", ref())
    plan, blocked = claimed(world, foreign)
    assert blocked == [Blocked("PodGroup", "pytest", HELD)]
    assert plan.podgroup_create is None and plan.podgroup_update is None and plan.adopt == []
    assert created_message(plan.status) == WAITING + f'PodGroup "pytest" ({HELD})'
    assert exists_events(plan) == [
        f'Resource "pytest" of Kind "PodGroup" already exists and is not managed by this PyTorchJob '
        f'(uid {JOB_UID}): {HELD}; waiting for it to be deleted']
    world.apply(plan)

    again, blocked = claimed(world, foreign)  # said once: nothing more while it stays
    assert blocked and again.is_empty()

    world.advance(5)
    gone, blocked = claimed(world)
    assert blocked == [] and exists_events(gone) == []
    assert gone.podgroup_create is not None and gone.podgroup_create["metadata"]["ownerReferences"][0]["uid"] == JOB_UID
    cond = get_condition(gone.status, "Created")
    assert cond["message"] == CREATED and cond["lastTransitionTime"] != cond["lastUpdateTime"]


def test_s14_services_and_pods_of_another_uid_are_not_created_the_others_are():
    world = World(pytorch_job(), ReconcileOptions(local_runtime=False))
    world.step()
    world.admit()
    stale = thing("Service", "pytest-master-0", ref(), labels=job_labels())
    plan, blocked = claimed(world, stale)
    assert [s["metadata"]["name"] for s in plan.create_services] == [
        "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
    assert blocked == [Blocked("Service", "pytest-master-0", HELD)]
    world.apply(plan)
    assert created_message(world.status) == WAITING + f'Service "pytest-master-0" ({HELD})'

    plan = world.reconcile()  # the stale Service is gone: ours is made, then the pods
    assert [s["metadata"]["name"] for s in plan.create_services] == ["pytest-master-0"]
    world.apply(plan)
    other_kind = ref("22222222-0000-0000-0000-000000000000", kind="TFJob")
    pods = [thing("Pod", "pytest-worker-1", other_kind, labels=job_labels("worker", 1)),
            thing("Pod", "pytest-worker-2", other_kind, labels=job_labels("worker", 2))]
    plan, blocked = claimed(world, *pods)
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-master-0", "pytest-worker-0"]
    held = "controlled by TFJob pytest, uid 22222222-0000-0000-0000-000000000000"
    assert blocked == [Blocked("Pod", "pytest-worker-1", held), Blocked("Pod", "pytest-worker-2", held)]
    assert created_message(plan.status) == WAITING + f'Pod "pytest-worker-1" ({held}); Pod "pytest-worker-2" ({held})'
    assert len(exists_events(plan)) == 2


def test_s14_the_message_names_three_and_counts_the_rest():
    world = World(pytorch_job(workers=5), ReconcileOptions(local_runtime=False))
    world.step()
    world.admit()
    stale = [thing("Service", f"pytest-worker-{i}", ref()) for i in range(5)]
    plan, blocked = claimed(world, *stale)
    assert len(blocked) == 5 and len(exists_events(plan)) == 5
    assert created_message(plan.status).endswith(f'Service "pytest-worker-2" ({HELD}) and 2 more')


def test_s14_orphans_the_selector_matches_are_adopted_others_block():
    world = World(pytorch_job())
    orphan_group = thing("PodGroup", "pytest", ref(controller=False))  # an owner, but no controller
    plan, blocked = claimed(world, orphan_group)
    assert blocked == [] and plan.podgroup_create is None and plan.adopt == [orphan_group]
    assert created_message(plan.status) == CREATED and exists_events(plan) == []

    world = World(pytorch_job(), ReconcileOptions(local_runtime=False))
    world.step()
    world.admit()
    labelled = thing("Service", "pytest-master-0", labels=job_labels())
    out_of_range = thing("Service", "pytest-worker-7", labels=job_labels("worker", 7))
    foreign_operator = thing("Service", "pytest-worker-8", labels={**job_labels("worker", 8),
                                                                    LABEL_OPERATOR_NAME: "tfjob-controller"})
    unlabelled = thing("Service", "pytest-worker-0")
    going = thing("Service", "pytest-worker-1", labels=job_labels("worker", 1), deletionTimestamp="2026-01-01T00:00:00Z")
    plan, blocked = claimed(world, labelled, out_of_range, foreign_operator, unlabelled, going,
                            orphans=(labelled, out_of_range, foreign_operator, going))
    assert plan.adopt == [labelled, out_of_range]  # adopted as ControllerRefManager does; the core decides next
    assert [s["metadata"]["name"] for s in plan.create_services] == ["pytest-worker-2"]
    assert blocked == [Blocked("Service", "pytest-worker-0", "no controller, not the job's labels"),
                       Blocked("Service", "pytest-worker-1", "no controller, being deleted")]


def test_a_finished_job_says_nothing():
    world = World(pytorch_job())
    world.job["status"] = {"conditions": [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated", "message": WAITING + "x"},
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "done"}],
        "completionTime": "2026-01-01T12:00:00Z", "replicaStatuses": {}}
    plan, blocked = claimed(world, thing("PodGroup", "pytest", ref()))
    assert blocked == [] and exists_events(plan) == []
    assert created_message(plan.status or world.status) == WAITING + "x"  # frozen with the rest


def test_claimants_map_events_to_the_jobs_of_the_name_and_to_those_waiting():
    c = Claimants()
    named = {("default", "pytest"): ["PyTorchJob/default/pytest"]}

    def jobs(ns, n):
        return named.get((ns, n), [])

    plain = thing("Service", "handmade", ref())  # no label, not a job's name
    assert c.keys("ADDED", plain, jobs) == set()
    c.wait("PyTorchJob/default/other", "default", [Blocked("Service", "handmade", HELD)])
    assert c.keys("MODIFIED", plain, jobs) == {"PyTorchJob/default/other"}
    assert c.keys("DELETED", plain, jobs) == {"PyTorchJob/default/other"}
    assert c.keys("ADDED", plain, jobs) == set()  # forgotten once gone
    c.wait("PyTorchJob/default/other", "default", [Blocked("Service", "handmade", HELD)])
    c.wait("PyTorchJob/default/other", "default", [])
    assert c.keys("MODIFIED", plain, jobs) == set()  # no longer waited for
    assert c.keys("DELETED", thing("PodGroup", "pytest", ref(kind="TFJob", name="x")), jobs) == {
        "PyTorchJob/default/pytest"}
    assert c.keys("ADDED", thing("Pod", "p", labels=job_labels()), jobs) == {"PyTorchJob/default/pytest"}


# ------------------------------------------------------------------------ the shell, over fakes


async def test_the_shell_waits_for_another_owners_podgroup_and_its_deletion_enqueues_the_job():
    job = pytorch_job()
    jc, client, rec = make(job)
    foreign = thing("PodGroup", "pytest", ref(kind="TFJob", name="someone-else"))
    jc.podgroups = FakeInformer(foreign)
    await jc.reconcile(KEY)
    assert client.calls == [("update_status", "PyTorchJob", "pytest")]  # the status only: no PodGroup
    held = f"controlled by TFJob someone-else, uid {OLD}"
    assert ("Warning", "ErrResourceExists", f'Resource "pytest" of Kind "PodGroup" already exists and is not managed '
            f"by this PyTorchJob (uid {JOB_UID}): {held}; waiting for it to be deleted") in rec.events

    jc.podgroups = FakeInformer()
    jc._owned_handler("DELETED", foreign, None)
    assert list(jc.controller.queue._queue) == [KEY]
    written = {**job, "metadata": {**job["metadata"], "resourceVersion": str(client.rv)}, "status": jc._last_write[KEY][1]}
    jc.jobs["PyTorchJob"] = FakeInformer(written)
    client.calls.clear()
    await jc.reconcile(KEY)
    assert ("create", "PodGroup", "pytest") in client.calls


async def test_the_shell_adopts_an_orphan_with_a_merge_patch_on_its_resource_version():
    jc, client, rec = make(pytorch_job())
    patches = []

    async def patch(kind, name, namespace, body, patch_type="merge"):
        client._do("patch", kind, name)
        patches.append((kind, name, patch_type, copy.deepcopy(body)))
        return {}
    client.patch = patch
    other = ref("33333333-0000-0000-0000-000000000000", kind="ConfigMap", name="keeper", controller=False)
    jc.podgroups = FakeInformer(thing("PodGroup", "pytest", other))
    jc.services = FakeInformer(thing("Service", "pytest-worker-0", labels=job_labels("worker", 0)))
    await jc.reconcile(KEY)
    mine = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID,
            "controller": True, "blockOwnerDeletion": True}
    assert sorted(patches, key=lambda p: p[0]) == [
        ("PodGroup", "pytest", "merge", {"metadata": {"ownerReferences": [other, mine], "resourceVersion": "7"}}),
        ("Service", "pytest-worker-0", "merge", {"metadata": {"ownerReferences": [mine], "resourceVersion": "7"}}),
    ]
    assert ("create", "PodGroup", "pytest") not in client.calls
    assert [e for e in rec.events if e[0] == "Warning"] == []


# ------------------------------------------------------------------------ the in-memory store


async def _events(client, reason: str) -> list[dict]:
    return [e for e in (await client.list("Event", "default")).items if e["reason"] == reason]


async def test_end_to_end_another_owners_podgroup_then_ours_and_an_orphan_adopted(store_client):
    client, clock = store_client
    jc = JobController(client, clock, ReconcileOptions(init_container_command=["initwait"]), kinds=("PyTorchJob",))
    task = asyncio.create_task(jc.run())
    try:
        stale = thing("PodGroup", "pytest", ref())
        for k in ("uid", "resourceVersion"):
            stale["metadata"].pop(k)
        stale["spec"] = {"minMember": 9}
        await client.create(stale)
        job = pytorch_job()
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            job["metadata"].pop(k)
        uid = (await client.create(job))["metadata"]["uid"]

        warned = await wait_for(lambda: _events(client, "ErrResourceExists"), what="the ErrResourceExists event")
        assert f'Kind "PodGroup" already exists and is not managed by this PyTorchJob (uid {uid}): {HELD}' \
            in warned[0]["message"]
        got = await client.get("PyTorchJob", "pytest", "default")
        assert created_message(got["status"]) == WAITING + f'PodGroup "pytest" ({HELD})'
        pg = await client.get("PodGroup", "pytest", "default")
        assert pg["spec"]["minMember"] == 9 and pg["metadata"]["ownerReferences"] == [ref()]  # untouched

        await client.delete("PodGroup", "pytest", "default")

        async def ours():
            items = (await client.list("PodGroup", "default")).items
            return items and items[0]["metadata"]["ownerReferences"][0]["uid"] == uid and items[0]

        pg = await wait_for(ours, what="the job's own PodGroup")
        assert pg["spec"]["minMember"] == 4

        async def restored():
            j = await client.get("PyTorchJob", "pytest", "default")
            return created_message(j["status"]) == CREATED

        await wait_for(restored, what="the Created message without the wait")

        # The job deleted, its PodGroup left an orphan (as a delete with propagationPolicy Orphan):
        # the job made again under that name adopts it.
        await client.delete("PyTorchJob", "pytest", "default")
        await client.patch("PodGroup", "pytest", "default", {"metadata": {"ownerReferences": None}})
        uid2 = (await client.create(job))["metadata"]["uid"]

        async def adopted():
            p = await client.get("PodGroup", "pytest", "default")
            refs = p["metadata"].get("ownerReferences") or []
            return [r["uid"] for r in refs if r.get("controller")] == [uid2] and p

        pg2 = await wait_for(adopted, what="the orphan PodGroup adopted")
        assert pg2["metadata"]["uid"] == pg["metadata"]["uid"]
        assert len(await _events(client, "ErrResourceExists")) == 1
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_owner_index_stays_the_controllers_uid():
    assert ctl.owner_index(thing("Pod", "p", ref())) == [OLD]
    assert ctl.owner_index(thing("Pod", "p", ref(controller=False))) == []
    assert claim.orphan_index(thing("Pod", "p", labels=job_labels())) == ["default/pytest"]
    assert claim.orphan_index(thing("Pod", "p", ref(), labels=job_labels())) == []
