"""The elastic PyTorchJob's HorizontalPodAutoscaler (controller/job/hpa.py): the object as training-operator
v1.9's desiredHPA builds it, ReconcileHPA's create / update / delete-on-suspend, and the job controller
over the in-memory store (the HPA's events enqueue the job; cluster mode within the operator's RBAC)."""
from __future__ import annotations

import asyncio
import copy

import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import controller as ctl
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.hpa import HpaAction, desired_hpa, plan_hpa, semantic
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.deploy.rbac import OPERATOR_RULES
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import NotFound
from phalanx.store.store import Store
from tests.unit.test_install import Authorizing, _allowed

CPU50 = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
UID = "0b6b8e36-0000-4000-8000-000000000001"


def elastic_job(name: str = "ej", metrics: list | None = CPU50, low: int | None = 1, high: int | None = 3,
                suspend: bool = False, **extra) -> dict:
    ep: dict = {"minReplicas": low, "maxReplicas": high, **extra}
    if metrics is not None:
        ep["metrics"] = metrics
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
           "spec": {"elasticPolicy": {k: v for k, v in ep.items() if v is not None},
                    "runPolicy": {"suspend": suspend},
                    "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                        {"name": "pytorch", "image": "x", "command": ["python3", "-c", "pass"],
                         "resources": {"requests": {"cpu": "500m"}}}]}}}}}}
    out = admit(job)
    out["metadata"].update(uid=UID, resourceVersion="7")
    return out


# --------------------------------------------------------------------------- the object


def test_the_hpa_is_named_after_the_job_targets_its_scale_and_is_controlled_by_it():
    hpa = desired_hpa(elastic_job(), "PyTorchJob")
    assert hpa == {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "ej", "namespace": "default", "ownerReferences": [
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ej", "uid": UID, "controller": True,
             "blockOwnerDeletion": True}]},
        "spec": {"scaleTargetRef": {"kind": "PyTorchJob", "name": "ej", "apiVersion": "kubeflow.org/v1"},
                 "minReplicas": 1, "maxReplicas": 3, "metrics": CPU50},
    }
    assert admit(hpa)["spec"]["metrics"] == CPU50  # what the apiserver accepts as is


def test_no_hpa_without_an_elastic_policy_or_its_metrics():
    job = elastic_job()
    del job["spec"]["elasticPolicy"]
    assert desired_hpa(job, "PyTorchJob") is None
    assert desired_hpa(elastic_job(metrics=None), "PyTorchJob") is None
    assert plan_hpa(elastic_job(metrics=None), "PyTorchJob", None) == HpaAction()


def test_bounds_come_from_the_elastic_policy_defaults_when_one_is_unset():
    # SetDefaults: a missing minReplicas is maxReplicas (and the other way round).
    assert desired_hpa(elastic_job(low=None, high=4), "PyTorchJob")["spec"]["minReplicas"] == 4
    assert desired_hpa(elastic_job(low=2, high=None), "PyTorchJob")["spec"]["maxReplicas"] == 2


