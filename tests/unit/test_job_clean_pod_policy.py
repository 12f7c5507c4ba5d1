"""What a finished job deletes and what it keeps, per cleanPodPolicy and pod state (fixed clock).

docs/SEMANTICS.md S5; docs/REFERENCE.md P5, C1, C2: a pod waiting for an in-place restart is not running.
"""
from __future__ import annotations

import pytest

from phalanx.controller.job import Plan
from phalanx.controller.job.restarts import awaits_restart
from tests.unit.test_job_core import PODS, assert_fixpoint, started
from tests.unit.test_job_world import World, pytorch_job, tf_job

MARK = "phalanx.dev/no-restart"
W0 = "pytest-worker-0"
RUN = {"running": {"startedAt": "2026-01-01T12:00:00Z"}}
CLBO = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container=pytorch"}}


def cs(state: dict, name: str = "pytorch", restarts: int = 0, last_exit: int | None = None) -> dict:
    last = {"terminated": {"exitCode": last_exit, "reason": "Error" if last_exit else "Completed"}} \
        if last_exit is not None else {}
    return {"name": name, "ready": "running" in state, "restartCount": restarts, "state": state, "lastState": last}


def term(code: int) -> dict:
    return {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed"}}


def pod(phase: str, containers: list[dict], inits: list[dict] | None = None, policy: str = "OnFailure",
        deleting: bool = False) -> dict:
    p = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
         "spec": {"restartPolicy": policy, "containers": [{"name": c["name"]} for c in containers]},
         "status": {"phase": phase, "containerStatuses": containers}}
    if inits is not None:
        p["status"]["initContainerStatuses"] = inits
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    return p


# --------------------------------------------------------------------------- the predicate


@pytest.mark.parametrize("case, p, waits", [
    ("crash loop after exit 1", pod("Running", [cs(CLBO, restarts=2, last_exit=1)]), True),
    ("just exited 1, restart not yet due", pod("Running", [cs(term(1), restarts=2, last_exit=1)]), True),
    ("first failure, no restart yet", pod("Running", [cs(term(1))]), True),
    ("Always: clean exit, restart due", pod("Running", [cs(term(0))], policy="Always"), True),
    ("Always: back-off after a clean exit", pod("Running", [cs(CLBO, restarts=1, last_exit=0)], policy="Always"), True),
    ("OnFailure: clean exit is the end", pod("Running", [cs(term(0))]), False),
    ("running", pod("Running", [cs(RUN, restarts=1, last_exit=1)]), False),
    ("starting", pod("Pending", [cs({"waiting": {"reason": "ContainerCreating"}})]), False),
    ("created, nothing reported", pod("Pending", []), False),
    ("one crash-looping, one running", pod("Running", [cs(CLBO, "a", 1, 1), cs(RUN, "b")]), False),
    ("one crash-looping, one done", pod("Running", [cs(CLBO, "a", 1, 1), cs(term(0), "b")]), True),
    ("one crash-looping, one not started", pod("Running", [cs(CLBO, "a", 1, 1),
                                                           cs({"waiting": {"reason": "ContainerCreating"}}, "b")]),
     False),
    ("init crash loop", pod("Pending", [cs({"waiting": {"reason": "PodInitializing"}})],
                            [cs(CLBO, "init", 1, 1)]), True),
    ("init running", pod("Pending", [cs({"waiting": {"reason": "PodInitializing"}})], [cs(RUN, "init")]), False),
    ("init done, main starting", pod("Pending", [cs({"waiting": {"reason": "PodInitializing"}})],
                                     [cs(term(0), "init")]), False),
    ("Never", pod("Running", [cs(term(1))], policy="Never"), False),
    ("Failed", pod("Failed", [cs(term(1), restarts=2, last_exit=1)]), False),
    ("being deleted", pod("Running", [cs(CLBO, restarts=1, last_exit=1)], deleting=True), False),
])
def test_s5_awaits_restart(case, p, waits):
    assert awaits_restart(p) is waits, case


# ----------------------------------------------------------------------- the decision matrix


def waiting_crash_loop(w: World) -> None:
    w.crashloop(W0, restarts=2)


def waiting_just_exited(w: World) -> None:
    w.pods[W0]["status"]["phase"] = "Running"
    w.pods[W0]["status"]["containerStatuses"] = [cs(term(1), restarts=2, last_exit=1)]


def waiting_init_crash_loop(w: World) -> None:
    w.pods[W0]["status"]["phase"] = "Pending"
    w.pods[W0]["status"]["containerStatuses"] = [cs({"waiting": {"reason": "PodInitializing"}})]
    w.pods[W0]["status"]["initContainerStatuses"] = [cs(CLBO, "init-pytorch", 2, 1)]


def running(w: World) -> None:
    w.running(W0)


def initialising(w: World) -> None:
    w.init(W0)


def pending(w: World) -> None:
    w.pods[W0]["status"] = {"phase": "Pending"}


def succeeded(w: World) -> None:
    w.succeeded(W0)


def failed(w: World) -> None:
    w.failed(W0, exit_code=1, restarts=2)


WAITING = [waiting_crash_loop, waiting_just_exited, waiting_init_crash_loop]
STATES = [*WAITING, running, initialising, pending, succeeded, failed]
# policy -> the states of worker-0 the finish keeps (marking those not ended); it deletes the others.
KEPT_UNDER = {"None": STATES, "Running": [*WAITING, succeeded, failed], "All": []}


