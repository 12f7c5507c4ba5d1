"""The simulation agrees with the real processes: every seed scenario replayed in
virtual time (``phalanx.sim``) shows the sequence of job conditions and the end
states of pods that the real-process scenario tests assert (test_pytorchjob_seed,
test_tfjob_seed, test_failures, test_run_policies).

The seed manifests run as written, at the notes' real timings (30 s jobs, 10 s
failures) with the kubelet's real back-off (10 s doubling to 5 min) — virtual
time makes each scenario take a fraction of a second. Where a real test changes
a command (C1's long workers, C2's worker that completes, exit 1 instead of
138), the same change is made here with a behaviour annotation.
"""
from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
import yaml

from phalanx.cli import describe as describe_mod
from phalanx.cli import printers
from phalanx.objects.clock import parse_time
from phalanx.objects.errors import NotFound
from phalanx.sim.arrivals import resolve
from phalanx.sim.runner import SimResult, Simulation
from phalanx.sim.workload import parse_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEEDS = EXAMPLES / "seeds"
PT_PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
TF_PODS = ["tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
BACKOFF_MSG = "Job {} has failed because it has reached the specified backoff limit"


def backoff_message(message: str, job: str) -> bool:
    """The original's sentence, then Phalanx's (backoffLimit ..., restartCount N): <the failure>."""
    return message.startswith(BACKOFF_MSG.format(job) + " (backoffLimit ") and "restartCount" in message \
        and (" pod " in message or "replica(s) deleted" in message)
DEADLINE_MSG = "Job {} has failed because it was active longer than specified deadline"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def job_state(job: dict) -> str:
    conds = (job.get("status") or {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""


@dataclass
class Recorder:
    """As the real scenarios' Recorder (conftest.py), in virtual seconds."""

    rows: list[tuple[float, str, str, str]] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    uids: dict[str, list[str]] = field(default_factory=dict)
    _last: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, t: float, kind: str, obj: dict, deleted: bool, now) -> None:
        name = obj["metadata"]["name"]
        if kind == "Pod":
            seen = self.uids.setdefault(name, [])
            if obj["metadata"].get("uid") not in seen:
                seen.append(obj["metadata"]["uid"])
            st = obj.get("status") or {}
            counts = [c.get("restartCount") or 0 for c in
                      (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])]
            self.restarts[name] = max([self.restarts.get(name, 0), *counts])
        if deleted:
            state = "<deleted>"
        elif kind == "Pod":
            state = printers.row(obj, "Pod", False, now)[2]
        elif kind == "PodGroup":
            state = (obj.get("status") or {}).get("phase") or ""
        else:
            state = job_state(obj)
        if self._last.get((kind, name)) != state:
            self._last[(kind, name)] = state
            self.rows.append((t, kind, name, state))

    def states(self, kind: str, name: str) -> list[str]:
        return [s for _, k, n, s in self.rows if k == kind and n == name]

    def first_time(self, kind: str, name: str, state: str) -> float:
        for t, k, n, s in self.rows:
            if (k, n, s) == (kind, name, state):
                return t
        raise AssertionError(f"{kind}/{name} never reached {state}: {self.states(kind, name)}")


@dataclass
class Run:
    sim: Simulation
    result: SimResult
    rec: Recorder
    marks: dict[str, Any]

    def get(self, kind: str, name: str, ns: str | None = "default") -> dict | None:
        try:
            return self.sim.store.get(kind, name, ns)
        except NotFound:
            return None

    def items(self, kind: str, ns: str = "default", **kw: Any) -> list[dict]:
        return self.sim.store.list(kind, ns, **kw)[0]

    def leftovers(self, job_uid: str) -> dict:
        def owned(kind):
            return sorted(o["metadata"]["name"] for o in self.items(kind)
                          if any(r.get("uid") == job_uid for r in o["metadata"].get("ownerReferences") or []))
        name = next(r.name for r in self.result.records)
        return {"pods": owned("Pod"), "services": owned("Service"), "podgroup": self.get("PodGroup", name) is not None}


Driver = Callable[[Simulation, Recorder, dict], Awaitable[None]]


def simulate(objects: list[dict], *, behaviour: dict | None = None, driver: Driver | None = None,
             settle: float = 0.0, until: float = 3600.0, **sim: Any) -> Run:
    """Simulate ``objects`` submitted at t=0 on one node (16 cpu, 64Gi) as the seeds' ``las1``."""
    entries = [{"at": 0, "manifest": copy.deepcopy(o)} for o in objects]
    if behaviour:
        for e in entries:
            if e["manifest"].get("kind") in ("PyTorchJob", "TFJob"):
                e["behaviour"] = behaviour
    data = {"cluster": {"nodes": [{"count": 1, "cpu": 16, "memory": "64Gi", "prefix": "las1"}]},
            "sim": {"backoffBase": "10s", "backoffCap": "300s", "defaultBackoffLimit": 0, **sim},
            "jobs": entries}
    rec = Recorder()
    marks: dict[str, Any] = {}

    def started(s: Simulation) -> None:
        async def pump(kind: str) -> None:
            async for ev in s.client.watch(kind, "default", resource_version=s.store.current_rv()):
                rec.add(s.loop.time(), kind, ev.object, ev.type == "DELETED", s.clock.now())
        for k in ("PyTorchJob", "TFJob", "PodGroup", "Pod"):
            s.spawn(pump(k))
        if driver is not None:
            marks["_driver"] = s.spawn(driver(s, rec, marks))

    sim_ = Simulation(resolve(parse_workload(data), Path(".")), until=until, settle=settle, on_started=started)
    result = sim_.run()
    task = marks.pop("_driver", None)
    if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()
    return Run(sim_, result, rec, marks)


async def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll in virtual time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} virtual s waiting for {what}")
        await asyncio.sleep(interval)


