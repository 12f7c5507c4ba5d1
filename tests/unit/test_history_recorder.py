"""The history recorder over the real Store and LocalClient with a fake clock: pod instances'
states, restarts, re-creations, events, de-duplication across restarts, removal with the job."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from phalanx.client.local import LocalClient
from phalanx.controller.history import HistoryRecorder, job_state, pod_state
from phalanx.objects.clock import FakeClock, format_time
from phalanx.store import Store
from phalanx.store.history import JobHistories, JobKey, Record

NS = "default"


async def eventually(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class Env:
    def __init__(self, root: Path) -> None:
        self.clock = FakeClock()
        self.store = Store(None, self.clock)
        self.client = LocalClient(self.store)
        self.histories = JobHistories(root)
        self.recorder: HistoryRecorder | None = None

    async def start(self) -> HistoryRecorder:
        self.recorder = HistoryRecorder(self.client, self.histories, self.clock)
        await self.recorder.start()
        await asyncio.wait_for(self.recorder.synced.wait(), 5)
        return self.recorder

    async def stop(self) -> None:
        if self.recorder is not None:
            await self.recorder.stop()
            self.recorder = None

    async def settle(self) -> None:
        """Every change made so far is seen and written: wait for the store's last resourceVersion."""
        rec = self.recorder
        assert rec is not None
        def caught_up() -> bool:
            for inf in rec._informers():
                have = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                        for o in inf.list()}
                want = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                        for o in self.store.list(inf.kind)[0]}
                if have != want:
                    return False
            return True
        await eventually(caught_up, what="informers caught up")
        await rec.flushed()

    def records(self, job: dict, kind: str | None = None) -> list[Record]:
        key = JobKey(NS, job["kind"], job["metadata"]["name"], job["metadata"]["uid"])
        return [r for r in self.histories.read(key) if kind is None or r.kind == kind]

    def states(self, job: dict, kind: str, name: str | None = None) -> list[str]:
        return [r.state for r in self.records(job, kind) if name is None or r.name == name]

    # -- objects ---------------------------------------------------------------

    async def job(self, name: str = "train") -> dict:
        return await self.client.create({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "busybox"}]}}}}}})

    async def condition(self, job: dict, ctype: str, reason: str = "", message: str = "") -> dict:
        cur = await self.client.get(job["kind"], job["metadata"]["name"], NS)
        conds = [c for c in (cur.get("status") or {}).get("conditions") or [] if c["type"] != ctype]
        conds.append({"type": ctype, "status": "True", "reason": reason or f"Job{ctype}", "message": message})
        cur["status"] = {"conditions": conds}
        return await self.client.update_status(cur)

    async def podgroup(self, job: dict, owned: bool = True) -> dict:
        meta: dict = {"name": job["metadata"]["name"], "namespace": NS}
        if owned:
            meta["ownerReferences"] = [owner(job)]
        return await self.client.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                         "metadata": meta, "spec": {"minMember": 1}})

    async def pod(self, job: dict, name: str) -> dict:
        return await self.client.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "ownerReferences": [owner(job)]},
            "spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}})

    async def pod_status(self, name: str, phase: str, *, node: str | None = None, state: dict | None = None,
                         last: dict | None = None, restarts: int = 0, ready: bool = False) -> dict:
        cur = await self.client.get("Pod", name, NS)
        if node and not cur["spec"].get("nodeName"):
            await self.client.bind(NS, name, node)
            cur = await self.client.get("Pod", name, NS)
        cs = {"name": "pytorch", "ready": ready, "restartCount": restarts, "state": state or {}}
        if last:
            cs["lastState"] = last
        cur["status"] = {"phase": phase, "containerStatuses": [cs],
                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        return await self.client.update_status(cur)

    async def event(self, obj: dict, reason: str, message: str = "", type_: str = "Normal") -> dict:
        m = obj["metadata"]
        ts = format_time(self.clock.now())
        return await self.client.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{m['name']}.{reason.lower()}", "namespace": NS},
            "involvedObject": {"kind": obj["kind"], "name": m["name"], "namespace": NS, "uid": m["uid"]},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": ts, "lastTimestamp": ts})


def owner(job: dict) -> dict:
    return {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": True}


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:01Z"}}


def done(code: int) -> dict:
    return {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                           "finishedAt": "2026-01-01T00:00:05Z"}}


@pytest.fixture
async def env(tmp_path):
    e = Env(tmp_path / "history")
    try:
        yield e
    finally:
        await e.stop()


# -- pure pieces -------------------------------------------------------------


def test_job_state_is_the_last_condition():
    assert job_state({}) == ("", {})
    job = {"status": {"conditions": [{"type": "Created", "reason": "a"},
                                     {"type": "Running", "reason": "JobRunning", "message": "m"}]}}
    assert job_state(job) == ("Running", {"reason": "JobRunning", "message": "m"})


def test_pod_state_reads_status_restarts_node_and_exit_code():
    now = FakeClock().now()
    pod = {"spec": {"nodeName": "n1", "containers": [{"name": "side"}, {"name": "pytorch"}]},
           "metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "pytorch"}},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "side", "ready": True, "restartCount": 0, "state": RUNNING},
               {"name": "pytorch", "ready": True, "restartCount": 2, "state": RUNNING, "lastState": done(3)}],
               "conditions": [{"type": "Ready", "status": "True"}]}}
    assert pod_state(pod, now) == ("Running", {"restarts": 2, "node": "n1", "exitCode": 3})
    assert pod_state({"status": {"phase": "Pending"}}, now) == ("Pending", {"restarts": 0, "node": ""})


