"""Failure scenarios of docs/REFERENCE.md Part 4 on real processes (issue 3): P5-P8, seed 001
(ExitCode), T3, T4, C1-C3, D1, D2 — with the fixes of docs/SEMANTICS.md S2–S7, S11.

Durations are scaled down (the seeds' 30 s become ~2 s, 10 s ~0.7 s, ...) with
the fixture's fast back-off (0.2 s doubling to 2 s); the order of events and the
end states are the notes'. Every test checks the job's condition sequence (as
``get -w`` shows it), the pods' states and restart counts, the job's restart
counters, that each condition transition produced an Event, and what is left
in the store at the end.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from phalanx.objects.clock import parse_time
from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e

PT_PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
TF_PODS = ["tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
BACKOFF_MSG = "Job {} has failed because it has reached the specified backoff limit"


def backoff_message(message: str, job: str) -> bool:
    """The original's sentence, then Phalanx's (backoffLimit ..., restartCount N): <the failure>."""
    return message.startswith(BACKOFF_MSG.format(job) + " (backoffLimit ") and "restartCount" in message \
        and (" pod " in message or "replica(s) deleted" in message)
DEADLINE_MSG = "Job {} has failed because it was active longer than specified deadline"


# ----------------------------------------------------------------------------- helpers


def script(*lines: str) -> list[str]:
    """A container command as the seeds write them: sh -c with SIGTERM trapped."""
    return ["sh", "-c", "\n".join(("trap exit INT TERM", *lines))]


def pytorch(seconds: float = 2, master: list[str] | None = None, worker: list[str] | None = None,
            **run_policy) -> dict:
    """The seed PyTorchJob, ``sleep 30s`` scaled, optionally other commands, runPolicy changes
    (a value of None removes the field)."""
    job = scaled(load_example("pytorchjob.yaml")[0], seconds)
    specs = job["spec"]["pytorchReplicaSpecs"]
    for rtype, cmd in (("Master", master), ("Worker", worker)):
        if cmd is not None:
            specs[rtype]["template"]["spec"]["containers"][0]["command"] = cmd
    _run_policy(job, run_policy)
    return job


def tensorflow(seconds: float = 2, ps: list[str] | None = None, worker: list[str] | None = None,
               worker_policy: str | None = None, pod_name_env: bool = False, **run_policy) -> dict:
    job = scaled(load_example("tfjob.yaml")[0], seconds)
    specs = job["spec"]["tfReplicaSpecs"]
    for rtype, cmd in (("PS", ps), ("Worker", worker)):
        if cmd is not None:
            specs[rtype]["template"]["spec"]["containers"][0]["command"] = cmd
    if worker_policy:
        specs["Worker"]["restartPolicy"] = worker_policy
    if pod_name_env:  # seed 001: worker-0 is picked by env POD_NAME from fieldRef metadata.name
        specs["Worker"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    _run_policy(job, run_policy)
    return job


def _run_policy(job: dict, changes: dict) -> None:
    rp = job["spec"].setdefault("runPolicy", {})
    for k, v in changes.items():
        if v is None:
            rp.pop(k, None)
        else:
            rp[k] = v


async def get(c, kind: str, name: str, ns: str = "default") -> dict | None:
    try:
        return await c.get(kind, name, ns)
    except NotFound:
        return None


async def wait_job(c, recorder, kind: str, name: str, state: str, timeout: float) -> dict:
    """The job's state is ``state`` in the store and the recorder has seen it."""
    async def reached():
        j = await get(c, kind, name)
        if j is None or job_state(j) != state or recorder.states(kind, name)[-1:] != [state]:
            return None
        return j
    return await wait_until(reached, timeout, f"{kind} {name} {state}")


async def leftovers(c, job: dict) -> dict:
    """What the store still holds of the job: pod and service names, the PodGroup."""
    uid = job["metadata"]["uid"]

    async def owned(kind):
        return sorted(o["metadata"]["name"] for o in (await c.list(kind, "default")).items
                      if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or []))
    return {"pods": await owned("Pod"), "services": await owned("Service"),
            "podgroup": await get(c, "PodGroup", job["metadata"]["name"]) is not None}


