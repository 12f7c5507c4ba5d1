"""A pod the scheduler evicts (DisruptionTarget True, reason PreemptionByScheduler, then a
graceful delete) is a preemption of the job, never a failure: no restart counted, never
Failed, not counted in replicaStatuses.failed; Restarting names the preemption until every
replica runs again; the pods are recreated under the same names once the old ones are gone."""
from __future__ import annotations

import copy

import pytest

from phalanx.controller.job import Plan, ReconcileOptions, reconcile
from phalanx.objects.clock import format_time
from tests.unit.test_framework_jax import jax_job
from tests.unit.test_framework_mpi import LOCAL, MPIWorld, mpi_job
from tests.unit.test_framework_paddle import paddle_job
from tests.unit.test_framework_xgboost import xgb_job
from tests.unit.test_job_world import World, pytorch_job, tf_job

PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
RECLAIM = 'volcano: reclaiming for queue "team-b" (below its deserved share): default/b-worker-0 of job default/b'
PREEMPT = ("volcano: preempting to accommodate a higher priority pod: default/hi-master-0 of job default/hi "
           "(priority 1000)")
POLICIES = ["Never", "OnFailure", "Always", "ExitCode"]


class PreemptWorld(World):
    """The fake world, plus the shell's memory of pods seen deleted with the eviction mark."""

    gone: dict[str, tuple[str, str]] = {}

    def reconcile(self) -> Plan:
        inputs = (copy.deepcopy(self.job), [copy.deepcopy(p) for p in self.pods.values()],
                  [copy.deepcopy(s) for s in self.services.values()], copy.deepcopy(self.podgroup))
        before = copy.deepcopy(inputs)
        others = [copy.deepcopy(o) for o in getattr(self, "others", {}).values()]
        plan = reconcile(*inputs, self.now, self.fw, self.options, others, preempted_gone=dict(self.gone))
        assert inputs == before, "reconcile must not change its inputs"
        return plan

    def mark(self, *names: str, message: str = RECLAIM) -> None:
        """The scheduler's first eviction step: the DisruptionTarget condition."""
        for n in names:
            conds = self.pods[n]["status"].setdefault("conditions", [])
            conds.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                          "message": message, "lastTransitionTime": format_time(self.now)})

    def evict(self, *names: str, message: str = RECLAIM) -> None:
        """Both steps: the condition, then the graceful delete (the pod terminates)."""
        self.mark(*names, message=message)
        for n in names:
            self.pods[n]["metadata"]["deletionTimestamp"] = format_time(self.now)

    def ended(self, n: str, exit_code: int = 143, phase: str = "Failed") -> None:
        """The node agent saw the container end after SIGTERM (the pod still exists)."""
        pod = self.pods[n]
        pod["status"]["phase"] = phase
        name = pod["spec"]["containers"][0]["name"]
        pod["status"]["containerStatuses"] = [{
            "name": name, "ready": False, "restartCount": 0, "lastState": {},
            "state": {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}}]

    def forget(self, *names: str) -> None:
        """The pods are gone; the shell remembers their last state (uid, eviction message)."""
        for n in names:
            pod = self.pods.pop(n)
            msg = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
            self.gone = {**self.gone, n: (pod["metadata"]["uid"], msg)}


class MPIPreemptWorld(PreemptWorld, MPIWorld):
    """PreemptWorld's reconcile over MPIWorld's owned objects."""


def running(job: dict, pods: list[str] | None = None, options: ReconcileOptions | None = None) -> PreemptWorld:
    w = (MPIPreemptWorld(job, options=options) if job["kind"] == "MPIJob" else PreemptWorld(job, options=options))
    w.step()
    w.admit()
    w.settle()
    w.running(*(pods or list(w.pods)))
    w.settle()
    assert w.state() == "Running", w.conditions()
    return w


def restarting_message(n: int, message: str = RECLAIM, job: str = "default/pytest", kind: str = "PyTorchJob") -> str:
    pods = f"{n} pods were preempted" if n > 1 else "1 pod was preempted"
    return f"{kind} {job} is restarting because {pods}: {message}"


def assert_uncounted(w: World) -> None:
    st = w.status
    assert "restartCount" not in st, st
    for rs in st["replicaStatuses"].values():
        assert "failed" not in rs and "restarts" not in rs, st["replicaStatuses"]
    assert not [c for c in st.get("conditions", []) if c["type"] == "Failed"]


