"""Waiting PodGroups are not rewritten when only the figures of their refusal
change (the O(N²) write storm the 500-job load benchmark found): the stored
message is kept for ADMISSION_MESSAGE_REFRESH, then refreshed; a new reason or
resource is written at once."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from phalanx.objects.clock import format_time
from phalanx.scheduler import SchedulerConfig, run_session
from phalanx.scheduler.job_updater import ADMISSION_MESSAGE_REFRESH
from phalanx.scheduler.testing import World, gang, node, podgroup, queue

T0 = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)
NEED = {"cpu": "2", "memory": "100Mi"}


def run(world: World, now: datetime):
    result = run_session(world.snapshot(), SchedulerConfig(), now)
    world.apply(result)
    return result


def message(world: World, name: str) -> str:
    conds = world.podgroup(name)["status"]["conditions"]
    return next(c["message"] for c in conds if c["type"] == "Unschedulable")


def busy_queue(waiting: int) -> World:
    """Queue capability 4 cpu: job "a" holds 2 running; jobs w-0.. wait (each needs 2, one slot is inqueue-able)."""
    pgs = [podgroup("a", 2, min_resources=NEED, phase="Running")]
    pgs += [podgroup(f"w-{i:03d}", 2, min_resources=NEED, created=f"2026-01-01T00:00:{i % 60:02d}Z")
            for i in range(waiting)]
    return World([node("n1", cpu="64", memory="64Gi")], [queue("root"), queue("default", capability={"cpu": "4"})],
                 pgs, gang("a", n=2, node_name="n1", phase="Running", cpu="1", memory="50Mi"))


def refused(result) -> list[str]:
    return sorted(name for (_, name), st in result.podgroup_status.items() if st.get("phase") == "Pending")


def test_a_moving_allocation_does_not_rewrite_every_waiting_podgroup():
    w = busy_queue(40)
    first = run(w, T0)
    assert len(refused(first)) == 39  # one more fits next to "a"; the rest are refused
    before = message(w, "w-039")
    assert "(allocated 2, inqueue 2)" in before
    # "a" ends: the allocation the refusals quote changes, nothing else does.
    for p in w.pods:
        p["status"]["phase"] = "Succeeded"
    second = run(w, T0 + timedelta(seconds=1))
    rewritten = [k for k, st in second.podgroup_status.items() if st.get("phase") == "Pending"]
    assert rewritten == []
    assert message(w, "w-039") == before
    warnings = [m for ref, t, r, m in second.events if ref["kind"] == "PodGroup" and t == "Warning"]
    assert set(warnings) <= {before}  # the same text: the shell does not record it again


def test_the_figures_are_refreshed_after_the_refresh_interval():
    w = busy_queue(3)
    run(w, T0)
    for p in w.pods:
        p["status"]["phase"] = "Succeeded"
    run(w, T0 + timedelta(seconds=1))
    later = T0 + ADMISSION_MESSAGE_REFRESH + timedelta(seconds=1)
    r = run(w, later)
    assert ("default", "w-002") in r.podgroup_status
    assert "(allocated 0, inqueue 4)" in message(w, "w-002")
    cond = next(c for c in w.podgroup("w-002")["status"]["conditions"] if c["type"] == "Unschedulable")
    assert cond["lastTransitionTime"] == format_time(later)


def test_a_new_resource_or_reason_is_written_at_once():
    w = busy_queue(3)
    run(w, T0)
    w.queue("default")["spec"]["capability"] = {"cpu": "4", "memory": "150Mi"}
    r = run(w, T0 + timedelta(seconds=1))
    assert ("default", "w-002") in r.podgroup_status
    assert "memory needed 100Mi" in message(w, "w-002")
    w.queue("default")["spec"]["capability"] = {"cpu": "64"}
    r = run(w, T0 + timedelta(seconds=2))
    assert r.podgroup_status[("default", "w-002")]["phase"] == "Inqueue"