async def wait_nothing_left(c, job: dict, timeout: float = 10, recorder=None) -> None:
    """Nothing of the job is left in the store and, with ``recorder``, its watch
    has seen every pod of the job go (it may lag the store)."""
    empty = {"pods": [], "services": [], "podgroup": False}

    async def gone():
        return await leftovers(c, job) == empty
    await wait_until(gone, timeout, "every pod, service and the PodGroup of the job deleted")
    if recorder is not None:
        prefix = job["metadata"]["name"] + "-"
        pods = {n for _, k, n, _ in recorder.rows if k == "Pod" and n.startswith(prefix)}
        await wait_until(lambda: all(recorder.states("Pod", n)[-1:] == ["<deleted>"] for n in pods), timeout,
                         "the recorder to see every pod of the job deleted")


def condition(job: dict, ctype: str) -> dict:
    return next(x for x in job["status"]["conditions"] if x["type"] == ctype)


async def assert_transitions_have_events(c, kind: str, name: str, states: list[str]) -> list[dict]:
    """Every condition transition of the job was recorded as an Event on it
    (identical events fold into one with a count, as client-go's correlator does)."""
    events = (await c.list("Event", "default", field_selector=f"involvedObject.name={name}")).items
    counts: dict[str, int] = {}
    for e in events:
        if e["involvedObject"]["kind"] == kind:
            counts[e["reason"]] = counts.get(e["reason"], 0) + e.get("count", 1)
    wanted: dict[str, int] = {}
    for s in states:
        if s not in ("", "<deleted>"):
            wanted[kind + s] = wanted.get(kind + s, 0) + 1
    for reason, n in wanted.items():
        assert counts.get(reason, 0) >= n, f"{reason}: {n} transitions, events {counts}"
    return events


