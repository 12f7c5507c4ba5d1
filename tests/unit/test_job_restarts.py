"""Restarts counted by the job, backoffLimit, ExitCode, deadline, no restart after finish.

docs/SEMANTICS.md S2-S7, S11; docs/REFERENCE.md P5-P8 (seed 000), seed 001, C3 (seed 003), D1/D2 (seed 004).
"""
from __future__ import annotations

import pytest

from phalanx.controller.job import ReconcileOptions
from phalanx.controller.job.restarts import is_retryable_exit_code
from phalanx.objects.clock import format_time
from tests.unit.test_job_core import PODS, assert_fixpoint, started
from tests.unit.test_job_world import World, pytorch_job, tf_job

BACKOFF_MSG = "Job pytest has failed because it has reached the specified backoff limit"
MARK = "phalanx.dev/no-restart-on-failure"


def running_world(job=None, **kw) -> World:
    w = started(job or pytorch_job(), **kw)
    w.running(*[n for n in w.pods])
    w.step()
    return w


# ----------------------------------------------------------------------------- docs/SEMANTICS.md S2


def test_s2_in_place_restart_is_counted_once_per_restart():
    w = running_world()
    w.running("pytest-worker-0", restarts=1, last_exit=1)
    plan = w.step()
    assert w.status["restartCount"] == 1
    assert w.status["replicaStatuses"]["Worker"]["restarts"] == 1
    assert w.status["podRestarts"]["pytest-worker-0"]["containers"] == {"pytorch": 1}
    assert plan.events == []
    assert w.step().is_empty()  # seen again: not counted again
    w.running("pytest-worker-0", restarts=3, last_exit=1)  # two more, seen at once
    w.step()
    assert w.status["restartCount"] == 3
    assert w.state() == "Running"


def test_s2_restart_after_a_clean_exit_under_always_is_not_a_failure():
    # docs/REFERENCE.md T3: "The PS restarting after a clean exit (Always) is not a failure."
    w = running_world(tf_job(backoff=0))
    w.running("tftest-ps-0", restarts=1, last_exit=0)
    w.step()
    assert "restartCount" not in w.status
    assert w.state() == "Running"


def test_s2_restarts_survive_pod_recreation():
    # docs/REFERENCE.md P8 FIX: counted by the job, not read back from the (new) pod.
    w = running_world()
    w.running("pytest-worker-0", restarts=2, last_exit=1)
    w.step()
    w.failed("pytest-worker-0", exit_code=None)  # evicted
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-0"]
    assert w.status["restartCount"] == 3
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-worker-0"]
    assert w.status["restartCount"] == 3 and "pytest-worker-0" not in w.status["podRestarts"]
    w.running("pytest-worker-0")
    w.step()
    assert w.status["restartCount"] == 3 and w.state() == "Running"


def test_s2_a_failed_pod_is_counted_once_while_its_deletion_is_pending():
    w = running_world()
    w.failed("pytest-worker-0", exit_code=None)
    w.pods["pytest-worker-0"]["metadata"]["deletionTimestamp"] = format_time(w.now)  # stays a while
    plan = w.step()
    assert plan.delete_pods == []  # already being deleted
    assert w.status["restartCount"] == 1
    assert_fixpoint(w)
    assert w.status["restartCount"] == 1


def test_failed_pod_under_on_failure_is_deleted_and_recreated_with_restarting_condition():
    w = running_world()
    w.failed("pytest-worker-1", exit_code=None)
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-1"]
    assert w.conditions()[-1] == ("Restarting", "True", "PyTorchJobRestarting")
    msg = "PyTorchJob pytest is restarting because 1 Worker replica(s) failed."
    assert w.status["conditions"][-1]["message"] == msg
    assert plan.events == [("Warning", "PyTorchJobRestarting", msg)]
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-worker-1"]
    assert w.conditions()[-1] == ("Running", "True", "PyTorchJobRunning")  # the master still runs
    assert_fixpoint(w)


# ----------------------------------------------------------------------------- docs/SEMANTICS.md S3