def restarts(job: dict, rtype: str | None = None) -> int:
    st = job.get("status") or {}
    if rtype is None:
        return st.get("restartCount", 0)
    return ((st.get("replicaStatuses") or {}).get(rtype) or {}).get("restarts", 0)


def condition(job: dict, ctype: str) -> dict:
    return next(x for x in job["status"]["conditions"] if x["type"] == ctype)


def is_subsequence(seq: list[str], order: list[str]) -> bool:
    it = iter(order)
    return all(any(s == o for o in it) for s in seq)


def assert_transitions_have_events(run: Run, kind: str, name: str) -> list[dict]:
    events = run.items("Event", field_selector=f"involvedObject.name={name}")
    counts: dict[str, int] = {}
    for e in events:
        if e["involvedObject"]["kind"] == kind:
            counts[e["reason"]] = counts.get(e["reason"], 0) + e.get("count", 1)
    wanted: dict[str, int] = {}
    for s in run.rec.states(kind, name):
        if s not in ("", "<deleted>"):
            wanted[kind + s] = wanted.get(kind + s, 0) + 1
    for reason, n in wanted.items():
        assert counts.get(reason, 0) >= n, f"{reason}: {n} transitions, events {counts}"
    return events


def snapshot_at_finish(kind: str, name: str) -> Driver:
    """A driver noting restart counters and pod uids when the job finishes (docs/SEMANTICS.md S5 checks)."""
    async def driver(sim: Simulation, rec: Recorder, marks: dict) -> None:
        def finished():
            try:
                j = sim.store.get(kind, name, "default")
            except NotFound:
                return None
            return j if job_state(j) in ("Succeeded", "Failed") else None
        j = await wait_until(finished, 3600, f"{kind} finished")
        marks["job"] = (restarts(j), j["status"].get("replicaStatuses"))
        marks["restarts"] = dict(rec.restarts)
        marks["uids"] = {n: list(u) for n, u in rec.uids.items()}
    return driver