async def pod_restart_counts(c, names: list[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for n in names:
        p = await get(c, "Pod", n)
        cs = ((p or {}).get("status") or {}).get("containerStatuses") or []
        out[n] = cs[0].get("restartCount", 0) if p is not None and cs else None
    return out


def restarts(job: dict, rtype: str | None = None) -> int:
    st = job.get("status") or {}
    if rtype is None:
        return st.get("restartCount", 0)
    return ((st.get("replicaStatuses") or {}).get(rtype) or {}).get("restarts", 0)


async def assert_nothing_restarts_after_finish(c, recorder, job_kind: str, name: str, pods: list[str],
                                               watch: float) -> dict:
    """docs/SEMANTICS.md S5: for ``watch`` seconds after the finish, no pod restarts again and the job's
    restart counters do not move; kept pods run to their end (or end where they waited to restart)."""
    job = await c.get(job_kind, name, "default")
    before_job = (restarts(job), job["status"].get("replicaStatuses"))
    before_pods = dict(recorder.restarts)
    before_uids = {n: list(u) for n, u in recorder.uids.items()}
    await asyncio.sleep(watch)
    job = await c.get(job_kind, name, "default")
    assert (restarts(job), job["status"].get("replicaStatuses")) == before_job
    for n in pods:
        assert recorder.restarts.get(n, 0) == before_pods.get(n, 0), f"{n} restarted after the job finished"
        assert recorder.uids.get(n, []) == before_uids.get(n, []), f"{n} recreated after the job finished"
    return job


async def _ended(c, name: str) -> dict | None:
    pod = await get(c, "Pod", name)
    return pod if pod is not None and pod["status"].get("phase") in ("Succeeded", "Failed") else None


# ------------------------------------------------------------------------------- P5


async def test_p5_failing_worker_restarts_in_place_job_succeeds_and_nothing_restarts_after(cluster, recorder):
    # docs/REFERENCE.md P5: RANK 1 (worker-0) exits 1 after 10 s under OnFailure; it restarts in place
    # (RESTARTS 1, 2, Error/CrashLoopBackOff) while the job stays Running; the job Succeeds when
    # the master completes (30 s). FIX: no pod of the finished job restarts again; its restarts
    # counted toward backoffLimit 3 (two of them here: not exceeded).
    c = cluster.client
    worker = script('if [ "${RANK}" = "1" ]; then', "sleep 0.7 & wait", "exit 1", "else", "sleep 2 & wait", "fi")
    created = await c.create(pytorch(2, worker=worker))
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Succeeded", 20)
    at_finish = recorder.restarts["pytest-worker-0"]  # the restart count worker-0 had when the job finished
    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    assert j["status"]["conditions"][-1]["message"] == "PyTorchJob pytest is successfully completed."
    # worker-0 failed and was restarted in place (same pod) before the success, the others did not.
    w0 = recorder.states("Pod", "pytest-worker-0")
    assert "Error" in w0 and len(recorder.uids["pytest-worker-0"]) == 1, w0
    assert at_finish >= 1
    assert j["status"]["podRestarts"]["pytest-worker-0"]["containers"]["pytorch"] <= at_finish
    assert all(recorder.restarts.get(n, 0) == 0 for n in ("pytest-master-0", "pytest-worker-1", "pytest-worker-2"))
    assert 1 <= restarts(j) <= 3 and restarts(j, "Worker") == restarts(j) and restarts(j, "Master") == 0
    # The job succeeded at the master's completion, with worker-0 still failing.
    assert recorder.first_time("PyTorchJob", "pytest", "Succeeded") >= \
        recorder.first_time("Pod", "pytest-master-0", "Completed")
    # Longer than the longest back-off (2 s): a restart it waited for would have come.
    j = await assert_nothing_restarts_after_finish(c, recorder, "PyTorchJob", "pytest", PT_PODS, 2.5)
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))

    async def settled():
        left = await leftovers(c, created)
        phases = {n: ((await get(c, "Pod", n)) or {}).get("status", {}).get("phase") for n in left["pods"]}
        return (left, phases) if all(p in ("Succeeded", "Failed") for p in phases.values()) else None

    left, phases = await wait_until(settled, 10, "every kept pod ran to its end")
    # cleanPodPolicy None deletes nothing (docs/SEMANTICS.md S5): worker-0, marked never to restart,
    # ended where it was (waiting for its restart, or running to its end): Failed, terminated Error
    # with its exit code, and the restart count it had; the PodGroup is deleted.
    assert left["pods"] == PT_PODS and set(left["services"]) == set(PT_PODS)
    assert phases["pytest-master-0"] == phases["pytest-worker-1"] == phases["pytest-worker-2"] == "Succeeded"
    assert phases["pytest-worker-0"] == "Failed"
    pod = await c.get("Pod", "pytest-worker-0", "default")
    assert pod["metadata"]["annotations"]["phalanx.dev/no-restart"] == "true"
    cs = pod["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["reason"] == "Error" and cs["state"]["terminated"]["exitCode"] == 1, cs
    assert cs["restartCount"] == at_finish == recorder.restarts["pytest-worker-0"], cs
    assert cs["lastState"].get("terminated", {}).get("exitCode", 1) == 1, cs  # the run before: a failure too
    assert recorder.states("Pod", "pytest-worker-0")[-1] == "Error"
    assert left["podgroup"] is False


@pytest.mark.parametrize("clean_pod_policy", ["None", "Running"])
async def test_p5_a_worker_waiting_to_restart_at_the_finish_is_kept_and_ended(cluster, recorder, clean_pod_policy):
    # docs/REFERENCE.md P5 with worker-0 crash-looping (it exits 1 at once), so between two runs when
    # the master completes: under None and Running alike (docs/SEMANTICS.md S5: it is not running) it
    # is kept, marked, and ends there: Failed, terminated Error, exit code 1, the restart count it had.
    # Running deletes the workers that run (they sleep 8 s); None keeps them.
    c = cluster.client
    worker = script('if [ "${RANK}" = "1" ]; then', "exit 1", "else", "sleep 8 & wait", "fi")
    created = await c.create(pytorch(2, worker=worker, cleanPodPolicy=clean_pod_policy, backoffLimit=20))
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Succeeded", 20)
    at_finish = recorder.restarts["pytest-worker-0"]
    waiting = bool(j["status"]["podRestarts"]["pytest-worker-0"].get("failing"))  # what the finish saw
    kept = PT_PODS if clean_pod_policy == "None" else PT_PODS[:2]
    if not waiting:  # seen running at the finish (rare: it runs for milliseconds): Running deletes it
        kept = PT_PODS if clean_pod_policy == "None" else PT_PODS[:1]

    async def ended():
        pod = await get(c, "Pod", "pytest-worker-0")
        left = await leftovers(c, created)
        done = pod is None or pod["status"]["phase"] == "Failed"
        return (left, pod) if left["pods"] == kept and done else None

    left, pod = await wait_until(ended, 10, f"the pods cleanPodPolicy {clean_pod_policy} keeps, worker-0 ended")
    assert (await c.get("Pod", "pytest-master-0", "default"))["status"]["phase"] == "Succeeded"
    if "pytest-worker-0" in kept:
        cs = pod["status"]["containerStatuses"][0]
        assert cs["state"]["terminated"]["reason"] == "Error" and cs["state"]["terminated"]["exitCode"] == 1, cs
        assert cs["lastState"]["terminated"]["exitCode"] == 1, cs
        assert cs["restartCount"] == at_finish >= 1, cs
    await assert_nothing_restarts_after_finish(c, recorder, "PyTorchJob", "pytest", PT_PODS, 2.5)
    assert left["podgroup"] is False and set(left["services"]) == set(kept)


# ------------------------------------------------------------------------------- P6, C2


async def _all_workers_fail(cluster, recorder, clean_pod_policy: str | None, completing_worker: bool):
    c = cluster.client
    lines = ["sleep 0.6 & wait", "exit 1"]
    if completing_worker:  # C2: worker-2 completes first, so a pod None would keep exists
        lines = ['if [ "${RANK}" = "3" ]; then', "exit 0", "fi", *lines]
    created = await c.create(pytorch(4, worker=script(*lines), cleanPodPolicy=clean_pod_policy))
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Failed", 20)
    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert condition(j, "Running")["status"] == "False"
    assert j["status"]["completionTime"]
    # backoffLimit 3: three failures were restarted, the next one failed the job.
    assert restarts(j) == restarts(j, "Worker") >= 4 and restarts(j, "Master") == 0
    # Well before the master would have completed (it sleeps 4 s); it never did.
    assert "Completed" not in recorder.states("Pod", "pytest-master-0")
    await wait_nothing_left(c, created, recorder=recorder)
    await wait_until(lambda: all(recorder.states("Pod", n)[-1] == "<deleted>" for n in PT_PODS), 5,
                     "the recorder to see every pod deleted")
    # Failed and deleted: never restarted after the failure.
    for n in PT_PODS:
        assert recorder.states("Pod", n)[-1] == "<deleted>"
        assert len(recorder.uids[n]) == 1, f"{n} recreated"
    assert recorder.states("PodGroup", "pytest")[-1] == "<deleted>"
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))
    return recorder