# -- the recorder ------------------------------------------------------------


async def test_pod_goes_pending_running_completed(env):
    await env.start()
    job = await env.job()
    await env.condition(job, "Created")
    await env.pod(job, "train-master-0")
    await env.settle()
    env.clock.advance(1)
    await env.pod_status("train-master-0", "Pending", node="n1")
    await env.pod_status("train-master-0", "Running", state=RUNNING, ready=True)
    await env.settle()
    await env.condition(job, "Running")
    await env.settle()
    env.clock.advance(4)
    await env.pod_status("train-master-0", "Succeeded", state=done(0))
    await env.condition(job, "Succeeded")
    await env.settle()
    assert env.states(job, "Job") == ["Created", "Running", "Succeeded"]
    pods = env.records(job, "Pod")
    assert [p.state for p in pods] == ["Pending", "Running", "Completed"]
    assert pods[0].detail == {"restarts": 0, "node": ""}
    assert pods[1].detail == {"restarts": 0, "node": "n1"}
    assert pods[2].detail == {"restarts": 0, "node": "n1", "exitCode": 0}
    assert pods[2].t - pods[0].t == pytest.approx(5)
    assert all(p.uid == pods[0].uid for p in pods)
    assert env.records(job, "Job")[-1].detail == {"reason": "JobSucceeded", "message": ""}


async def test_restart_is_recorded_when_the_count_grows(env):
    await env.start()
    job = await env.job()
    await env.pod(job, "p")
    await env.pod_status("p", "Running", node="n1", state=RUNNING, ready=True)
    await env.settle()
    await env.pod_status("p", "Running", state=RUNNING, ready=True, restarts=1, last=done(137))
    await env.settle()
    await env.pod_status("p", "Running", state=RUNNING, ready=True, restarts=1, last=done(137))  # no change
    await env.settle()
    pods = env.records(job, "Pod")
    assert [(p.state, p.detail["restarts"]) for p in pods] == [("Pending", 0), ("Running", 0), ("Running", 1)]
    assert pods[2].detail["exitCode"] == 137


async def test_deleted_instance_and_its_successor_are_two_instances(env):
    await env.start()
    job = await env.job()
    first = await env.pod(job, "p")
    await env.pod_status("p", "Failed", node="n1", state=done(1))
    await env.settle()
    await env.client.delete("Pod", "p", NS, grace_period_seconds=0)
    await env.settle()
    second = await env.pod(job, "p")
    await env.settle()
    pods = env.records(job, "Pod")
    assert [(p.uid, p.state) for p in pods] == [
        (first["metadata"]["uid"], "Pending"), (first["metadata"]["uid"], "Error"),
        (first["metadata"]["uid"], "<deleted>"), (second["metadata"]["uid"], "Pending")]