def test_an_empty_metrics_list_still_makes_an_hpa_without_metrics():
    """``metrics: []`` is not nil: the HPA is made, its metrics left out (the apiserver defaults 80% cpu)."""
    hpa = desired_hpa(elastic_job(metrics=[]), "PyTorchJob")
    assert "metrics" not in hpa["spec"]
    assert admit(hpa)["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 80}


# --------------------------------------------------------------------------- ReconcileHPA


def stored(hpa: dict, **spec) -> dict:
    out = admit(copy.deepcopy(hpa))
    out["metadata"].update(resourceVersion="12", uid="hpa-uid")
    out["spec"].update(spec)
    return out


def test_created_when_missing_unless_suspended():
    assert plan_hpa(elastic_job(), "PyTorchJob", None).create == desired_hpa(elastic_job(), "PyTorchJob")
    assert plan_hpa(elastic_job(suspend=True), "PyTorchJob", None) == HpaAction()


def test_deleted_while_suspended():
    current = stored(desired_hpa(elastic_job(), "PyTorchJob"))
    assert plan_hpa(elastic_job(suspend=True), "PyTorchJob", current) == HpaAction(delete=current)


def test_kept_when_the_spec_is_the_same_replaced_when_it_differs():
    job = elastic_job()
    current = stored(desired_hpa(job, "PyTorchJob"))
    assert plan_hpa(job, "PyTorchJob", current) == HpaAction()
    changed = stored(desired_hpa(job, "PyTorchJob"), maxReplicas=5)
    update = plan_hpa(job, "PyTorchJob", changed).update
    assert update is not None
    assert update["spec"]["maxReplicas"] == 3
    assert update["metadata"]["resourceVersion"] == "12"  # the current one's, as the original sets it
    assert "uid" not in update["metadata"] and update["metadata"]["ownerReferences"][0]["uid"] == UID


def test_quantities_compare_by_value_as_go_semantic_equality():
    avg = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "0.5"}}}]
    job = elastic_job(metrics=avg)
    current = stored(desired_hpa(job, "PyTorchJob"))
    assert current["spec"]["metrics"][0]["resource"]["target"]["averageValue"] == "500m"  # the apiserver's form
    assert plan_hpa(job, "PyTorchJob", current) == HpaAction()
    assert semantic({"metrics": avg}) == {"metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "500m"}}}]}


def test_a_job_managed_by_another_controller_gets_no_hpa():
    job = elastic_job()
    job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert plan_hpa(job, "PyTorchJob", None) == HpaAction()


def test_only_the_pytorch_framework_has_one():
    kinds = {k for k in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")
             if "HorizontalPodAutoscaler" in get_framework(k).owned_kinds(ReconcileOptions())}
    assert kinds == {"PyTorchJob"}


# --------------------------------------------------------------------------- the job controller


@pytest.fixture
async def world():
    clock = FakeClock()
    store = Store(None, clock, admission=admit)
    client = LocalClient(store)
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    jc = JobController(client, clock, ReconcileOptions(gang_scheduler=None, init_container_command=["w"]),
                       kinds=("PyTorchJob",))
    task = asyncio.create_task(jc.run())
    try:
        yield client
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        store.close()


async def eventually(probe, what: str):
    for _ in range(500):
        v = await probe()
        if v:
            return v
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def hpa_of(client, name="ej"):
    try:
        return await client.get("HorizontalPodAutoscaler", name, "default")
    except NotFound:
        return None


def manifest(**kw) -> dict:
    job = elastic_job(**kw)
    for k in ("uid", "resourceVersion"):
        job["metadata"].pop(k)
    return job


async def test_s15_the_controller_creates_updates_recreates_and_deletes_the_hpa(world):
    client = world
    await client.create(manifest())
    hpa = await eventually(lambda: hpa_of(client), "the HPA")
    job = await client.get("PyTorchJob", "ej", "default")
    assert hpa["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ej",
                                                   "uid": job["metadata"]["uid"], "controller": True,
                                                   "blockOwnerDeletion": True}]
    assert hpa["spec"] == {"scaleTargetRef": {"kind": "PyTorchJob", "name": "ej", "apiVersion": "kubeflow.org/v1"},
                           "minReplicas": 1, "maxReplicas": 3, "metrics": CPU50}

    # Someone edits the HPA: its event enqueues the job, which puts its spec back.
    await client.patch("HorizontalPodAutoscaler", "ej", "default", {"spec": {"maxReplicas": 9}})
    await eventually(lambda: _spec_is(client, "maxReplicas", 3), "the HPA's spec put back")

    # The job's bounds change: the HPA follows.
    job["spec"]["elasticPolicy"]["maxReplicas"] = 4
    await client.update(job)
    await eventually(lambda: _spec_is(client, "maxReplicas", 4), "the HPA updated")

    # Deleted from outside: made again (its DELETED event enqueues the job).
    await client.delete("HorizontalPodAutoscaler", "ej", "default")
    await eventually(lambda: hpa_of(client), "the HPA made again")

    # Suspended: gone, and not made again while the job stays suspended.
    await client.patch("PyTorchJob", "ej", "default", {"spec": {"runPolicy": {"suspend": True}}})
    await eventually(lambda: _gone(client), "the HPA deleted")
    await asyncio.sleep(0.1)
    assert await hpa_of(client) is None


async def _spec_is(client, key, value):
    hpa = await hpa_of(client)
    return hpa is not None and hpa["spec"].get(key) == value


async def _gone(client):
    return await hpa_of(client) is None


async def test_s15_the_hpas_status_writes_do_not_enqueue_the_job(world):
    client = world
    await client.create(manifest())
    hpa = await eventually(lambda: hpa_of(client), "the HPA")
    assert not ctl._may_change_plan({**hpa, "status": {"desiredReplicas": 3}}, hpa)
    assert ctl._may_change_plan({**hpa, "spec": {**hpa["spec"], "maxReplicas": 2}}, hpa)


async def test_in_cluster_mode_the_operator_role_suffices_for_the_hpa():
    assert all(_allowed(OPERATOR_RULES, "autoscaling", "horizontalpodautoscalers", v)
               for v in ("get", "list", "watch", "create", "update", "patch", "delete"))
    assert not _allowed(OPERATOR_RULES, "autoscaling", "horizontalpodautoscalers/status", "update")
    clock = FakeClock()
    store = Store(None, clock, admission=admit)
    raw = LocalClient(store)
    await raw.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    operator = Authorizing(raw, OPERATOR_RULES, "system:serviceaccount:phalanx-system:phalanx-operator")
    options = ReconcileOptions(gang_scheduler=None, local_runtime=False, resolvable_names=True)
    jc = JobController(operator, clock, options, kinds=["PyTorchJob"])
    task = asyncio.create_task(jc.run())
    try:
        await raw.create(manifest())
        await eventually(lambda: hpa_of(raw), "the HPA")
        assert operator.denied == []
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        store.close()
    assert ("autoscaling", "horizontalpodautoscalers", "create") in operator.used