async def test_p6_all_workers_fail_job_failed_past_backoff_limit_and_everything_deleted(cluster, recorder):
    # docs/REFERENCE.md P6: every worker exits 1 after 10 s (OnFailure, backoffLimit 3). FIX (docs/SEMANTICS.md S2/S3):
    # Failed once the failures exceed backoffLimit, well before the master completes; all
    # pods (master included), services and the PodGroup deleted.
    rec = await _all_workers_fail(cluster, recorder, None, completing_worker=False)
    assert all("Error" in rec.states("Pod", f"pytest-worker-{i}") for i in range(3))


async def test_c2_failure_deletes_every_pod_whatever_clean_pod_policy(cluster, recorder):
    # docs/REFERENCE.md C2: when a job Fails all its pods are deleted whatever cleanPodPolicy says —
    # here None, with a worker that had Completed (a pod None keeps on success).
    rec = await _all_workers_fail(cluster, recorder, "None", completing_worker=True)
    assert "Completed" in rec.states("Pod", "pytest-worker-2")


# ------------------------------------------------------------------------------- P7


async def test_p7_master_fails_backoff_limit_3_allows_exactly_3_restarts(cluster, recorder):
    # docs/REFERENCE.md P7 (ACCEPTANCE): the master exits 1 after 30 s under OnFailure, backoffLimit 3.
    # It restarts in place while the job stays Running and the workers complete. FIX: exactly
    # 3 restarts are granted and each runs to its own failure; the 4th failure fails the job
    # (BackoffLimitExceeded) before any 4th restart, and nothing of the job is left.
    c = cluster.client
    created = await c.create(pytorch(0.9, master=script("sleep 0.6 & wait && exit 1")))
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Failed", 20)
    failed_at = time.monotonic()
    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert restarts(j, "Master") == restarts(j) == 4  # 3 granted restarts + the failure that was refused
    assert restarts(j, "Worker") == 0
    await wait_nothing_left(c, created, recorder=recorder)
    # Exactly three in-place restarts of the one master pod; the workers completed meanwhile.
    assert recorder.restarts["pytest-master-0"] == 3
    assert len(recorder.uids["pytest-master-0"]) == 1
    master = recorder.states("Pod", "pytest-master-0")
    assert master.count("Error") + master.count("CrashLoopBackOff") >= 3, master
    for w in PT_PODS[1:]:
        assert "Completed" in recorder.states("Pod", w)
        assert recorder.restarts.get(w, 0) == 0
    # A granted restart runs to its own failure: the third restart was not killed early —
    # the job failed only after the master had failed a fourth time (>= 4 x 0.6 s of runs).
    first_run = recorder.first_time("Pod", "pytest-master-0", "Running")
    assert failed_at - first_run >= 4 * 0.6
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))


