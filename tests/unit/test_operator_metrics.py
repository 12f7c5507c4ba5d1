"""The operator's counters: fed from what the job shell wrote, each job condition counted once per
transition to True, pods/PodGroups per successful create/delete, over fakes and the in-memory store."""
from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from phalanx.controller.job import Plan, ReconcileOptions
from phalanx.controller.job.controller import JobController
from phalanx.controller.metrics import FRAMEWORK_NAMES, JOB_STATES, OperatorMetrics, framework_name, job_state
from phalanx.objects.clock import format_time
from phalanx.objects.errors import AlreadyExists, Conflict, NotFound
from tests.unit.test_job_controller import KEY, full_plan, make, obj, store_client, wait_for  # noqa: F401
from tests.unit.test_job_world import NOW, pytorch_job

JOB = {"job_namespace": "default", "framework": "pytorch"}


def value(m: OperatorMetrics, name: str, labels: dict | None = None) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def cond(ctype: str, status: str = "True") -> dict:
    t = format_time(NOW)
    return {"type": ctype, "status": status, "reason": f"PyTorchJob{ctype}", "message": "",
            "lastUpdateTime": t, "lastTransitionTime": t}


def with_status(*types: str) -> dict:
    job = pytorch_job()
    job["status"] = {"conditions": [cond(t) for t in types]}
    return job


def test_framework_names_are_the_originals():
    assert {k: framework_name(k) for k in FRAMEWORK_NAMES} == {
        "PyTorchJob": "pytorch", "TFJob": "tensorflow", "MPIJob": "mpi", "XGBoostJob": "xgboost",
        "PaddleJob": "paddle", "JAXJob": "jax"}


def test_each_instance_has_its_own_registry():
    a, b = OperatorMetrics(), OperatorMetrics(CollectorRegistry())
    a.created_pods.inc()
    assert value(a, "created_pods_total") == 1 and value(b, "created_pods_total") == 0


async def test_a_condition_becoming_true_is_counted_once_when_its_status_write_succeeds():
    jc, _, _ = make()
    m = jc.metrics
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(status={"conditions": [cond("Created")]}))
    assert value(m, "training_operator_jobs_created_total", JOB) == 1
    # the same condition again (the job already has it): no transition
    await jc.apply(KEY, "PyTorchJob", with_status("Created"),
                   Plan(status={"conditions": [cond("Created"), cond("Running")]}))
    assert value(m, "training_operator_jobs_created_total", JOB) == 1
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Running"),
                   Plan(status={"conditions": [cond("Created"), cond("Restarting")]}))
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Restarting"),
                   Plan(status={"conditions": [cond("Created"), cond("Restarting"), cond("Running", "False")]}))
    assert value(m, "training_operator_jobs_restarted_total", JOB) == 1  # still Restarting: one transition
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Running"),
                   Plan(status={"conditions": [cond("Created"), cond("Restarting")]}))
    assert value(m, "training_operator_jobs_restarted_total", JOB) == 2  # Running, then Restarting again
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Running"),
                   Plan(status={"conditions": [cond("Created"), cond("Running", "False"), cond("Succeeded")]}))
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Succeeded"),
                   Plan(status={"conditions": [cond("Created"), cond("Succeeded")], "completionTime": "x"}))
    assert value(m, "training_operator_jobs_successful_total", JOB) == 1
    assert value(m, "training_operator_jobs_failed_total", JOB) == 0


async def test_a_refused_status_write_counts_nothing():
    jc, client, _ = make()
    client.fail[("update_status", "PyTorchJob", "pytest")] = Conflict("pytorchjobs", "pytest")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(status={"conditions": [cond("Created"), cond("Failed")]}))
    client.fail[("update_status", "PyTorchJob", "pytest")] = NotFound("pytorchjobs", "pytest")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(status={"conditions": [cond("Created"), cond("Failed")]}))
    for name in ("created", "failed"):
        assert value(jc.metrics, f"training_operator_jobs_{name}_total", JOB) == 0


async def test_pods_and_podgroups_count_what_was_written():
    jc, client, _ = make()
    m = jc.metrics
    plan = full_plan()  # deletes PodGroup, p-old, s-old; creates s-new, p-new
    plan.podgroup_create = obj("PodGroup", "pg")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert [value(m, n) for n in ("created_pods_total", "deleted_pods_total", "failed_pods_total",
                                  "created_pod_groups_total", "deleted_pod_groups_total")] == [1, 1, 0, 1, 1]
    client.fail[("create", "Pod", "p-new")] = AlreadyExists("pods", "p-new")
    client.fail[("delete", "Pod", "p-old")] = NotFound("pods", "p-old")
    client.fail[("delete", "PodGroup", "pytest")] = NotFound("podgroups", "pytest")
    client.fail[("create", "PodGroup", "pg")] = Conflict("podgroups", "pg")
    plan = full_plan()
    plan.status = None
    plan.podgroup_create = obj("PodGroup", "pg")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), plan)
    assert [value(m, n) for n in ("created_pods_total", "deleted_pods_total",
                                  "created_pod_groups_total", "deleted_pod_groups_total")] == [1, 1, 1, 1]


