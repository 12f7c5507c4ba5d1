"""Seed 000 (PyTorchJob), scenarios P1-P4, on real processes with 30 s scaled to ~2 s."""
from __future__ import annotations

import asyncio
import json

import pytest

from phalanx.cli import describe as describe_mod
from phalanx.node.network import PORT_RANGE
from phalanx.objects.errors import ApiError, NotFound
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e

PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]


def is_subsequence(seq: list[str], order: list[str]) -> bool:
    it = iter(order)
    return all(any(s == o for o in it) for s in seq)


async def _get(client, kind, name, ns="default"):
    try:
        return await client.get(kind, name, ns)
    except NotFound:
        return None


async def test_p1_normal_run_order_of_states(cluster, recorder):
    # docs/REFERENCE.md P1: Created -> Running (master Running) -> Succeeded (master Completed);
    # PodGroup Inqueue -> Running, deleted after success; pods kept (cleanPodPolicy None).
    job = scaled(load_example("pytorchjob.yaml")[0], 2)
    await cluster.client.create(job)
    c = cluster.client

    async def done():
        j = await c.get("PyTorchJob", "pytest", "default")
        if job_state(j) != "Succeeded":
            return False
        pods = (await c.list("Pod", "default")).items
        return len(pods) == 4 and all(p["status"].get("phase") == "Succeeded" for p in pods)

    await wait_until(done, 30, "job Succeeded and every pod Completed")
    await wait_until(lambda: recorder.states("PodGroup", "pytest")[-1:] == ["<deleted>"], 5, "PodGroup deleted")

    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    pg = recorder.states("PodGroup", "pytest")
    assert pg[:3] == ["", "Inqueue", "Running"], pg
    assert pg[-1] == "<deleted>"
    master = recorder.states("Pod", "pytest-master-0")
    assert master[0] == "Pending" and master[-1] == "Completed", master
    assert is_subsequence(master, ["Pending", "ContainerCreating", "Running", "Completed"]), master
    for w in PODS[1:]:
        states = recorder.states("Pod", w)
        assert is_subsequence(states, ["Pending", "Init:0/1", "PodInitializing", "Running", "Completed"]), states
        assert "Init:0/1" in states and "Running" in states, states
    # The job turns Running only once the master runs, and Succeeded once the master completed.
    assert recorder.first_time("PyTorchJob", "pytest", "Running") >= recorder.first_time("Pod", "pytest-master-0", "Running")
    assert recorder.first_time("PyTorchJob", "pytest", "Succeeded") >= recorder.first_time("Pod", "pytest-master-0", "Completed")

    j = await c.get("PyTorchJob", "pytest", "default")
    types = [(x["type"], x["status"], x["reason"]) for x in j["status"]["conditions"]]
    assert types == [("Created", "True", "PyTorchJobCreated"), ("Running", "False", "PyTorchJobRunning"),
                     ("Succeeded", "True", "PyTorchJobSucceeded")]
    assert j["status"]["conditions"][-1]["message"] == "PyTorchJob pytest is successfully completed."
    assert j["status"]["startTime"] and j["status"]["completionTime"]
    # All four bound to the one node (binpack), all still there.
    pods = (await c.list("Pod", "default")).items
    assert sorted(p["metadata"]["name"] for p in pods) == PODS
    assert {p["spec"]["nodeName"] for p in pods} == {"las1"}
    assert await _get(c, "PodGroup", "pytest") is None


