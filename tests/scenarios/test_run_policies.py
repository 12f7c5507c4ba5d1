"""runPolicy.suspend and ttlSecondsAfterFinished on real processes (issue 3, item 4)."""
from __future__ import annotations

import pytest

from phalanx.objects.clock import parse_time
from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e


async def _exists(c, kind, name, ns="default") -> bool:
    try:
        await c.get(kind, name, ns)
        return True
    except NotFound:
        return False


async def _owned(c, kind, uid):
    return [o for o in (await c.list(kind, "default")).items
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]


def _cond(job, ctype):
    return next((x for x in job["status"].get("conditions") or [] if x["type"] == ctype), None)


async def test_suspend_deletes_everything_and_resume_resets_start_time(cluster, recorder):
    c = cluster.client
    await c.create(scaled(load_example("pytorchjob.yaml")[0], 3))

    async def running():
        j = await c.get("PyTorchJob", "pytest", "default")
        return j if job_state(j) == "Running" else None

    job = await wait_until(running, 15, "job Running")
    uid, first_start = job["metadata"]["uid"], parse_time(job["status"]["startTime"])
    await c.patch("PyTorchJob", "pytest", "default", {"spec": {"runPolicy": {"suspend": True}}})

    async def suspended_and_empty():
        j = await c.get("PyTorchJob", "pytest", "default")
        s = _cond(j, "Suspended")
        if not (s and s["status"] == "True"):
            return None
        if await _owned(c, "Pod", uid) or await _owned(c, "Service", uid) or await _exists(c, "PodGroup", "pytest"):
            return None
        return j

    j = await wait_until(suspended_and_empty, 15, "suspended with pods, services and PodGroup deleted")
    assert _cond(j, "Suspended")["reason"] == "PyTorchJobSuspended"
    assert _cond(j, "Suspended")["message"] == "PyTorchJob pytest is suspended."
    assert _cond(j, "Running")["status"] == "False"
    assert job_state(j) == "Suspended"
    # Resume: startTime is reset, the gang is scheduled again and the job completes.
    # (Timestamps have second precision: let the clock pass the first startTime.)
    from datetime import datetime, timedelta, timezone
    await wait_until(lambda: datetime.now(timezone.utc) >= first_start + timedelta(seconds=1), 3, "a new second")
    await c.patch("PyTorchJob", "pytest", "default", {"spec": {"runPolicy": {"suspend": False}}})

    async def succeeded():
        jj = await c.get("PyTorchJob", "pytest", "default")
        return jj if job_state(jj) == "Succeeded" else None

    j = await wait_until(succeeded, 30, "resumed job Succeeded")
    assert parse_time(j["status"]["startTime"]) > first_start
    resumed = _cond(j, "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "PyTorchJobResumed")
    reasons = [e["reason"] for e in (await c.list("Event", "default",
               field_selector="involvedObject.name=pytest,involvedObject.kind=PyTorchJob")).items]
    assert "PyTorchJobSuspended" in reasons and "PyTorchJobResumed" in reasons


async def test_ttl_after_finished_deletes_the_job_and_all_it_owns(cluster):
    c = cluster.client
    job = scaled(load_example("pytorchjob.yaml")[0], 0.5)
    job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 1
    created = await c.create(job)
    uid = created["metadata"]["uid"]

    async def succeeded():
        j = await c.get("PyTorchJob", "pytest", "default")
        return j if job_state(j) == "Succeeded" else None

    j = await wait_until(succeeded, 20, "job Succeeded")
    done = parse_time(j["status"]["completionTime"])
    assert await _exists(c, "PyTorchJob", "pytest")

    async def all_gone():
        return not (await _exists(c, "PyTorchJob", "pytest") or await _owned(c, "Pod", uid)
                    or await _owned(c, "Service", uid) or await _exists(c, "PodGroup", "pytest"))

    await wait_until(all_gone, 15, "job, pods, services and PodGroup deleted after the TTL")
    # Not before the TTL: the job was still there right after completion (asserted above),
    # and the completion time is recorded.
    assert done is not None