def assert_nothing_restarted_after_finish(run: Run, kind: str, name: str, pods: list[str]) -> dict:
    job = run.get(kind, name)
    assert (restarts(job), job["status"].get("replicaStatuses")) == run.marks["job"]
    for n in pods:
        assert run.rec.restarts.get(n, 0) == run.marks["restarts"].get(n, 0), f"{n} restarted after the finish"
        assert run.rec.uids.get(n, []) == run.marks["uids"].get(n, []), f"{n} recreated after the finish"
    return job


def assert_ended_failed(pod: dict | None, job: dict, restart_count: int) -> None:
    """docs/SEMANTICS.md S5: a kept pod of the finished job, marked never to restart and ended:
    Failed, terminated Error with exit code 1, the restart count the job saw at the finish."""
    assert pod is not None and pod["status"]["phase"] == "Failed"
    assert pod["metadata"]["annotations"]["phalanx.dev/no-restart"] == "true"
    cs = pod["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["reason"] == "Error" and cs["state"]["terminated"]["exitCode"] == 1, cs
    assert cs["lastState"]["terminated"]["exitCode"] == 1, cs
    seen = job["status"]["podRestarts"][pod["metadata"]["name"]]["containers"][cs["name"]]
    assert cs["restartCount"] == seen == restart_count, cs


# ----------------------------------------------------------------------------- seed 000: P1, P2


def test_p1_normal_run_order_of_states():
    run = simulate(docs(EXAMPLES / "pytorchjob.yaml"))
    rec = run.rec
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    pg = rec.states("PodGroup", "pytest")
    assert pg[:3] == ["", "Inqueue", "Running"] and pg[-1] == "<deleted>", pg
    master = rec.states("Pod", "pytest-master-0")
    assert master[0] == "Pending" and master[-1] == "Completed", master
    assert is_subsequence(master, ["Pending", "ContainerCreating", "Running", "Completed"]), master
    for w in PT_PODS[1:]:
        states = rec.states("Pod", w)
        assert is_subsequence(states, ["Pending", "Init:0/1", "PodInitializing", "Running", "Completed"]), states
        assert "Init:0/1" in states and "Running" in states, states
    assert rec.first_time("PyTorchJob", "pytest", "Running") >= rec.first_time("Pod", "pytest-master-0", "Running")
    assert rec.first_time("PyTorchJob", "pytest", "Succeeded") >= \
        rec.first_time("Pod", "pytest-master-0", "Completed")
    j = run.get("PyTorchJob", "pytest")
    assert [(x["type"], x["status"], x["reason"]) for x in j["status"]["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated"), ("Running", "False", "PyTorchJobRunning"),
        ("Succeeded", "True", "PyTorchJobSucceeded")]
    assert j["status"]["conditions"][-1]["message"] == "PyTorchJob pytest is successfully completed."
    assert j["status"]["startTime"] and j["status"]["completionTime"]
    pods = run.items("Pod")
    assert sorted(p["metadata"]["name"] for p in pods) == PT_PODS
    assert {p["spec"]["nodeName"] for p in pods} == {"las1-00000"}
    assert run.get("PodGroup", "pytest") is None
    # At the notes' timing: the master runs its 30 s, the job Succeeds then.
    assert 30 <= rec.first_time("PyTorchJob", "pytest", "Succeeded") < 31


def test_p2_queue_capability_blocks_the_gang_until_it_is_raised():
    async def driver(sim: Simulation, rec: Recorder, marks: dict) -> None:
        def refused():
            try:
                pg = sim.store.get("PodGroup", "pytest", "default")
            except NotFound:
                return None
            conds = (pg.get("status") or {}).get("conditions") or []
            return pg if any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conds) else None
        pg = await wait_until(refused, 30, "PodGroup Unschedulable")
        await asyncio.sleep(60)  # a minute of scheduling cycles: nothing may start meanwhile
        pods = sim.store.list("Pod", "default")[0]
        marks["bound"] = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
        marks["phases"] = {p["status"].get("phase") for p in pods}
        job = sim.store.get("PyTorchJob", "pytest", "default")
        marks["state"] = job_state(job)
        events = sim.store.list("Event", "default", field_selector="involvedObject.name=pytest")[0]
        marks["describe"] = describe_mod.describe(job, {"events": events, "podgroup": pg})
        marks["message"] = next(c["message"] for c in pg["status"]["conditions"] if c["type"] == "Unschedulable")
        marks["raised_at"] = sim.loop.time()
        q = sim.store.get("Queue", "default")
        q["spec"]["capability"] = {"cpu": 8}
        sim.store.update(q)

    run = simulate(docs(SEEDS / "p2-queue-capability.yaml"), driver=driver)
    m = run.marks
    assert 'queue "default"' in m["message"] and "cpu" in m["message"] and "4" in m["message"] \
        and "2" in m["message"], m["message"]
    assert m["bound"] == [] and m["phases"] <= {"Pending"}, "no pod may be bound while the gang cannot fit"
    assert m["state"] == "Created"
    assert 'queue "default"' in m["describe"]
    assert run.rec.states("PyTorchJob", "pytest")[-1] == "Succeeded"
    assert run.rec.first_time("PyTorchJob", "pytest", "Running") >= m["raised_at"]