# ------------------------------------------------------------------------------- P8


async def test_p8_deleting_the_master_repeatedly_exhausts_backoff_limit(cluster, recorder):
    # docs/REFERENCE.md P8: a deleted pod is recreated like a failed one. FIX (docs/SEMANTICS.md S2): the deletion is a
    # restart counted in the job's status, so the 4th deletion (backoffLimit 3) fails the job.
    c = cluster.client
    created = await c.create(pytorch(4))
    seen: list[str] = []
    for n in range(1, 5):
        async def master_running():
            p = await get(c, "Pod", "pytest-master-0")
            ok = p is not None and p["metadata"]["uid"] not in seen and p["status"].get("phase") == "Running" \
                and not p["metadata"].get("deletionTimestamp")
            return p if ok else None
        pod = await wait_until(master_running, 10, f"master-0 Running (incarnation {n})")
        j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Running", 5)
        assert restarts(j) == restarts(j, "Master") == n - 1
        seen.append(pod["metadata"]["uid"])
        await c.delete("Pod", "pytest-master-0", "default")
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Failed", 10)
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert restarts(j) == restarts(j, "Master") == 4 and restarts(j, "Worker") == 0
    # Each deletion: Restarting, then Running again once the new master runs; the 4th: Failed.
    states = recorder.states("PyTorchJob", "pytest")
    assert states == ["", "Created", "Running"] + ["Restarting", "Running"] * 3 + ["Failed"], states
    assert recorder.uids["pytest-master-0"][:4] == seen and len(recorder.uids["pytest-master-0"]) == 4
    # Every new pod starts at RESTARTS 0 (it is a new pod); the count is the job's.
    assert recorder.restarts["pytest-master-0"] == 0
    await wait_nothing_left(c, created, recorder=recorder)
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))


# ---------------------------------------------------------------------- seed 001 ExitCode


