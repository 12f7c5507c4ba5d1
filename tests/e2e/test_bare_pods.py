"""Bare pods (no job, no PodGroup, schedulerName defaulted to default-scheduler)
are gang-scheduled as a group of one: on the embedded cluster they Run and
Succeed, their PodGroup goes with them; `kubectl run` then `kubectl logs` works."""
from __future__ import annotations

import json
from typing import Iterator

import pytest

from phalanx.api.constants import ANNOTATION_GROUP_NAME
from phalanx.objects.errors import NotFound
from tests.e2e.test_kubectl import Plane, started_plane
from tests.scenarios.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def hello_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": name, "image": "busybox", "command": ["sh", "-c", "echo hi"],
                                     "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}}}]}}


async def test_a_bare_pod_runs_and_succeeds_and_its_podgroup_goes_with_it(cluster):
    c = cluster.client
    created = await c.create(hello_pod("hello"))
    assert created["spec"]["schedulerName"] == "default-scheduler"
    uid = created["metadata"]["uid"]
    group = f"podgroup-{uid}"

    async def phase() -> str | None:
        return ((await c.get("Pod", "hello", "default")).get("status") or {}).get("phase")

    await wait_until(lambda: _is(phase(), "Succeeded"), 30, "the bare pod Succeeded")
    pod = await c.get("Pod", "hello", "default")
    assert pod["metadata"]["annotations"][ANNOTATION_GROUP_NAME] == group
    assert pod["spec"]["nodeName"] == "las1"
    pg = await c.get("PodGroup", group, "default")
    assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "default"
    assert pg["spec"]["minResources"] == {"cpu": "100m", "memory": "32Mi"}
    assert [(r["kind"], r["uid"]) for r in pg["metadata"]["ownerReferences"]] == [("Pod", uid)]
    # The scheduler took the group through admission to the end of its one task.
    await wait_until(lambda: _is(_pg_phase(c, group), "Completed"), 10, "the PodGroup Completed")
    assert "hi\n" in await cluster.log_provider.read("default", "hello")

    await c.delete("Pod", "hello", "default")
    await wait_until(lambda: _is(_pg_phase(c, group), None), 15, "the PodGroup garbage-collected")


async def _pg_phase(c, name: str) -> str | None:
    try:
        return ((await c.get("PodGroup", name, "default")).get("status") or {}).get("phase")
    except NotFound:
        return None


async def _is(value, expected) -> bool:
    return (await value) == expected


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[Plane]:
    yield from started_plane(tmp_path_factory.mktemp("barepods"), {"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]})


def test_kubectl_run_then_logs_prints_hi(plane):
    plane.kubectl("run", "hello", "--image=busybox", "--restart=Never", "--command", "--", "sh", "-c", "echo hi")

    def succeeded() -> dict | None:
        pod = json.loads(plane.kubectl("get", "pod", "hello", "-o", "json").stdout)
        return pod if (pod.get("status") or {}).get("phase") == "Succeeded" else None

    pod = plane.wait(succeeded, 30, "pod hello Succeeded")
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert plane.kubectl("logs", "hello").stdout == "hi\n"
    group = pod["metadata"]["annotations"][ANNOTATION_GROUP_NAME]
    assert group == f"podgroup-{pod['metadata']['uid']}"
    pg = plane.json("get", "podgroup", group)
    assert pg["spec"]["minMember"] == 1
    plane.kubectl("delete", "pod", "hello")
    plane.wait(lambda: plane.kubectl("get", "podgroup", group, check=False).returncode != 0, 15,
               "the PodGroup garbage-collected")