def test_s3_backoff_limit_n_allows_n_restarts_and_the_next_failure_fails_the_job():
    # docs/REFERENCE.md P7 FIX: backoffLimit 3 -> three restarts granted, the fourth failure fails.
    w = running_world(pytorch_job(backoff=3))
    for n in (1, 2, 3):
        w.running("pytest-master-0", restarts=n, last_exit=1)
        w.step()
        assert w.state() == "Running" and w.status["restartCount"] == n
    w.advance(5)
    w.crashloop("pytest-master-0", restarts=4)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")
    msg = BACKOFF_MSG + (" (backoffLimit 3, restartCount 5): Master pod pytest-master-0, container pytorch, "
                         "exited with code 1 (Error)")
    assert w.status["conditions"][-1]["message"] == msg
    assert w.status["completionTime"] == format_time(w.now)
    # docs/SEMANTICS.md S5: on failure everything of the job goes, whatever cleanPodPolicy says.
    assert plan.delete_pods == PODS and plan.delete_services == PODS and plan.podgroup_delete
    assert ("Normal", "PyTorchJobFailed", msg) in plan.events
    assert ("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup") in plan.events
    assert_fixpoint(w)


def test_s3_default_backoff_limit_is_zero_when_unset():
    # docs/REFERENCE.md C3 FIX: without backoffLimit, the first failure that needs a restart fails the job.
    w = running_world(pytorch_job(backoff=None))
    w.running("pytest-worker-0", restarts=1, last_exit=1)
    w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")


def test_s3_operator_wide_default_backoff_limit():
    w = running_world(pytorch_job(backoff=None), options=ReconcileOptions(default_backoff_limit=2))
    for n in (1, 2):
        w.running("pytest-worker-0", restarts=n, last_exit=1)
        w.step()
        assert w.state() == "Running"
    w.running("pytest-worker-0", restarts=3, last_exit=1)
    w.step()
    assert w.state() == "Failed"


def test_s3_all_workers_failing_fails_the_job_before_the_master_completes():
    # docs/REFERENCE.md P6: three workers fail with backoffLimit 3 -> the fourth failure fails the job.
    w = running_world(pytorch_job(backoff=3))
    for i in range(3):
        w.running(f"pytest-worker-{i}", restarts=1, last_exit=1)
    w.step()
    assert w.state() == "Running" and w.status["restartCount"] == 3
    w.crashloop("pytest-worker-0", restarts=2)
    plan = w.step()
    assert w.state() == "Failed" and sorted(plan.delete_pods) == PODS


# ------------------------------------------------------------------------ ExitCode (docs/SEMANTICS.md S6)


@pytest.mark.parametrize("code, retryable", [
    (None, True), (1, False), (2, False), (3, False), (125, False), (126, False), (127, False), (128, False),
    (129, True), (130, True), (137, True), (138, True), (139, False), (143, True), (255, True),
])
def test_s6_exit_code_classes(code, retryable):
    assert is_retryable_exit_code(code) is retryable


def test_s6_exit_code_retryable_pod_is_recreated_and_counts_toward_backoff():
    # Seed 001: worker-0 exits 138 under ExitCode -> deleted and recreated, Restarting; FIX: counted.
    w = running_world(tf_job(worker_policy="ExitCode", backoff=1))
    assert w.pods["tftest-worker-0"]["spec"]["restartPolicy"] == "Never"
    w.failed("tftest-worker-0", exit_code=138)
    plan = w.step()
    assert plan.delete_pods == ["tftest-worker-0"]
    assert w.conditions()[-1] == ("Restarting", "True", "TFJobRestarting")
    assert w.status["conditions"][-1]["message"] == "job tftest is restarting because Worker replica(s) failed."
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["tftest-worker-0"]
    w.running("tftest-worker-0")
    w.step()
    assert w.state() == "Running"
    w.failed("tftest-worker-0", exit_code=138)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert w.status["restartCount"] == 2