# ----------------------------------------------------------------------------- P5, P6, C2, P7, P8


def test_p5_failing_worker_restarts_in_place_job_succeeds_and_nothing_restarts_after():
    run = simulate(docs(SEEDS / "p5-worker-fails.yaml"), driver=snapshot_at_finish("PyTorchJob", "pytest"),
                   settle=600)
    rec = run.rec
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    j = run.get("PyTorchJob", "pytest")
    assert j["status"]["conditions"][-1]["message"] == "PyTorchJob pytest is successfully completed."
    w0 = rec.states("Pod", "pytest-worker-0")
    assert "Error" in w0 and len(rec.uids["pytest-worker-0"]) == 1, w0
    assert rec.restarts["pytest-worker-0"] >= 1
    assert all(rec.restarts.get(n, 0) == 0 for n in ("pytest-master-0", "pytest-worker-1", "pytest-worker-2"))
    assert 1 <= restarts(j) <= 3 and restarts(j, "Worker") == restarts(j) and restarts(j, "Master") == 0
    assert rec.first_time("PyTorchJob", "pytest", "Succeeded") >= rec.first_time("Pod", "pytest-master-0", "Completed")
    assert_nothing_restarted_after_finish(run, "PyTorchJob", "pytest", PT_PODS)
    assert_transitions_have_events(run, "PyTorchJob", "pytest")
    left = run.leftovers(j["metadata"]["uid"])
    phases = {n: run.get("Pod", n)["status"]["phase"] for n in left["pods"]}
    assert all(p in ("Succeeded", "Failed") for p in phases.values()), phases
    assert {"pytest-master-0", "pytest-worker-1", "pytest-worker-2"} <= set(left["pods"])
    assert phases["pytest-master-0"] == phases["pytest-worker-1"] == phases["pytest-worker-2"] == "Succeeded"
    # cleanPodPolicy None deletes nothing: worker-0 (running at the finish, restarted at 30 s) ran to
    # its end, not restarted: Failed, terminated Error 1, the restart count it had.
    assert left["pods"] == PT_PODS and phases["pytest-worker-0"] == "Failed"
    assert_ended_failed(run.get("Pod", "pytest-worker-0"), j, run.marks["restarts"]["pytest-worker-0"])
    assert left["podgroup"] is False
    assert set(left["services"]) == set(left["pods"])


def _all_workers_fail(objects: list[dict], behaviour: dict | None = None) -> Run:
    run = simulate(objects, behaviour=behaviour)
    rec = run.rec
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    j = run.get("PyTorchJob", "pytest")
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert condition(j, "Running")["status"] == "False"
    assert j["status"]["completionTime"]
    assert restarts(j) == restarts(j, "Worker") >= 4 and restarts(j, "Master") == 0
    assert "Completed" not in rec.states("Pod", "pytest-master-0")
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    for n in PT_PODS:
        assert rec.states("Pod", n)[-1] == "<deleted>"
        assert len(rec.uids[n]) == 1, f"{n} recreated"
    assert rec.states("PodGroup", "pytest")[-1] == "<deleted>"
    assert_transitions_have_events(run, "PyTorchJob", "pytest")
    # At the notes' timing: the workers fail at 10 s and 20 s; Failed at 20 s, long before 30 s.
    assert rec.first_time("PyTorchJob", "pytest", "Failed") < 30
    return run


