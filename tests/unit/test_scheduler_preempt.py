"""Preempt and reclaim in the pure session: who may evict whom, how much, and when nothing is evicted
(Volcano actions/preempt, actions/reclaim and the priority, gang, proportion, conformance votes)."""
from __future__ import annotations

from datetime import datetime, timezone

from phalanx.api.constants import ANNOTATION_DESERVED, ANNOTATION_RECLAIMING
from phalanx.scheduler import SchedulerConfig, run_session
from phalanx.scheduler.cache import SnapshotCache, feed
from phalanx.scheduler.config import VOLCANO_DEFAULT_ACTIONS
from phalanx.scheduler.info import TaskInfo
from phalanx.scheduler.session import Session
from phalanx.scheduler.testing import World, node, pod, podgroup, queue

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)
PRIORITIES = {"low": 1, "mid": 5, "high": 1000}


def job_pods(job: str, n: int, *, ns: str = "default", node_name: str | None = None, phase: str = "Pending",
             cpu: str = "1") -> list[dict]:
    return [pod(f"{job}-worker-{i}", job, cpu, "100Mi", namespace=ns, node_name=node_name, phase=phase)
            for i in range(n)]


def running(job: str, n: int, min_member: int, queue_name: str = "default", *, ns: str = "default",
            node_name: str = "n1", priority_class: str | None = None) -> tuple[dict, list[dict]]:
    pg = podgroup(job, min_member, namespace=ns, queue=queue_name, phase="Running", priority_class=priority_class,
                  min_resources={"cpu": str(min_member), "memory": f"{100 * min_member}Mi"})
    return pg, job_pods(job, n, ns=ns, node_name=node_name, phase="Running")


def waiting(job: str, n: int, min_member: int, queue_name: str = "default", *, ns: str = "default",
            priority_class: str | None = None) -> tuple[dict, list[dict]]:
    pg = podgroup(job, min_member, namespace=ns, queue=queue_name, phase="Inqueue", priority_class=priority_class)
    return pg, job_pods(job, n, ns=ns)


def world(*jobs: tuple[dict, list[dict]], queues: list[dict] | None = None, nodes: list[dict] | None = None) -> World:
    return World(nodes or [node("n1", cpu="8")], queues or [queue("root"), queue("default")],
                 [pg for pg, _ in jobs], [p for _, pods in jobs for p in pods])


def two_teams(a_weight: int = 1, b_weight: int = 1, a_reclaimable: bool = True) -> list[dict]:
    qa, qb = queue("team-a", a_weight), queue("team-b", b_weight)
    qa["spec"]["reclaimable"] = a_reclaimable
    return [queue("root"), queue("default"), qa, qb]


def run(w: World, config: SchedulerConfig | None = None):
    result = run_session(w.snapshot(priority_classes=PRIORITIES), config or SchedulerConfig(), NOW)
    w.apply(result)
    return result


def evicted(result) -> list[str]:
    return sorted(e.name for e in result.evictions)


def events(result, reason: str) -> list[tuple[str, str]]:
    return [(ref["name"], m) for ref, _t, r, m in result.events if r == reason]