def assert_restarting(w: World, message: str) -> None:
    conds = w.status["conditions"]
    assert (conds[-1]["type"], conds[-1]["status"], conds[-1]["reason"]) == ("Restarting", "True",
                                                                            "PyTorchJobRestarting")
    assert conds[-1]["message"] == message
    assert not [c for c in conds if c["type"] == "Running" and c["status"] == "True"]


def recover(w: World, pods: list[str]) -> None:
    """The old pods are gone: the same names are created (Pending), then run."""
    plan = w.step()
    assert sorted(p["metadata"]["name"] for p in plan.create_pods) == sorted(pods)
    w.settle()
    assert all(w.pods[n]["status"] == {"phase": "Pending"} for n in pods)
    assert w.state() == "Restarting"  # recreated, not running yet
    w.running(*pods)
    w.settle()
    assert w.state() == "Running"
    assert [c for c in w.status["conditions"] if c["type"] in ("Running", "Restarting")] == \
        [next(c for c in w.status["conditions"] if c["type"] == "Running")]


# -------------------------------------------------------------- the whole gang evicted, each stage


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("stage", ["terminating", "ended-143", "ended-0", "gone-seen", "gone-unseen"])
def test_an_evicted_gang_is_a_preemption_never_a_failure(policy, stage):
    w = running(pytorch_job(policy=policy, backoff=0))
    old = {n: w.pods[n]["metadata"]["uid"] for n in PODS}
    if stage == "gone-unseen":
        w.evict(*PODS)
        w.forget(*PODS)  # gone before any reconcile saw them being deleted
    else:
        w.evict(*PODS)
        if stage.startswith("ended"):
            for n in PODS:
                w.ended(n, exit_code=int(stage.split("-")[1]), phase="Failed" if stage == "ended-143" else "Succeeded")
        elif stage == "gone-seen":
            w.step()  # seen terminating
            w.forget(*PODS)
    w.advance(5)
    plan = w.step()
    assert_uncounted(w)
    assert_restarting(w, restarting_message(4))
    assert ("Warning", "PyTorchJobRestarting", restarting_message(4)) in w.events
    if stage.startswith("gone"):
        assert sorted(p["metadata"]["name"] for p in plan.create_pods) == PODS
    else:
        assert plan.create_pods == [] and plan.delete_pods == []  # the scheduler deletes; they still exist
        assert w.step().is_empty()
        w.finish_deletions()
        recover(w, PODS)
    assert all(w.pods[n]["metadata"]["uid"] != old[n] for n in PODS)
    w.succeeded("pytest-master-0")
    w.settle()
    assert w.state() == "Succeeded" and "restartCount" not in w.status
    assert len([e for e in w.events if e[1] == "PyTorchJobRestarting"]) == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_one_worker_preempted_while_the_master_runs_keeps_restarting_until_it_runs_again(policy):
    w = running(pytorch_job(policy=policy, backoff=0))
    w.evict("pytest-worker-1", message=PREEMPT)
    plan = w.step()
    assert_restarting(w, restarting_message(1, PREEMPT))
    assert [e for e in plan.events if e[1] == "PyTorchJobRestarting"] == [
        ("Warning", "PyTorchJobRestarting", restarting_message(1, PREEMPT))]
    w.ended("pytest-worker-1", exit_code=143)
    assert w.step().is_empty()
    w.finish_deletions()
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-worker-1"]
    assert w.settle()[-1].is_empty()
    assert_restarting(w, restarting_message(1, PREEMPT))  # the master runs, the worker waits for the gang
    w.running("pytest-worker-1")
    w.step()
    assert w.state() == "Running"
    assert_uncounted(w)


def test_a_pod_marked_but_not_yet_deleted_is_still_running():
    w = running(pytorch_job(policy="Never", backoff=0))
    w.mark(*PODS)
    plan = w.step()
    assert w.state() == "Running" and plan.events == [] and plan.delete_pods == []
    assert w.status["podRestarts"]["pytest-worker-0"]["preempted"] == RECLAIM
    w.forget(*PODS)  # deleted and gone before the next reconcile
    plan = w.step()
    assert_uncounted(w)
    assert_restarting(w, restarting_message(4))
    assert sorted(p["metadata"]["name"] for p in plan.create_pods) == PODS


def test_a_pod_gone_unseen_without_its_last_state_was_deleted_from_outside():
    w = running(pytorch_job(policy="OnFailure", backoff=3))
    w.evict("pytest-worker-0")
    w.pods.pop("pytest-worker-0")  # the shell did not remember it either
    w.step()
    assert w.status["restartCount"] == 1


# -------------------------------------------------------------- failure rules do not apply


