"""Volcano's scheduler series: buckets, what the driver reports of a session (timings, gang and
queue figures), what the shell reports of its bindings, and their text exposition."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.runtime.probes import exposition
from phalanx.scheduler import SchedulerConfig, Snapshot, run_session
from phalanx.scheduler.metrics import QUEUE_GAUGES, Histogram, SchedulerMetrics, exponential_buckets_range
from phalanx.scheduler.scheduler import Scheduler
from phalanx.scheduler.testing import gang, node, podgroup, queue
from phalanx.store import Store
from tests.unit.test_scheduler_shell import clean, eventually

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)  # 10 s after testing.T0


def scrape(m: SchedulerMetrics) -> dict[tuple[str, tuple], float]:
    """Every sample of the text exposition: (name, sorted labels) -> value."""
    text = exposition(m.registry).body.decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def count(samples: dict, name: str, **labels: str) -> float:
    return samples.get((f"{name}_count", tuple(sorted(labels.items()))), 0.0)


def test_exponential_buckets_range_is_gos():
    b = exponential_buckets_range(1, 5000, 20)
    assert len(b) == 20 and b[0] == 1 and b[-1] == pytest.approx(5000)
    assert all(y / x == pytest.approx(5000 ** (1 / 19)) for x, y in zip(b, b[1:]))


def test_histogram_buckets_are_cumulative_and_inclusive():
    h = Histogram("h_milliseconds", "doc", (1.0, 2.0, 4.0), ("stage",))
    for v in (0.5, 1.0, 3.0, 9.0):
        h.observe(v, "Bound")
    fam = h.family()
    got = {(s.name, s.labels.get("le")): s.value for s in fam.samples}
    assert got[("h_milliseconds_bucket", "1.0")] == 2  # 0.5 and 1.0 (le is inclusive)
    assert got[("h_milliseconds_bucket", "2.0")] == 2
    assert got[("h_milliseconds_bucket", "4.0")] == 3
    assert got[("h_milliseconds_bucket", "+Inf")] == 4
    assert got[("h_milliseconds_count", None)] == 4 and got[("h_milliseconds_sum", None)] == 13.5
    assert h.count("Bound") == 4 and h.count("Other") == 0


def test_two_schedulers_have_their_own_registries_and_one_registry_refuses_a_second():
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.bind_failed()
    assert scrape(a)[("volcano_schedule_attempts_total", (("result", "error"),))] == 1
    assert ("volcano_schedule_attempts_total", (("result", "error"),)) not in scrape(b)
    with pytest.raises(ValueError):
        SchedulerMetrics(a.registry)


def world() -> Snapshot:
    """One 16-cpu node; ``fits`` (4 x 1 cpu) places, ``big`` (4 x 8 cpu) cannot."""
    pgs = [podgroup("fits", 4, phase="Inqueue"), podgroup("big", 4, phase="Inqueue")]
    pods = gang("fits") + gang("big", cpu="8")
    return Snapshot.build([node("n1", cpu="16")], [queue("root"), queue("default", parent="root")], pgs, pods)


def test_the_driver_reports_timings_and_the_closed_sessions_figures():
    config = SchedulerConfig()
    m = SchedulerMetrics(CollectorRegistry())
    plain = run_session(world(), config, NOW)
    result = run_session(world(), config, NOW, observer=m, snapshot_seconds=0.25)
    assert result.bindings == plain.bindings and plain.stats is None  # observing changes no decision
    assert len(result.bindings) == 4
    st = result.stats
    assert st is not None
    assert st.unready == {"big": 2}  # two of its 8-cpu pods fit: 2 short of the gang
    assert sorted(st.jobs) == ["big", "fits"] and st.unschedulable_tasks == 4
    assert st.scheduled_jobs == [(("fits", "default", "default"), 10000.0)]
    alloc_cpu, alloc_mem, req_cpu = st.queues["default"][:3]
    assert (alloc_cpu, alloc_mem, req_cpu) == (4000.0, 4 * 100 * 2 ** 20, 36000.0)

    m.session(0.5, st)
    s = scrape(m)
    assert count(s, "volcano_e2e_scheduling_latency_milliseconds") == 1
    assert s[("volcano_e2e_scheduling_latency_milliseconds_sum", ())] == 500.0
    assert count(s, "volcano_open_session_duration_milliseconds") == 1
    assert s[("volcano_open_session_duration_milliseconds_sum", ())] >= 250.0
    for action in config.actions:
        assert count(s, "volcano_action_scheduling_latency_milliseconds", action=action) == 1
    for plugin in (p for tier in config.tiers for p in tier):
        for phase in ("OnSessionOpen", "OnSessionClose"):
            assert count(s, "volcano_plugin_scheduling_latency_milliseconds", plugin=plugin, OnSession=phase) == 1
    assert count(s, "volcano_e2e_job_scheduling_latency_milliseconds") == 1
    job = (("job_name", "fits"), ("job_namespace", "default"), ("queue", "default"))
    assert s[("volcano_e2e_job_scheduling_duration", job)] == 10000.0
    assert s[("volcano_unschedule_task_count", (("job_id", "big"),))] == 2
    assert s[("volcano_unschedule_task_count", (("job_id", "fits"),))] == 0
    assert s[("volcano_unschedule_job_count", ())] == 1
    assert s[("volcano_schedule_attempts_total", (("result", "unschedulable"),))] == 4
    assert s[("volcano_queue_allocated_milli_cpu", (("queue_name", "default"),))] == 4000
    assert s[("volcano_queue_request_memory_bytes", (("queue_name", "default"),))] == 8 * 100 * 2 ** 20
    assert s[("volcano_queue_weight", (("queue_name", "default"),))] == 1
    assert ("volcano_queue_deserved_milli_cpu", (("queue_name", "default"),)) in s

    # the next session replaces the gauges: a job gone from it has no series any more
    m.session(0.1, run_session(Snapshot.build([node("n1")], [queue("root"), queue("default", parent="root")],
                                              [], []), config, NOW, observer=m).stats)
    s = scrape(m)
    assert not [k for k in s if k[0] in ("volcano_unschedule_task_count", "volcano_e2e_job_scheduling_duration")]
    assert s[("volcano_unschedule_job_count", ())] == 0
    assert count(s, "volcano_e2e_scheduling_latency_milliseconds") == 2
    # a queue whose jobs are gone holds, requests and deserves nothing; its weight stays
    for q in ("root", "default"):
        assert {n: s[(f"volcano_queue_{n}", (("queue_name", q),))] for n, _ in QUEUE_GAUGES} == {
            **{n: 0 for n, _ in QUEUE_GAUGES}, "weight": 1}, q


@pytest.fixture
async def shell():
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    store = Store(None, clock)
    metrics = SchedulerMetrics(CollectorRegistry())
    sched = Scheduler(LocalClient(store), clock, debounce=0.002, period=0.1, metrics=metrics)
    assert not sched.synced()
    task = asyncio.create_task(sched.run())
    try:
        yield store, clock, sched
    finally:
        await sched.stop()
        await asyncio.wait_for(task, 5)


async def test_the_shell_reports_bindings_and_queue_podgroup_counts(shell):
    store, clock, sched = shell
    await eventually(sched.synced, what="informers synced")
    store.create(clean(node("las1")))
    await eventually(lambda: _get(store, "Queue", "default"), what="default queue")
    store.create(clean(podgroup("pytest", 4, min_resources={"cpu": "4", "memory": "400Mi"})))
    await eventually(lambda: (_get(store, "PodGroup", "pytest", "default").get("status") or {}).get("phase")
                     == "Inqueue", what="Inqueue")
    for p in gang("pytest"):
        store.create(clean(p))
    clock.advance(3)  # the pods are 3 s old when bound
    await eventually(lambda: all(p["spec"].get("nodeName") for p in store.list("Pod", "default")[0]),
                     what="all pods bound")

    def running():
        s = scrape(sched.metrics)
        return s.get(("volcano_queue_pod_group_running_count", (("queue_name", "default"),))) == 1 and s
    s = await eventually(running, what="the queue status counting a running PodGroup")
    assert s[("volcano_schedule_attempts_total", (("result", "scheduled"),))] == 4
    assert count(s, "volcano_task_scheduling_latency_milliseconds", stage="Bound") == 4
    assert s[("volcano_task_scheduling_latency_milliseconds_sum", (("stage", "Bound"),))] == 4 * 3000.0
    assert count(s, "volcano_scheduling_stage_duration_milliseconds", stage="Bind") == 4
    assert count(s, "volcano_e2e_scheduling_latency_milliseconds") == sched.sessions
    assert s[("volcano_queue_pod_group_pending_count", (("queue_name", "default"),))] == 0
    assert ("volcano_queue_pod_group_running_count", (("queue_name", "root"),)) in s


def _get(store: Store, kind: str, name: str, ns: str | None = None) -> dict:
    try:
        return store.get(kind, name, ns)
    except Exception:
        return {}
