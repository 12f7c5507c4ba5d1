"""The pod state machine (phalanx.node.podstate), with a fake clock.

Shapes follow the golden kubelet status patches (docs/REFERENCE.md golden 47-51)
and the seed 000 watch sequences.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from phalanx.node.podstate import (
    BackoffConfig,
    ContainerObservation,
    DeletePod,
    KillPod,
    StartContainer,
    Termination,
    decide,
    go_duration,
    pod_problem,
    rejected_status,
)
from phalanx.node.reported import observations_from_status
from phalanx.objects.clock import FakeClock, format_time

T0 = datetime(2026, 11, 29, 7, 14, 40, tzinfo=timezone.utc)
UID = "202d7ea6-9175-47de-9348-0862fc4a8238"
CFG = BackoffConfig(base=10, cap=300, reset_after=600)


def make_pod(policy: str = "OnFailure", containers=("pytorch",), inits=(), *, status=None, deleting=False,
             grace=None, deadline=None, name="pytest-worker-1") -> dict:
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": UID},
        "spec": {
            "restartPolicy": policy, "nodeName": "las1",
            "containers": [{"name": c, "image": "busybox:1.37.0-glibc", "command": ["true"]} for c in containers],
        },
        "status": status if status is not None else {"phase": "Pending"},
    }
    if inits:
        pod["spec"]["initContainers"] = [{"name": c, "image": "alpine:3.10", "command": ["true"]} for c in inits]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = format_time(T0)
        if grace is not None:
            pod["metadata"]["deletionGracePeriodSeconds"] = grace
    if deadline is not None:
        pod["spec"]["activeDeadlineSeconds"] = deadline
    return pod


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def running(name: str, since: float = 0, restarts: int = 0, last: Termination | None = None, backoff: int = 0):
    return ContainerObservation(name=name, container_id=f"phalanx://{name}", started_at=at(since),
                                restart_count=restarts, last_termination=last, backoff_count=backoff)


def exited(name: str, code: int, start: float, end: float, restarts: int = 0, backoff: int = 0,
           last: Termination | None = None, reason: str = "", permanent: bool = False):
    t = Termination(exit_code=code, started_at=at(start), finished_at=at(end), reason=reason,
                    container_id=f"phalanx://{name}", permanent=permanent)
    return ContainerObservation(name=name, container_id=f"phalanx://{name}", started_at=at(start), terminated=t,
                                restart_count=restarts, last_termination=last, backoff_count=backoff)


def obs_map(*items: ContainerObservation) -> dict[str, ContainerObservation]:
    return {o.name: o for o in items}


def settle(pod, obs, now, **kw):
    """Decide, write the status back into the pod (as the agent does), decide again."""
    d = decide(pod, obs, now, **kw)
    pod["status"] = d.status
    return decide(pod, obs, now, **kw)


def cstatus(d, name="pytorch", init=False):
    key = "initContainerStatuses" if init else "containerStatuses"
    return next(s for s in d.status[key] if s["name"] == name)


def cond(d, ctype):
    return next(c for c in d.status["conditions"] if c["type"] == ctype)


def kubectl_status(d) -> str:
    """The kubectl STATUS column for the decided status (printPod's rules)."""
    st = d.status
    reason = st.get("reason") or st["phase"]
    inits = st.get("initContainerStatuses") or []
    initializing = False
    for i, c in enumerate(inits):
        s = c["state"]
        if "terminated" in s and s["terminated"]["exitCode"] == 0:
            continue
        if "terminated" in s:
            reason = "Init:" + s["terminated"]["reason"]
        elif "waiting" in s and s["waiting"].get("reason") not in (None, "PodInitializing"):
            reason = "Init:" + s["waiting"]["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    if not initializing:
        for c in reversed(st.get("containerStatuses") or []):
            s = c["state"]
            if "waiting" in s and s["waiting"].get("reason"):
                reason = s["waiting"]["reason"]
            elif "terminated" in s:
                reason = s["terminated"]["reason"]
            elif "running" in s and c["ready"]:
                reason = "Running"
    return reason


# --------------------------------------------------------------------------- back-off arithmetic


def test_backoff_sequence_doubles_from_base_to_cap():
    cfg = BackoffConfig(base=10, cap=300)
    assert [cfg.delay(n) for n in range(0, 8)] == [0, 10, 20, 40, 80, 160, 300, 300]
    assert cfg.delay(1000) == 300


def test_backoff_configurable_for_fast_tests():
    cfg = BackoffConfig(base=0.1, cap=1)
    assert [cfg.delay(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.8, 1]


@pytest.mark.parametrize("seconds,text", [
    (10, "10s"), (20, "20s"), (40, "40s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"),
    (0.1, "100ms"), (0.2, "200ms"), (1.6, "1.6s"), (0, "0s"), (3600, "1h0m0s"), (0.0000005, "500ns"),
    (0.0015, "1.5ms"),
])
def test_go_duration_format(seconds, text):
    assert go_duration(seconds) == text


# --------------------------------------------------------------------------- normal lifecycle


def test_fresh_pod_without_init_starts_container_and_reports_container_creating():
    d = decide(make_pod(), {}, T0, pod_ip="127.0.1.5")
    assert d.actions == [StartContainer(name="pytorch", init=False, restart=False, backoff_count=0)]
    assert d.phase == "Pending"
    assert cstatus(d)["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert kubectl_status(d) == "ContainerCreating"
    assert d.status["podIP"] == "127.0.1.5" and d.status["podIPs"] == [{"ip": "127.0.1.5"}]
    assert d.status["hostIP"] == "127.0.0.1" and d.status["startTime"] == format_time(T0)
    assert cond(d, "ContainersReady")["message"] == "containers with unready status: [pytorch]"
    assert cond(d, "Initialized")["status"] == "True"
    assert d.next_wakeup is None


def test_running_pod_matches_golden_shape():
    pod = make_pod(inits=("init-pytorch",), name="pytest-worker-0")
    init_done = exited("init-pytorch", 0, 1, 4)
    d = decide(pod, obs_map(init_done, running("pytorch", 5)), at(6), pod_ip="127.0.1.5")
    assert d.actions == [] and d.phase == "Running"
    st = d.status
    assert list(st)[:7] == ["hostIP", "hostIPs", "podIP", "podIPs", "startTime", "phase", "conditions"]
    assert [c["type"] for c in st["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert all(c["status"] == "True" for c in st["conditions"])
    c = cstatus(d)
    assert list(c) == ["name", "ready", "restartCount", "started", "containerID", "state", "lastState", "image",
                       "imageID"]
    assert c["ready"] is True and c["started"] is True and c["restartCount"] == 0
    assert c["state"] == {"running": {"startedAt": format_time(at(5))}} and c["lastState"] == {}
    i = cstatus(d, "init-pytorch", init=True)
    assert i["ready"] is True and i["started"] is False
    assert i["state"]["terminated"]["reason"] == "Completed" and i["state"]["terminated"]["exitCode"] == 0
    assert list(i["state"]["terminated"]) == ["exitCode", "reason", "startedAt", "finishedAt", "containerID"]
    assert kubectl_status(d) == "Running"


def test_succeeded_pod_conditions_say_pod_completed():
    d = decide(make_pod(), obs_map(exited("pytorch", 0, 1, 30)), at(31))
    assert d.phase == "Succeeded" and d.actions == [] and d.next_wakeup is None
    assert (cond(d, "Initialized")["status"], cond(d, "Initialized")["reason"]) == ("True", "PodCompleted")
    assert cond(d, "Ready")["reason"] == "PodCompleted" and cond(d, "Ready")["status"] == "False"
    assert cond(d, "ContainersReady")["reason"] == "PodCompleted"
    assert cond(d, "PodReadyToStartContainers")["status"] == "False"
    assert cstatus(d)["state"]["terminated"]["reason"] == "Completed"
    assert cstatus(d)["ready"] is False and cstatus(d)["started"] is False
    assert kubectl_status(d) == "Completed"


def test_condition_transition_time_kept_while_status_unchanged():
    pod = make_pod()
    d1 = decide(pod, obs_map(running("pytorch", 1)), at(2))
    pod["status"] = d1.status
    d2 = decide(pod, obs_map(running("pytorch", 1)), at(50))
    assert cond(d2, "Ready")["lastTransitionTime"] == format_time(at(2))
    assert d2.status == d1.status  # nothing changed: the agent writes nothing
    d3 = decide(pod, obs_map(exited("pytorch", 0, 1, 60)), at(61))
    assert cond(d3, "Ready")["lastTransitionTime"] == format_time(at(61))


def test_pod_scheduled_condition_from_scheduler_is_kept():
    sched = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    pod = make_pod(status={"phase": "Pending", "conditions": [sched], "qosClass": "Burstable"})
    d = decide(pod, {}, T0)
    assert cond(d, "PodScheduled") == sched
    assert d.status["qosClass"] == "Burstable"  # fields the agent does not own survive


# --------------------------------------------------------------------------- restart policies


@pytest.mark.parametrize("policy,code,phase,restart", [
    ("Always", 0, "Running", True),
    ("Always", 1, "Running", True),
    ("OnFailure", 0, "Succeeded", False),
    ("OnFailure", 1, "Running", True),
    ("OnFailure", 137, "Running", True),
    ("Never", 0, "Succeeded", False),
    ("Never", 1, "Failed", False),
    ("Never", 143, "Failed", False),
])
def test_restart_policy_decides_restart_and_phase(policy, code, phase, restart):
    d = decide(make_pod(policy), obs_map(exited("pytorch", code, 0, 5)), at(5))
    assert d.phase == phase
    starts = [a for a in d.actions if isinstance(a, StartContainer)]
    assert bool(starts) == restart
    if restart:  # first restart after a failure is immediate (kubelet has no back-off entry yet)
        assert starts == [StartContainer("pytorch", init=False, restart=True, backoff_count=1)]
        # The terminated state is what is shown until the new instance runs ("Error 0").
        assert cstatus(d)["state"]["terminated"]["exitCode"] == code


def test_error_reason_and_exit_code_reported():
    d = decide(make_pod("Never"), obs_map(exited("pytorch", 1, 0, 5)), at(5))
    t = cstatus(d)["state"]["terminated"]
    assert t["reason"] == "Error" and t["exitCode"] == 1
    assert kubectl_status(d) == "Error"
    assert cond(d, "Ready")["reason"] == "PodFailed"


def test_oom_killed_reported_and_restarted_under_on_failure():
    o = exited("pytorch", 137, 0, 2, reason="OOMKilled")
    d = decide(make_pod("Never"), obs_map(o), at(2))
    assert d.phase == "Failed"
    assert cstatus(d)["state"]["terminated"]["reason"] == "OOMKilled"
    assert kubectl_status(d) == "OOMKilled"
    d = decide(make_pod("OnFailure"), obs_map(o), at(2))
    assert [a.name for a in d.actions if isinstance(a, StartContainer)] == ["pytorch"]


def test_container_cannot_run_is_permanent_even_under_always():
    o = exited("pytorch", 128, 0, 0, reason="ContainerCannotRun", permanent=True)
    d = decide(make_pod("Always"), obs_map(o), at(1))
    assert d.actions == [] and d.phase == "Failed"
    assert cstatus(d)["state"]["terminated"]["reason"] == "ContainerCannotRun"


def test_multi_container_on_failure_phase():
    pod = make_pod("OnFailure", containers=("a", "b"))
    d = decide(pod, obs_map(exited("a", 0, 0, 3), running("b", 0)), at(4))
    assert d.phase == "Running" and d.actions == []
    assert cond(d, "Ready")["message"] == "containers with unready status: [a]"
    d = decide(pod, obs_map(exited("a", 0, 0, 3), exited("b", 0, 0, 5)), at(6))
    assert d.phase == "Succeeded"
    pod = make_pod("Never", containers=("a", "b"))
    d = decide(pod, obs_map(exited("a", 1, 0, 3), running("b", 0)), at(4))
    assert d.phase == "Running"  # not terminal while one still runs
    d = decide(pod, obs_map(exited("a", 1, 0, 3), exited("b", 0, 0, 5)), at(6))
    assert d.phase == "Failed"


# --------------------------------------------------------------------------- CrashLoopBackOff


def test_crash_loop_backoff_message_and_wakeup_match_golden():
    # docs/REFERENCE.md golden 50: restartCount 2, the third run failed: back-off 20s.
    last = Termination(exit_code=1, started_at=at(11), finished_at=at(21), container_id="phalanx://x")
    o = ContainerObservation(name="pytorch", container_id="phalanx://x", started_at=at(11), terminated=last,
                             restart_count=2, backoff_count=2)
    d = settle(make_pod("OnFailure"), obs_map(o), at(22))
    assert d.actions == []
    c = cstatus(d)
    assert c["state"] == {"waiting": {
        "reason": "CrashLoopBackOff",
        "message": f"back-off 20s restarting failed container=pytorch pod=pytest-worker-1_default({UID})"}}
    assert c["lastState"]["terminated"]["exitCode"] == 1 and c["lastState"]["terminated"]["reason"] == "Error"
    assert c["restartCount"] == 2 and c["ready"] is False
    assert d.phase == "Running" and kubectl_status(d) == "CrashLoopBackOff"
    assert cond(d, "Ready")["reason"] == "ContainersNotReady"
    assert d.next_wakeup == at(41)
    assert d.backing_off == {"pytorch": 20}
    # At the wake-up the restart is due; CrashLoopBackOff stays shown until it runs.
    pod = make_pod("OnFailure", status=d.status)
    d = decide(pod, obs_map(o), at(41))
    assert d.actions == [StartContainer("pytorch", restart=True, backoff_count=3)]
    assert cstatus(d)["state"]["waiting"]["reason"] == "CrashLoopBackOff" and d.backing_off == {}


def test_exit_is_reported_as_error_before_crash_loop_backoff():
    """Seed 000 P5 watch: ... Running -> Error -> CrashLoopBackOff -> Running ..."""
    pod = make_pod("OnFailure")
    o = exited("pytorch", 1, 0, 10, restarts=1, backoff=1, last=Termination(1, at(-1), at(-5)))
    d1 = decide(pod, obs_map(o), at(10))
    assert kubectl_status(d1) == "Error" and d1.actions == [] and d1.next_wakeup == at(20)
    assert cstatus(d1)["lastState"]["terminated"]["finishedAt"] == format_time(at(-1))
    assert d1.backing_off == {}
    pod["status"] = d1.status
    d2 = decide(pod, obs_map(o), at(10.5))
    assert kubectl_status(d2) == "CrashLoopBackOff" and d2.next_wakeup == at(20)
    assert cstatus(d2)["lastState"]["terminated"]["finishedAt"] == format_time(at(10))
    pod["status"] = d2.status
    assert decide(pod, obs_map(o), at(11)).status == d2.status  # settled: nothing more to write
    # A new termination (another container ID) is reported as Error again.
    o2 = ContainerObservation(name="pytorch", container_id="phalanx://new", started_at=at(20),
                              terminated=Termination(1, at(25), at(20), container_id="phalanx://new"),
                              restart_count=2, backoff_count=2, last_termination=o.terminated)
    assert kubectl_status(decide(pod, obs_map(o2), at(25))) == "Error"


def test_backoff_sequence_over_many_crashes():
    """Restart n waits 0, 10, 20, 40, ... 300, 300 (seed 000 P5: 10s, 20s, 40s ...)."""
    clock = FakeClock(T0)
    pod = make_pod("OnFailure")
    backoff = 0
    restarts = 0
    last = None
    waits = []
    for _ in range(9):
        start = clock.now()
        clock.advance(1)  # the run lasts a second and fails
        t = Termination(exit_code=1, started_at=start, finished_at=clock.now())
        o = ContainerObservation(name="pytorch", started_at=start, terminated=t, restart_count=restarts,
                                 backoff_count=backoff, last_termination=last)
        d = decide(pod, obs_map(o), clock.now(), backoff=CFG)
        waited = 0.0
        while not d.actions:
            assert d.next_wakeup is not None
            step = (d.next_wakeup - clock.now()).total_seconds()
            clock.advance(step)
            waited += step
            d = decide(pod, obs_map(o), clock.now(), backoff=CFG)
        (a,) = d.actions
        waits.append(waited)
        backoff, restarts, last = a.backoff_count, restarts + 1, t
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_backoff_resets_after_a_long_clean_run():
    t = Termination(exit_code=1, started_at=at(0), finished_at=at(600))
    o = ContainerObservation(name="pytorch", started_at=at(0), terminated=t, restart_count=7, backoff_count=7)
    d = decide(make_pod("OnFailure"), obs_map(o), at(600), backoff=CFG)
    assert d.actions == [StartContainer("pytorch", restart=True, backoff_count=1)]
    short = BackoffConfig(base=10, cap=300, reset_after=60)
    t2 = Termination(exit_code=1, started_at=at(0), finished_at=at(59))
    o2 = ContainerObservation(name="pytorch", started_at=at(0), terminated=t2, restart_count=7, backoff_count=7)
    d = settle(make_pod("OnFailure"), obs_map(o2), at(59), backoff=short)
    assert d.actions == [] and d.backing_off == {"pytorch": 300}


def test_always_policy_backs_off_after_clean_exits_too():
    o = exited("pytorch", 0, 0, 1, restarts=1, backoff=1)
    d = settle(make_pod("Always"), obs_map(o), at(2))
    assert d.actions == [] and cstatus(d)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert d.phase == "Running"


def test_restarted_container_reports_last_state():
    prev = Termination(exit_code=1, started_at=at(0), finished_at=at(10))
    d = decide(make_pod(), obs_map(running("pytorch", 11, restarts=1, last=prev)), at(12))
    c = cstatus(d)
    assert c["restartCount"] == 1 and "running" in c["state"]
    assert c["lastState"]["terminated"]["finishedAt"] == format_time(at(10))
    assert kubectl_status(d) == "Running"


# --------------------------------------------------------------------------- init containers


def test_init_container_runs_first_and_pod_shows_init_0_of_1():
    pod = make_pod(inits=("init-pytorch",))
    d = decide(pod, {}, T0)
    assert d.actions == [StartContainer("init-pytorch", init=True)]
    assert d.phase == "Pending" and kubectl_status(d) == "Init:0/1"
    assert cstatus(d)["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert cstatus(d, "init-pytorch", init=True)["state"] == {"waiting": {"reason": "PodInitializing"}}
    d = decide(pod, obs_map(running("init-pytorch", 1)), at(2))
    assert d.actions == [] and kubectl_status(d) == "Init:0/1"
    i = cstatus(d, "init-pytorch", init=True)
    assert i["started"] is True and i["ready"] is False
    ini = cond(d, "Initialized")
    assert ini["status"] == "False" and ini["reason"] == "ContainersNotInitialized"
    assert ini["message"] == "containers with incomplete status: [init-pytorch]"


def test_init_done_then_pod_initializing_then_running():
    pod = make_pod(inits=("init-pytorch",))
    d = decide(pod, obs_map(exited("init-pytorch", 0, 1, 4)), at(4))
    assert d.actions == [StartContainer("pytorch")]
    assert kubectl_status(d) == "PodInitializing" and d.phase == "Pending"
    assert cond(d, "Initialized")["status"] == "True"


def test_init_containers_run_in_order():
    pod = make_pod(inits=("a", "b"))
    d = decide(pod, obs_map(exited("a", 0, 0, 1)), at(1))
    assert d.actions == [StartContainer("b", init=True)]
    assert kubectl_status(d) == "Init:1/2"
    d = decide(pod, obs_map(running("a", 0)), at(1))
    assert d.actions == [] and kubectl_status(d) == "Init:0/2"


def test_failing_init_container_under_never_fails_the_pod():
    pod = make_pod("Never", inits=("init-pytorch",))
    d = decide(pod, obs_map(exited("init-pytorch", 1, 0, 3)), at(3))
    assert d.actions == [] and d.phase == "Failed"
    assert kubectl_status(d) == "Init:Error"


def test_failing_init_container_retried_with_backoff_otherwise():
    pod = make_pod("OnFailure", inits=("init-pytorch",))
    d = decide(pod, obs_map(exited("init-pytorch", 1, 0, 3)), at(3))
    assert d.actions == [StartContainer("init-pytorch", init=True, restart=True, backoff_count=1)]
    assert d.phase == "Pending" and kubectl_status(d) == "Init:Error"
    o = exited("init-pytorch", 1, 4, 6, restarts=1, backoff=1)
    d = settle(pod, obs_map(o), at(7))
    assert d.actions == [] and kubectl_status(d) == "Init:CrashLoopBackOff"
    assert d.next_wakeup == at(16)
    pod_always = make_pod("Always", inits=("init-pytorch",))
    d = decide(pod_always, obs_map(exited("init-pytorch", 0, 0, 1)), at(1))
    assert d.actions == [StartContainer("pytorch")]  # init containers never restart after exit 0


# --------------------------------------------------------------------------- deletion and deadline


def test_deletion_kills_with_grace_then_deletes():
    pod = make_pod("OnFailure", deleting=True, grace=7)
    d = decide(pod, obs_map(running("pytorch", 0)), at(5))
    assert d.actions == [KillPod(grace_seconds=7, reason="Deleted")]
    d = decide(pod, obs_map(exited("pytorch", 143, 0, 6)), at(6))
    assert d.actions == [DeletePod()]
    assert cstatus(d)["state"]["terminated"]["exitCode"] == 143  # no restart while deleting
    assert d.phase == "Failed" and d.next_wakeup is None
    d = decide(pod, obs_map(exited("pytorch", 0, 0, 6)), at(6))
    assert d.phase == "Succeeded" and d.actions == [DeletePod()]


def test_deletion_grace_defaults():
    pod = make_pod(deleting=True)
    assert decide(pod, obs_map(running("pytorch")), T0).actions == [KillPod(30, "Deleted")]
    pod["spec"]["terminationGracePeriodSeconds"] = 3
    assert decide(pod, obs_map(running("pytorch")), T0).actions == [KillPod(3, "Deleted")]


def test_deleting_a_pod_never_started_deletes_at_once():
    d = decide(make_pod(deleting=True), {}, T0)
    assert d.actions == [DeletePod()]


def test_deleting_during_backoff_does_not_restart():
    o = exited("pytorch", 1, 0, 1, restarts=3, backoff=3)
    d = decide(make_pod(deleting=True), obs_map(o), at(2))
    assert d.actions == [DeletePod()] and d.next_wakeup is None


def test_active_deadline_exceeded_kills_and_fails():
    pod = make_pod("OnFailure", deadline=60, status={"phase": "Running", "startTime": format_time(T0)})
    d = decide(pod, obs_map(running("pytorch", 1)), at(30))
    assert d.next_wakeup == at(60) and d.actions == []
    d = decide(pod, obs_map(running("pytorch", 1)), at(60))
    assert d.actions == [KillPod(grace_seconds=30, reason="DeadlineExceeded")]
    assert d.phase == "Failed" and d.status["reason"] == "DeadlineExceeded"
    assert d.status["message"] == "Pod was active on the node longer than the specified deadline"
    pod["status"] = d.status
    d = decide(pod, obs_map(exited("pytorch", 143, 1, 61)), at(61))
    assert d.actions == [] and d.phase == "Failed" and d.status["reason"] == "DeadlineExceeded"


def test_terminal_pod_is_never_started_again():
    pod = make_pod("Always", status={"phase": "Succeeded", "containerStatuses": []})
    d = decide(pod, {}, T0)
    assert d.actions == [] and d.status == pod["status"]
    pod = make_pod("Always", status={"phase": "Failed"})
    d = decide(pod, obs_map(exited("pytorch", 1, 0, 1)), at(50))
    assert d.actions == [] and d.phase == "Failed"


# --------------------------------------------------------------------------- after an agent restart


def test_observations_from_status_keep_finished_init_and_lose_running():
    pod = make_pod("OnFailure", inits=("init-pytorch",), status={
        "phase": "Running",
        "initContainerStatuses": [{"name": "init-pytorch", "restartCount": 0, "state": {"terminated": {
            "exitCode": 0, "reason": "Completed", "startedAt": format_time(at(1)), "finishedAt": format_time(at(2))}}}],
        "containerStatuses": [{"name": "pytorch", "restartCount": 2, "state": {"running": {
            "startedAt": format_time(at(3))}}, "lastState": {}}],
    })
    obs = observations_from_status(pod, at(10))
    assert obs["init-pytorch"].terminated.exit_code == 0
    assert obs["pytorch"].terminated.reason == "ContainerStatusUnknown" and obs["pytorch"].restart_count == 2
    d = settle(pod, obs, at(10))
    # Lost with restartCount 2: back-off 20s, then only the main container restarts.
    assert d.actions == [] and cstatus(d)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cstatus(d)["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    d = decide(pod, obs, at(30))
    assert d.actions == [StartContainer("pytorch", restart=True, backoff_count=3)]
    never = make_pod("Never", status=pod["status"])
    d = decide(never, observations_from_status(never, at(10)), at(10))
    assert d.phase == "Failed" and d.actions == []


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("mutate,needle", [
    (lambda p: p["spec"].update(restartPolicy="Sometimes"), "spec.restartPolicy"),
    (lambda p: p["spec"].update(containers=[]), "spec.containers"),
    (lambda p: p["spec"].update(containers=[{"image": "x"}]), "spec.containers[0].name"),
    (lambda p: p["spec"].update(containers=[{"name": "a"}, {"name": "a"}]), "Duplicate"),
    (lambda p: p.update(spec=None), "spec"),
])
def test_pod_problem_names_field(mutate, needle):
    pod = make_pod()
    mutate(pod)
    problem = pod_problem(pod)
    assert problem is not None and needle in problem


def test_pod_problem_none_for_good_pod():
    assert pod_problem(make_pod(inits=("i",))) is None


def test_rejected_status_is_failed_with_reason():
    st = rejected_status(make_pod(), T0, "InvalidPodSpec", "spec.containers: Required value")
    assert st["phase"] == "Failed" and st["reason"] == "InvalidPodSpec"
    assert st["message"] == "spec.containers: Required value"


def test_s5_no_restart_annotation_turns_always_into_never():
    # The job controller marks the pods a finished job keeps; the agent must not restart them.
    pod = make_pod("Always")
    o = exited("pytorch", 0, 0, 1)
    assert any(isinstance(a, StartContainer) for a in decide(pod, obs_map(o), at(2), backoff=CFG).actions)
    pod["metadata"]["annotations"] = {"phalanx.dev/no-restart": "true"}
    d = settle(pod, obs_map(o), at(2), backoff=CFG)
    assert not any(isinstance(a, StartContainer) for a in d.actions)
    assert d.status["phase"] == "Succeeded"


@pytest.mark.parametrize("policy, code, restarts", [
    ("OnFailure", 1, False), ("Always", 1, False), ("Always", 0, True), ("OnFailure", 0, False),
])
def test_s3_no_restart_on_failure_annotation_stops_failure_restarts_only(policy, code, restarts):
    # The job controller marks its pods once backoffLimit leaves no restart (docs/REFERENCE.md C3/P7): a
    # container that exits non-zero is not restarted — not even the first, immediate restart —
    # so the pod fails and the job fails without a restart that was not granted. A clean exit
    # under Always is no failure and still restarts.
    pod = make_pod(policy)
    o = exited("pytorch", code, 0, 1)
    unmarked = decide(pod, obs_map(o), at(1), backoff=CFG)
    assert any(isinstance(a, StartContainer) for a in unmarked.actions) is (code != 0 or policy == "Always")
    pod["metadata"]["annotations"] = {"phalanx.dev/no-restart-on-failure": "true"}
    d = settle(pod, obs_map(o), at(1), backoff=CFG)
    assert any(isinstance(a, StartContainer) for a in d.actions) is restarts
    if code != 0:
        assert d.status["phase"] == "Failed"
        assert d.status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
