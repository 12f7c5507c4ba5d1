"""SnapshotCache (the incremental snapshot) against Snapshot.build: random
clusters run for several sessions with pods starting, finishing, failing and
going away; after every change both snapshots must give the same session
result, decision for decision."""
from __future__ import annotations

import copy
import dataclasses
import random
from datetime import timedelta

import pytest

from phalanx.scheduler import SchedulerConfig, run_session
from phalanx.scheduler.cache import SnapshotCache
from phalanx.scheduler.job_updater import is_settled
from phalanx.scheduler.snapshot import Snapshot
from phalanx.scheduler.testing import World, gang, node, pod, podgroup, queue
from tests.unit.test_scheduler_property import T0, random_world

PRIO = {"hi": 10}
KINDS = (("Node", "nodes"), ("Queue", "queues"), ("PodGroup", "podgroups"), ("Pod", "pods"))


def _key(kind: str, o: dict) -> tuple:
    m = o["metadata"]
    return (m.get("namespace") if kind in ("Pod", "PodGroup") else None, m["name"])


class Mirror:
    """Feeds a World's changes into a SnapshotCache the way informer events
    would: a changed object arrives as a new dict, a vanished one as a delete."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.cache = SnapshotCache(PRIO)
        self.seen: dict[str, dict[tuple, dict]] = {k: {} for k, _ in KINDS}
        self.sync()

    def sync(self) -> int:
        changes = 0
        for kind, attr in KINDS:
            now = {_key(kind, o): o for o in getattr(self.w, attr)}
            seen = self.seen[kind]
            for k in list(seen):
                if k not in now:
                    self.cache.delete(kind, k[0], k[1])
                    del seen[k]
                    changes += 1
            for k, o in now.items():
                if seen.get(k) != o:
                    seen[k] = copy.deepcopy(o)
                    self.cache.put(kind, copy.deepcopy(o))
                    changes += 1
        return changes


def results_equal(a, b) -> None:
    assert a.bindings == b.bindings
    assert a.podgroup_status == b.podgroup_status
    assert a.queue_status == b.queue_status
    assert a.pod_conditions == b.pod_conditions
    assert a.events == b.events


def step_world(rng: random.Random, w: World) -> None:
    """What the rest of the cluster does between sessions."""
    w.start_bound_pods()
    for p in w.pods:
        if p["status"]["phase"] == "Running":
            r = rng.random()
            if r < 0.15:
                p["status"]["phase"] = "Succeeded"
            elif r < 0.2:
                p["status"]["phase"] = "Failed"
            elif r < 0.23:
                p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if w.pods and rng.random() < 0.2:
        w.pods.remove(rng.choice(w.pods))
    if len(w.podgroups) > 1 and rng.random() < 0.1:
        w.podgroups.remove(rng.choice(w.podgroups))
    if rng.random() < 0.1:
        n = rng.choice(w.nodes)
        n["status"]["conditions"][0]["status"] = rng.choice(["True", "False"])
    for pg in w.podgroups:  # job controllers create the pods of admitted gangs
        name = pg["metadata"]["name"]
        if (pg.get("status") or {}).get("phase") == "Inqueue" and rng.random() < 0.5:
            taken = {p["metadata"]["name"] for p in w.pods}
            late = next(f"{name}-late-{i}" for i in range(len(taken) + 1) if f"{name}-late-{i}" not in taken)
            w.pods.append(pod(late, name, cpu=rng.choice(["500m", "1"]), memory="100Mi"))
    if rng.random() < 0.05:
        w.nodes.append(node(f"late{len(w.nodes)}", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": "2"}))


@pytest.mark.parametrize("seed", range(120))
def test_cache_gives_the_same_sessions_as_a_full_build(seed):
    rng = random.Random(seed)
    w = random_world(rng)
    mirror = Mirror(w)
    config = SchedulerConfig()
    for step in range(7):
        now = T0 + timedelta(seconds=step)
        full = run_session(w.snapshot(priority_classes=PRIO), config, now)
        incremental = run_session(mirror.cache.build(), config, now)
        results_equal(full, incremental)
        w.apply(full)
        step_world(rng, w)
        mirror.sync()


def test_the_comparison_is_not_vacuous():
    # Across seeds the cache keeps jobs settled (out of the session) and still agrees.
    settled = bound = 0
    for seed in range(40):
        rng = random.Random(seed)
        w = random_world(rng)
        mirror = Mirror(w)
        for step in range(7):
            now = T0 + timedelta(seconds=step)
            r = run_session(w.snapshot(priority_classes=PRIO), SchedulerConfig(), now)
            bound += len(r.bindings)
            w.apply(r)
            step_world(rng, w)
            mirror.sync()
            mirror.cache.build()
            settled += mirror.cache.counts()["settled"]
    assert settled > 100 and bound > 100


def running_world(jobs: int) -> World:
    pgs, pods = [], []
    for j in range(jobs):
        st = {"phase": "Running", "running": 4,
              "conditions": [{"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                              "message": "", "transitionID": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        pgs.append(podgroup(f"j{j:03d}", 4, status=st, min_resources={"cpu": "4", "memory": "400Mi"}))
        pods += gang(f"j{j:03d}", 4, node_name=f"n{j % 4}", phase="Running")
    return World([node(f"n{i}", cpu="256", memory="1Ti", pods="1000") for i in range(4)],
                 [queue("root"), queue("default", parent="root")], pgs, pods)


def test_settled_jobs_stay_out_of_the_session_and_are_not_reparsed():
    w = running_world(50)
    mirror = Mirror(w)
    snap = mirror.cache.build()
    assert snap.jobs == {} and snap.settled["default"].phases == {"Running": 50}
    assert snap.settled["default"].allocated[0] == 50 * 4 * 1000  # millicores
    assert sum(n.ntasks for n in snap.nodes) == 200
    before = mirror.cache.rebuilt
    # a new job arrives: only it is parsed, and it is the only job in the session
    w.podgroups.append(podgroup("new", 2, phase="Inqueue"))
    w.pods += [pod("new-worker-0", "new"), pod("new-worker-1", "new")]
    mirror.sync()
    snap = mirror.cache.build()
    assert list(snap.jobs) == [("default", "new")]
    assert mirror.cache.rebuilt - before == 1
    full = run_session(w.snapshot(), SchedulerConfig(), T0)
    results_equal(full, run_session(snap, SchedulerConfig(), T0))
    assert len(full.bindings) == 2


def test_a_settled_job_whose_pod_finishes_comes_back_into_the_session():
    w = running_world(3)
    mirror = Mirror(w)
    mirror.cache.build()
    w.pod("j001-worker-0")["status"]["phase"] = "Failed"
    mirror.sync()
    snap = mirror.cache.build()
    assert list(snap.jobs) == [("default", "j001")]
    results_equal(run_session(w.snapshot(), SchedulerConfig(), T0), run_session(snap, SchedulerConfig(), T0))


def test_is_settled_rules():
    w = running_world(1)
    job = Snapshot.build(w.nodes, w.queues, w.podgroups, w.pods).jobs[("default", "j000")]
    assert is_settled(job)
    for change in ("pending pod", "no Scheduled", "Unschedulable", "count", "phase Inqueue"):
        w2 = running_world(1)
        pg = w2.podgroups[0]
        if change == "pending pod":
            w2.pods[1]["spec"].pop("nodeName")
            w2.pods[1]["status"]["phase"] = "Pending"
        elif change == "no Scheduled":
            pg["status"]["conditions"] = []
        elif change == "Unschedulable":
            pg["status"]["conditions"].append({"type": "Unschedulable", "status": "True", "reason": "x"})
        elif change == "count":
            pg["status"]["running"] = 3
        elif change == "phase Inqueue":
            pg["status"]["phase"] = "Inqueue"
        job = Snapshot.build(w2.nodes, w2.queues, w2.podgroups, w2.pods).jobs[("default", "j000")]
        assert not is_settled(job), change


def test_an_admitted_podgroup_without_pods_waits_outside_the_session():
    w = World([node("n1")], [queue("root"), queue("default", parent="root")],
              [podgroup("a", 2, phase="Inqueue", min_resources={"cpu": "2"}), podgroup("b", 2)], [])
    mirror = Mirror(w)
    snap = mirror.cache.build()
    assert list(snap.jobs) == [("default", "b")]  # b waits for admission
    assert snap.settled["default"].inqueue[0] == 2000 and snap.settled["default"].phases == {"Inqueue": 1}
    results_equal(run_session(w.snapshot(), SchedulerConfig(), T0), run_session(snap, SchedulerConfig(), T0))
    w.pods += [pod("a-worker-0", "a"), pod("a-worker-1", "a")]  # its pods come: back in the session
    mirror.sync()
    snap = mirror.cache.build()
    assert sorted(snap.jobs) == [("default", "a"), ("default", "b")]
    full = run_session(w.snapshot(), SchedulerConfig(), T0)
    results_equal(full, run_session(snap, SchedulerConfig(), T0))
    assert len(full.bindings) == 2


def test_new_resource_dimension_reparses_everything():
    w = running_world(2)
    mirror = Mirror(w)
    mirror.cache.build()
    w.nodes.append(node("gpu", extra={"nvidia.com/gpu": "4"}))
    mirror.sync()
    snap = mirror.cache.build()
    assert "nvidia.com/gpu" in snap.dims.names
    assert len(snap.settled["default"].allocated) == 3
    results_equal(run_session(w.snapshot(), SchedulerConfig(), T0), run_session(snap, SchedulerConfig(), T0))


def test_objects_without_a_namespace_are_in_default_for_put_get_and_delete():
    cache = SnapshotCache()
    p = pod("a", "g")
    del p["metadata"]["namespace"]
    cache.put("Pod", p)
    assert cache.get("Pod", None, "a") is p and cache.get("Pod", "default", "a") is p
    cache.delete("Pod", None, "a")
    assert cache.get("Pod", "default", "a") is None and cache.counts()["pods"] == 0


@pytest.mark.parametrize("seed", range(30))
def test_kept_queue_totals_equal_totals_summed_afresh(seed):
    # Settled jobs enter and leave their queue's totals one record at a time; after any
    # churn the totals are those of a cache fed the same cluster from scratch.
    rng = random.Random(seed)
    w = random_world(rng)
    mirror = Mirror(w)
    for step in range(7):
        r = run_session(w.snapshot(priority_classes=PRIO), SchedulerConfig(), T0 + timedelta(seconds=step))
        w.apply(r)
        step_world(rng, w)
        mirror.sync()
        kept = {q: dataclasses.asdict(t) for q, t in mirror.cache.build().settled.items()}
        fresh = {q: dataclasses.asdict(t) for q, t in Mirror(w).cache.build().settled.items()}
        assert kept == fresh
