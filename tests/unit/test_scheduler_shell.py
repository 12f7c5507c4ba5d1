"""The scheduler shell over the real Store, LocalClient and informers: P1 and
P2 end to end, event de-duplication, conflict retries, robustness."""
from __future__ import annotations

import asyncio
import copy
import time

import pytest

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import ApiError, Conflict
from phalanx.scheduler.scheduler import Scheduler, node_signature, pod_signature, trim_pod
from phalanx.scheduler.testing import gang, node, pod, podgroup, queue
from phalanx.store import Store

SEED_MIN = {"cpu": "4", "memory": "400Mi"}


async def eventually(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def clean(obj: dict) -> dict:
    """What a client sends: no server-set metadata."""
    obj = copy.deepcopy(obj)
    for k in ("uid", "resourceVersion", "creationTimestamp"):
        obj["metadata"].pop(k, None)
    return obj


@pytest.fixture
async def env():
    clock = FakeClock()
    store = Store(None, clock)
    client = LocalClient(store)
    sched = Scheduler(client, clock, debounce=0.002, period=0.1)
    task = asyncio.create_task(sched.run())
    try:
        yield store, client, sched
    finally:
        await sched.stop()
        await asyncio.wait_for(task, 5)


def get(store: Store, kind: str, name: str, ns: str | None = "default") -> dict | None:
    try:
        return store.get(kind, name, ns)
    except Exception:
        return None


def phase(store: Store, name: str) -> str | None:
    pg = get(store, "PodGroup", name)
    return ((pg or {}).get("status") or {}).get("phase")


def events(store: Store, kind: str | None = None) -> list[dict]:
    items = store.list("Event", "default")[0]
    return [e for e in items if kind is None or e["involvedObject"]["kind"] == kind]


async def sessions_pass(sched: Scheduler, n: int = 2) -> None:
    start = sched.sessions
    for _ in range(n):
        sched.trigger()
        await asyncio.sleep(0.01)
    await eventually(lambda: sched.sessions >= start + n, what=f"{n} more sessions")


async def test_root_and_default_queues_are_created(env):
    store, _, _ = env
    root = await eventually(lambda: get(store, "Queue", "root", None), what="root queue")
    default = await eventually(lambda: get(store, "Queue", "default", None), what="default queue")
    assert root["spec"]["reclaimable"] is False and root["spec"]["weight"] == 1
    assert default["spec"] == {"weight": 1, "reclaimable": True, "parent": "root"}


async def test_seed_job_end_to_end(env):
    # P1: PodGroup -> Inqueue; pods created -> all bound to one node -> Running.
    store, _, _ = env
    store.create(clean(node("las1")))
    await eventually(lambda: get(store, "Queue", "default", None))
    store.create(clean(podgroup("pytest", 4, min_resources=SEED_MIN)))
    await eventually(lambda: phase(store, "pytest") == "Inqueue", what="Inqueue")
    for p in gang("pytest"):
        store.create(clean(p))
    pods = await eventually(lambda: [p for p in store.list("Pod", "default")[0] if p["spec"].get("nodeName")]
                            if all(p["spec"].get("nodeName") for p in store.list("Pod", "default")[0]) else None,
                            what="all pods bound")
    assert {p["spec"]["nodeName"] for p in pods} == {"las1"}
    for p in pods:
        conds = {c["type"]: c["status"] for c in p["status"]["conditions"]}
        assert conds["PodScheduled"] == "True"
    await eventually(lambda: phase(store, "pytest") == "Running", what="Running")
    msgs = sorted(e["message"] for e in events(store, "Pod") if e["reason"] == "Scheduled")
    assert msgs == [f"Successfully assigned default/{n} to las1"
                    for n in ("pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2")]
    assert all(e["source"]["component"] == "volcano" for e in events(store))
    q = await eventually(lambda: (get(store, "Queue", "default", None).get("status") or {}).get("running") == 1
                         and get(store, "Queue", "default", None), what="queue status")
    assert q["status"]["allocated"] == {"cpu": "4", "memory": "400Mi"}


async def test_queue_capability_is_explained_once_and_lifted_without_resubmitting(env):
    # P2: PodGroup Pending with a readable condition and one Warning event.
    store, client, sched = env
    await eventually(lambda: get(store, "Queue", "default", None))
    await client.patch("Queue", "default", None, {"spec": {"capability": {"cpu": 2}}})
    store.create(clean(node("las1")))
    store.create(clean(podgroup("pytest", 4, min_resources=SEED_MIN)))
    msg = 'queue "default" capability exceeded: cpu needed 4, allowed 2 (allocated 0, inqueue 0)'

    def refused():
        pg = get(store, "PodGroup", "pytest") or {}
        return any(c.get("reason") == "QueueCapabilityExceeded" and c.get("message") == msg
                   for c in (pg.get("status") or {}).get("conditions") or [])
    await eventually(refused, what="refusal condition")
    assert phase(store, "pytest") == "Pending"
    rv = get(store, "PodGroup", "pytest")["metadata"]["resourceVersion"]
    await sessions_pass(sched, 3)
    assert get(store, "PodGroup", "pytest")["metadata"]["resourceVersion"] == rv  # not rewritten
    warnings = [e for e in events(store, "PodGroup") if e["type"] == "Warning"]
    assert [(e["reason"], e["message"], e["count"]) for e in warnings] == [("Unschedulable", msg, 1)]
    normal = [e for e in events(store, "PodGroup") if e["type"] == "Normal"]
    assert [(e["reason"], e["message"]) for e in normal] == [
        ("Unschedulable", "queue resource quota insufficient: insufficient cpu")]

    await client.patch("Queue", "default", None, {"spec": {"capability": {"cpu": 8}}})
    await eventually(lambda: phase(store, "pytest") == "Inqueue", what="admission after raising capability")
    for p in gang("pytest"):
        store.create(clean(p))
    await eventually(lambda: all(p["spec"].get("nodeName") for p in store.list("Pod", "default")[0]),
                     what="pods bound")


async def test_unplaceable_gang_gets_pod_conditions_and_no_binding(env):
    store, _, sched = env
    store.create(clean(node("small", cpu="3")))
    await eventually(lambda: get(store, "Queue", "default", None))
    store.create(clean(podgroup("pytest", 4, phase=None)))  # no minResources: admitted at once
    for p in gang("pytest"):
        store.create(clean(p))

    def all_conditioned():
        ps = store.list("Pod", "default")[0]
        return all(any(c["type"] == "PodScheduled" and c["status"] == "False" for c in p["status"].get("conditions") or [])
                   for p in ps) and ps
    pods = await eventually(all_conditioned, what="PodScheduled=False on every pod")
    assert not any(p["spec"].get("nodeName") for p in pods)
    await sessions_pass(sched, 2)
    failed = [e for e in events(store, "Pod") if e["reason"] == "FailedScheduling"]
    assert len(failed) == 4 and all(e["count"] == 1 for e in failed)


async def test_a_bad_pod_does_not_stop_scheduling(env):
    store, _, _ = env
    store.create(clean(node("n1")))
    await eventually(lambda: get(store, "Queue", "default", None))
    store.create(clean(podgroup("good", 1)))
    store.create(clean(podgroup("bad", 1)))
    store.create(clean(pod("bad-worker-0", "bad", cpu="lots")))
    store.create(clean(pod("good-worker-0", "good")))
    await eventually(lambda: get(store, "Pod", "good-worker-0")["spec"].get("nodeName") == "n1", what="good pod bound")
    assert not get(store, "Pod", "bad-worker-0")["spec"].get("nodeName")


async def test_s9_a_session_runs_as_soon_as_something_changes_not_on_a_tick():
    clock = FakeClock()
    store = Store(None, clock)
    sched = Scheduler(LocalClient(store), clock, debounce=0.002, period=60)  # the tick would take a minute
    task = asyncio.create_task(sched.run())
    try:
        await eventually(lambda: get(store, "Queue", "default", None), what="default queue")
        store.create(clean(node("las1")))
        store.create(clean(podgroup("pytest", 4, min_resources=SEED_MIN)))
        await eventually(lambda: phase(store, "pytest") == "Inqueue", timeout=2, what="Inqueue without a tick")
        for p in gang("pytest"):
            store.create(clean(p))
        await eventually(lambda: phase(store, "pytest") == "Running", timeout=2, what="Running without a tick")
    finally:
        await sched.stop()
        await asyncio.wait_for(task, 5)


# ---------------------------------------------------------------- shell logic with fakes

class FakeInformer:
    def __init__(self, objs: list[dict]) -> None:
        self.objs = objs

    def add_handler(self, fn) -> None:
        pass

    async def start(self) -> None:
        pass

    async def wait_synced(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    def list(self) -> list[dict]:
        return list(self.objs)

    def get(self, ns, name):
        return next((o for o in self.objs if o["metadata"]["name"] == name
                     and o["metadata"].get("namespace") in (ns, None)), None)


class FakeClient:
    """Records writes; its informers never see them (a watch that lags)."""

    def __init__(self, objs: dict[str, list[dict]]) -> None:
        self.objs = objs
        self.binds: list[tuple[str, str, str]] = []
        self.updates: list[dict] = []
        self.created: list[dict] = []
        self.patches: list[tuple] = []
        self.deleted: list[tuple] = []
        self.conflicts = 0
        self.rv = 100

    async def bind(self, ns, name, node_name):
        self.binds.append((ns, name, node_name))

    async def update(self, obj):
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("podgroups.scheduling.volcano.sh", obj["metadata"]["name"])
        self.rv += 1
        out = copy.deepcopy(obj)
        out["metadata"]["resourceVersion"] = str(self.rv)
        self.updates.append(out)
        return out

    update_status = update

    async def get(self, kind, name, namespace=None):
        o = next(o for o in self.objs[kind] if o["metadata"]["name"] == name)
        return copy.deepcopy(o)

    async def create(self, obj):
        out = copy.deepcopy(obj)
        self.created.append(out)
        return out

    async def patch(self, kind, name, namespace, patch, *a, **kw):
        self.patches.append((kind, name, patch))
        return {}

    async def delete(self, kind, name, namespace=None, **kw):
        self.deleted.append((kind, namespace, name, kw.get("preconditions_uid")))
        return None


def fake_scheduler(objs: dict[str, list[dict]]) -> tuple[Scheduler, FakeClient]:
    client = FakeClient(objs)
    sched = Scheduler(client, FakeClock(), informer_factory=lambda c, kind: FakeInformer(objs.setdefault(kind, [])))
    return sched, client


async def start(sched: Scheduler) -> None:
    await sched._start_informers()


async def test_a_bind_is_not_repeated_while_the_watch_lags():
    objs = {"Node": [node("n1")], "Queue": [], "PodGroup": [podgroup("pytest", 4, phase="Inqueue")],
            "Pod": gang("pytest")}
    objs["Queue"] = [queue("default")]
    sched, client = fake_scheduler(objs)
    await start(sched)
    r1 = await sched.run_once()
    assert len(client.binds) == 4 and len(r1.podgroup_status) == 1
    updates = len(client.updates)
    r2 = await sched.run_once()  # informers still show unbound pods and the old status
    assert len(client.binds) == 4
    assert r2.bindings == []
    # the binds we made are counted: the PodGroup turns Running, written once
    assert r2.podgroup_status[("default", "pytest")]["phase"] == "Running"
    r3 = await sched.run_once()
    assert r3.podgroup_status == {} and len(client.updates) == updates + 1 + len(r2.queue_status)


async def test_podgroup_write_retries_on_conflict_with_a_fresh_read():
    objs = {"Node": [node("n1")], "Queue": [queue("default")], "PodGroup": [podgroup("pytest", 4)], "Pod": []}
    sched, client = fake_scheduler(objs)
    await start(sched)
    client.conflicts = 2
    await sched._write_podgroup("default", "pytest", {"phase": "Inqueue"})
    assert [u["status"] for u in client.updates] == [{"phase": "Inqueue"}]


async def test_identical_events_are_emitted_once():
    objs = {"Node": [node("n1")], "Queue": [queue("default", capability={"cpu": 2})],
            "PodGroup": [podgroup("pytest", 4, min_resources=SEED_MIN)], "Pod": []}
    sched, client = fake_scheduler(objs)
    await start(sched)
    for _ in range(3):
        await sched.run_once()
    await sched.flush_events()  # events are written in the background
    created = [(e["reason"], e["type"]) for e in client.created if e.get("kind") == "Event"]
    assert sorted(created) == [("Unschedulable", "Normal"), ("Unschedulable", "Warning")]


def test_relevance_filter_ignores_status_churn():
    s = Scheduler(FakeClient({}), FakeClock())
    p = pod("a", "g")
    p2 = copy.deepcopy(p)
    p2["status"]["containerStatuses"] = [{"name": "main", "ready": True}]
    assert not s._relevant("Pod", "MODIFIED", p2, p)
    p3 = copy.deepcopy(p)
    p3["spec"]["nodeName"] = "n1"
    assert s._relevant("Pod", "MODIFIED", p3, p)
    n = node("n1")
    n2 = copy.deepcopy(n)
    n2["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:05Z"
    assert node_signature(n) == node_signature(n2)
    assert not s._relevant("Node", "MODIFIED", n2, n)
    n3 = copy.deepcopy(n)
    n3["spec"]["unschedulable"] = True
    assert s._relevant("Node", "MODIFIED", n3, n)
    assert s._relevant("Pod", "ADDED", p, None)
    assert not s._relevant("Pod", "ADDED", pod("x", None, scheduler="other"), None)
    assert pod_signature(None) == ()


def test_trim_pod_keeps_what_scheduling_reads():
    p = pod("a", "g", node_selector={"zone": "a"})
    p["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    p["status"]["containerStatuses"] = [{"name": "main"}]
    t = trim_pod(p)
    assert t["spec"]["containers"] == [{"name": "main", "resources": p["spec"]["containers"][0]["resources"]}]
    assert t["spec"]["nodeSelector"] == {"zone": "a"}
    assert "containerStatuses" not in t["status"] and t["metadata"] is p["metadata"]


async def test_a_problem_that_comes_back_is_reported_again():
    sched, client = fake_scheduler({"Node": [], "Queue": [], "PodGroup": [], "Pod": []})
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p", "uid": "u1"}
    for reason, msg in [("FailedScheduling", "A"), ("FailedScheduling", "A"), ("Scheduled", "ok"),
                        ("FailedScheduling", "A"), ("FailedScheduling", "B"), ("FailedScheduling", "B")]:
        sched._event(ref, "Warning" if reason == "FailedScheduling" else "Normal", reason, msg)
        await sched.flush_events()
    # the third "A" is emitted again; the recorder folds it into the first Event (count 2)
    assert [(e["reason"], e["message"]) for e in client.created] == [
        ("FailedScheduling", "A"), ("Scheduled", "ok"), ("FailedScheduling", "B")]
    assert [(k, p["count"]) for k, _, p in client.patches] == [("Event", 2)]


def _two_teams_objs() -> dict[str, list[dict]]:
    a_pods = [pod(f"a-worker-{i}", "a", node_name="n1", phase="Running") for i in range(8)]
    b_pods = [pod(f"b-worker-{i}", "b") for i in range(4)]
    return {"Node": [node("n1", cpu="8")], "Queue": [queue("root"), queue("team-a"), queue("team-b")],
            "PodGroup": [podgroup("a", 4, queue="team-a", phase="Running"),
                         podgroup("b", 4, queue="team-b", phase="Inqueue")],
            "Pod": a_pods + b_pods}


async def test_a_reclaimed_pod_gets_disruption_target_then_a_graceful_delete_and_is_not_taken_twice():
    objs = _two_teams_objs()
    sched, client = fake_scheduler(objs)
    await start(sched)
    r1 = await sched.run_once()
    victims = sorted(e.name for e in r1.evictions)
    assert victims == ["a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7"]
    assert sorted(d[2] for d in client.deleted) == victims
    assert all(d[3] == f"pod-default-{d[2]}" for d in client.deleted)  # the very pod: uid precondition
    marked = [u for u in client.updates if u["kind"] == "Pod"
              and any(c["type"] == "DisruptionTarget" for c in u["status"].get("conditions") or [])]
    assert sorted(u["metadata"]["name"] for u in marked) == victims
    cond = next(c for c in marked[0]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert cond["status"] == "True" and cond["reason"] == "PreemptionByScheduler"
    assert cond["message"].startswith('volcano: reclaiming for queue "team-b"')
    # the watch has not shown the deletions yet: the victims are terminating all the same
    r2 = await sched.run_once()
    assert r2.evictions == [] and len(client.deleted) == 4
    ann = [p for p in client.patches if p[0] == "Queue"]
    assert {p[1] for p in ann} >= {"team-a", "team-b"}


async def test_a_failed_eviction_is_forgotten_and_decided_again():
    objs = _two_teams_objs()
    sched, client = fake_scheduler(objs)
    await start(sched)

    async def refuse(*a, **kw):
        raise ApiError("boom")
    client.delete = refuse
    r1 = await sched.run_once()
    assert len(r1.evictions) == 4
    r2 = await sched.run_once()
    assert len(r2.evictions) == 4


async def test_reclaim_end_to_end_over_the_store(env):
    store, client, sched = env
    store.create(clean(node("n1", cpu="8")))
    for q in ("team-a", "team-b"):
        store.create(clean(queue(q)))
    store.create(clean(podgroup("a", 4, queue="team-a")))
    await eventually(lambda: phase(store, "a") == "Inqueue", what="a Inqueue")
    for i in range(8):
        store.create(clean(pod(f"a-worker-{i}", "a")))
    await eventually(lambda: all(p["spec"].get("nodeName") for p in store.list("Pod", "default")[0]), what="a bound")
    for p in store.list("Pod", "default")[0]:
        p["status"]["phase"] = "Running"
        store.update_status(p)
    await eventually(lambda: phase(store, "a") == "Running", what="a Running")
    store.create(clean(podgroup("b", 4, queue="team-b")))
    await eventually(lambda: phase(store, "b") == "Inqueue", what="b Inqueue")
    for i in range(4):
        store.create(clean(pod(f"b-worker-{i}", "b")))

    def deleting():
        return sorted(p["metadata"]["name"] for p in store.list("Pod", "default")[0]
                      if p["metadata"].get("deletionTimestamp"))
    assert await eventually(lambda: len(deleting()) == 4 and deleting(), what="4 victims") == [
        "a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7"]
    await sessions_pass(sched, 3)
    assert len(deleting()) == 4
    reasons = {e["reason"] for e in events(store)}
    assert {"Evict", "Reclaimed"} <= reasons
    qa = get(store, "Queue", "team-a", None)
    assert qa["metadata"]["annotations"]["phalanx.dev/deserved"].startswith('{"cpu":"4"')
    for name in deleting():  # the node agent's part: the victims end
        store.delete("Pod", name, "default", grace_period_seconds=0)
    await eventually(lambda: all(get(store, "Pod", f"b-worker-{i}")["spec"].get("nodeName") for i in range(4)),
                     what="b bound")