def finish(policy: str, state, job_policy: str = "OnFailure") -> tuple[World, Plan]:
    """worker-0 seen in ``state`` in the reconcile that sees the master completed: the job Succeeds in it."""
    w = started(pytorch_job(cleanPodPolicy=policy, backoff=5, policy=job_policy))
    w.running(*PODS)
    w.step()
    state(w)
    w.succeeded("pytest-master-0")
    plan = w.step()
    assert w.state() == "Succeeded"
    return w, plan


@pytest.mark.parametrize("policy", ["None", "Running", "All"])
@pytest.mark.parametrize("state", STATES, ids=lambda s: s.__name__)
def test_s5_on_success_clean_pod_policy_and_pod_state_decide(policy, state):
    w, plan = finish(policy, state)
    kept = state in KEPT_UNDER[policy]
    assert (W0 in plan.delete_pods) is not kept and (W0 in plan.delete_services) is not kept
    ended = state in (succeeded, failed)
    # A kept pod that has not ended is marked never to restart: the node agent then ends a waiting one
    # at once (Failed), lets a running one run to its end.
    assert (W0 in plan.stop_restarting) is (kept and not ended)
    if kept and not ended:
        assert w.pods[W0]["metadata"]["annotations"][MARK] == "true"
    assert plan.podgroup_delete
    assert_fixpoint(w)
    assert (W0 in w.pods and not w.pods[W0]["metadata"].get("deletionTimestamp")) is kept


@pytest.mark.parametrize("policy", ["None", "Running", "All"])
@pytest.mark.parametrize("state", STATES, ids=lambda s: s.__name__)
def test_s5_on_failure_every_pod_goes_whatever_the_policy_and_state(policy, state):
    # docs/REFERENCE.md C2: backoffLimit 0, worker-1 fails and needs a restart: Failed, everything deleted.
    w = started(pytorch_job(cleanPodPolicy=policy, backoff=0))
    w.running(*PODS)
    w.step()
    state(w)
    w.crashloop("pytest-worker-1", restarts=0)
    plan = w.step()
    assert w.state() == "Failed"
    assert W0 in plan.delete_pods and W0 in plan.delete_services and plan.stop_restarting == []


@pytest.mark.parametrize("policy", ["None", "Running"])
def test_s5_a_kept_waiting_pod_ended_by_the_node_agent_stays_with_its_restart_count(policy):
    # docs/REFERENCE.md P5: the agent obeys the mark: Failed, terminated Error, exit 1, restartCount 2.
    w, plan = finish(policy, waiting_crash_loop)
    assert W0 not in plan.delete_pods and W0 in plan.stop_restarting
    counters = (w.status["restartCount"], w.status["replicaStatuses"]["Worker"]["restarts"])
    assert counters == (3, 3)  # two restarts and the failure it waited to restart, counted as seen
    w.failed(W0, exit_code=1, restarts=2)
    assert w.step().is_empty()
    assert_fixpoint(w)
    assert w.pods[W0]["status"]["containerStatuses"][0]["restartCount"] == 2
    assert (w.status["restartCount"], w.status["replicaStatuses"]["Worker"]["restarts"]) == counters


def test_s5_running_deletes_a_kept_pod_restarted_before_its_mark_arrived():
    # The restart raced the mark: the pod runs again, so cleanPodPolicy Running deletes it.
    w, plan = finish("Running", waiting_crash_loop)
    assert W0 in plan.stop_restarting
    w.running(W0, restarts=3, last_exit=1)
    plan = w.step()
    assert plan.delete_pods == [W0] and plan.status is None  # the counters of a finished job do not move


def test_s5_none_keeps_a_kept_pod_restarted_before_its_mark_arrived():
    w, plan = finish("None", waiting_crash_loop)
    assert plan.delete_pods == [] and W0 in plan.stop_restarting
    w.running(W0, restarts=3, last_exit=1)  # marked already: it runs to its end
    assert w.step().is_empty()
    assert not w.pods[W0]["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize("policy, kept", [("None", True), ("Running", True), ("All", False)])
def test_s5_always_pod_waiting_after_a_clean_exit_is_not_running(policy, kept):
    # docs/REFERENCE.md T1/T4: the PS (Always) between a clean exit and its restart; marked, it ends Succeeded.
    w = started(tf_job(cleanPodPolicy=policy))
    w.running(*w.pods)
    w.step()
    ps = w.pods["tftest-ps-0"]
    ps["status"]["containerStatuses"] = [cs(CLBO, "tensorflow", 1, 0)]
    w.step()
    w.succeeded("tftest-worker-0")
    plan = w.step()
    assert w.state() == "Succeeded"
    assert ("tftest-ps-0" in plan.delete_pods) is not kept and ("tftest-ps-0" in plan.stop_restarting) is kept
    if kept:
        w.succeeded("tftest-ps-0")
    assert_fixpoint(w)


@pytest.mark.parametrize("job_policy, code", [("OnFailure", 1), ("ExitCode", 137)])
@pytest.mark.parametrize("policy, kept", [("None", True), ("Running", True), ("All", False)])
def test_s5_a_failed_pod_the_job_would_recreate_is_left_to_clean_pod_policy(job_policy, code, policy, kept):
    # Seen Failed in the reconcile that finishes the job: a finished job makes no pod again, so cleanPodPolicy decides.
    w, plan = finish(policy, lambda w: w.failed(W0, exit_code=code, restarts=2), job_policy)
    assert (W0 in plan.delete_pods) is not kept and plan.create_pods == []
    assert W0 not in plan.stop_restarting  # it has ended
    assert_fixpoint(w)
    assert (W0 in w.pods) is kept