async def test_a_failed_pod_deleted_for_a_restart_is_a_failed_pod():
    jc, _, _ = make()
    failed = {**obj("Pod", "p-failed"), "status": {"phase": "Failed"}}
    shut = {**obj("Pod", "p-shut"), "status": {"phase": "Failed", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}}
    jc.pods.objs = {("default", "p-failed"): failed, ("default", "p-shut"): shut,
                    ("default", "p-run"): {**obj("Pod", "p-run"), "status": {"phase": "Running"}}}
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Running"),
                   Plan(delete_pods=["p-failed", "p-run", "p-shut"]))  # p-shut: recreated, not a failure
    assert value(jc.metrics, "deleted_pods_total") == 3 and value(jc.metrics, "failed_pods_total") == 1
    # a finished job deleting its failed pods (cleanPodPolicy) restarts nothing
    await jc.apply(KEY, "PyTorchJob", with_status("Created", "Failed"), Plan(delete_pods=["p-failed"]))
    assert value(jc.metrics, "deleted_pods_total") == 4 and value(jc.metrics, "failed_pods_total") == 1


async def test_a_job_deleted_after_its_ttl_is_counted():
    jc, client, _ = make()
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(delete_job=True))
    client.fail[("delete", "PyTorchJob", "pytest")] = NotFound("pytorchjobs", "pytest")
    await jc.apply(KEY, "PyTorchJob", pytorch_job(), Plan(delete_job=True))
    assert value(jc.metrics, "training_operator_jobs_deleted_total", JOB) == 1