async def test_p1_podgroup_spec(cluster):
    job = scaled(load_example("pytorchjob.yaml")[0], 1)
    await cluster.client.create(job)
    pg = await wait_until(lambda: _get(cluster.client, "PodGroup", "pytest"), 5, "PodGroup created")
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["queue"] == "default"
    from phalanx.objects.quantity import parse_quantity
    mr = pg["spec"]["minResources"]
    assert parse_quantity(mr["cpu"]) == 4
    assert parse_quantity(mr["memory"]) == 400 * 1024**2
    ref = pg["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("PyTorchJob", "pytest", True)


async def test_p2_queue_capability_blocks_gang_and_raising_it_lets_it_run(cluster, recorder):
    c = cluster.client
    q = await wait_until(lambda: _get(c, "Queue", "default", None), 5, "default queue")
    q["spec"]["capability"] = {"cpu": 2}
    await c.update(q)
    await c.create(scaled(load_example("pytorchjob.yaml")[0], 1))

    async def refused():
        pg = await _get(c, "PodGroup", "pytest")
        conds = (pg or {}).get("status", {}).get("conditions") or []
        return pg if any(x.get("type") == "Unschedulable" and x.get("status") == "True" for x in conds) else None

    pg = await wait_until(refused, 10, "PodGroup Unschedulable for queue capability")
    msg = next(x["message"] for x in pg["status"]["conditions"] if x["type"] == "Unschedulable")
    assert 'queue "default"' in msg and "cpu" in msg and "4" in msg and "2" in msg, msg
    await asyncio.sleep(0.5)  # a few scheduling cycles: nothing may start meanwhile
    pods = (await c.list("Pod", "default")).items
    assert all(not p["spec"].get("nodeName") for p in pods), "no pod may be bound while the gang cannot fit"
    assert all(p.get("status", {}).get("phase", "Pending") == "Pending" for p in pods)
    job = await c.get("PyTorchJob", "pytest", "default")
    assert job_state(job) == "Created"
    # describe explains why.
    events = (await c.list("Event", "default", field_selector="involvedObject.name=pytest")).items
    text = describe_mod.describe(job, {"events": events, "podgroup": pg})
    assert 'queue "default"' in text, text
    # Raising the capability lets the same job run, without resubmitting it.
    q = await c.get("Queue", "default")
    q["spec"]["capability"] = {"cpu": 8}
    await c.update(q)
    await wait_until(lambda: _state_is(c, "Succeeded"), 30, "job Succeeded after raising capability")


async def _state_is(c, state):
    return job_state(await c.get("PyTorchJob", "pytest", "default")) == state


def _env(pod: dict) -> dict[str, str]:
    c = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in c.get("env", [])}


async def test_p3_environment_of_master_and_workers(cluster):
    c = cluster.client
    job = scaled(load_example("pytorchjob.yaml")[0], 1)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "env; sleep 1"]
    await c.create(job)
    await wait_until(lambda: _state_is(c, "Succeeded"), 30, "job Succeeded")
    names_resolvable = cluster.network.nss_wrapper_available()
    master_svc = await c.get("Service", "pytest-master-0", "default")
    ports = json.loads(master_svc["metadata"]["annotations"]["phalanx.dev/host-ports"])
    port = str(ports["pytorchjob-port"])
    # The declared port unless it was taken: by a program (bound) or by another home on the machine (claimed, as a
    # test running beside this one); tests/unit/test_node_network.py and test_machine_claims.py check which.
    assert port == "23456" or PORT_RANGE[0] <= int(port) <= PORT_RANGE[1]
    addr = "pytest-master-0" if names_resolvable else master_svc["metadata"]["annotations"]["phalanx.dev/address"]
    for i, name in enumerate(PODS):
        pod = await c.get("Pod", name, "default")
        env = _env(pod)
        rank = str(i)
        expected = {
            "PYTHONUNBUFFERED": "1", "MASTER_PORT": port, "PET_MASTER_PORT": port,
            "MASTER_ADDR": addr, "PET_MASTER_ADDR": addr, "WORLD_SIZE": "4", "RANK": rank,
            "PET_NODE_RANK": rank, "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "4",
        }
        assert {k: env.get(k) for k in expected} == expected, name
        # ...and the process really saw them.
        text = await _log(cluster, name)
        for k, v in expected.items():
            assert f"{k}={v}\n" in text, (name, k)
    # Workers carry the init container that waits for the master; the master doesn't.
    assert (await c.get("Pod", "pytest-master-0", "default"))["spec"].get("initContainers") in (None, [])
    w = await c.get("Pod", "pytest-worker-0", "default")
    assert [ic["name"] for ic in w["spec"]["initContainers"]] == ["init-pytorch"]


async def _log(cluster, pod: str, container: str | None = None) -> str:
    return await cluster.log_provider.read("default", pod, container)


async def test_p4_master_replicas_2_rejected_and_nothing_stored(cluster):
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(ApiError) as e:
        await cluster.client.create(job)
    assert "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in e.value.message
    assert (await cluster.client.list("PyTorchJob", "default")).items == []
    assert (await cluster.client.list("PodGroup", "default")).items == []