def test_p6_all_workers_fail_job_failed_past_backoff_limit_and_everything_deleted():
    run = _all_workers_fail(docs(SEEDS / "p6-all-workers-fail.yaml"))
    assert all("Error" in run.rec.states("Pod", f"pytest-worker-{i}") for i in range(3))


def test_c2_failure_deletes_every_pod_whatever_clean_pod_policy():
    job = docs(SEEDS / "p6-all-workers-fail.yaml")[0]
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    # As the real test: the worker with RANK 3 (worker-2) completes at once.
    run = _all_workers_fail([job], behaviour={"Worker[2]": {"duration": "0s", "exitCode": 0}})
    assert "Completed" in run.rec.states("Pod", "pytest-worker-2")


def test_p7_master_fails_backoff_limit_3_allows_exactly_3_restarts():
    run = simulate(docs(SEEDS / "p7-master-fails.yaml"))
    rec = run.rec
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    j = run.get("PyTorchJob", "pytest")
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert restarts(j, "Master") == restarts(j) == 4 and restarts(j, "Worker") == 0
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert rec.restarts["pytest-master-0"] == 3 and len(rec.uids["pytest-master-0"]) == 1
    master = rec.states("Pod", "pytest-master-0")
    assert master.count("Error") + master.count("CrashLoopBackOff") >= 3, master
    for w in PT_PODS[1:]:
        assert "Completed" in rec.states("Pod", w) and rec.restarts.get(w, 0) == 0
    # Each granted restart ran to its own failure: four 30 s runs plus back-offs of 0, 10, 20 s.
    failed_at = rec.first_time("PyTorchJob", "pytest", "Failed")
    first_run = rec.first_time("Pod", "pytest-master-0", "Running")
    assert failed_at - first_run == pytest.approx(4 * 30 + 10 + 20, abs=0.1)
    assert_transitions_have_events(run, "PyTorchJob", "pytest")


def test_p8_deleting_the_master_repeatedly_exhausts_backoff_limit():
    async def driver(sim: Simulation, rec: Recorder, marks: dict) -> None:
        seen: list[str] = []
        counts: list[tuple[int, int]] = []
        for n in range(1, 5):
            def master_running():
                try:
                    p = sim.store.get("Pod", "pytest-master-0", "default")
                except NotFound:
                    return None
                ok = p["metadata"]["uid"] not in seen and p["status"].get("phase") == "Running" \
                    and not p["metadata"].get("deletionTimestamp")
                return p if ok else None
            pod = await wait_until(master_running, 60, f"master-0 Running (incarnation {n})")
            j = await wait_until(lambda: (lambda j: j if job_state(j) == "Running" else None)(
                sim.store.get("PyTorchJob", "pytest", "default")), 10, "job Running")  # created before its pods
            counts.append((restarts(j), restarts(j, "Master")))
            seen.append(pod["metadata"]["uid"])
            sim.store.delete("Pod", "pytest-master-0", "default")
        marks["seen"], marks["counts"] = seen, counts

    run = simulate(docs(EXAMPLES / "pytorchjob.yaml"), driver=driver)
    rec = run.rec
    assert run.marks["counts"] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    j = run.get("PyTorchJob", "pytest")
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert restarts(j) == restarts(j, "Master") == 4 and restarts(j, "Worker") == 0
    states = rec.states("PyTorchJob", "pytest")
    assert states == ["", "Created", "Running"] + ["Restarting", "Running"] * 3 + ["Failed"], states
    assert rec.uids["pytest-master-0"][:4] == run.marks["seen"] and len(rec.uids["pytest-master-0"]) == 4
    assert rec.restarts["pytest-master-0"] == 0
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert_transitions_have_events(run, "PyTorchJob", "pytest")