async def test_a_job_run_to_its_end_over_the_store(store_client):  # noqa: F811
    """Created, gated PodGroup, pods, a retryable failure (ExitCode 137: a restart), success."""
    client, clock = store_client
    registry = CollectorRegistry()
    jc = JobController(client, clock, ReconcileOptions(init_container_command=["initwait"]), kinds=("PyTorchJob",),
                       metrics=OperatorMetrics(registry))
    m = jc.metrics
    assert not jc.synced()
    task = asyncio.create_task(jc.run())
    try:
        await wait_for(lambda: _true(jc.synced()), what="informers synced")
        job = pytorch_job(workers=1, policy="ExitCode")
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            job["metadata"].pop(k)
        await client.create(job)
        pg = await wait_for(lambda: _first(client, "PodGroup"), what="PodGroup")
        pg["status"] = {"phase": "Inqueue"}
        await client.update(pg)
        await wait_for(lambda: _pods(client, 2), what="2 pods")
        assert value(m, "training_operator_jobs_created_total", JOB) == 1
        assert (value(m, "created_pod_groups_total"), value(m, "created_pods_total")) == (1, 2)

        worker = await client.get("Pod", "pytest-worker-0", "default")
        worker["status"] = {"phase": "Failed", "containerStatuses": [
            {"name": "pytorch", "restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
        await client.update_status(worker)

        async def recreated():
            return value(m, "created_pods_total") == 3 or None
        await wait_for(recreated, what="the failed worker recreated")
        assert value(m, "failed_pods_total") == 1 and value(m, "deleted_pods_total") == 1
        assert value(m, "training_operator_jobs_restarted_total", JOB) == 1

        for name in ("pytest-master-0", "pytest-worker-0"):
            pod = await wait_for(lambda n=name: _get(client, n), what=name)
            pod["status"] = {"phase": "Succeeded", "containerStatuses": [
                {"name": "pytorch", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
            await client.update_status(pod)

        async def done():
            return value(m, "deleted_pod_groups_total") == 1 or None
        await wait_for(done, what="the PodGroup deleted")
        assert value(m, "training_operator_jobs_successful_total", JOB) == 1
        # later rounds of the finished job (a label change enqueues it) count nothing again
        j = await client.get("PyTorchJob", "pytest", "default")
        j["metadata"].setdefault("labels", {})["touch"] = "1"
        await client.update(j)
        await jc.drain(2.0)
        assert [value(m, f"training_operator_jobs_{n}_total", JOB)
                for n in ("created", "successful", "failed", "restarted", "deleted")] == [1, 1, 0, 1, 0]
        assert [value(m, n) for n in ("created_pods_total", "deleted_pods_total", "failed_pods_total",
                                      "created_pod_groups_total", "deleted_pod_groups_total")] == [3, 1, 1, 1, 1]
        assert value(m, "phalanx_job_restarts_total", JOB) == 1  # the job's status.restartCount
        assert {st: value(m, "phalanx_jobs", {**JOB, "state": st}) for st in JOB_STATES} == {
            "Created": 0, "Running": 0, "Restarting": 0, "Suspended": 0, "Succeeded": 1, "Failed": 0}
    finally:
        await jc.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _true(v: bool) -> bool:
    return v


async def _first(client, kind):
    items = (await client.list(kind, "default")).items
    return items[0] if items else None


async def _pods(client, n):
    items = (await client.list("Pod", "default")).items
    return items if len(items) == n else None


async def _get(client, name):
    try:
        return await client.get("Pod", name, "default")
    except NotFound:
        return None


@pytest.mark.parametrize("kind", sorted(FRAMEWORK_NAMES))
def test_status_written_labels_every_kind(kind):
    m = OperatorMetrics()
    m.status_written(kind, "ns1", None, {"conditions": [cond("Created")]})
    assert value(m, "training_operator_jobs_created_total",
                 {"job_namespace": "ns1", "framework": FRAMEWORK_NAMES[kind]}) == 1


def test_restarts_count_what_the_status_write_adds_to_restart_count():
    m = OperatorMetrics()
    m.status_written("TFJob", "ns1", None, {"restartCount": 2})
    m.status_written("TFJob", "ns1", {"restartCount": 2}, {"restartCount": 2})  # unchanged: nothing
    m.status_written("TFJob", "ns1", {"restartCount": 2}, {"restartCount": 5})
    m.status_written("TFJob", "ns1", {"restartCount": 5}, {})  # dropped (a reset): no negative count
    m.status_written("TFJob", "ns1", {}, {"restartCount": "7"})  # not an integer: ignored
    m.status_written("TFJob", "ns1", {}, {"restartCount": True})
    assert value(m, "phalanx_job_restarts_total", {"job_namespace": "ns1", "framework": "tensorflow"}) == 5
    assert value(m, "phalanx_job_restarts_total", JOB) == 0


def job_in(ns: str, *conds: dict) -> dict:
    return {"metadata": {"name": "j", "namespace": ns}, "status": {"conditions": list(conds)}}


def test_a_jobs_state_is_its_last_true_condition():
    assert job_state(job_in("a")) == "Unknown"
    assert job_state({"status": "weird"}) == "Unknown" and job_state(None) == "Unknown"
    assert job_state(job_in("a", cond("Created"))) == "Created"
    assert job_state(job_in("a", cond("Created"), cond("Running"))) == "Running"
    assert job_state(job_in("a", cond("Created"), cond("Running", "False"), cond("Succeeded"))) == "Succeeded"
    assert job_state(job_in("a", cond("Created"), cond("Suspended", "False"))) == "Created"
    assert job_state(job_in("a", cond("Created"), {"type": 3, "status": "True"})) == "Created"


def test_jobs_by_state_are_counted_from_the_caches_at_each_scrape():
    m = OperatorMetrics()
    assert m.registry.get_sample_value("phalanx_jobs", {**JOB, "state": "Running"}) is None  # no source yet
    jobs = [("PyTorchJob", job_in("default", cond("Created"), cond("Running"))),
            ("PyTorchJob", job_in("default", cond("Created"), cond("Running"))),
            ("PyTorchJob", job_in("default")),
            ("TFJob", job_in("ns1", cond("Created"), cond("Failed"))),
            ("TFJob", {"metadata": {}}), ("TFJob", "not a job")]  # no namespace: skipped
    m.job_objects = lambda: jobs
    tf = {"job_namespace": "ns1", "framework": "tensorflow"}
    assert {st: value(m, "phalanx_jobs", {**JOB, "state": st}) for st in (*JOB_STATES, "Unknown")} == {
        "Created": 0, "Running": 2, "Restarting": 0, "Suspended": 0, "Succeeded": 0, "Failed": 0, "Unknown": 1}
    assert {st: value(m, "phalanx_jobs", {**tf, "state": st}) for st in JOB_STATES if value(
        m, "phalanx_jobs", {**tf, "state": st})} == {"Failed": 1}
    assert m.registry.get_sample_value("phalanx_jobs", {**tf, "state": "Running"}) == 0  # every state reported
    assert m.registry.get_sample_value("phalanx_jobs", {**tf, "state": "Unknown"}) is None
    jobs.clear()  # the jobs deleted: their series go
    assert m.registry.get_sample_value("phalanx_jobs", {**JOB, "state": "Running"}) is None