def test_s6_exit_code_permanent_failure_fails_the_job_with_a_completion_time():
    # docs/SEMANTICS.md S11: the original sets Failed without completionTime on this path.
    w = running_world(tf_job(worker_policy="ExitCode"))
    w.failed("tftest-worker-1", exit_code=1)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "TFJobFailed")
    msg = 'job "tftest" is failing because "Worker" replica(s) failed.'
    assert w.status["conditions"][-1]["message"] == msg
    assert w.status["completionTime"] == format_time(w.now)
    assert ("Warning", "TFJobFailed", msg) in plan.events
    tf_pods = ["tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
    assert plan.delete_pods == tf_pods and plan.delete_services == tf_pods
    assert "restartCount" not in w.status


# --------------------------------------------------------------------------- docs/SEMANTICS.md S7 Never


def test_s7_a_replica_failing_under_never_fails_the_pytorchjob():
    w = running_world(pytorch_job(policy="Never"))
    w.failed("pytest-worker-2", exit_code=1)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert w.status["conditions"][-1]["message"] == "PyTorchJob pytest is failed because 1 Worker replica(s) failed."
    assert w.status["completionTime"]
    assert plan.delete_pods == PODS and plan.delete_services == PODS  # docs/SEMANTICS.md S5: the failed one too


def test_s11_running_pod_being_deleted_is_not_counted_as_failed_under_never():
    w = running_world(pytorch_job(policy="Never"))
    w.pods["pytest-worker-0"]["metadata"]["deletionTimestamp"] = format_time(w.now)
    w.step()
    assert w.state() == "Running"
    assert "failed" not in w.status["replicaStatuses"]["Worker"]


# ------------------------------------------------------------------------------- docs/SEMANTICS.md S4


def test_s4_deadline_is_enforced_when_it_passes_not_at_the_next_event():
    # docs/REFERENCE.md D2 FIX: activeDeadlineSeconds 15, pods stably Running -> Failed at 15 s.
    w = World(pytorch_job(activeDeadlineSeconds=15))
    w.step()
    w.admit()
    plan = w.step()  # services, startTime
    assert plan.requeue_after == 15
    w.advance(2)
    assert w.step().requeue_after == 13
    w.running(*PODS)
    w.advance(5)
    assert w.step().requeue_after == 8
    w.advance(8)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "DeadlineExceeded")
    msg = "Job pytest has failed because it was active longer than specified deadline"
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Normal", "PyTorchJobFailed", msg) in plan.events
    assert plan.delete_pods == PODS and plan.podgroup_delete
    assert plan.requeue_after is None
    assert_fixpoint(w)


def test_s4_no_deadline_before_start_time():
    w = World(pytorch_job(activeDeadlineSeconds=5))
    w.step()
    w.advance(100)
    plan = w.step()  # still gated: the job has not started
    assert plan.requeue_after is None and w.state() == "Created"


# ------------------------------------------------------------------------------- docs/SEMANTICS.md S5


def test_s5_pods_of_a_finished_job_are_kept_marked_and_never_restarted():
    # docs/REFERENCE.md P5 FIX: with cleanPodPolicy None nothing is deleted, the crash-looping
    # worker included; every unfinished pod is marked never to restart (the node agent then ends
    # the waiting one, Failed), and the job's counters no longer move.
    w = running_world(pytorch_job(backoff=5))
    w.crashloop("pytest-worker-2", restarts=2)
    w.step()
    counted = w.status["restartCount"]
    w.succeeded("pytest-master-0")
    plan = w.step()
    assert w.state() == "Succeeded" and sorted(w.pods) == PODS
    assert plan.delete_pods == [] and sorted(plan.stop_restarting) == PODS[1:]
    w.running("pytest-worker-1", restarts=1, last_exit=1)  # restarted before the mark reached its node
    w.failed("pytest-worker-2", exit_code=1, restarts=2)  # the node agent obeyed the mark
    plan = w.step()
    assert plan.is_empty()  # nothing deleted, no second mark, counters frozen
    assert w.status["restartCount"] == counted and sorted(w.pods) == PODS
    w.succeeded("pytest-worker-0")
    assert_fixpoint(w)