# ----------------------------------------------------------------------------- seed 001: ExitCode


def test_exit_code_138_recreates_the_pod_until_backoff_limit_then_fails():
    run = simulate(docs(SEEDS / "exitcode-138.yaml"))
    rec = run.rec
    states = rec.states("TFJob", "tftest")
    assert states == ["", "Created", "Running"] + ["Restarting", "Running"] * 3 + ["Failed"], states
    j = run.get("TFJob", "tftest")
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "tftest")
    assert j["status"]["completionTime"]
    assert restarts(j) == restarts(j, "Worker") == 4 and restarts(j, "PS") == 0
    assert len(rec.uids["tftest-worker-0"]) == 4 and rec.restarts["tftest-worker-0"] == 0
    assert rec.states("Pod", "tftest-worker-0").count("Error") >= 4
    assert all(len(rec.uids[n]) == 1 for n in ("tftest-ps-0", "tftest-worker-1", "tftest-worker-2"))
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    events = assert_transitions_have_events(run, "TFJob", "tftest")
    restarting = [e for e in events if e["reason"] == "TFJobRestarting"]
    assert restarting and restarting[0]["type"] == "Warning"
    assert restarting[0]["message"] == "job tftest is restarting because Worker replica(s) failed."


def test_exit_code_1_is_permanent_and_fails_the_job_at_once():
    run = simulate(docs(SEEDS / "exitcode-138.yaml"), behaviour={"Worker[0]": {"failAfter": "3s", "exitCode": 1}})
    rec = run.rec
    assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Failed"]
    j = run.get("TFJob", "tftest")
    msg = 'job "tftest" is failing because "Worker" replica(s) failed.'
    failed = condition(j, "Failed")
    assert (failed["reason"], failed["message"]) == ("TFJobFailed", msg)
    assert j["status"]["completionTime"] and restarts(j) == 0
    assert len(rec.uids["tftest-worker-0"]) == 1 and rec.restarts["tftest-worker-0"] == 0
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert all("Completed" not in rec.states("Pod", n) for n in ("tftest-worker-1", "tftest-worker-2"))
    events = assert_transitions_have_events(run, "TFJob", "tftest")
    assert any(e["reason"] == "TFJobFailed" and e["type"] == "Warning" and e["message"] == msg for e in events)


# ----------------------------------------------------------------------------- seed 002: T1, T3, T4


def test_t1_normal_run():
    run = simulate(docs(EXAMPLES / "tfjob.yaml"))
    rec = run.rec
    assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
    assert rec.states("PodGroup", "tftest")[-1] == "<deleted>"
    assert rec.first_time("TFJob", "tftest", "Succeeded") >= rec.first_time("Pod", "tftest-worker-0", "Completed")
    j = run.get("TFJob", "tftest")
    assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
    assert {p["metadata"]["name"] for p in run.items("Pod")} == set(TF_PODS)


def test_t3_tf_worker_failing_under_on_failure_fails_the_job_past_backoff_limit():
    run = simulate(docs(SEEDS / "t3-tf-worker-fails.yaml"))
    rec = run.rec
    assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Failed"]
    j = run.get("TFJob", "tftest")
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "tftest")
    assert restarts(j) == restarts(j, "Worker") == 4 and restarts(j, "PS") == 0
    assert rec.restarts["tftest-worker-0"] == 3 and len(rec.uids["tftest-worker-0"]) == 1
    assert rec.restarts["tftest-ps-0"] >= 1  # the PS completed and was restarted (Always): not counted
    for n in ("tftest-worker-1", "tftest-worker-2"):
        assert "Completed" in rec.states("Pod", n)
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert_transitions_have_events(run, "TFJob", "tftest")


