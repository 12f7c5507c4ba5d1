"""The embedded cluster's HPA controller shell (controller/autoscaler/controller.py) over the in-memory store
with a stand-in for the pods' measurements: the job's scale read and written, the status and events in
kube-controller-manager's words, the scale errors of each kind of target; and the node's pod CPU reading
(node/cpuusage.py) on real processes."""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.cluster import EmbeddedCluster
from phalanx.config import ConfigError, parse_config
from phalanx.controller.autoscaler.controller import HPAController, scale_of
from phalanx.controller.autoscaler.decide import Scale, Settings
from phalanx.node.cpuusage import CpuReading, PodCpuUsage, process_tree_cpu
from phalanx.node.instances import Instance
from phalanx.node.shim import cpu_seconds
from phalanx.objects.clock import FakeClock, format_time
from phalanx.store.store import Store
from tests.unit.test_job_hpa import manifest

T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=timezone.utc)
SEL = "training.kubeflow.org/job-name=ej,training.kubeflow.org/operator-name=pytorchjob-controller," \
      "training.kubeflow.org/replica-type=worker"
REASON = "cpu resource utilization (percentage of request) above target"


def hpa(name: str = "ej", kind: str = "PyTorchJob", target: str = "ej", api_version: str = "kubeflow.org/v1",
        **spec) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"kind": kind, "name": target, "apiVersion": api_version}, "minReplicas": 1,
                     "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}], **spec}}


