"""docs/SEMANTICS.md S11: the original's known bugs, one regression test each, named after it.

(The fifth, "Running pods being deleted counted as failed under Never", is
``test_job_restarts.test_s11_running_pod_being_deleted_is_not_counted_as_failed_under_never``.)
"""
from __future__ import annotations

import copy

from tests.unit.test_job_core import PODS, assert_fixpoint, started
from tests.unit.test_job_world import World, pytorch_job, tf_job


def test_s11_replicas_zero_does_not_create_and_delete_a_pod_forever():
    # kubeflow#1709: GetPodSlices sized from maxIndex 0, so with replicas 0 the original creates
    # worker-0, deletes it as out of range on the next reconcile, creates it again, ...
    w = started(tf_job(extra={"Chief": 1, "Evaluator": 0}))
    pods = ["tftest-chief-0", "tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
    assert sorted(w.pods) == pods
    w.running(*pods)
    for _ in range(5):
        plan = w.step()
        assert not any(p["metadata"]["name"].startswith("tftest-evaluator") for p in plan.create_pods)
        assert not any(n.startswith("tftest-evaluator") for n in plan.delete_pods + plan.delete_services)
        assert not any(s["metadata"]["name"].startswith("tftest-evaluator") for s in plan.create_services)
    assert sorted(w.pods) == pods and sorted(w.services) == pods
    assert w.state() == "Running"
    assert_fixpoint(w)


def test_s11_exit_code_permanent_failure_of_a_pytorchjob_has_a_completion_time_and_ttl_works():
    # docs/REFERENCE.md §3.7: PyTorch/Paddle/JAX jobs failed through the ExitCode permanent path never got
    # completionTime, so with ttlSecondsAfterFinished every later reconcile errored and the job
    # was never deleted.
    w = started(pytorch_job(policy="ExitCode", ttlSecondsAfterFinished=10))
    w.running(*PODS)
    w.step()
    w.failed("pytest-worker-1", exit_code=2)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert w.status["completionTime"] == w.status["conditions"][-1]["lastTransitionTime"]
    assert plan.requeue_after == 10 and not plan.delete_job
    w.advance(10)
    assert w.step().delete_job


def _run_with_master_success_and_worker_failure(job: dict) -> tuple[list, list[str]]:
    w = World(job)
    w.step()
    w.admit()
    w.settle()
    w.running(*PODS)
    w.step()
    w.succeeded("pytest-master-0")
    w.failed("pytest-worker-0", exit_code=1)  # in the same reconcile, under Never
    w.step()
    created = [p["metadata"]["name"] for plan in w.plans for p in plan.create_pods]
    return w.conditions(), created


def test_s11_replica_types_are_evaluated_in_a_fixed_order_not_map_order():
    # The original walks the replica map in Go's random order and returns on success, so the
    # same pod states could end Succeeded or Failed from one run to the next.
    job = pytorch_job(policy="Never")
    specs = job["spec"]["pytorchReplicaSpecs"]
    reordered = copy.deepcopy(job)
    reordered["spec"]["pytorchReplicaSpecs"] = {"Worker": specs["Worker"], "Master": specs["Master"]}
    results = {repr(_run_with_master_success_and_worker_failure(j)) for j in (job, reordered) for _ in range(3)}
    assert len(results) == 1
    conditions, created = _run_with_master_success_and_worker_failure(reordered)
    assert created == PODS  # Master first, then Worker 0..2
    # The documented order (Master, then Worker) with the original's early return on success.
    assert conditions[-1] == ("Succeeded", "True", "PyTorchJobSucceeded")


def test_s11_podgroup_is_not_rewritten_on_every_reconcile():
    # The original updates the PodGroup on every reconcile; with Volcano writing its status, every
    # job event then causes a PodGroup write, which causes a job event again (status churn).
    w = started()
    w.running(*PODS)
    w.step()
    for phase, running in (("Running", 1), ("Running", 4), ("Running", 3)):
        w.podgroup["status"] = {"phase": phase, "running": running}  # the scheduler's writes
        w.podgroup["spec"]["minTaskMember"] = {"master": 1, "worker": 3}  # a field we do not own
        w.podgroup["metadata"]["resourceVersion"] = str(int(w.podgroup["metadata"].get("resourceVersion", "1")) + 1)
        plan = w.step()
        assert plan.podgroup_update is None and plan.podgroup_create is None
        assert plan.is_empty(), plan