def test_exit_code_with_a_permanent_code_after_the_eviction_does_not_fail_the_job():
    w = running(pytorch_job(policy="ExitCode", backoff=0))
    w.evict("pytest-worker-0")
    w.ended("pytest-worker-0", exit_code=1)
    w.step()
    assert_uncounted(w)
    assert w.state() == "Restarting"


def test_a_preempted_pod_that_ended_without_being_deleted_is_deleted_and_recreated():
    w = running(pytorch_job(policy="Never", backoff=0))
    w.mark("pytest-worker-2")
    w.ended("pytest-worker-2", exit_code=137)
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-2"] and plan.create_pods == []
    assert_uncounted(w)
    assert_restarting(w, restarting_message(1))
    plan = w.step()  # World deletes an ended pod at once
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-worker-2"]


def test_a_preempted_master_that_exits_0_does_not_make_the_job_succeed():
    w = running(pytorch_job(policy="OnFailure", backoff=0))
    w.evict(*PODS)
    w.ended("pytest-master-0", exit_code=0, phase="Succeeded")
    w.step()
    assert w.state() == "Restarting" and "completionTime" not in w.status
    assert "succeeded" not in w.status["replicaStatuses"]["Master"]


def test_backoff_limit_0_with_a_preemption_leaves_the_job_running():
    w = running(pytorch_job(policy="OnFailure", backoff=0))
    w.evict("pytest-worker-0", "pytest-worker-1")
    for n in ("pytest-worker-0", "pytest-worker-1"):
        w.ended(n)
    w.step()
    w.finish_deletions()
    recover(w, ["pytest-worker-0", "pytest-worker-1"])
    assert_uncounted(w)
    # A real failure afterwards is still the one that exhausts backoffLimit 0.
    w.failed("pytest-worker-0", exit_code=1)
    w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")


def test_a_real_failure_then_a_preemption_names_the_preemption_and_counts_only_the_failure():
    w = running(pytorch_job(policy="OnFailure", backoff=3))
    w.failed("pytest-worker-0", exit_code=1)
    w.step()
    assert w.state() == "Restarting" and w.status["restartCount"] == 1
    w.evict("pytest-worker-1", "pytest-master-0")
    plan = w.step()
    assert w.status["restartCount"] == 1
    assert_restarting(w, restarting_message(2))
    assert ("Warning", "PyTorchJobRestarting", restarting_message(2)) in plan.events


def test_a_second_preemption_after_the_recovery_is_reported_again():
    w = running(pytorch_job(policy="Never", backoff=0))
    for round_ in range(2):
        w.evict("pytest-worker-0")
        w.step()
        w.finish_deletions()
        recover(w, ["pytest-worker-0"])
    assert len([e for e in w.events if e[1] == "PyTorchJobRestarting"]) == 2
    assert_uncounted(w)


def test_suspend_while_preempted_deletes_nothing_twice():
    w = running(pytorch_job(policy="Never", backoff=0))
    w.evict(*PODS)
    w.step()
    w.job["spec"]["runPolicy"]["suspend"] = True
    plan = w.step()
    assert plan.delete_pods == []  # already being deleted
    assert w.state() == "Suspended"


# -------------------------------------------------------------- every kind


KINDS = [
    ("PyTorchJob", pytorch_job(policy="Never", backoff=0)),
    ("TFJob", tf_job(ps_policy="Never", worker_policy="Never", backoff=0)),
    ("XGBoostJob", xgb_job(policy="Never", backoff=0)),
    ("PaddleJob", paddle_job(policy="Never", backoff=0)),
    ("JAXJob", jax_job(policy="Never", backoff=0)),
    ("MPIJob", mpi_job(backoff=0)),
]


@pytest.mark.parametrize("kind,job", KINDS, ids=[k for k, _ in KINDS])
def test_every_kind_treats_an_evicted_gang_as_a_preemption(kind, job):
    w = running(job, options=LOCAL if kind == "MPIJob" else None)
    pods = sorted(w.pods)
    w.evict(*pods)
    for n in pods:
        w.ended(n, exit_code=143)
    plan = w.step()
    name = job["metadata"]["name"]
    msg = restarting_message(len(pods), job=f"default/{name}", kind=kind)
    assert w.conditions()[-1] == ("Restarting", "True", f"{kind}Restarting"), w.conditions()
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Warning", f"{kind}Restarting", msg) in plan.events
    assert_uncounted(w)
    w.finish_deletions()
    plan = w.step()
    assert sorted(p["metadata"]["name"] for p in plan.create_pods) == pods
    w.settle()
    w.running(*pods)
    w.settle()
    assert w.state() == "Running"
    assert_uncounted(w)