@pytest.mark.parametrize("clean_pod_policy", ["None", "Running"])
def test_t4_ps_crash_loops_job_succeeds_and_the_ps_never_restarts_after(clean_pod_policy):
    job = docs(SEEDS / "t4-tf-ps-fails.yaml")[0]
    job["spec"]["runPolicy"]["cleanPodPolicy"] = clean_pod_policy
    run = simulate([job], driver=snapshot_at_finish("TFJob", "tftest"), settle=600)
    rec = run.rec
    assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
    j = run.get("TFJob", "tftest")
    assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
    assert rec.restarts["tftest-ps-0"] >= 1 and "Error" in rec.states("Pod", "tftest-ps-0")
    assert 1 <= restarts(j) == restarts(j, "PS") <= 3 and restarts(j, "Worker") == 0
    assert_nothing_restarted_after_finish(run, "TFJob", "tftest", TF_PODS)
    left = run.leftovers(j["metadata"]["uid"])
    assert {"tftest-worker-0", "tftest-worker-1", "tftest-worker-2"} <= set(left["pods"])
    assert left["podgroup"] is False
    # The PS waits in CrashLoopBackOff at the finish (exited at 30 s): not running, so kept under None
    # and Running alike, and ended there without its restart: Failed, Error 1, restart count 1.
    assert j["status"]["podRestarts"]["tftest-ps-0"]["failing"] == ["tensorflow"]
    assert rec.states("Pod", "tftest-ps-0")[-2:] == ["CrashLoopBackOff", "Error"]
    assert_ended_failed(run.get("Pod", "tftest-ps-0"), j, 1)
    assert_transitions_have_events(run, "TFJob", "tftest")


# ----------------------------------------------------------------------------- seed 003: C1, C3


def test_c1_clean_pod_policy_all_deletes_the_running_workers_on_success():
    # As the real test: the workers outlive the master (80 s against 30 s).
    run = simulate(docs(SEEDS / "c1-clean-pod-policy-all.yaml"), behaviour={"Worker": {"duration": "80s"}})
    rec = run.rec
    j = run.get("PyTorchJob", "pytest")
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
    assert rec.states("Pod", "pytest-master-0")[-2:] == ["Completed", "<deleted>"]
    for w in PT_PODS[1:]:
        states = rec.states("Pod", w)
        assert "Running" in states and "Completed" not in states, states
        assert states[-1] == "<deleted>" and "Error" in states  # Terminating -> Error, as the notes saw
    assert job_state(j) == "Succeeded" and restarts(j) == 0
    assert_transitions_have_events(run, "PyTorchJob", "pytest")


