"""A job made again under the name of one just deleted, on the embedded cluster: with the garbage
collector held back the new job uses none of the old job's PodGroup, Services or pods (a Warning
ErrResourceExists event, the Created message), and runs once the collector has removed them; after
a delete with propagationPolicy Orphan the new job adopts the old pods, which keep running."""
from __future__ import annotations

import asyncio

import pytest

from phalanx.controller.gc import GarbageCollector
from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

WAITING = "PyTorchJob pytest is created. Waiting for objects of its names that it does not manage to be deleted: "


def job_doc() -> dict:
    def replica() -> dict:
        return {"replicas": 1, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{
                    "name": "pytorch", "image": "busybox", "command": ["sh", "-c", "trap exit TERM; sleep 60 & wait"],
                    "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pytest", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}}}


def controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


async def owned(c, kind: str, uid: str) -> list[dict]:
    return [o for o in (await c.list(kind, "default")).items if controller_uid(o) == uid]


async def running(c, uid: str) -> bool:
    pods = await owned(c, "Pod", uid)
    return len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


async def gone(c, kind: str, name: str) -> bool:
    try:
        await c.get(kind, name, "default")
    except NotFound:
        return True
    return False


def created_message(job: dict) -> str:
    return next(c["message"] for c in job["status"]["conditions"] if c["type"] == "Created")


async def test_s14_made_again_before_the_garbage_collector_waits_for_the_old_objects_then_runs(cluster):
    c = cluster.client
    old = (await c.create(job_doc()))["metadata"]["uid"]
    await wait_until(lambda: running(c, old), 30, "the first job's pods Running")
    await cluster.gc.stop()  # held back: the old job's objects stay once it is deleted
    gc, task = None, None
    try:
        await c.delete("PyTorchJob", "pytest", "default")
        await wait_until(lambda: gone(c, "PyTorchJob", "pytest"), 10, "the first job gone")
        new = (await c.create(job_doc()))["metadata"]["uid"]

        async def warned():
            return [e for e in (await c.list("Event", "default")).items
                    if e["reason"] == "ErrResourceExists" and e["involvedObject"].get("uid") == new]

        events = await wait_until(warned, 10, "the new job's ErrResourceExists event")
        held = f"controlled by PyTorchJob pytest, uid {old}"
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == (
            f'Resource "pytest" of Kind "PodGroup" already exists and is not managed by this PyTorchJob (uid {new}): '
            f"{held}; waiting for it to be deleted")
        job = await c.get("PyTorchJob", "pytest", "default")
        assert created_message(job) == WAITING + f'PodGroup "pytest" ({held})'
        assert job_state(job) == "Created"
        assert await owned(c, "Pod", new) == [] and await owned(c, "PodGroup", new) == []
        pg = await c.get("PodGroup", "pytest", "default")
        assert controller_uid(pg) == old and pg["spec"]["minMember"] == 2  # neither used nor changed
        assert len(await owned(c, "Service", old)) == 2 and len(await owned(c, "Pod", old)) == 2

        gc = cluster.gc = GarbageCollector(c)  # the collector resumes
        task = asyncio.create_task(gc.run())
        await wait_until(lambda: running(c, new), 45, "the new job's pods Running")

        async def job_running():
            j = await c.get("PyTorchJob", "pytest", "default")
            return job_state(j) == "Running" and created_message(j) == "PyTorchJob pytest is created." and j

        await wait_until(job_running, 15, "the new job Running, its Created message plain again")
        for kind in ("Pod", "Service", "PodGroup"):
            assert await owned(c, kind, old) == [], kind
        assert len(await owned(c, "Service", new)) == 2
        assert controller_uid(await c.get("PodGroup", "pytest", "default")) == new
    finally:
        if gc is not None:
            await gc.stop()
        if task is not None:
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)


async def test_s14_made_again_after_an_orphaning_delete_adopts_the_running_pods(cluster):
    c = cluster.client
    old = (await c.create(job_doc()))["metadata"]["uid"]
    await wait_until(lambda: running(c, old), 30, "the first job's pods Running")
    pod_uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await owned(c, "Pod", old)}
    await c.delete("PyTorchJob", "pytest", "default", propagation_policy="Orphan")
    await wait_until(lambda: gone(c, "PyTorchJob", "pytest"), 10, "the first job gone, its objects orphaned")
    new = (await c.create(job_doc()))["metadata"]["uid"]

    await wait_until(lambda: running(c, new), 20, "the old pods adopted by the new job")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in await owned(c, "Pod", new)} == pod_uids
    await wait_until(lambda: owned(c, "PodGroup", new), 10, "the PodGroup adopted")
    assert len(await owned(c, "Service", new)) == 2

    async def job_running():
        return job_state(await c.get("PyTorchJob", "pytest", "default")) == "Running"

    await wait_until(job_running, 15, "the new job Running on the adopted pods")
    assert [e for e in (await c.list("Event", "default")).items if e["reason"] == "ErrResourceExists"] == []
