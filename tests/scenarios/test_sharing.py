"""Sharing a cluster on the embedded cluster with real processes: reclaim between two teams' queues
(gang surplus, and a gang with none to spare) and preemption by priority within a queue; the victims'
instances' logs stay readable. Durations scaled down; order of events and end states exact."""
from __future__ import annotations

import asyncio
import re

import pytest

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from tests.scenarios.conftest import Recorder, job_state, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# A replica that says when it starts and when it is told to stop, then works for ``seconds``.
WORK = ("import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('got SIGTERM', flush=True)\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('started', flush=True)\n"
        "time.sleep(float(sys.argv[1]))\n"
        "print('done', flush=True)\n")


def job(name: str, replicas: int, seconds: float, *, queue: str = "default", min_available: int | None = None,
        priority_class: str | None = None, master_seconds: float | None = None) -> dict:
    """A PyTorchJob of ``replicas`` pods of 1 CPU; the master works ``master_seconds`` (the job
    succeeds when it does), the workers ``seconds``."""
    def spec(n: int, s: float) -> dict:
        return {"replicas": n, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{
                    "name": "pytorch", "image": "python", "command": ["python3", "-c", WORK, str(s)],
                    "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}]}}}
    policy: dict = {"queue": queue}
    if min_available is not None:
        policy["minAvailable"] = min_available
    if priority_class:
        policy["priorityClass"] = priority_class
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"runPolicy": {"schedulingPolicy": policy},
                     "pytorchReplicaSpecs": {"Master": spec(1, master_seconds or seconds),
                                             "Worker": spec(replicas - 1, seconds)}}}


@pytest.fixture
async def plane(tmp_path):
    cfg = ClusterConfig(nodes=[NodeConfig("las1", 8, 16 * 1024**3)],
                        agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
                        operator=OperatorSettings(default_backoff_limit=0))
    c = EmbeddedCluster(tmp_path / "home", cfg, persist=False)
    await c.start()
    rec = Recorder()
    rv = (await c.client.list("Pod", "default")).resource_version

    async def pump(kind: str) -> None:
        async for ev in c.client.watch(kind, "default", resource_version=rv):
            if ev.type != "BOOKMARK":
                rec.add(kind, ev.object, ev.type == "DELETED")

    tasks = [asyncio.create_task(pump(k)) for k in ("PyTorchJob", "PodGroup", "Pod")]
    try:
        yield c, rec
    finally:
        for t in tasks:
            t.cancel()
        await c.stop(kill_pods=True)


async def two_teams(c: EmbeddedCluster) -> None:
    for team in ("team-a", "team-b"):
        await c.client.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                               "metadata": {"name": team}, "spec": {"weight": 1, "reclaimable": True}})


def pods_of(rec: Recorder, job_name: str) -> list[str]:
    return sorted({n for _, k, n, _ in rec.rows if k == "Pod" and n.startswith(job_name + "-")})