def test_c3_no_backoff_limit_fails_at_the_first_failure_and_cleans_up():
    run = simulate(docs(SEEDS / "c3-no-backoff-limit.yaml"))
    rec = run.rec
    j = run.get("PyTorchJob", "pytest")
    assert "backoffLimit" not in j["spec"]["runPolicy"]
    failed = condition(j, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest")
    assert 1 <= restarts(j) == restarts(j, "Worker") <= 3
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    states = rec.states("PyTorchJob", "pytest")
    assert states == ["", "Created", "Running", "Failed"] and "Succeeded" not in states
    assert "Completed" not in rec.states("Pod", "pytest-master-0")
    assert all(len(rec.uids[n]) == 1 for n in PT_PODS)
    assert_transitions_have_events(run, "PyTorchJob", "pytest")


# ----------------------------------------------------------------------------- seed 004: D1, D2


def _deadline(seed: str, seconds: int) -> tuple[Run, float]:
    run = simulate(docs(SEEDS / seed))
    j = run.get("PyTorchJob", "pytest")
    failed = condition(j, "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", DEADLINE_MSG.format("pytest"))
    assert j["status"]["completionTime"]
    start = run.sim.clock.seconds(parse_time(j["status"]["startTime"]))
    lateness = run.rec.first_time("PyTorchJob", "pytest", "Failed") - (start + seconds)
    assert run.leftovers(j["metadata"]["uid"]) == {"pods": [], "services": [], "podgroup": False}
    assert "Completed" not in run.rec.states("Pod", "pytest-master-0")
    assert all(run.rec.states("Pod", n)[-1] == "<deleted>" for n in PT_PODS)
    assert_transitions_have_events(run, "PyTorchJob", "pytest")
    return run, lateness


def test_d1_deadline_while_pods_are_starting():
    run, lateness = _deadline("d1-deadline-5s.yaml", 5)
    assert run.rec.states("PyTorchJob", "pytest") in (["", "Created", "Failed"],
                                                      ["", "Created", "Running", "Failed"])
    assert -0.05 <= lateness < 1.0, lateness


def test_d2_deadline_enforced_while_every_pod_is_stably_running():
    run, lateness = _deadline("d2-deadline-15s.yaml", 15)
    assert run.rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
    j = run.get("PyTorchJob", "pytest")
    deadline = run.sim.clock.seconds(parse_time(j["status"]["startTime"])) + 15
    for n in PT_PODS:
        assert run.rec.first_time("Pod", n, "Running") < deadline - 0.5
    assert -0.05 <= lateness < 1.0, lateness


# ----------------------------------------------------------------------------- run policies


def test_suspend_deletes_everything_and_resume_resets_start_time():
    async def driver(sim: Simulation, rec: Recorder, marks: dict) -> None:
        def get() -> dict:
            try:
                return sim.store.get("PyTorchJob", "pytest", "default")
            except NotFound:
                return {}
        job = await wait_until(lambda: (lambda j: j if job_state(j) == "Running" else None)(get()), 15, "Running")
        uid, marks["first_start"] = job["metadata"]["uid"], job["status"]["startTime"]
        await asyncio.sleep(5)
        sim.store.patch("PyTorchJob", "pytest", "default", {"spec": {"runPolicy": {"suspend": True}}})

        def empty():
            j = get()
            s = next((c for c in j["status"].get("conditions") or [] if c["type"] == "Suspended"), None)
            owned = [o for k in ("Pod", "Service") for o in sim.store.list(k, "default")[0]
                     if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]
            try:
                sim.store.get("PodGroup", "pytest", "default")
                pg = True
            except NotFound:
                pg = False
            return j if s and s["status"] == "True" and not owned and not pg else None
        marks["suspended"] = await wait_until(empty, 15, "suspended, everything deleted")
        await asyncio.sleep(10)
        sim.store.patch("PyTorchJob", "pytest", "default", {"spec": {"runPolicy": {"suspend": False}}})

    run = simulate(docs(EXAMPLES / "pytorchjob.yaml"), driver=driver)
    s = run.marks["suspended"]
    sus = condition(s, "Suspended")
    assert (sus["reason"], sus["message"]) == ("PyTorchJobSuspended", "PyTorchJob pytest is suspended.")
    assert condition(s, "Running")["status"] == "False" and job_state(s) == "Suspended"
    j = run.get("PyTorchJob", "pytest")
    assert job_state(j) == "Succeeded"
    assert parse_time(j["status"]["startTime"]) > parse_time(run.marks["first_start"])
    resumed = condition(j, "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "PyTorchJobResumed")
    reasons = [e["reason"] for e in run.items("Event", field_selector="involvedObject.name=pytest")]
    assert "PyTorchJobSuspended" in reasons and "PyTorchJobResumed" in reasons
    assert run.rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Suspended", "Running",
                                                      "Succeeded"], run.rec.states("PyTorchJob", "pytest")


def test_ttl_after_finished_deletes_the_job_and_all_it_owns():
    job = docs(EXAMPLES / "pytorchjob.yaml")[0]
    job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 60
    run = simulate([job], settle=120)
    rec = run.rec
    assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded", "<deleted>"]
    done = rec.first_time("PyTorchJob", "pytest", "Succeeded")
    gone = rec.first_time("PyTorchJob", "pytest", "<deleted>")
    assert 59 <= gone - done <= 61  # completionTime has second precision, as in Kubernetes
    assert run.items("Pod") == [] and run.items("Service") == [] and run.get("PodGroup", "pytest") is None
    assert run.result.records[0].final_state == "Succeeded"