async def test_exit_code_138_recreates_the_pod_until_backoff_limit_then_fails(cluster, recorder):
    # Seed 001 (ACCEPTANCE): TFJob PS Always + Worker ExitCode; worker-0 (env POD_NAME) exits
    # 138 after 10 s. The operator deletes and recreates it (RESTARTS 0 each time) and the job
    # goes Running -> Restarting -> Running at every cycle. FIX: the recreations count toward
    # backoffLimit 3; the 4th failure fails the job and everything is deleted.
    c = cluster.client
    worker = script('if [ "${POD_NAME}" = "tftest-worker-0" ]; then', "sleep 0.4 & wait", "exit 138",
                    "else", "sleep 2 & wait", "fi")
    created = await c.create(tensorflow(2, worker=worker, worker_policy="ExitCode", pod_name_env=True))
    j = await wait_job(c, recorder, "TFJob", "tftest", "Failed", 25)
    states = recorder.states("TFJob", "tftest")
    assert states == ["", "Created", "Running"] + ["Restarting", "Running"] * 3 + ["Failed"], states
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "tftest")
    assert j["status"]["completionTime"]
    assert restarts(j) == restarts(j, "Worker") == 4 and restarts(j, "PS") == 0
    # Four worker-0 pods (one per failure), each new one at RESTARTS 0 and exiting Error.
    assert len(recorder.uids["tftest-worker-0"]) == 4
    assert recorder.restarts["tftest-worker-0"] == 0
    assert recorder.states("Pod", "tftest-worker-0").count("Error") >= 4
    assert all(len(recorder.uids[n]) == 1 for n in ("tftest-ps-0", "tftest-worker-1", "tftest-worker-2"))
    await wait_nothing_left(c, created, recorder=recorder)
    events = await assert_transitions_have_events(c, "TFJob", "tftest", states)
    restarting = [e for e in events if e["reason"] == "TFJobRestarting"]
    assert restarting and restarting[0]["type"] == "Warning"
    assert restarting[0]["message"] == "job tftest is restarting because Worker replica(s) failed."


async def test_exit_code_1_is_permanent_and_fails_the_job_at_once(cluster, recorder):
    # docs/REFERENCE.md seed 001 / docs/SEMANTICS.md S6 (ACCEPTANCE): under ExitCode, exit 1 is a permanent error: no restart,
    # the job Fails at once (with a completionTime, docs/SEMANTICS.md S11) and its pods are deleted.
    c = cluster.client
    worker = script('if [ "${POD_NAME}" = "tftest-worker-0" ]; then', "sleep 0.3 & wait", "exit 1",
                    "else", "sleep 3 & wait", "fi")
    created = await c.create(tensorflow(3, worker=worker, worker_policy="ExitCode", pod_name_env=True))
    j = await wait_job(c, recorder, "TFJob", "tftest", "Failed", 15)
    assert recorder.states("TFJob", "tftest") == ["", "Created", "Running", "Failed"]
    failed = condition(j, "Failed")
    msg = 'job "tftest" is failing because "Worker" replica(s) failed.'
    assert (failed["reason"], failed["message"]) == ("TFJobFailed", msg)
    assert j["status"]["completionTime"]
    assert restarts(j) == 0
    assert len(recorder.uids["tftest-worker-0"]) == 1 and recorder.restarts["tftest-worker-0"] == 0
    await wait_nothing_left(c, created, recorder=recorder)
    assert all("Completed" not in recorder.states("Pod", n) for n in ("tftest-worker-1", "tftest-worker-2"))
    events = await assert_transitions_have_events(c, "TFJob", "tftest", recorder.states("TFJob", "tftest"))
    assert any(e["reason"] == "TFJobFailed" and e["type"] == "Warning" and e["message"] == msg for e in events)


# ------------------------------------------------------------------------------- T3, T4


