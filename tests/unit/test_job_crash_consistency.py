"""A crash in the middle of applying a reconcile leaves a state the next reconcile
completes (level-triggered): for every write of a round, the controller is
"killed" right before it, a new controller (no memory of the old one) takes
over, and the end state must be the crash-free one — cleanups, PodGroup
deletion, the no-restart marks and the restart counts included.

In-memory store, fake clock, no processes: the pods' states are written by
the test as the node agent would.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.controller.job import ReconcileOptions
from phalanx.controller.job.claim import ORPHAN_INDEX, orphan_index
from phalanx.controller.job.controller import OWNER_INDEX, JobController, owner_index
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import NotFound
from phalanx.store.store import Store

KEY = "PyTorchJob/default/crashy"


class Crash(BaseException):
    """The process died here: nothing after it runs (not an Exception, so nobody catches it)."""


class CrashingClient:
    """The LocalClient, dying right before its ``crash_at``-th write (1-based)."""

    WRITES = ("create", "update", "update_status", "patch", "delete", "bind")

    def __init__(self, inner: LocalClient, crash_at: int | None = None) -> None:
        self.inner = inner
        self.crash_at = crash_at
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.writes += 1
            if self.crash_at is not None and self.writes == self.crash_at:
                raise Crash()
            return await attr(*args, **kwargs)
        return write


class StoreView:
    """An informer that never lags: reads the store."""

    def __init__(self, store: Store, kind: str) -> None:
        self.store, self.kind = store, kind

    def get(self, ns: str, name: str) -> dict | None:
        try:
            return self.store.get(self.kind, name, ns)
        except NotFound:
            return None

    def list(self, ns: str | None = None, label_selector: Any = None) -> list[dict]:
        return self.store.list(self.kind, ns)[0]

    def by_index(self, index: str, value: str) -> list[dict]:
        fn = {OWNER_INDEX: owner_index, ORPHAN_INDEX: orphan_index}[index]
        return [o for o in self.list() if value in fn(o)]


class World:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = Store(None, self.clock, admission=admit)
        port = iter(range(23456, 24000))

        def network(op: str, o: dict, old: dict | None) -> dict:  # the local network's Service allocation
            if op == "create" and isinstance(o, dict) and o.get("kind") == "Service":
                ann = o["metadata"].setdefault("annotations", {})
                ann["phalanx.dev/address"] = "127.0.1.9"
                ann["phalanx.dev/host-ports"] = '{"pytorchjob-port": %d}' % next(port)
            return o

        self.store.add_admission_plugin(network)
        self.client = LocalClient(self.store)

    def controller(self, crash_at: int | None = None) -> tuple[JobController, CrashingClient]:
        client = CrashingClient(self.client, crash_at)
        jc = JobController(client, self.clock, ReconcileOptions(init_container_command=["initwait"]),
                           kinds=("PyTorchJob",))
        jc.jobs = {"PyTorchJob": StoreView(self.store, "PyTorchJob")}
        jc.pods, jc.services = StoreView(self.store, "Pod"), StoreView(self.store, "Service")
        jc.podgroups = StoreView(self.store, "PodGroup")
        return jc, client

    async def settle(self, crash_at: int | None = None) -> int:
        """Reconcile until a round writes nothing; with ``crash_at``, the first
        controller dies before that write and a fresh one carries on. Pods
        being deleted are let go as their node agent would. Returns the writes
        of the first controller."""
        jc, client = self.controller(crash_at)
        try:
            await self._rounds(jc, client)
        except Crash:
            pass
        first = client.writes
        jc, client = self.controller()
        await self._rounds(jc, client)
        return first

    async def _rounds(self, jc: JobController, client: CrashingClient) -> None:
        for _ in range(30):
            before = client.writes
            await jc.reconcile(KEY)
            if client.writes == before:
                if not self.kubelet():
                    return
        raise AssertionError("the controller never settled")

    def kubelet(self) -> bool:
        """Finish the graceful deletions (the processes are gone); whether there were any."""
        doomed = [p["metadata"]["name"] for p in self.store.list("Pod", "default")[0]
                  if p["metadata"].get("deletionTimestamp")]
        for name in doomed:
            self.store.delete("Pod", name, "default", grace_period_seconds=0)
        return bool(doomed)

    def set_pod_status(self, name: str, status: dict) -> None:
        pod = self.store.get("Pod", name, "default")
        pod["status"] = status
        self.store.update_status(pod)

    def snapshot(self) -> dict:
        """What a crash must not change: the objects that exist, the job's status
        without times and uids, and the pods' annotations."""
        job = self.store.get("PyTorchJob", "crashy", "default")
        status = copy.deepcopy(job.get("status") or {})
        for k in ("startTime", "completionTime", "lastReconcileTime"):
            status.pop(k, None)
        status["conditions"] = [(c["type"], c["status"], c.get("reason")) for c in status.get("conditions") or []]
        for entry in (status.get("podRestarts") or {}).values():
            entry.pop("uid", None)
        pods = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}, bool(p["metadata"].get(
            "deletionTimestamp"))) for p in self.store.list("Pod", "default")[0]}
        for anns, _ in pods.values():
            for k in [k for k in anns if not k.startswith("phalanx.dev/no-restart")]:
                anns.pop(k)
        return {"status": status, "pods": pods,
                "services": sorted(s["metadata"]["name"] for s in self.store.list("Service", "default")[0]),
                "podgroups": sorted(g["metadata"]["name"] for g in self.store.list("PodGroup", "default")[0])}


