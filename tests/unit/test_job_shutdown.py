"""A control-plane stop is not a failure (issue 15): pods the node agent stopped
because it shut down (kubelet's graceful node shutdown: Failed, DisruptionTarget
TerminationByKubelet) are recreated by the job controller at the next start,
whatever the restart policy, and no restart is counted."""
from __future__ import annotations

from datetime import timedelta

import pytest

from phalanx.api.pod import stopped_by_shutdown
from phalanx.node import podstate
from tests.unit.test_job_world import NOW, World, pytorch_job

PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]


def running_world(policy: str) -> World:
    w = World(pytorch_job(policy=policy))
    w.step()
    w.admit()
    w.settle()
    w.running(*PODS)
    w.settle()
    assert w.state() == "Running"
    return w


def stop_by_shutdown(w: World, *names: str) -> None:
    """What the node agent writes when the control plane stops, then the kill."""
    for n in names:
        pod = w.pods[n]
        pod["status"] = podstate.shutdown_status(pod, w.now)
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 143, "reason": "Error"}}


@pytest.mark.parametrize("policy", ["OnFailure", "Never", "ExitCode", "Always"])
def test_pods_stopped_by_a_shutdown_are_recreated_without_a_restart(policy):
    w = running_world(policy)
    old_uids = {n: w.pods[n]["metadata"]["uid"] for n in PODS}
    stop_by_shutdown(w, *PODS)
    w.advance(30)
    plan = w.step()
    assert sorted(plan.delete_pods) == PODS
    assert [e[1] for e in plan.events] == ["PodStoppedByShutdown"] * 4
    st = w.status
    assert "restartCount" not in st
    assert all("failed" not in rs and "restarts" not in rs and "active" not in rs
               for rs in st["replicaStatuses"].values())
    assert w.state() == "Running" and ("Restarting", "True", "PyTorchJobRestarting") not in w.conditions()
    w.settle()
    assert sorted(w.pods) == PODS and all(w.pods[n]["metadata"]["uid"] != old_uids[n] for n in PODS)
    assert all(p["status"] == {"phase": "Pending"} for p in w.pods.values())
    w.running(*PODS)
    w.succeeded("pytest-master-0")
    w.settle()
    assert w.state() == "Succeeded" and "restartCount" not in w.status


def test_a_real_failure_after_the_recreation_still_counts():
    w = running_world("OnFailure")
    stop_by_shutdown(w, "pytest-worker-1")
    w.settle()
    w.running("pytest-worker-1")
    w.failed("pytest-worker-1", exit_code=1)
    w.step()
    assert w.status["restartCount"] == 1 and w.status["replicaStatuses"]["Worker"]["restarts"] == 1
    assert w.state() == "Restarting"


def test_shutdown_status_is_what_the_kubelet_writes_and_is_kept_by_later_rounds():
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c", "command": ["x"]}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    st = podstate.shutdown_status(pod, NOW)
    assert (st["phase"], st["reason"], st["message"]) == (
        "Failed", "Terminated", "Pod was terminated in response to imminent node shutdown.")
    dt = [c for c in st["conditions"] if c["type"] == "DisruptionTarget"]
    assert dt == [{"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                   "lastTransitionTime": "2026-01-01T12:00:00Z",
                   "reason": "TerminationByKubelet",
                   "message": "Pod was terminated in response to imminent node shutdown."}]
    marked = {**pod, "status": st}
    assert stopped_by_shutdown(marked) and not stopped_by_shutdown(pod)
    # The next agent's round on the frozen pod (its container exited) keeps phase, reason and the condition.
    exit_ = podstate.Termination(exit_code=143, finished_at=NOW + timedelta(seconds=1), started_at=NOW)
    obs = {"c": podstate.ContainerObservation(name="c", container_id="phalanx://x", started_at=NOW,
                                              terminated=exit_)}
    d = podstate.decide(marked, obs, NOW + timedelta(seconds=2))
    assert d.status["phase"] == "Failed" and d.status["reason"] == "Terminated"
    assert stopped_by_shutdown({"status": d.status})