# ---------------------------------------------------------------- reclaim
def test_reclaim_takes_back_a_queues_deserved_share_from_the_surplus_of_a_gang_and_stops_there():
    w = world(running("a", 8, 4, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams())
    r = run(w)
    # A's four pods above minMember go, its last ones first; B is pipelined on the room they leave
    assert evicted(r) == ["a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7"]
    assert not r.bindings
    assert {e.action for e in r.evictions} == {"reclaim"}
    assert r.evictions[0].message == ('volcano: reclaiming for queue "team-b" (below its deserved share): '
                                      "default/b-worker-0 of job default/b")
    # while the victims terminate, nothing more is taken and B waits on the room coming back
    r2 = run(w)
    assert not r2.evictions and not r2.bindings
    w.finish_evicted_pods()
    r3 = run(w)
    assert sorted(n for _, n, _ in r3.bindings) == [f"b-worker-{i}" for i in range(4)]
    # A's recreated pods wait: team-a holds its deserved share, team-b is at its own
    w.pods += job_pods("a", 8)[4:]
    w.start_bound_pods()
    r4 = run(w)
    assert not r4.evictions and not r4.bindings


def test_reclaim_stops_at_deserved():
    # team-b wants 6 (three gangs of 2) against team-a's 8 at weight 1:1: both deserve 4; two of
    # team-b's gangs are given room, the third waits, and team-a is left with exactly its share
    w = world(running("a", 8, 1, "team-a"), waiting("b1", 2, 2, "team-b"), waiting("b2", 2, 2, "team-b"),
              waiting("b3", 2, 2, "team-b"), queues=two_teams())
    r = run(w)
    assert evicted(r) == ["a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7"]
    assert not run(w).evictions
    w.finish_evicted_pods()
    r3 = run(w)
    assert sorted(n for _, n, _ in r3.bindings) == ["b1-worker-0", "b1-worker-1", "b2-worker-0", "b2-worker-1"]
    assert not r3.evictions


def test_reclaim_takes_only_from_queues_above_their_deserved_share():
    # deserved: team-a 4, team-b 2, team-c 2 (its whole request); team-c is at its share
    qc = queue("team-c", 2)
    a, c = running("a", 6, 1, "team-a"), running("c", 2, 1, "team-c")
    w = world(a, c, waiting("b", 2, 2, "team-b"), queues=[*two_teams(), qc])
    r = run(w)
    assert evicted(r) == ["a-worker-4", "a-worker-5"]


def test_reclaim_never_takes_a_queue_below_its_deserved_share_and_discards_all_when_it_cannot_finish():
    # team-b wants 6 of 8 at weight 1:1: its deserved share is 4, so its gang of 6 cannot be pipelined
    w = world(running("a", 8, 1, "team-a"), waiting("b", 6, 6, "team-b"), queues=two_teams())
    r = run(w)
    assert not r.evictions and not r.bindings
    assert all(p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")
               for p in w.pods if p["metadata"]["name"].startswith("a-"))


def test_a_queue_marked_not_reclaimable_keeps_what_it_borrowed():
    w = world(running("a", 8, 4, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams(a_reclaimable=False))
    assert not run(w).evictions


def test_a_queue_at_its_share_does_not_reclaim_from_a_fuller_one():
    # team-b already holds its deserved 4; its second job waits, nothing is evicted
    b1 = running("b1", 4, 4, "team-b")
    w = world(running("a", 4, 4, "team-a"), b1, waiting("b2", 2, 2, "team-b"), queues=two_teams())
    assert not run(w).evictions


# ---------------------------------------------------------------- gang safety
def test_a_gang_is_never_left_below_min_member_it_loses_all_its_pods_at_once():
    # A has no pod to spare (minMember 8): taking one takes the whole gang
    w = world(running("a", 8, 8, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams())
    r = run(w)
    assert evicted(r) == [f"a-worker-{i}" for i in range(8)]
    assert events(r, "Reclaimed") == [("a", '8 pod(s) evicted for job default/b of queue "team-b": queue "team-a" '
                                            "is above its deserved share: "
                                            + ", ".join(f"a-worker-{i}" for i in range(8)))]


def test_a_gang_with_some_pods_to_spare_loses_those_first_then_the_rest_together():
    w = world(running("a", 8, 6, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams())
    # two spare pods are not enough for B's four: the remaining six go together
    assert len(run(w).evictions) == 8


def test_a_gang_member_that_may_not_be_evicted_protects_its_whole_gang():
    a_pg, a_pods = running("a", 8, 8, "team-a")
    a_pods[0]["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    w = world((a_pg, a_pods), waiting("b", 4, 4, "team-b"), queues=two_teams())
    assert not run(w).evictions


# ---------------------------------------------------------------- preempt
def test_a_higher_priority_job_preempts_a_lower_one_of_its_queue():
    w = world(running("low", 8, 8, priority_class="low"), waiting("urgent", 4, 4, priority_class="high"))
    r = run(w)
    assert evicted(r) == [f"low-worker-{i}" for i in range(8)]
    assert {e.action for e in r.evictions} == {"preempt"}
    assert r.evictions[0].message == ("volcano: preempting to accommodate a higher priority pod: "
                                      "default/urgent-worker-0 of job default/urgent (priority 1000)")
    assert events(r, "Preempted")[0][1].startswith("8 pod(s) evicted by job default/urgent (priority 1000 > 1): ")
    evict_events = events(r, "Evict")
    assert len(evict_events) == 8 and evict_events[0][1].startswith("Pod is evicted, because of preempt: volcano: ")


def test_preemption_takes_only_what_the_preemptor_needs_from_a_gang_with_pods_to_spare():
    w = world(running("low", 8, 2, priority_class="low"), waiting("urgent", 3, 3, priority_class="high"))
    assert evicted(run(w)) == ["low-worker-5", "low-worker-6", "low-worker-7"]


def test_preemption_takes_the_lowest_priority_job_first():
    low = running("low", 4, 1, priority_class="low")
    mid = running("mid", 4, 1, priority_class="mid")
    w = world(low, mid, waiting("urgent", 2, 2, priority_class="high"))
    assert evicted(run(w)) == ["low-worker-2", "low-worker-3"]


def test_equal_priorities_never_preempt_each_other():
    w = world(running("one", 8, 1, priority_class="mid"), waiting("two", 4, 4, priority_class="mid"))
    assert not run(w).evictions


def test_jobs_of_another_queue_are_not_preempted():
    w = world(running("low", 8, 1, "team-a", priority_class="low"),
              waiting("urgent", 4, 4, "team-a", priority_class="high"), queues=two_teams())
    w.podgroups[0]["spec"]["queue"] = "team-b"  # the low job lives in team-b, at its share 4... of 8 held
    r = run(w, SchedulerConfig(actions=("enqueue", "allocate", "preempt", "backfill")))
    assert not r.evictions


def test_a_preemptor_with_preemption_policy_never_evicts_nobody():
    pg, pods = waiting("urgent", 4, 4, priority_class="high")
    for p in pods:
        p["spec"]["preemptionPolicy"] = "Never"
    w = world(running("low", 8, 1, priority_class="low"), (pg, pods))
    assert not run(w).evictions


def test_pods_marked_not_preemptable_by_annotation_or_label_are_never_victims():
    pg, pods = running("low", 8, 1, priority_class="low")
    for p in pods[:5]:
        p["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    pods[5]["metadata"]["labels"] = {"volcano.sh/preemptable": "false"}
    w = world((pg, pods), waiting("urgent", 2, 2, priority_class="high"))
    assert evicted(run(w)) == ["low-worker-6", "low-worker-7"]


def test_evictions_are_discarded_when_the_preemptor_still_would_not_fit():
    pg, pods = running("low", 8, 1, priority_class="low")
    for p in pods[:6]:
        p["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    w = world((pg, pods), waiting("urgent", 4, 4, priority_class="high"))
    r = run(w)
    assert not r.evictions and not r.bindings
    assert not any(p["metadata"].get("deletionTimestamp") for p in w.pods)


def test_system_pods_are_never_victims():
    pg, pods = running("sys", 4, 1, ns="kube-system", priority_class="low")
    pg2, pods2 = running("crit", 4, 1, priority_class="low")
    for p in pods2:
        p["spec"]["priorityClassName"] = "system-node-critical"
    w = world((pg, pods), (pg2, pods2), waiting("urgent", 2, 2, priority_class="high"))
    assert not run(w).evictions


def test_a_starving_job_preempts_only_until_its_gang_is_placed_or_waiting():
    # urgent needs 2 (minMember 2) of its 4 pods: 2 victims, not 4
    w = world(running("low", 8, 1, priority_class="low"), waiting("urgent", 4, 2, priority_class="high"))
    assert len(run(w).evictions) == 2


def test_volcanos_default_actions_evict_nobody():
    w = world(running("low", 8, 8, priority_class="low"), waiting("urgent", 4, 4, priority_class="high"))
    assert not run(w, SchedulerConfig(actions=VOLCANO_DEFAULT_ACTIONS)).evictions


def test_preemption_is_decided_once_the_victims_are_terminating_they_are_not_taken_twice():
    w = world(running("low", 8, 2, priority_class="low"), waiting("urgent", 4, 4, priority_class="high"))
    assert len(run(w).evictions) == 4
    assert not run(w).evictions
    w.finish_evicted_pods()
    assert len(run(w).bindings) == 4


# ---------------------------------------------------------------- the incremental snapshot
def _cached(w: World):
    cache = SnapshotCache(PRIORITIES)
    feed(cache, w.nodes, w.queues, w.podgroups, w.pods)
    cache.build()  # the first session settles the running job
    return cache


def test_victims_are_found_among_the_jobs_the_incremental_snapshot_keeps_as_sums():
    w = world(running("a", 8, 4, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams())
    for pg in w.podgroups:  # A's status as the scheduler wrote it: settled
        if pg["metadata"]["name"] == "a":
            pg["status"] = {"phase": "Running", "running": 8, "conditions": [
                {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                 "message": "", "transitionID": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    cache = _cached(w)
    assert cache.counts()["settled"] == 1
    snap = cache.build()
    assert ("default", "a") not in snap.jobs
    r = run_session(snap, SchedulerConfig(), NOW)
    assert evicted(r) == ["a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7"]
    # the queues' figures are those of the full snapshot: nothing counted twice
    full = run_session(w.snapshot(priority_classes=PRIORITIES), SchedulerConfig(), NOW)
    assert r.queue_status == full.queue_status
    assert evicted(full) == evicted(r)


def test_no_settled_job_is_parsed_when_no_victim_can_exist():
    w = world(running("one", 8, 8), waiting("two", 4, 4))
    w.podgroups[0]["status"] = {"phase": "Running", "running": 8, "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled", "message": ""}]}
    cache = _cached(w)
    snap = cache.build()
    loads = []
    real = snap.load_settled
    assert real is not None
    snap.load_settled = lambda: loads.append(1) or real()
    r = run_session(snap, SchedulerConfig(), NOW)
    assert not r.evictions and loads == []


# ---------------------------------------------------------------- what the queues say
def test_queues_carry_their_deserved_share_and_whether_they_are_reclaiming():
    w = world(running("a", 8, 8, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams(a_reclaimable=False))
    r = run(w)
    assert r.queue_annotations["team-a"][ANNOTATION_DESERVED] == '{"cpu":"4","memory":"800Mi"}'
    assert r.queue_annotations["team-b"][ANNOTATION_DESERVED] == '{"cpu":"4","memory":"400Mi"}'
    # team-b is below its share with pods waiting, but team-a may not be reclaimed from
    assert ANNOTATION_RECLAIMING not in r.queue_annotations["team-b"]
    w2 = world(running("a", 8, 8, "team-a"), waiting("b", 4, 4, "team-b"), queues=two_teams())
    w2.podgroups[1]["spec"]["minMember"] = 5  # cannot be pipelined within its share: nothing evicted
    r2 = run(w2)
    assert not r2.evictions
    assert r2.queue_annotations["team-b"][ANNOTATION_RECLAIMING] == "true"
    assert not run(w).queue_annotations  # written once, not again


# ---------------------------------------------------------------- the votes
def _task(name: str) -> TaskInfo:
    return TaskInfo(uid=name, namespace="default", name=name, job=None, pod={}, role="",  # type: ignore[arg-type]
                    priority=0, status="Running", node_name="n1", resreq=[1.0], init_resreq=[1.0], nz_cpu=0,
                    nz_mem=0, best_effort=False, index=0, creation=0, spec_key=0)


def test_victim_votes_intersect_over_all_tiers_an_empty_answer_vetoes_and_no_answer_allows_nobody():
    a, b, c = _task("a"), _task("b"), _task("c")
    cands = [a, b, c]
    both = [[lambda _p, cs: [t for t in cs if t is not c]], [lambda _p, cs: [t for t in cs if t is not a]]]
    assert Session._victims(both, a, cands) == [b]
    assert Session._victims([[lambda _p, cs: None], [lambda _p, cs: cs]], a, cands) == cands
    assert Session._victims([[lambda _p, cs: []], [lambda _p, cs: cs]], a, cands) == []
    assert Session._victims([[lambda _p, cs: None]], a, cands) == []
    assert Session._victims([], a, cands) == []


# ---------------------------------------------------------------- admission of a job that would take resources back
def _pending(job: str, queue_name: str = "default", priority_class: str | None = None) -> tuple[dict, list[dict]]:
    return podgroup(job, 4, queue=queue_name, priority_class=priority_class,
                    min_resources={"cpu": "4", "memory": "400Mi"}), []


def test_a_job_of_a_queue_below_its_share_is_admitted_on_a_full_cluster_when_reclaim_can_make_room():
    w = world(running("a", 8, 4, "team-a"), _pending("b", "team-b"), queues=two_teams())
    run(w)
    assert w.podgroup("b")["status"]["phase"] == "Inqueue"


def test_without_reclaim_such_a_job_waits_for_admission_as_in_volcano():
    w = world(running("a", 8, 4, "team-a"), _pending("b", "team-b"), queues=two_teams())
    run(w, SchedulerConfig(actions=VOLCANO_DEFAULT_ACTIONS))
    assert w.podgroup("b")["status"]["phase"] == "Pending"


def test_a_higher_priority_job_is_admitted_on_a_full_cluster_an_equal_one_is_not():
    w = world(running("low", 8, 8, priority_class="low"), _pending("urgent", priority_class="high"),
              _pending("same", priority_class="low"))
    run(w)
    assert w.podgroup("urgent")["status"]["phase"] == "Inqueue"
    assert w.podgroup("same")["status"]["phase"] == "Pending"