async def test_t3_tf_worker_failing_under_on_failure_fails_the_job_past_backoff_limit(cluster, recorder):
    # docs/REFERENCE.md T3: worker-0 exits 1 after 10 s under OnFailure; the other workers and the PS
    # complete at 30 s and the PS (Always) restarts after its clean exit. FIX (docs/SEMANTICS.md S2/S3): worker-0
    # restarts in place until its failures exceed backoffLimit 3, then Failed and all deleted;
    # the PS's clean restart is not a failure.
    c = cluster.client
    worker = script('if [ "${POD_NAME}" = "tftest-worker-0" ]; then', "sleep 0.5 & wait", "exit 1",
                    "else", "sleep 1.5 & wait", "fi")
    created = await c.create(tensorflow(1.5, worker=worker, pod_name_env=True))
    j = await wait_job(c, recorder, "TFJob", "tftest", "Failed", 20)
    assert recorder.states("TFJob", "tftest") == ["", "Created", "Running", "Failed"]
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "tftest")
    assert restarts(j) == restarts(j, "Worker") == 4 and restarts(j, "PS") == 0
    assert recorder.restarts["tftest-worker-0"] == 3 and len(recorder.uids["tftest-worker-0"]) == 1
    # The PS completed and was restarted (Always) before the failure: not counted.
    assert recorder.restarts["tftest-ps-0"] >= 1
    for n in ("tftest-worker-1", "tftest-worker-2"):
        assert "Completed" in recorder.states("Pod", n)
    await wait_nothing_left(c, created, recorder=recorder)
    await assert_transitions_have_events(c, "TFJob", "tftest", recorder.states("TFJob", "tftest"))


async def test_t4_ps_crash_loops_job_succeeds_and_the_ps_never_restarts_after(cluster, recorder):
    # docs/REFERENCE.md T4 (ACCEPTANCE with P5): the PS exits 1 after 15 s under Always and restarts
    # again and again; the job Succeeds when the workers complete (30 s). FIX (docs/SEMANTICS.md S5): after that
    # the PS is never restarted again.
    c = cluster.client
    created = await c.create(tensorflow(2, ps=script("sleep 1 & wait && exit 1")))
    j = await wait_job(c, recorder, "TFJob", "tftest", "Succeeded", 20)
    assert recorder.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
    assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
    assert recorder.restarts["tftest-ps-0"] >= 1 and "Error" in recorder.states("Pod", "tftest-ps-0")
    assert 1 <= restarts(j) == restarts(j, "PS") <= 3 and restarts(j, "Worker") == 0
    await assert_nothing_restarts_after_finish(c, recorder, "TFJob", "tftest", TF_PODS, 2.0)
    left = await leftovers(c, created)
    assert {"tftest-worker-0", "tftest-worker-1", "tftest-worker-2"} <= set(left["pods"])
    assert left["podgroup"] is False
    # cleanPodPolicy None keeps the PS: it ended (where it waited to restart, or at its run's end) Failed.
    ps = await wait_until(lambda: _ended(c, "tftest-ps-0"), 5, "the PS ended")
    cs = ps["status"]["containerStatuses"][0]
    assert ps["status"]["phase"] == "Failed" and cs["state"]["terminated"]["exitCode"] == 1, cs
    assert cs["restartCount"] == recorder.restarts["tftest-ps-0"] >= 1
    await assert_transitions_have_events(c, "TFJob", "tftest", recorder.states("TFJob", "tftest"))


# ------------------------------------------------------------------------------- C1, C3


async def test_c1_clean_pod_policy_all_deletes_the_running_workers_on_success(cluster, recorder):
    # docs/REFERENCE.md C1: cleanPodPolicy All; the job Succeeds when the master completes and the
    # still-running workers are deleted (Terminating -> Error); nothing of the job is left.
    c = cluster.client
    created = await c.create(pytorch(3, worker=script("sleep 8 & wait"), cleanPodPolicy="All"))
    await wait_job(c, recorder, "PyTorchJob", "pytest", "Succeeded", 20)
    await wait_nothing_left(c, created, recorder=recorder)
    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    assert recorder.states("Pod", "pytest-master-0")[-2:] == ["Completed", "<deleted>"]
    for w in PT_PODS[1:]:
        states = recorder.states("Pod", w)
        assert "Running" in states and "Completed" not in states, states
        assert states[-1] == "<deleted>"
    j = await c.get("PyTorchJob", "pytest", "default")
    assert job_state(j) == "Succeeded" and restarts(j) == 0
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))


