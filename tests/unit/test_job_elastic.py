"""Elastic PyTorchJobs in the job reconciler (issue 20): scaling the Worker replicas adds and removes
pods and Services (highest index first), the gang stays the minimum, the env stays consistent, a
failing worker restarts per restartPolicy and counts toward backoffLimit (SEMANTICS S2, S3), and the
job succeeds as soon as a worker does (the original's elastic rule)."""
from __future__ import annotations

from phalanx.api.constants import LABEL_REPLICA_INDEX
from tests.unit.test_job_core import started
from tests.unit.test_job_preemption import PreemptWorld
from tests.unit.test_job_world import env_of, pytorch_job

ELASTIC = {"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 4, "maxRestarts": 3}


def elastic_job(workers: int = 2, backoff: int = 3, policy: str = "OnFailure") -> dict:
    job = pytorch_job(master=None, workers=workers, backoff=backoff, policy=policy)
    job["spec"]["elasticPolicy"] = dict(ELASTIC)
    job["spec"]["nprocPerNode"] = "1"
    return job


def running_world(workers: int = 2, **kw):
    w = started(elastic_job(workers, **kw))
    w.running(*w.pods)
    w.settle()
    assert w.state() == "Running"
    return w


def scale(w, n: int) -> None:
    w.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = n
    w.job["metadata"]["generation"] = w.job["metadata"].get("generation", 1) + 1


def test_scale_up_adds_the_next_workers_and_their_services_with_the_same_rendezvous():
    w = running_world(2)
    first = env_of(w.pods["pytest-worker-0"])
    scale(w, 4)
    plans = w.settle()
    assert sorted(p["metadata"]["name"] for x in plans for p in x.create_pods) == ["pytest-worker-2",
                                                                                  "pytest-worker-3"]
    assert sorted(w.services) == [f"pytest-worker-{i}" for i in range(4)]
    assert not any(x.delete_pods for x in plans)
    for n in ("pytest-worker-2", "pytest-worker-3"):
        e = env_of(w.pods[n])
        assert e["PET_NNODES"] == "2:4" and e["PET_RDZV_ENDPOINT"] == first["PET_RDZV_ENDPOINT"]
        assert e["PET_RDZV_BACKEND"] == "c10d" and e["PET_MAX_RESTARTS"] == "3" and "RANK" not in e
        assert w.pods[n]["metadata"]["labels"][LABEL_REPLICA_INDEX] == n[-1]
    assert w.podgroup is not None and w.podgroup["spec"]["minMember"] == 2  # the gang is the minimum
    w.running("pytest-worker-2", "pytest-worker-3")
    w.settle()
    assert w.status["replicaStatuses"]["Worker"]["active"] == 4 and w.state() == "Running"
    assert "restartCount" not in w.status


def test_scale_down_removes_the_highest_indexes_and_counts_no_failure():
    w = running_world(4)
    scale(w, 2)
    plan = w.step()
    assert sorted(plan.delete_pods) == ["pytest-worker-2", "pytest-worker-3"]
    w.finish_deletions()
    w.settle()
    assert sorted(w.pods) == ["pytest-worker-0", "pytest-worker-1"]
    assert sorted(w.services) == ["pytest-worker-0", "pytest-worker-1"]
    assert w.state() == "Running" and "restartCount" not in w.status
    assert w.status["replicaStatuses"]["Worker"]["active"] == 2


def test_a_failing_worker_restarts_in_place_and_counts_toward_backoff_limit():
    w = running_world(3, backoff=2)
    w.crashloop("pytest-worker-1", restarts=0)  # failed, backing off before its first restart
    w.settle()
    assert w.state() == "Running" and w.status["restartCount"] == 1
    w.running("pytest-worker-1", restarts=1, last_exit=1)
    w.settle()
    w.crashloop("pytest-worker-1", restarts=1)
    w.settle()
    assert w.status["restartCount"] == 2 and w.state() == "Running"
    w.running("pytest-worker-1", restarts=2, last_exit=1)
    w.settle()
    w.crashloop("pytest-worker-1", restarts=2)
    w.settle()
    assert w.state() == "Failed"  # backoffLimit 2 granted two restarts; the third failure fails the job
    failed = [c for c in w.status["conditions"] if c["type"] == "Failed"][-1]
    assert failed["reason"] == "BackoffLimitExceeded"


def test_a_worker_failed_under_exit_code_is_recreated_and_the_job_restarts():
    w = running_world(2, policy="ExitCode")
    w.failed("pytest-worker-1", exit_code=137)  # retryable (SIGKILL)
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-1"]
    w.finish_deletions()
    w.settle()
    assert "pytest-worker-1" in w.pods and w.status["restartCount"] == 1
    assert w.state() in ("Restarting", "Running")


def test_the_job_succeeds_when_one_worker_succeeded():
    w = running_world(3)
    w.succeeded("pytest-worker-0")
    w.settle()
    assert w.state() == "Succeeded"
    ok = [c for c in w.status["conditions"] if c["type"] == "Succeeded"][-1]
    assert ok["message"] == "PyTorchJob default/pytest successfully completed."


def _preempt_world(workers: int, master: bool = False):
    job = elastic_job(workers)
    if master:
        job["spec"]["pytorchReplicaSpecs"]["Master"] = pytorch_job()["spec"]["pytorchReplicaSpecs"]["Master"]
    w = PreemptWorld(job)
    w.gone = {}
    w.step()
    w.admit()
    w.settle()
    w.running(*w.pods)
    w.settle()
    return w


def test_workers_evicted_above_the_minimum_are_lost_capacity_not_a_restart():
    w = _preempt_world(4)
    w.evict("pytest-worker-2", "pytest-worker-3")
    w.settle()
    assert w.state() == "Running" and "restartCount" not in w.status
    for n in ("pytest-worker-2", "pytest-worker-3"):
        w.ended(n)
    w.settle()
    w.forget("pytest-worker-2", "pytest-worker-3")
    plans = w.settle()
    assert sorted(p["metadata"]["name"] for x in plans for p in x.create_pods) == ["pytest-worker-2",
                                                                                  "pytest-worker-3"]
    assert w.state() == "Running" and "restartCount" not in w.status
    assert "Restarting" not in [t for t, _, _ in w.conditions()]


def test_an_eviction_below_the_minimum_restarts_the_elastic_job_as_any_gang():
    w = _preempt_world(2)  # at its minimum: every worker is the gang
    w.evict("pytest-worker-1")
    w.settle()
    assert w.state() == "Restarting" and "preempted" in w.status["conditions"][-1]["message"]
    assert "restartCount" not in w.status


def test_an_evicted_master_restarts_the_elastic_job():
    w = _preempt_world(4, master=True)
    w.evict("pytest-master-0")
    w.settle()
    assert w.state() == "Restarting"