async def running_pods(c: EmbeddedCluster, prefix: str) -> list[str]:
    pods = (await c.client.list("Pod", "default")).items
    return sorted(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith(prefix)
                  and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


async def finished(c: EmbeddedCluster, name: str) -> str:
    return job_state(await c.client.get("PyTorchJob", name, "default"))


async def test_a_reclaims_its_share_from_the_surplus_of_b_and_both_succeed(plane):
    c, rec = plane
    await two_teams(c)
    # the master outlasts B and the recreated workers: A succeeds after all its workers did
    await c.client.create(job("a", 8, 8, queue="team-a", min_available=4, master_seconds=22))
    await wait_until(lambda: _all_running(c, "a-", 8), 30, "all of a's pods running")
    t_b = asyncio.get_running_loop().time()
    await c.client.create(job("b", 4, 3, queue="team-b"))
    # within one period or so A's four pods above minAvailable go, its last workers first
    victims = ["a-worker-3", "a-worker-4", "a-worker-5", "a-worker-6"]

    async def evicted() -> bool:
        pods = {p["metadata"]["name"]: p for p in (await c.client.list("Pod", "default")).items}
        return all(any(x.get("type") == "DisruptionTarget" for x in (pods.get(v, {}).get("status") or {})
                       .get("conditions") or []) or v not in pods for v in victims)
    await wait_until(evicted, 10, "a's surplus evicted")
    assert asyncio.get_running_loop().time() - t_b < 6
    await wait_until(lambda: _all_running(c, "b-", 4), 30, "b running")
    # A's recreated pods wait while B runs: team-a holds its deserved share
    assert await running_pods(c, "a-") == ["a-master-0", "a-worker-0", "a-worker-1", "a-worker-2"]
    await wait_until(lambda: _equals(finished(c, "b"), "Succeeded"), 30, "b Succeeded")
    await wait_until(lambda: _equals(finished(c, "a"), "Succeeded"), 60, "a Succeeded")
    await wait_until(lambda: rec.states("PyTorchJob", "a")[-1:] == ["Succeeded"] and all(
        rec.states("Pod", v)[-1:] == ["Completed"] for v in victims), 10, "the watches to catch up")
    # the recreated instances ran only once B's pods were ending (each frees its CPU)
    b_end = min(rec.first_time("Pod", n, "Completed") for n in pods_of(rec, "b"))
    for v in victims:
        assert len(rec.uids[v]) == 2, rec.states("Pod", v)
        starts = [t for t, k, n, s in rec.rows if k == "Pod" and n == v and s == "Running"]
        assert len(starts) == 2 and starts[1] > b_end, rec.states("Pod", v)
    assert all(n == 0 for n in rec.restarts.values()), rec.restarts
    assert rec.states("PyTorchJob", "a") == ["", "Created", "Running", "Restarting", "Running", "Succeeded"]
    a = await c.client.get("PyTorchJob", "a", "default")
    assert not a["status"].get("restartCount") and not any(
        r.get("failed") or r.get("restarts") for r in a["status"]["replicaStatuses"].values())
    restarting = [e["message"] for e in (await c.client.list("Event", "default")).items
                  if e["reason"] == "PyTorchJobRestarting" and e["involvedObject"]["name"] == "a"]
    assert len(restarting) == 1 and re.fullmatch(
        r'PyTorchJob default/a is restarting because 4 pods were preempted: volcano: reclaiming for queue "team-b" '
        r"\(below its deserved share\): default/b-(master|worker)-\d of job default/b", restarting[0]), restarting
    # the evicted instances' logs are kept beside the new ones
    text = "".join([x async for x in c.log_provider.job_logs("default", "PyTorchJob", "a")])
    for v in victims:
        assert text.count(f"==> {v}/pytorch (instance ") == 2
    assert text.count("got SIGTERM") == 4


async def test_a_gang_with_nothing_to_spare_is_evicted_whole_and_runs_again_after_b(plane):
    c, rec = plane
    await two_teams(c)
    await c.client.create(job("a", 8, 4, queue="team-a", master_seconds=8))  # minAvailable: all 8
    await wait_until(lambda: _all_running(c, "a-", 8), 30, "all of a's pods running")
    await c.client.create(job("b", 4, 3, queue="team-b"))
    await wait_until(lambda: _all_running(c, "b-", 4), 30, "b running")
    assert await running_pods(c, "a-") == []
    await wait_until(lambda: _equals(finished(c, "b"), "Succeeded"), 30, "b Succeeded")
    await wait_until(lambda: _equals(finished(c, "a"), "Succeeded"), 60, "a Succeeded")
    await wait_until(lambda: rec.states("PodGroup", "a")[-1:] == ["<deleted>"], 10, "the watches to catch up")
    b_end = min(rec.first_time("Pod", n, "Completed") for n in pods_of(rec, "b"))
    for n in pods_of(rec, "a"):
        starts = [t for t, k, m, s in rec.rows if k == "Pod" and m == n and s == "Running"]
        assert len(starts) == 2 and starts[1] > b_end, rec.states("Pod", n)
    assert all(n == 0 for n in rec.restarts.values()), rec.restarts
    # the whole gang gone, the PodGroup waits for admission again, then runs
    pg_states = [s for s in rec.states("PodGroup", "a") if s]
    assert pg_states == ["Inqueue", "Running", "Pending", "Inqueue", "Running", "<deleted>"], pg_states


async def test_a_high_priority_job_preempts_a_low_one_in_its_queue(plane):
    c, rec = plane
    for name, value in (("low", 10), ("high", 1000)):
        await c.client.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": name}, "value": value})
    await c.client.create(job("low", 8, 4, priority_class="low", master_seconds=6))
    await wait_until(lambda: _all_running(c, "low-", 8), 30, "low running")
    await c.client.create(job("high", 4, 3, priority_class="high"))
    await wait_until(lambda: _all_running(c, "high-", 4), 30, "high running")
    await wait_until(lambda: _equals(finished(c, "high"), "Succeeded"), 30, "high Succeeded")
    await wait_until(lambda: _equals(finished(c, "low"), "Succeeded"), 60, "low Succeeded")
    events = [e for e in (await c.client.list("Event", "default")).items if e["reason"] == "Preempted"]
    assert events and events[0]["involvedObject"]["name"] == "low"
    assert "by job default/high (priority 1000 > 10)" in events[0]["message"]
    assert all(n == 0 for n in rec.restarts.values()), rec.restarts


async def test_equal_priorities_wait_their_turn(plane):
    c, rec = plane
    await c.client.create(job("first", 8, 4))
    await wait_until(lambda: _all_running(c, "first-", 8), 30, "first running")
    await c.client.create(job("second", 4, 1))
    await wait_until(lambda: _equals(finished(c, "first"), "Succeeded"), 30, "first Succeeded")
    await wait_until(lambda: _equals(finished(c, "second"), "Succeeded"), 30, "second Succeeded")
    assert all(len(u) == 1 for u in rec.uids.values()), rec.uids


async def _all_running(c: EmbeddedCluster, prefix: str, n: int) -> bool:
    return len(await running_pods(c, prefix)) == n


async def _equals(value, want) -> bool:
    return (await value) == want


async def test_an_elastic_job_preempted_above_its_minimum_keeps_running_with_fewer_workers(plane):
    # Issue 20: an elastic PyTorchJob's gang is its minimum (4 of 8 workers here), so a higher
    # priority job takes only the workers above it, highest index first; the job stays Running on
    # the others (no restart, no Restarting), gets its workers back when room returns, and
    # succeeds when a worker does.
    c, rec = plane
    for name, value in (("low", 10), ("high", 1000)):
        await c.client.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": name}, "value": value})
    low = job("low", 9, 7, priority_class="low")
    specs = low["spec"]["pytorchReplicaSpecs"]
    del specs["Master"]
    specs["Worker"]["replicas"] = 8
    low["spec"]["elasticPolicy"] = {"minReplicas": 4, "maxReplicas": 8, "rdzvBackend": "c10d"}
    await c.client.create(low)
    await wait_until(lambda: _all_running(c, "low-", 8), 30, "low's 8 workers running")
    pg = await c.client.get("PodGroup", "low", "default")
    assert pg["spec"]["minMember"] == 4
    await c.client.create(job("high", 4, 2, priority_class="high"))
    await wait_until(lambda: _all_running(c, "high-", 4), 30, "high running")
    assert await running_pods(c, "low-") == [f"low-worker-{i}" for i in range(4)]
    assert await finished(c, "low") == "Running"
    await wait_until(lambda: _equals(finished(c, "high"), "Succeeded"), 30, "high Succeeded")
    await wait_until(lambda: _all_running(c, "low-", 8), 30, "low's workers back")
    await wait_until(lambda: _equals(finished(c, "low"), "Succeeded"), 60, "low Succeeded")
    assert "Restarting" not in rec.states("PyTorchJob", "low"), rec.states("PyTorchJob", "low")
    for i in range(8):
        starts = [s for s in rec.states("Pod", f"low-worker-{i}") if s == "Running"]
        assert len(starts) == (1 if i < 4 else 2), (i, rec.states("Pod", f"low-worker-{i}"))
    assert all(n == 0 for n in rec.restarts.values()), rec.restarts
    status = (await c.client.get("PyTorchJob", "low", "default"))["status"]
    assert status.get("restartCount", 0) == 0