async def test_c3_no_backoff_limit_fails_at_the_first_failure_and_cleans_up(cluster, recorder):
    # docs/REFERENCE.md C3 (ACCEPTANCE): P6 with backoffLimit removed. Observed: nothing cleaned, workers
    # restarted forever, job Succeeded. FIX (docs/SEMANTICS.md S3): the default is 0 — the first failure that would
    # need a restart fails the job; never Succeeded; everything deleted.
    c = cluster.client
    created = await c.create(pytorch(3, worker=script("sleep 0.6 & wait", "exit 1"), backoffLimit=None))
    assert "backoffLimit" not in created["spec"]["runPolicy"]
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Failed", 20)
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert 1 <= restarts(j) == restarts(j, "Worker") <= 3
    await wait_nothing_left(c, created, recorder=recorder)
    states = recorder.states("PyTorchJob", "pytest")
    assert states == ["", "Created", "Running", "Failed"] and "Succeeded" not in states
    assert "Completed" not in recorder.states("Pod", "pytest-master-0")
    assert all(len(recorder.uids[n]) == 1 for n in PT_PODS)
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", states)


# ------------------------------------------------------------------------------- D1, D2


async def _deadline(cluster, recorder, seconds: int, sleep: float) -> tuple[dict, float]:
    """Run the seed job with activeDeadlineSeconds; returns the failed job and how late
    (seconds) its Failed state was seen after startTime + activeDeadlineSeconds."""
    c = cluster.client
    created = await c.create(pytorch(sleep, activeDeadlineSeconds=seconds))
    j = await wait_job(c, recorder, "PyTorchJob", "pytest", "Failed", seconds + 10)
    failed = condition(j, "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", DEADLINE_MSG.format("pytest"))
    assert j["status"]["completionTime"]
    deadline = parse_time(j["status"]["startTime"]).timestamp() + seconds
    lateness = recorder.wall(recorder.first_time("PyTorchJob", "pytest", "Failed")) - deadline
    await wait_nothing_left(c, created, recorder=recorder)
    assert "Completed" not in recorder.states("Pod", "pytest-master-0")
    # The store is empty; the recorder's watch may still be delivering the last deletions.
    await wait_until(lambda: all(recorder.states("Pod", n)[-1] == "<deleted>" for n in PT_PODS), 5,
                     "the recorder to see every pod deleted")
    await assert_transitions_have_events(c, "PyTorchJob", "pytest", recorder.states("PyTorchJob", "pytest"))
    return j, lateness


async def test_d1_deadline_while_pods_are_starting(cluster, recorder):
    # docs/REFERENCE.md D1: activeDeadlineSeconds 5 (scaled to 1), pods still starting: Failed
    # (DeadlineExceeded) at the deadline, pods deleted.
    j, lateness = await _deadline(cluster, recorder, 1, 2)
    states = recorder.states("PyTorchJob", "pytest")
    assert states in (["", "Created", "Failed"], ["", "Created", "Running", "Failed"]), states
    assert -0.05 <= lateness < 1.0, lateness


async def test_d2_deadline_enforced_while_every_pod_is_stably_running(cluster, recorder):
    # docs/REFERENCE.md D2 (ACCEPTANCE): activeDeadlineSeconds 15 (scaled to 3), all pods stably Running
    # well before it. Observed: nothing at 15 s, Failed only when the master completed. FIX (docs/SEMANTICS.md S4):
    # Failed within a second of the deadline, reason DeadlineExceeded, pods deleted.
    j, lateness = await _deadline(cluster, recorder, 3, 6)
    assert recorder.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    deadline = parse_time(j["status"]["startTime"]).timestamp() + 3
    for n in PT_PODS:  # stably Running before the deadline: nothing changed that could trigger it
        assert recorder.wall(recorder.first_time("Pod", n, "Running")) < deadline - 0.5
    assert -0.05 <= lateness < 1.0, lateness
    print(f"D2 lateness: {lateness:.3f} s")