def test_s5_a_kept_pod_restarted_after_a_clean_exit_is_not_deleted():
    # docs/REFERENCE.md T1: after success the pods remain, the PS (Always) included.
    w = running_world(tf_job())
    w.succeeded("tftest-worker-0")
    w.step()
    assert w.state() == "Succeeded"
    w.running("tftest-ps-0", restarts=1, last_exit=0)
    assert w.step().is_empty()
    ps = w.pods["tftest-ps-0"]
    ps["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert w.step().is_empty()
    assert "tftest-ps-0" in w.pods


def test_s5_several_clean_restarts_after_the_finish_are_still_clean():
    w = running_world(tf_job())
    w.succeeded("tftest-worker-0")
    w.step()
    w.running("tftest-ps-0", restarts=3, last_exit=0)  # seen only after three clean restarts
    assert w.step().is_empty()
    w.running("tftest-ps-0", restarts=4, last_exit=2)  # a failure too: cleanPodPolicy None still keeps it
    assert w.step().is_empty()
    assert "tftest-ps-0" in w.pods


def test_s5_kept_running_pods_are_marked_never_to_restart_once():
    # docs/REFERENCE.md T1/T4: after success the PS (Always) keeps running to its end but is
    # not restarted again: the job marks kept, unfinished pods once (phalanx.dev/no-restart).
    w = running_world(tf_job())
    w.succeeded("tftest-worker-0")
    plan = w.step()
    assert w.state() == "Succeeded"
    assert sorted(plan.stop_restarting) == ["tftest-ps-0", "tftest-worker-1", "tftest-worker-2"]
    assert "tftest-worker-0" not in plan.stop_restarting  # already finished
    assert w.pods["tftest-ps-0"]["metadata"]["annotations"]["phalanx.dev/no-restart"] == "true"
    assert w.step().stop_restarting == []


# ---------------------------------------------- docs/SEMANTICS.md S2: failures counted as they happen (P7)


def exited(w: World, n: str, exit_code: int, restarts: int = 0) -> None:
    """The container exited and the node agent will restart it in place (phase stays Running)."""
    pod = w.pods[n]
    pod["status"]["phase"] = "Running"
    w._container(pod, {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}},
                 restarts)


def test_s2_a_failure_is_counted_when_it_is_seen_not_when_the_restart_happens():
    w = running_world(pytorch_job(backoff=5))
    exited(w, "pytest-master-0", 1)  # exited, restart pending (immediate for the first)
    w.step()
    assert w.status["restartCount"] == 1
    assert w.status["podRestarts"]["pytest-master-0"]["failing"] == ["pytorch"]
    w.running("pytest-master-0", restarts=1, last_exit=1)  # ...and restarted: the same failure
    w.step()
    assert w.status["restartCount"] == 1 and "failing" not in w.status["podRestarts"]["pytest-master-0"]
    w.crashloop("pytest-master-0", restarts=1)  # failed again, backing off
    w.step()
    assert w.status["restartCount"] == 2
    w.running("pytest-master-0", restarts=2, last_exit=1)
    assert w.step().status is None or w.status["restartCount"] == 2
    assert w.status["restartCount"] == 2
    # A restart seen only after the fact (the failure was missed) is still counted once.
    w.running("pytest-master-0", restarts=3, last_exit=1)
    w.step()
    assert w.status["restartCount"] == 3
    # Missed both the restart of a counted failure and a further one: 2 more restarts, 1 new.
    w.crashloop("pytest-master-0", restarts=3)
    w.step()
    assert w.status["restartCount"] == 4
    w.crashloop("pytest-master-0", restarts=5)  # restarted (the counted one), failed, restarted, failed
    w.step()
    assert w.status["restartCount"] == 6
    assert_fixpoint(w)


def test_s3_p7_the_failure_past_backoff_limit_fails_the_job_before_it_is_restarted():
    # docs/REFERENCE.md P7 FIX: backoffLimit 3 -> 3 restarts run to their own failure; the 4th failure
    # fails the job while the container waits in CrashLoopBackOff, so no 4th restart starts.
    w = running_world(pytorch_job(backoff=3))
    exited(w, "pytest-master-0", 1)
    w.step()
    for n in (1, 2):
        w.running("pytest-master-0", restarts=n, last_exit=1)
        w.step()
        w.crashloop("pytest-master-0", restarts=n)
        w.step()
        assert w.state() == "Running" and w.status["restartCount"] == n + 1
    assert MARK not in w.pods["pytest-master-0"]["metadata"].get("annotations", {})  # 3rd restart pending
    w.running("pytest-master-0", restarts=3, last_exit=1)  # the 3rd restart was granted: it runs
    plan = w.step()
    assert w.state() == "Running" and plan.delete_pods == []
    # (No restart is left: now that it restarted, the master is marked not to restart a failure.)
    assert plan.stop_failure_restarts == ["pytest-master-0"]
    assert all(p["metadata"]["annotations"].get("phalanx.dev/no-restart-on-failure") == "true"
               for p in w.pods.values())
    w.crashloop("pytest-master-0", restarts=3)  # the mark came too late for the agent: still counted
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert w.status["restartCount"] == 4 and w.status["replicaStatuses"]["Master"]["restarts"] == 4
    assert plan.delete_pods == PODS