class Readings:
    """Stands in for the node: cores by pod uid."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.cores, self.asked = clock, {}, []

    def __call__(self, uid: str):
        self.asked.append(uid)
        cores = self.cores.get(uid)
        return None if cores is None else CpuReading({"pytorch": cores}, self.clock.now(), 15.0)


@pytest.fixture
async def world():
    clock = FakeClock(T0)
    store = Store(None, clock, admission=admit)
    client = LocalClient(store)
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    readings = Readings(clock)
    ctl = HPAController(client, clock, readings, Settings(sync_period=0.05))
    await ctl.informer.start()
    await ctl.informer.wait_synced()
    try:
        yield client, ctl, readings, clock
    finally:
        await ctl.informer.stop()
        store.close()


async def running_worker(client, clock, index: int = 0) -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"ej-worker-{index}", "namespace": "default",
        "labels": dict(kv.split("=") for kv in SEL.split(","))},
        "spec": {"containers": [{"name": "pytorch", "image": "x", "command": ["python3"],
                                 "resources": {"requests": {"cpu": "500m"}}}]}}
    made = await client.create(pod)
    started = format_time(clock.now() - timedelta(minutes=10))
    made["status"] = {"phase": "Running", "startTime": started,
                      "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}
    return await client.update_status(made)


async def elastic_job_with_status(client) -> dict:
    job = await client.create(manifest())
    job["status"] = {"replicaStatuses": {"Worker": {"active": 1, "selector": SEL}}}
    return await client.update_status(job)


async def synced(ctl, client, name="ej"):
    """Let the informer see the latest HPA, then run one sync of it."""
    want = (await client.get("HorizontalPodAutoscaler", name, "default"))["metadata"]["resourceVersion"]
    for _ in range(200):
        cached = ctl.informer.get("default", name)
        if cached is not None and cached["metadata"]["resourceVersion"] == want:
            break
        await _tick()
    return await ctl.reconcile(f"default/{name}")


async def _tick():
    await asyncio.sleep(0.005)


async def events_of(client, name="ej") -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in (await client.list("Event", "default")).items
            if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == "HorizontalPodAutoscaler"]


def conditions(hpa_: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"]) for c in hpa_["status"]["conditions"]}


async def test_s15_a_busy_worker_scales_the_job_up_through_its_worker_replicas(world):
    client, ctl, readings, clock = world
    await elastic_job_with_status(client)
    pod = await running_worker(client, clock)
    readings.cores[pod["metadata"]["uid"]] = 1.0  # 200% of its 500m request against 50%
    await client.create(hpa())
    result = await synced(ctl, client)
    assert result is not None and result.requeue_after == 0.05
    job = await client.get("PyTorchJob", "ej", "default")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    got = await client.get("HorizontalPodAutoscaler", "ej", "default")
    assert got["status"]["desiredReplicas"] == 3 and got["status"]["currentReplicas"] == 1
    assert got["status"]["lastScaleTime"] == format_time(T0)
    assert got["status"]["currentMetrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageUtilization": 200, "averageValue": "1"}}}]
    assert conditions(got) == {"AbleToScale": ("True", "SucceededRescale"), "ScalingActive": ("True", "ValidMetricFound"),
                               "ScalingLimited": ("True", "TooManyReplicas")}
    assert await events_of(client) == [("Normal", "SuccessfulRescale", f"New size: 3; reason: {REASON}")]

    # Next sync: the job says 3, the worker pods are not there yet (missing on a scale up count as 0).
    clock.advance(15)
    await synced(ctl, client)
    got = await client.get("HorizontalPodAutoscaler", "ej", "default")
    assert got["status"]["currentReplicas"] == 3 and got["status"]["desiredReplicas"] == 3
    assert conditions(got)["AbleToScale"] == ("True", "ReadyForNewScale")


async def test_an_idle_worker_is_left_alone_and_pods_not_running_are_not_measured(world):
    client, ctl, readings, clock = world
    await elastic_job_with_status(client)
    pod = await running_worker(client, clock)
    readings.cores[pod["metadata"]["uid"]] = 0.1  # 20% against 50%: ceil(0.4 x 1) is the one there is
    await client.create(hpa())
    await synced(ctl, client)
    job = await client.get("PyTorchJob", "ej", "default")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    got = await client.get("HorizontalPodAutoscaler", "ej", "default")
    assert got["status"]["desiredReplicas"] == 1 and "lastScaleTime" not in got["status"]
    assert conditions(got)["ScalingLimited"] == ("False", "DesiredWithinRange")
    pending = await client.create({**pod, "metadata": {**pod["metadata"], "name": "ej-worker-1", "uid": None,
                                                       "resourceVersion": None}, "status": None})
    readings.asked.clear()
    await synced(ctl, client)
    assert pending["metadata"]["uid"] not in readings.asked


async def test_scale_errors_name_the_target_as_kube_apiserver_would(world):
    client, ctl, _, _ = world
    await client.create({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf", "namespace": "default"},
                         "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                             {"name": "tensorflow", "image": "x", "command": ["python3"]}]}}}}}})
    cases = {
        "gone": (hpa("gone", target="nosuch"), 'pytorchjobs.kubeflow.org "nosuch" not found'),
        "tf": (hpa("tf", kind="TFJob", target="tf"), 'tfjobs.kubeflow.org "tf" not found'),
        "foo": (hpa("foo", kind="Foo", api_version="foo.io/v1"), 'no matches for kind "Foo" in group "foo.io"'),
        "lease": (hpa("lease", kind="Lease", api_version="coordination.k8s.io/v1"),
                  "the server could not find the requested resource"),
    }
    for name, (obj, why) in cases.items():
        await client.create(obj)
        await synced(ctl, client, name)
        got = await client.get("HorizontalPodAutoscaler", name, "default")
        [cond] = got["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("AbleToScale", "False", "FailedGetScale")
        assert cond["message"] == f"the HPA controller was unable to get the target's current scale: {why}"
        assert await events_of(client, name) == [("Warning", "FailedGetScale", why)]


async def test_a_job_without_its_selector_yet_cannot_be_measured(world):
    client, ctl, _, _ = world
    await client.create(manifest())
    await client.create(hpa())
    await synced(ctl, client)
    got = await client.get("HorizontalPodAutoscaler", "ej", "default")
    assert conditions(got) == {"AbleToScale": ("True", "SucceededGetScale"), "ScalingActive": ("False", "InvalidSelector")}
    assert ("Warning", "SelectorRequired", "selector is required") in await events_of(client)


async def test_a_deleted_hpa_is_forgotten(world):
    client, ctl, _, _ = world
    await client.create(hpa("gone", target="nosuch"))
    await synced(ctl, client, "gone")
    assert "default/gone" in ctl.histories
    await client.delete("HorizontalPodAutoscaler", "gone", "default")
    for _ in range(200):
        if ctl.informer.get("default", "gone") is None:
            break
        await _tick()
    assert await ctl.reconcile("default/gone") is None
    assert "default/gone" not in ctl.histories


def test_the_scale_subresource_of_a_job_as_the_crd_maps_it():
    job = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}},
           "status": {"replicaStatuses": {"Worker": {"active": 1, "selector": "a=b"}}}}
    assert scale_of(job, "pytorchReplicaSpecs") == Scale(2, 1, "a=b")
    assert scale_of({"spec": {}}, "pytorchReplicaSpecs") == Scale(0, 0, "")


# --------------------------------------------------------------------------- the node's reading


def _instance(pid: int, started: datetime, container_id: str = "c-1") -> Instance:
    return Instance(container="pytorch", container_id=container_id, restart_count=0, backoff_count=0,
                    log_path=Path("/dev/null"), started_at=started, pid=pid)


class FakeRuntime:
    def __init__(self, instances: dict) -> None:
        self.by_uid = instances

    def instances(self, uid: str) -> dict:
        return self.by_uid.get(uid, {})


BURN = ("import subprocess, sys, time\n"
        "child = 'import time\\nwhile time.process_time() < 0.3: pass\\nprint(1, flush=True)\\ntime.sleep(60)'\n"
        "p = subprocess.Popen([sys.executable, '-c', child], stdout=subprocess.PIPE)\n"
        "p.stdout.readline()\nprint(1, flush=True)\ntime.sleep(60)\n")


def test_a_pods_cpu_is_its_process_tree_averaged_over_the_window():
    proc = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # the grandchild burned 0.3 s of cpu
        own, tree = cpu_seconds(proc.pid), process_tree_cpu(proc.pid)
        assert own is not None and tree is not None and tree >= own + 0.29
        clock = FakeClock(T0 + timedelta(seconds=10))
        rt = FakeRuntime({"u1": {"pytorch": _instance(proc.pid, T0)}})
        usage = PodCpuUsage(lambda: [rt], clock, window=5.0)
        first = usage.usage("u1")
        assert first is not None and first.window == 10.0 and first.timestamp == clock.now()
        assert abs(first.containers["pytorch"] - tree / 10.0) < 0.01  # since the container's start
        clock.advance(5)
        second = usage.usage("u1")
        assert second is not None and second.window == 5.0
        assert second.containers["pytorch"] < 0.02  # both sleep now
        clock.advance(1)
        assert usage.usage("u1").window == 1.0  # type: ignore[union-attr]  # under a window: from the last baseline
        rt.by_uid["u1"] = {"pytorch": _instance(proc.pid, T0 + timedelta(seconds=15), "c-2")}  # restarted
        assert usage.usage("u1").window == 1.0  # type: ignore[union-attr]  # from the new container's start
        assert usage.usage("nobody") is None
    finally:
        for p in [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        proc.wait()
    time.sleep(0.01)
    assert process_tree_cpu(proc.pid) is None


# --------------------------------------------------------------------------- the cluster's settings


def test_the_cluster_config_sets_the_controllers_flags(tmp_path):
    nodes = [{"name": "n1", "cpu": 2, "memory": "1Gi"}]
    cfg = parse_config({"nodes": nodes, "autoscaler": {"syncPeriod": 0.5, "downscaleStabilization": 60,
                                                       "tolerance": 0.05, "cpuInitializationPeriod": 0,
                                                       "initialReadinessDelay": 1}})
    assert (cfg.autoscaler.sync_period, cfg.autoscaler.downscale_stabilization, cfg.autoscaler.tolerance) == \
        (0.5, 60.0, 0.05)
    assert parse_config({"nodes": nodes}).autoscaler.sync_period == 15.0
    for bad, why in (({"syncPeriod": 0}, "autoscaler.syncPeriod: must be a positive number"),
                     ({"tolerance": -1}, "autoscaler.tolerance: must be a non-negative number"),
                     ({"every": 1}, "autoscaler: unknown field(s) ['every']")):
        with pytest.raises(ConfigError, match=f"^cluster config: {re.escape(why)}$"):
            parse_config({"nodes": nodes, "autoscaler": bad})
    c = EmbeddedCluster(tmp_path, cfg, persist=False)
    try:
        s = c.autoscaler.settings
        assert (s.sync_period, s.downscale_stabilization, s.tolerance) == (0.5, 60.0, 0.05)
        assert (s.readiness.cpu_initialization_period, s.readiness.initial_readiness_delay) == (0.0, 1.0)
        assert c.pod_cpu.window == 0.5
    finally:
        c.store.close()
