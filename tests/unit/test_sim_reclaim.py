"""Reclaim in a simulation: examples/sim/two-teams.yaml through the Simulation API, in virtual
time (exact timings), and what the timeline, summary and picture record of it."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.sim.arrivals import load_workload, resolve
from phalanx.sim.metrics import Timeline, deserved_of, eviction_of
from phalanx.sim.report import summarize, timeline_csv, write_outputs
from phalanx.sim.runner import Simulation
from phalanx.sim.workload import parse_workload

WORKLOAD = Path(__file__).resolve().parents[2] / "examples" / "sim" / "two-teams.yaml"


class Run:
    """One run of the two-teams workload, with every pod change seen."""

    def __init__(self) -> None:
        self.pods: list[tuple[float, str, str, str, bool, bool, str]] = []  # t, name, uid, phase, bound, deleting, mark
        self.sim = Simulation(load_workload(WORKLOAD), on_started=self._watch)
        self.result = self.sim.run()

    def _watch(self, sim: Simulation) -> None:
        assert sim.client is not None and sim.store is not None and sim.loop is not None
        client, rv, loop = sim.client, sim.store.current_rv(), sim.loop

        async def pods() -> None:
            async for ev in client.watch("Pod", None, resource_version=rv):
                o: dict[str, Any] = ev.object
                m = o["metadata"]
                marks = [c.get("message", "") for c in (o.get("status") or {}).get("conditions") or []
                         if c.get("type") == "DisruptionTarget"]
                phase = "<deleted>" if ev.type == "DELETED" else (o.get("status") or {}).get("phase") or ""
                self.pods.append((round(loop.time(), 3), m["name"], m["uid"], phase,
                                  bool((o.get("spec") or {}).get("nodeName")), bool(m.get("deletionTimestamp")),
                                  marks[0] if marks else ""))
        sim.spawn(pods())

    def first(self, name: str, phase: str | None = None, *, uid: str | None = None, bound: bool | None = None,
              deleting: bool | None = None, marked: bool | None = None) -> tuple:
        for row in self.pods:
            t, n, u, ph, b, d, mark = row
            if n == name and (phase is None or ph == phase) and (uid is None or u == uid) \
                    and (bound is None or b == bound) and (deleting is None or d == deleting) \
                    and (marked is None or bool(mark) == marked):
                return row
        raise AssertionError(f"no such state of {name}: {phase} {uid} bound={bound} deleting={deleting}")

    def uids(self, name: str) -> list[str]:
        return list(dict.fromkeys(u for _, n, u, *_ in self.pods if n == name))

    def record(self, name: str) -> Any:
        return next(r for r in self.result.records if r.name == name)


@pytest.fixture(scope="module")
def two_teams() -> Run:
    return Run()


A_WORKERS = [f"train-a-worker-{i}" for i in range(7)]
B_PODS = ["train-b-master-0"] + [f"train-b-worker-{i}" for i in range(3)]


def steps(t: list[float], *series: list[float]) -> list[tuple]:
    """The values of ``series`` each time one of them changes: (t, v1, v2, ...)."""
    out: list[tuple] = []
    for i, ti in enumerate(t):
        values = tuple(s[i] for s in series)
        if not out or out[-1][1:] != values:
            out.append((round(ti, 3), *values))
    return out


def test_team_b_reclaims_exactly_the_four_pods_above_team_as_min_available(two_teams):
    r = two_teams
    assert r.result.evictions == {"preempted": 0, "reclaimed": 4}
    b_created = min(r.first(p)[0] for p in B_PODS)
    assert b_created == 60.005  # the PodGroup admitted (5 ms debounce), then the job controller's pods
    marked = sorted({n for _, n, _, _, _, _, mark in r.pods if mark})
    assert marked == ["train-a-worker-3", "train-a-worker-4", "train-a-worker-5", "train-a-worker-6"]
    for name in marked:
        t, *_, mark = r.first(name, marked=True)
        # within one scheduling session of team-b's pods existing, marked then deleted gracefully
        assert t == 60.01
        prefix = 'volcano: reclaiming for queue "team-b" (below its deserved share): team-b/'
        assert mark.startswith(prefix) and mark.endswith(" of job team-b/train-b")
        assert mark[len(prefix):-len(" of job team-b/train-b")] in B_PODS  # the pod reclaimed for
        assert r.first(name, deleting=True)[0] == 60.01
        # SIGTERM: the container stops 2 s later (sim.stopTime), the pod is removed then
        assert r.first(name, "Failed", uid=r.uids(name)[0])[0] == 62.01
        assert r.first(name, "<deleted>")[0] == 62.01
    # team-b binds on the room the victims leave, runs its 120 s and succeeds
    for name in B_PODS:
        assert r.first(name, bound=True)[0] == 62.015
        assert r.first(name, "Running")[0] == 62.015
        assert r.first(name, "Succeeded")[0] == 182.015
    b = r.record("train-b")
    assert (b.state, round(b.running, 3), round(b.finished, 3), b.restarts) == ("Succeeded", 62.015, 182.015, 0)


def test_the_timeline_has_per_queue_columns_and_counts_the_evictions(two_teams, tmp_path):
    r = two_teams
    text = timeline_csv(r.result.timeline, r.result.capacity)
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.splitlines()[0].split(",")
    assert header == ["t", "cpu", "memory", "gpu", "cpu_util", "memory_util", "gpu_util", "running_pods",
                      "evictions", "waiting_team-a", "waiting_team-b", "alloc_cpu_team-a", "deserved_cpu_team-a",
                      "alloc_cpu_team-b", "deserved_cpu_team-b"]  # no GPUs in this cluster: no GPU columns
    ev = [(float(row["t"]), int(row["evictions"])) for row in rows]
    assert [e for _, e in ev] == sorted(e for _, e in ev) and ev[-1][1] == 4
    assert min(t for t, e in ev if e == 4) == 60.01
    summary = summarize(r.result, "two-teams.yaml").data
    assert summary["evictions"] == {"preempted": 0, "reclaimed": 4, "total": 4}
    assert summary["queues"]["team-b"]["peakCpu"] == 4
    write_outputs(r.result, summarize(r.result, "two-teams.yaml"), tmp_path, png=False)
    assert json.loads((tmp_path / "summary.json").read_text())["evictions"]["reclaimed"] == 4
    assert (tmp_path / "utilisation.svg").read_bytes().startswith(b"<?xml")


def test_team_a_gets_its_pods_back_after_team_b_and_both_succeed(two_teams):
    r = two_teams
    a = r.record("train-a")
    assert (a.state, a.restarts, round(a.finished, 3)) == ("Succeeded", 0, 600.01)
    assert [(round(t, 3), s) for t, s in a.states] == [
        (0.0, ""), (0.0, "Created"), (0.01, "Running"), (60.01, "Restarting"), (182.02, "Running"),
        (600.01, "Succeeded")]
    # the master and workers 0-2 (minAvailable 4) keep running, uninterrupted
    for name in ["train-a-master-0"] + A_WORKERS[:3]:
        assert len(r.uids(name)) == 1
        assert not any(d or mark for _, n, _, _, _, d, mark in r.pods if n == name)
        assert r.first(name, "Succeeded")[0] == 600.01
    for name in A_WORKERS[3:]:
        old, new = r.uids(name)
        # recreated once the old pod is gone; it waits (team-a at its share, team-b at its own)
        created = r.first(name, uid=new)[0]
        assert 62.01 <= created < 182.015 and not r.first(name, uid=new)[4]
        # and is bound only once team-b's pods finished
        assert r.first(name, uid=new, bound=True)[0] == 182.02
        assert r.first(name, "Running", uid=new)[0] == 182.02
    tl: Timeline = r.result.timeline
    assert steps(tl.t, tl.queue_cpu["team-a"], tl.queue_cpu["team-b"]) == [
        (0.0, 0.0, 0.0), (0.01, 8.0, 0.0), (62.01, 4.0, 0.0), (62.015, 4.0, 4.0), (182.015, 4.0, 0.0),
        (182.02, 8.0, 0.0), (600.01, 4.0, 0.0)]  # at the end: the master is done, the recreated workers not yet
    assert steps(tl.t, tl.deserved_cpu["team-a"], tl.deserved_cpu["team-b"]) == [
        (0.0, 0.0, 0.0), (0.01, 8.0, 0.0), (60.01, 4.0, 4.0), (182.02, 8.0, 0.0)]


def test_a_queues_deserved_share_and_a_pods_eviction_mark_are_read_as_the_scheduler_writes_them():
    def queue(annotation: Any) -> dict:
        return {"metadata": {"name": "q", "annotations": {"phalanx.dev/deserved": annotation}}}

    assert deserved_of(queue('{"cpu":"4","memory":"8Gi"}')) == (4.0, 0.0)
    assert deserved_of(queue('{"cpu":"1500m","nvidia.com/gpu":"2"}')) == (1.5, 2.0)
    assert deserved_of({"metadata": {"name": "q"}}) == (0.0, 0.0)
    assert deserved_of(queue("not json")) == deserved_of(queue('["cpu"]')) == deserved_of(queue('{"cpu":"x"}')) \
        == (0.0, 0.0)

    def pod(message: str, status: str = "True") -> dict:
        return {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                          {"type": "DisruptionTarget", "status": status, "message": message,
                                           "reason": "PreemptionByScheduler"}]}}

    assert eviction_of(pod("volcano: preempting to accommodate a higher priority pod: a/b of job a/c (priority 9)")) \
        == "preempted"
    assert eviction_of(pod('volcano: reclaiming for queue "b" (below its deserved share): a/p of job a/j')) \
        == "reclaimed"
    assert eviction_of(pod("volcano: reclaiming", status="False")) is None
    assert eviction_of(pod("Node is shutting down")) is None and eviction_of({}) is None


def test_the_stop_time_setting_is_validated_and_reaches_the_agents():
    job = [{"manifest": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}}]
    assert parse_workload({"sim": {"stopTime": "2s"}, "jobs": job}).sim.seconds("stop_time") == 2.0
    with pytest.raises(ValueError) as e:
        parse_workload({"sim": {"stopTime": "soon"}, "jobs": job})
    assert "sim.stopTime" in str(e.value)
    # a workload's stop time reaches the simulated agents
    sim = Simulation(resolve(parse_workload({"sim": {"stopTime": "3s", "until": "1s"}, "jobs": job}), Path(".")))
    sim.run()
    assert sim.agent is not None and sim.agent.config.stop_time == 3.0


def test_the_same_jobs_in_one_queue_by_priority_are_preempted_and_counted_so():
    data = yaml.safe_load(WORKLOAD.read_text())
    data["cluster"]["queues"] = []
    classes = [{"manifest": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n},
                             "value": v}} for n, v in (("low", 10), ("high", 1000))]
    for job, pc in zip(data["jobs"], ("low", "high")):
        policy = job["manifest"]["spec"]["runPolicy"]["schedulingPolicy"]
        policy.pop("queue")
        policy["priorityClass"] = pc
    data["jobs"] = classes + data["jobs"]
    result = Simulation(resolve(parse_workload(data), WORKLOAD.parent)).run()
    assert result.evictions == {"preempted": 4, "reclaimed": 0}
    tl = result.timeline
    assert steps(tl.t, tl.evictions, tl.queue_cpu["default"]) == [
        (0.0, 0, 0.0), (0.01, 0, 8.0), (60.01, 4, 8.0), (62.01, 4, 4.0), (62.015, 4, 8.0), (182.015, 4, 4.0),
        (182.02, 4, 8.0), (600.01, 4, 4.0)]
    assert [(r.name, r.state, r.restarts) for r in result.records] == [
        ("train-a", "Succeeded", 0), ("train-b", "Succeeded", 0)]
    assert summarize(result, "w").data["evictions"] == {"preempted": 4, "reclaimed": 0, "total": 4}
