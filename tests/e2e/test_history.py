"""The seed PyTorchJob on the embedded cluster (real processes, 30 s scaled to 2 s): its history file
holds the job's conditions, the PodGroup's phases, each pod's states and the Scheduled events, in order."""
from __future__ import annotations

import pytest

from phalanx.store.history import JobKey
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e

PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]


def is_subsequence(seq: list[str], order: list[str]) -> bool:
    it = iter(order)
    return all(any(s == o for o in it) for s in seq)


async def test_seed_job_history(cluster):
    c = cluster.client
    job = await c.create(scaled(load_example("pytorchjob.yaml")[0], 2))
    key = JobKey("default", "PyTorchJob", "pytest", job["metadata"]["uid"])
    assert cluster.histories.path(key) == cluster.home / "history" / "default" / f"PyTorchJob_pytest_{key.uid}.jsonl"

    def records():
        return cluster.histories.read(key)

    def pod_states(name: str) -> list[str]:
        return [r.state for r in records() if r.kind == "Pod" and r.name == name]

    async def done():
        j = await c.get("PyTorchJob", "pytest", "default")
        return job_state(j) == "Succeeded" and all(pod_states(p)[-1:] == ["Completed"] for p in PODS)

    await wait_until(done, 40, "job Succeeded and every pod Completed in the history")
    await wait_until(lambda: [r for r in records() if r.kind == "Job"][-1:]
                     and [r for r in records() if r.kind == "Job"][-1].state == "Succeeded", 5, "Succeeded recorded")
    recs = records()
    print("\n".join(f"{r.t:.3f} {r.kind} {r.name} {r.state} {r.detail}" for r in recs))
    assert [r.state for r in recs if r.kind == "Job"] == ["Created", "Running", "Succeeded"]
    assert [r.t for r in recs] == sorted(r.t for r in recs)
    pg = [r.state for r in recs if r.kind == "PodGroup"]
    assert is_subsequence(["Inqueue", "Running"], pg) and pg == list(dict.fromkeys(pg)), pg
    for name in PODS:
        states = pod_states(name)
        assert states[0] == "Pending" and states[-1] == "Completed", (name, states)
        assert "Running" in states, (name, states)
        pod = [r for r in recs if r.kind == "Pod" and r.name == name]
        assert len({r.uid for r in pod}) == 1
        assert pod[-1].detail["exitCode"] == 0 and pod[-1].detail["node"] == "las1"
        assert all(a != b for a, b in zip(states, states[1:])), (name, states)  # appended on change only
    scheduled = sorted(r.detail["object"] for r in recs if r.kind == "Event" and r.state == "Scheduled")
    assert scheduled == ["Pod/" + p for p in PODS] + ["PodGroup/pytest"]  # Volcano's: the gang is scheduled
    # The job's own events are there too; none is recorded twice with the same count.
    assert any(r.kind == "Event" and r.detail["object"] == "PyTorchJob/pytest" for r in recs)
    seen = [(r.uid, r.detail["count"]) for r in recs if r.kind == "Event"]
    assert len(seen) == len(set(seen))
    # The job deleted: its history goes with it.
    await c.delete("PyTorchJob", "pytest", "default")
    await wait_until(lambda: not cluster.histories.path(key).exists(), 10, "history removed with the job")