def test_s2_exit_zero_under_always_waiting_for_its_restart_is_not_a_failure():
    w = running_world(tf_job(backoff=0))
    exited(w, "tftest-ps-0", 0)
    assert "restartCount" not in (w.step().status or w.status)
    w.running("tftest-ps-0", restarts=1, last_exit=0)
    w.step()
    assert "restartCount" not in w.status and w.state() == "Running"


def test_s2_exit_code_pods_are_counted_once_as_failed_pods_not_as_pending_restarts():
    # ExitCode pods run with restartPolicy Never: their exit is no in-place restart.
    w = running_world(tf_job(worker_policy="ExitCode", backoff=3))
    w.failed("tftest-worker-0", exit_code=137)
    w.step()
    assert w.status["restartCount"] == 1
    assert_fixpoint(w)
    assert w.status["restartCount"] == 1


def test_s2_a_pending_failure_then_a_failed_pod_is_one_failure():
    w = running_world(pytorch_job(backoff=3))
    exited(w, "pytest-worker-1", 1)
    w.step()
    w.failed("pytest-worker-1", exit_code=1)  # e.g. could not be restarted: Failed, recreated
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-1"] and w.status["restartCount"] == 1
    w.settle()
    assert w.status["restartCount"] == 1


def test_s2_an_init_container_failing_under_on_failure_counts():
    w = started(pytorch_job(backoff=3))
    pod = w.pods["pytest-worker-0"]
    pod["spec"]["nodeName"] = "las1"
    pod["status"]["initContainerStatuses"] = [{
        "name": "init-pytorch", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
    w.step()
    assert w.status["restartCount"] == 2  # one restart done, one failure waiting for its restart


# ------------------------------------------------- docs/SEMANTICS.md S2: pods deleted from outside (P8)


def test_s2_p8_a_pod_deleted_from_outside_is_a_restart_and_is_recreated():
    w = running_world(pytorch_job(backoff=3))
    old_uid = w.pods["pytest-master-0"]["metadata"]["uid"]
    assert w.status["podRestarts"]["pytest-master-0"] == {"uid": old_uid}
    del w.pods["pytest-master-0"]  # kubectl delete pod, finished before we looked
    plan = w.step()
    assert w.status["restartCount"] == 1 and w.status["replicaStatuses"]["Master"]["restarts"] == 1
    assert w.conditions()[-1] == ("Restarting", "True", "PyTorchJobRestarting")
    msg = "job pytest is restarting because Master replica(s) were deleted."
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Warning", "PyTorchJobRestarting", msg) in plan.events
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-master-0"]
    w.step()  # the new pod is recorded under its own uid
    assert w.status["podRestarts"]["pytest-master-0"]["uid"] != old_uid
    w.running("pytest-master-0")
    w.step()
    assert w.state() == "Running" and w.status["restartCount"] == 1
    assert_fixpoint(w)


def test_s2_p8_a_pod_seen_being_deleted_from_outside_counts_once():
    w = running_world(pytorch_job(backoff=3))
    w.pods["pytest-worker-2"]["metadata"]["deletionTimestamp"] = format_time(w.now)  # graceful
    plan = w.step()
    assert w.status["restartCount"] == 1 and plan.delete_pods == []
    assert w.status["podRestarts"]["pytest-worker-2"]["failureCounted"] is True
    assert w.step().is_empty()
    w.finish_deletions()
    plan = w.step()
    assert w.status["restartCount"] == 1
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pytest-worker-2"]


def test_s2_p8_the_fourth_deletion_exhausts_backoff_limit_3():
    w = running_world(pytorch_job(backoff=3))
    for n in (1, 2, 3):
        del w.pods["pytest-master-0"]
        w.settle()
        w.running("pytest-master-0")
        w.step()
        assert w.state() == "Running" and w.status["restartCount"] == n
    del w.pods["pytest-master-0"]
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert w.status["restartCount"] == 4 and plan.create_pods == []
    assert sorted(plan.delete_pods) == PODS[1:]


def test_s2_a_pod_replaced_unseen_under_the_same_name_counts():
    w = running_world(pytorch_job(backoff=3))
    w.pods["pytest-worker-0"]["metadata"]["uid"] = "someone-else-recreated-it"
    w.step()
    assert w.status["restartCount"] == 1
    assert w.status["podRestarts"]["pytest-worker-0"] == {"uid": "someone-else-recreated-it"}
    assert_fixpoint(w)


def test_s2_a_pod_first_seen_already_being_deleted_is_not_counted():
    # Never seen alive (e.g. deleted by a suspend before a control-plane restart): not ours to count.
    w = running_world(pytorch_job(backoff=3))
    status = w.job["status"]
    status["podRestarts"].pop("pytest-worker-0")
    w.pods["pytest-worker-0"]["metadata"]["deletionTimestamp"] = format_time(w.now)
    w.step()
    w.finish_deletions()
    w.step()
    assert "restartCount" not in w.status


def test_s2_deletions_the_job_makes_itself_are_not_restarts():
    # Scale-down: out-of-range pods are deleted on purpose.
    w = running_world(pytorch_job(backoff=0))
    w.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-2"] and "restartCount" not in w.status
    assert w.status["podRestarts"]["pytest-worker-2"]["deletedByJob"] is True
    w.finish_deletions()
    w.step()
    assert "restartCount" not in w.status and "pytest-worker-2" not in w.status["podRestarts"]
    assert w.state() == "Running"
    # Suspend deletes every pod, resume recreates them: no restart either.
    w.job["spec"]["runPolicy"]["suspend"] = True
    w.step()
    w.finish_deletions()
    w.job["spec"]["runPolicy"]["suspend"] = False
    w.settle()
    assert "restartCount" not in w.status and w.state() != "Failed"


def test_s2_a_failed_pod_the_job_recreates_is_counted_once_not_again_when_it_is_gone():
    w = running_world(pytorch_job(backoff=3))
    w.failed("pytest-worker-0", exit_code=None)
    w.step()
    w.finish_deletions()
    w.settle()
    assert w.status["restartCount"] == 1


# ----------------------------------- docs/SEMANTICS.md S3: no restart left -> the agent restarts no failure


def test_s3_once_no_restart_is_left_the_pods_are_marked_and_the_next_failure_is_not_restarted():
    # docs/REFERENCE.md P7, C3: the agent restarts the first failure of a container at once; once backoffLimit leaves
    # no restart it must not, or a restart that was not granted would start and be killed.
    w = running_world(pytorch_job(backoff=1))
    assert w.step().stop_failure_restarts == []
    exited(w, "pytest-worker-1", 1)
    plan = w.step()
    assert w.status["restartCount"] == 1 and w.state() == "Running"
    # Every other pod is marked; the one waiting for the restart it was granted only once it
    # restarted (marked now, the agent would cancel that granted restart).
    assert plan.stop_failure_restarts == ["pytest-master-0", "pytest-worker-0", "pytest-worker-2"]
    assert w.step().is_empty()
    w.running("pytest-worker-1", restarts=1, last_exit=1)
    assert w.step().stop_failure_restarts == ["pytest-worker-1"]
    assert all(p["metadata"]["annotations"][MARK] == "true" for p in w.pods.values())
    assert w.step().stop_failure_restarts == []  # marked once
    # The agent now lets a failure end the pod (Failed) instead of restarting it: past the limit.
    w.failed("pytest-master-0", exit_code=1)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert w.status["restartCount"] == 2 and sorted(plan.delete_pods) == PODS


def test_s3_with_backoff_limit_0_pods_are_created_marked():
    # C3: unset backoffLimit means 0 — no restart at all, from the first pod on.
    w = started(pytorch_job(backoff=None))
    assert all(p["metadata"]["annotations"][MARK] == "true" for p in w.pods.values())
    w.running(*PODS)
    assert w.step().stop_failure_restarts == []
    w.failed("pytest-worker-0", exit_code=1)
    w.step()
    assert w.conditions()[-1] == ("Failed", "True", "BackoffLimitExceeded")


def test_s3_pods_that_restart_nothing_in_place_are_not_marked():
    # ExitCode pods run with restartPolicy Never (the operator recreates them); Never is Never.
    w = started(tf_job(worker_policy="ExitCode", backoff=0))
    assert MARK in w.pods["tftest-ps-0"]["metadata"]["annotations"]  # Always: failures are not restarted
    assert all(MARK not in w.pods[f"tftest-worker-{i}"]["metadata"]["annotations"] for i in range(3))
    w = started(pytorch_job(policy="Never", backoff=0))
    assert all(MARK not in p["metadata"].get("annotations", {}) for p in w.pods.values())
