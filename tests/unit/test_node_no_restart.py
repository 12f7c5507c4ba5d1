"""The node agent's side of docs/SEMANTICS.md S5 (phalanx.node.podstate, fake clock): a kept pod of a finished job.

Marked ``phalanx.dev/no-restart`` while it waits to restart, it is restarted never and shows its last end at once.
"""
from __future__ import annotations

import pytest

from phalanx.node.podstate import StartContainer, Termination, decide
from tests.unit.test_node_podstate import CFG, at, exited, make_pod, obs_map, running, settle

MARK = {"phalanx.dev/no-restart": "true"}


def previous(code: int = 1) -> Termination:
    """The run before the current one (lastState once the current one is shown terminated)."""
    return Termination(exit_code=code, started_at=at(0), finished_at=at(5), container_id="phalanx://pytorch")


def starts(d) -> bool:
    return any(isinstance(a, StartContainer) for a in d.actions)


def test_s5_a_crash_looping_container_marked_is_shown_terminated_error_with_its_restart_count():
    # docs/REFERENCE.md P5: worker-0 in its back-off wait when the job Succeeds (cleanPodPolicy None).
    pod = make_pod("OnFailure", name="pytest-worker-0")
    o = exited("pytorch", 1, 6, 11, restarts=2, backoff=2, last=previous())
    d = settle(pod, obs_map(o), at(12), backoff=CFG)
    cs = d.status["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" and d.status["phase"] == "Running"
    assert d.next_wakeup == at(11 + 20) and d.backing_off == {"pytorch": 20}
    pod["status"] = d.status
    pod["metadata"]["annotations"] = dict(MARK)
    for now in (at(13), at(31), at(600)):  # before, at and long after the restart was due
        d = decide(pod, obs_map(o), now, backoff=CFG)
        pod["status"] = d.status
        assert not starts(d) and d.next_wakeup is None and d.backing_off == {}
        assert d.status["phase"] == "Failed"
        cs = d.status["containerStatuses"][0]
        assert cs["restartCount"] == 2 and cs["ready"] is False and cs["started"] is False
        assert cs["state"] == {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-11-29T07:14:46Z",
                                              "finishedAt": "2026-11-29T07:14:51Z",
                                              "containerID": "phalanx://pytorch"}}
        assert cs["lastState"]["terminated"]["exitCode"] == 1
        assert cs["lastState"]["terminated"]["finishedAt"] == "2026-11-29T07:14:45Z"  # the run before
        ready = next(c for c in d.status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False" and ready["reason"] == "PodFailed"


def test_s5_a_container_that_just_exited_marked_before_its_immediate_restart_is_not_restarted():
    pod = make_pod("OnFailure", name="pytest-worker-0")
    o = exited("pytorch", 1, 0, 5)
    assert starts(decide(pod, obs_map(o), at(5), backoff=CFG))  # the first restart is immediate
    pod["metadata"]["annotations"] = dict(MARK)
    d = settle(pod, obs_map(o), at(5), backoff=CFG)
    assert not starts(d) and d.status["phase"] == "Failed"
    cs = d.status["containerStatuses"][0]
    assert cs["restartCount"] == 0 and cs["lastState"] == {}
    assert cs["state"]["terminated"]["reason"] == "Error" and cs["state"]["terminated"]["exitCode"] == 1


def test_s5_a_running_container_marked_runs_to_its_end_and_is_not_restarted():
    pod = make_pod("OnFailure", name="pytest-worker-0")
    pod["metadata"]["annotations"] = dict(MARK)
    d = settle(pod, obs_map(running("pytorch", since=6, restarts=2, last=previous())), at(8), backoff=CFG)
    assert d.status["phase"] == "Running" and d.actions == []  # the mark does not stop what runs
    d = settle(pod, obs_map(exited("pytorch", 1, 6, 11, restarts=2, last=previous())), at(11), backoff=CFG)
    assert not starts(d) and d.status["phase"] == "Failed"
    assert d.status["containerStatuses"][0]["restartCount"] == 2


def test_s5_a_crash_looping_init_container_marked_fails_the_pod():
    pod = make_pod("OnFailure", inits=("init-pytorch",), name="pytest-worker-0")
    o = exited("init-pytorch", 1, 6, 11, restarts=1, backoff=1, last=previous())
    d = settle(pod, obs_map(o), at(12), backoff=CFG)
    assert d.status["initContainerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    pod["status"] = d.status
    pod["metadata"]["annotations"] = dict(MARK)
    d = settle(pod, obs_map(o), at(30), backoff=CFG)
    assert not starts(d) and d.status["phase"] == "Failed"
    init = d.status["initContainerStatuses"][0]
    assert init["restartCount"] == 1 and init["state"]["terminated"]["exitCode"] == 1
    assert d.status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}


@pytest.mark.parametrize("code, phase, reason", [(0, "Succeeded", "Completed"), (1, "Failed", "Error")])
def test_s5_an_always_container_waiting_marked_ends_with_its_last_exit(code, phase, reason):
    # docs/REFERENCE.md T4: the PS (Always) between an exit and its restart when the job Succeeds.
    pod = make_pod("Always", containers=("tensorflow",), name="tftest-ps-0")
    o = exited("tensorflow", code, 6, 11, restarts=3, backoff=3)
    pod["status"] = settle(pod, obs_map(o), at(12), backoff=CFG).status
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    pod["metadata"]["annotations"] = dict(MARK)
    d = settle(pod, obs_map(o), at(100), backoff=CFG)
    assert not starts(d) and d.status["phase"] == phase
    cs = d.status["containerStatuses"][0]
    assert cs["restartCount"] == 3 and cs["state"]["terminated"]["reason"] == reason