async def test_events_of_the_job_its_podgroup_and_its_pods(env):
    await env.start()
    job = await env.job()
    pg = await env.podgroup(job)
    pod = await env.pod(job, "p")
    other = await env.job("other")
    await env.event(job, "SuccessfulCreatePod", "Created pod: p")
    await env.event(pg, "Unschedulable", "0/1 nodes are unavailable", "Warning")
    ev = await env.event(pod, "Scheduled", "Successfully assigned default/p to n1")
    await env.event(other, "SuccessfulCreatePod", "not this job's")
    await env.settle()
    events = env.records(job, "Event")
    assert [(e.state, e.detail["object"], e.detail["type"]) for e in events] == [
        ("SuccessfulCreatePod", "PyTorchJob/train", "Normal"), ("Unschedulable", "PodGroup/train", "Warning"),
        ("Scheduled", "Pod/p", "Normal")]
    assert events[2].detail["count"] == 1 and events[2].detail["message"].endswith("to n1")
    assert events[2].detail["at"] == env.clock.now().timestamp()
    # A count that grows is recorded again (back-off restarts); the same count is not.
    env.clock.advance(10)
    await env.client.patch("Event", ev["metadata"]["name"], NS, {"count": 2,
                                                                  "lastTimestamp": format_time(env.clock.now())})
    await env.client.patch("Event", ev["metadata"]["name"], NS, {"message": "same count"})
    await env.settle()
    scheduled = [e for e in env.records(job, "Event") if e.state == "Scheduled"]
    assert [e.detail["count"] for e in scheduled] == [1, 2]
    assert scheduled[1].detail["at"] - scheduled[0].detail["at"] == 10
    # An event of a pod already deleted still finds its job.
    await env.client.delete("Pod", "p", NS, grace_period_seconds=0)
    await env.event(pod, "Killing", "Stopping container pytorch")
    await env.settle()
    assert env.states(job, "Event")[-1] == "Killing"
    assert env.states(other, "Event") == ["SuccessfulCreatePod"]


async def test_podgroup_phases_by_owner_or_by_name(env):
    await env.start()
    job = await env.job()
    pg = await env.podgroup(job, owned=False)
    await env.settle()
    for phase in ("Pending", "Pending", "Inqueue", "Running"):
        pg = await env.client.get("PodGroup", "train", NS)
        pg["status"] = {"phase": phase}
        await env.client.update(pg)
    await env.settle()
    assert env.states(job, "PodGroup") == ["Pending", "Inqueue", "Running"]


async def test_objects_seen_before_their_job_are_recorded_with_it(env):
    # The pod and its event exist before the recorder starts; the job comes with them.
    job = await env.job()
    await env.condition(job, "Created")
    pod = await env.pod(job, "p")
    await env.event(pod, "Scheduled", "assigned")
    await env.start()
    await env.settle()
    assert [r.kind for r in env.records(job)] == ["Job", "Pod", "Event"]


async def test_a_restarted_recorder_writes_no_duplicate_and_misses_nothing(env):
    await env.start()
    job = await env.job()
    await env.condition(job, "Created")
    pod = await env.pod(job, "p")
    await env.pod_status("p", "Running", node="n1", state=RUNNING, ready=True)
    await env.event(pod, "Scheduled", "assigned")
    await env.settle()
    before = env.records(job)
    await env.stop()
    # While nobody watches: the job runs, the pod is deleted.
    await env.condition(job, "Running")
    await env.client.delete("Pod", "p", NS, grace_period_seconds=0)
    await env.start()
    await env.settle()
    after = env.records(job)
    assert after[:len(before)] == before
    assert [(r.kind, r.state) for r in after[len(before):]] == [("Job", "Running"), ("Pod", "<deleted>")]
    await env.stop()
    await env.start()
    await env.settle()
    assert env.records(job) == after


async def test_history_goes_with_its_job_and_stale_files_are_removed(env):
    stale = JobKey(NS, "TFJob", "gone", "0000-dead")
    env.histories.append(stale, [Record(1.0, "Job", "gone", "0000-dead", "Created")])
    await env.start()
    await env.settle()
    assert env.histories.read(stale) == []
    job = await env.job()
    await env.condition(job, "Created")
    await env.settle()
    key = JobKey(NS, "PyTorchJob", "train", job["metadata"]["uid"])
    assert env.histories.keys() == [key]
    await env.client.delete("PyTorchJob", "train", NS)
    await env.settle()
    assert env.histories.keys() == []


async def test_an_unwritable_history_is_logged_not_fatal(env, tmp_path, caplog):
    env.histories.root = tmp_path / "file"
    env.histories.root.write_text("not a folder")
    rec = await env.start()
    job = await env.job()
    await env.condition(job, "Created")
    await env.settle()
    assert rec.errors >= 1
    assert "history: cannot append" in caplog.text
    await env.condition(job, "Running")
    await env.settle()
    assert rec.errors >= 2