def job(policy: str = "OnFailure", backoff: int = 3, workers: int = 2, clean: str = "None") -> dict:
    container = {"name": "pytorch", "image": "busybox", "command": ["sh", "-c", "sleep 30"]}
    replica = {"restartPolicy": policy, "template": {"spec": {"containers": [container]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "crashy", "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": backoff, "cleanPodPolicy": clean},
                     "pytorchReplicaSpecs": {"Master": {**replica, "replicas": 1},
                                             "Worker": {**replica, "replicas": workers}}}}


def running(restarts: int = 0) -> dict:
    return {"phase": "Running", "containerStatuses": [
        {"name": "pytorch", "restartCount": restarts, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}


def terminated(code: int, phase: str) -> dict:
    return {"phase": phase, "containerStatuses": [{"name": "pytorch", "restartCount": 0, "state": {"terminated": {
        "exitCode": code, "reason": "Completed" if code == 0 else "Error",
        "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}}]}


async def started(spec: dict) -> World:
    """A job whose PodGroup was admitted and whose pods all run."""
    w = World()
    await w.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    await w.client.create(spec)
    await w.settle()
    pg = w.store.get("PodGroup", "crashy", "default")
    pg["status"] = {"phase": "Running"}
    w.store.update(pg)
    await w.settle()
    for p in w.store.list("Pod", "default")[0]:
        w.store.bind("default", p["metadata"]["name"], "node-a")  # deletions become graceful
        w.set_pod_status(p["metadata"]["name"], running())
    await w.settle()
    return w


Step = Callable[[World], None]


def master_fails_permanently(w: World) -> None:  # ExitCode 1: the job fails, everything goes
    w.set_pod_status("crashy-master-0", terminated(1, "Failed"))


def worker_pod_fails(w: World) -> None:  # OnFailure: deleted, recreated, one restart counted
    w.set_pod_status("crashy-worker-0", terminated(1, "Failed"))


def master_succeeds(w: World) -> None:  # cleanPodPolicy None: workers kept, marked never to restart
    w.set_pod_status("crashy-master-0", terminated(0, "Succeeded"))


def worker_restarts_in_place(w: World) -> None:  # with backoffLimit 1 used up: Failed, cleanup
    w.set_pod_status("crashy-worker-1", running(restarts=2))


CASES: list[tuple[str, dict, Step]] = [
    ("permanent failure cleanup", job(policy="ExitCode"), master_fails_permanently),
    ("failed pod recreated", job(), worker_pod_fails),
    ("success keeps and marks pods", job(), master_succeeds),
    ("backoff limit exceeded", job(backoff=1), worker_restarts_in_place),
]


@pytest.mark.parametrize("spec,step", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
async def test_a_crash_before_any_write_of_a_round_changes_nothing_in_the_end(spec, step):
    ref = await started(spec)
    step(ref)
    writes = await ref.settle()
    want = ref.snapshot()
    assert writes >= 2, "the round must have several writes to interrupt"
    for crash_at in range(1, writes + 1):
        w = await started(spec)
        step(w)
        await w.settle(crash_at=crash_at)
        assert w.snapshot() == want, f"crash before write {crash_at} of {writes}"


async def test_the_cases_reach_the_end_states_they_name():
    """Guards the table above: each step does what its name says (else the
    comparison could be between two equally wrong runs)."""
    outcomes = {}
    for name, spec, step in CASES:
        w = await started(spec)
        step(w)
        await w.settle()
        outcomes[name] = w.snapshot()
    failed = outcomes["permanent failure cleanup"]
    assert failed["status"]["conditions"][-1][:2] == ("Failed", "True")
    assert (failed["pods"], failed["services"], failed["podgroups"]) == ({}, [], [])
    recreated = outcomes["failed pod recreated"]
    assert recreated["status"]["restartCount"] == 1 and "crashy-worker-0" in recreated["pods"]
    assert recreated["podgroups"] == ["crashy"]
    kept = outcomes["success keeps and marks pods"]
    assert kept["status"]["conditions"][-1][:2] == ("Succeeded", "True") and kept["podgroups"] == []
    assert kept["pods"]["crashy-worker-0"][0] == {"phalanx.dev/no-restart": "true"}
    exceeded = outcomes["backoff limit exceeded"]
    assert exceeded["status"]["conditions"][-1][2] == "BackoffLimitExceeded"
    assert (exceeded["pods"], exceeded["podgroups"]) == ({}, [])
