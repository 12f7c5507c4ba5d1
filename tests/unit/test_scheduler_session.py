"""The pure scheduling session: seed scenarios P1/P2, gang all-or-nothing,
phase machine, ordering, queues (Volcano's framework and plugins, and Phalanx's deviations)."""
from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest

from phalanx.scheduler import SchedulerConfig, run_session
from phalanx.scheduler.config import VOLCANO_DEFAULT_WEIGHTS
from phalanx.scheduler.testing import World, gang, node, pod, podgroup, queue

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)
NOW_STR = "2026-01-01T00:00:10Z"
SEED_MIN = {"cpu": "4", "memory": "400Mi"}


def run(world: World, config: SchedulerConfig | None = None, **kw):
    result = run_session(world.snapshot(**kw), config or SchedulerConfig(), NOW)
    world.apply(result)
    return result


def cond(status: dict, ctype: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)


def events_of(result, kind: str | None = None, reason: str | None = None) -> list[tuple[str, str, str, str]]:
    return [(ref["name"], t, r, m) for ref, t, r, m in result.events
            if (kind is None or ref["kind"] == kind) and (reason is None or r == reason)]


def seed_world(nodes=None, capability=None, pods=True, phase=None) -> World:
    return World(nodes or [node("las1")], [queue("root"), queue("default", capability=capability)],
                 [podgroup("pytest", 4, min_resources=SEED_MIN, phase=phase)], gang("pytest") if pods else [])


# ---------------------------------------------------------------- P1 normal run

def test_seed_podgroup_goes_inqueue_before_pods_exist():
    # P1: the controller creates pods only once the PodGroup is Inqueue.
    w = seed_world(pods=False)
    r = run(w)
    assert r.bindings == []
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Inqueue"
    assert "conditions" not in st  # the gang plugin skips jobs without tasks
    assert r.queue_status["default"]["inqueue"] == 1
    assert r.events == []


def test_seed_job_inqueue_and_all_four_bound_in_one_session():
    w = seed_world()
    r = run(w)
    assert r.bindings == [("default", "pytest-master-0", "las1"), ("default", "pytest-worker-0", "las1"),
                          ("default", "pytest-worker-1", "las1"), ("default", "pytest-worker-2", "las1")]
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Inqueue"  # binding tasks are not "scheduled" yet (Volcano jobStatus)
    sched = cond(st, "Scheduled")
    assert sched == {"type": "Scheduled", "status": "True", "transitionID": r.session_uid,
                     "lastTransitionTime": NOW_STR, "reason": "tasks in gang are ready to be scheduled",
                     "message": ""}
    assert r.queue_status["default"]["allocated"] == {"cpu": "4", "memory": "400Mi"}
    assert r.queue_status["root"]["allocated"] == {"cpu": "4", "memory": "400Mi"}  # rolled up
    assert r.pod_conditions == {}
    assert events_of(r, reason="Unschedulable") == []


def test_phase_turns_running_only_at_the_next_session_then_nothing_is_rewritten():
    w = seed_world()
    run(w)
    r2 = run(w)  # the binds are now observed: 4 Bound tasks
    assert r2.bindings == []
    st = r2.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Running"
    assert "running" not in st  # Bound, not Running yet
    assert events_of(r2, "PodGroup") == [("pytest", "Normal", "Scheduled", "pod group is ready")]
    assert r2.queue_status["default"]["running"] == 1 and "inqueue" not in r2.queue_status["default"]
    w.start_bound_pods()
    r3 = run(w)
    assert r3.podgroup_status[("default", "pytest")]["running"] == 4
    r4 = run(w)
    assert r4.empty  # steady state: no write, no event (no churn, VC #3852)


def test_seed_job_packs_on_one_of_two_nodes_with_default_weights():
    w = seed_world(nodes=[node("las1"), node("las2")])
    r = run(w)
    assert {n for _, _, n in r.bindings} == {"las1"}


def test_volcano_default_weights_spread_the_seed_job_which_is_why_phalanx_uses_binpack_10():
    w = seed_world(nodes=[node("las1"), node("las2")])
    r = run(w, SchedulerConfig(**VOLCANO_DEFAULT_WEIGHTS))
    assert sorted(n for _, _, n in r.bindings) == ["las1", "las1", "las2", "las2"]


# ---------------------------------------------------------------- P2 queue capability

P2_MESSAGE = 'queue "default" capability exceeded: cpu needed 4, allowed 2 (allocated 0, inqueue 0)'


def test_s8_gang_admission_refusal_names_queue_resource_needed_and_allowed():
    w = seed_world(capability={"cpu": 2}, pods=False)
    r = run(w)
    assert r.bindings == []
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Pending"
    assert cond(st, "Unschedulable") == {
        "type": "Unschedulable", "status": "True", "transitionID": r.session_uid, "lastTransitionTime": NOW_STR,
        "reason": "QueueCapabilityExceeded", "message": P2_MESSAGE}
    assert events_of(r, "PodGroup") == [
        ("pytest", "Normal", "Unschedulable", "queue resource quota insufficient: insufficient cpu"),
        ("pytest", "Warning", "Unschedulable", P2_MESSAGE)]
    assert r.queue_status["default"]["pending"] == 1


def test_queue_capability_refusal_is_not_rewritten_every_session():
    w = seed_world(capability={"cpu": 2}, pods=False)
    run(w)
    r2 = run(w)
    assert r2.podgroup_status == {} and r2.queue_status == {} and r2.bindings == []


def test_raising_the_capability_admits_the_job_without_resubmitting():
    w = seed_world(capability={"cpu": 2}, pods=False)
    run(w)
    w.queue("default")["spec"]["capability"] = {"cpu": "8"}
    r = run(w)
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Inqueue"
    assert cond(st, "Unschedulable") == {
        "type": "Unschedulable", "status": "False", "transitionID": r.session_uid, "lastTransitionTime": NOW_STR,
        "reason": "Admitted", "message": 'admitted to queue "default"'}
    w.pods.extend(gang("pytest"))  # the job controller now creates the pods
    r2 = run(w)
    assert len(r2.bindings) == 4


def test_removing_the_capability_also_admits():
    w = seed_world(capability={"cpu": 2}, pods=False)
    run(w)
    del w.queue("default")["spec"]["capability"]
    assert run(w).podgroup_status[("default", "pytest")]["phase"] == "Inqueue"


def test_capability_on_memory_names_memory():
    w = seed_world(capability={"memory": "200Mi"}, pods=False)
    r = run(w)
    assert cond(r.podgroup_status[("default", "pytest")], "Unschedulable")["message"] == (
        'queue "default" capability exceeded: memory needed 400Mi, allowed 200Mi (allocated 0, inqueue 0)')


def test_capability_counts_what_the_queue_already_holds():
    w = World([node("n1")], [queue("default", capability={"cpu": "6"})],
              [podgroup("a", 4, min_resources=SEED_MIN, phase="Running"),
               podgroup("b", 4, min_resources=SEED_MIN)],
              gang("a", node_name="n1", phase="Running"))
    r = run(w)
    assert cond(r.podgroup_status[("default", "b")], "Unschedulable")["message"] == (
        'queue "default" capability exceeded: cpu needed 4, allowed 6 (allocated 4, inqueue 0)')


def test_job_larger_than_the_cluster_is_refused_by_overcommit():
    w = World([node("n1", cpu="3")], [queue()], [podgroup("pytest", 4, min_resources=SEED_MIN)], [])
    r = run(w)
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Pending"
    c = cond(st, "Unschedulable")
    assert (c["reason"], c["message"]) == (
        "NotEnoughResources",
        "cluster resources insufficient: cpu needed 4, available 3600m "
        "(allocatable 3 x overcommit-factor 1.2, used 0, inqueue 0)")
    assert ("pytest", "Normal", "Unschedulable", "resource in cluster is overused: overused cpu") in events_of(r)


def test_podgroup_without_min_resources_is_admitted_unconditionally():
    w = World([node("n1", cpu="1")], [queue(capability={"cpu": "1"})], [podgroup("big", 8)], [])
    assert run(w).podgroup_status[("default", "big")]["phase"] == "Inqueue"


def test_closed_queue_admits_nothing():
    w = World([node("n1")], [queue(state="Closed")], [podgroup("pytest", 4, min_resources=SEED_MIN)], [])
    c = cond(run(w).podgroup_status[("default", "pytest")], "Unschedulable")
    assert (c["reason"], c["message"]) == ("QueueClosed", 'queue "default" is Closed: it admits no new PodGroups')


def test_refused_job_whose_pods_already_exist_keeps_the_refusal_as_reason():
    # The seed's controller created the pods at once; the refusal must still be the reason.
    w = seed_world(capability={"cpu": 2})
    r = run(w)
    assert r.bindings == []
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Pending"
    c = cond(st, "Unschedulable")
    assert (c["reason"], c["message"]) == ("QueueCapabilityExceeded", P2_MESSAGE)
    assert cond(st, "Scheduled") is None
    assert set(r.pod_conditions) == {("default", p["metadata"]["name"]) for p in w.pods}
    pc = r.pod_conditions[("default", "pytest-master-0")]
    assert (pc["status"], pc["reason"], pc["message"]) == ("False", "Unschedulable", P2_MESSAGE)
    assert events_of(r, "PodGroup") == [
        ("pytest", "Normal", "Unschedulable", "queue resource quota insufficient: insufficient cpu"),
        ("pytest", "Warning", "Unschedulable", P2_MESSAGE)]


# ---------------------------------------------------------------- gang all-or-nothing

def test_s8_allocation_is_all_or_nothing_when_the_fourth_pod_does_not_fit():
    # 4 cpu node, 1 cpu held by a pod of another scheduler: 3 of 4 fit.
    other = pod("other", None, cpu="1", node_name="n1", scheduler="default-scheduler", phase="Running")
    w = World([node("n1", cpu="4")], [queue()], [podgroup("pytest", 4, phase="Inqueue")], gang("pytest") + [other])
    r = run(w)
    assert r.bindings == []
    st = r.podgroup_status[("default", "pytest")]
    assert st["phase"] == "Inqueue"
    c = cond(st, "Unschedulable")
    msg = ("1/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
           "Pending: 1 Unschedulable, 3 Schedulable. Origin reason is pytest-worker-2: "
           "0/1 nodes are unavailable: 1 Insufficient cpu.")
    assert (c["status"], c["reason"], c["message"]) == ("True", "NotEnoughResources", msg)
    assert r.pod_conditions[("default", "pytest-master-0")] == {
        "type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": NOW_STR,
        "reason": "Schedulable",
        "message": "Pod default/pytest-master-0 can possibly be assigned to n1, once minAvailable is satisfied"}
    w2 = r.pod_conditions[("default", "pytest-worker-2")]
    assert (w2["reason"], w2["message"]) == ("Unschedulable", "0/1 nodes are unavailable: 1 Insufficient cpu.")
    assert ("pytest", "Warning", "Unschedulable", msg) in events_of(r, "PodGroup")
    assert len(events_of(r, "Pod", "FailedScheduling")) == 4


def test_gang_on_a_3_cpu_node_is_stopped_by_the_queue_deserved_share():
    # Admitted earlier (phase Inqueue): proportion's deserved (3 cpu) stops the 4th task.
    w = World([node("n1", cpu="3")], [queue()], [podgroup("pytest", 4, min_resources=SEED_MIN, phase="Inqueue")],
              gang("pytest"))
    r = run(w)
    assert r.bindings == []
    c = cond(r.podgroup_status[("default", "pytest")], "Unschedulable")
    assert c["message"] == ("1/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
                            "Pending: 1 Unschedulable, 3 Schedulable")
    assert {k[1] for k, v in r.pod_conditions.items() if v["status"] == "False"} == {
        "pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"}


def test_unchanged_pod_conditions_are_not_rewritten():
    other = pod("other", None, cpu="1", node_name="n1", scheduler="default-scheduler", phase="Running")
    w = World([node("n1", cpu="4")], [queue()], [podgroup("pytest", 4, phase="Inqueue")], gang("pytest") + [other])
    run(w)
    r2 = run(w)
    assert r2.pod_conditions == {} and r2.podgroup_status == {}
    assert events_of(r2, "Pod") == []


def test_gang_binds_when_capacity_frees_up():
    other = pod("other", None, cpu="1", node_name="n1", scheduler="default-scheduler", phase="Running")
    w = World([node("n1", cpu="4")], [queue()], [podgroup("pytest", 4, phase="Inqueue")], gang("pytest") + [other])
    run(w)
    w.pod("other")["status"]["phase"] = "Succeeded"
    r = run(w)
    assert len(r.bindings) == 4
    st = r.podgroup_status[("default", "pytest")]
    assert cond(st, "Scheduled")["status"] == "True"
    assert cond(st, "Unschedulable")["status"] == "False"  # Phalanx: the stale condition is cleared


def test_min_member_smaller_than_replicas_binds_what_fits():
    w = World([node("n1", cpu="3")], [queue()], [podgroup("elastic", 2, phase="Inqueue")], gang("elastic"))
    r = run(w)
    assert [p for _, p, _ in r.bindings] == ["elastic-master-0", "elastic-worker-0", "elastic-worker-1"]
    assert cond(r.podgroup_status[("default", "elastic")], "Scheduled")["status"] == "True"
    left = r.pod_conditions[("default", "elastic-worker-2")]
    assert (left["reason"], left["message"]) == ("Unschedulable", "all nodes are unavailable")


def test_min_member_gang_below_minimum_binds_nothing():
    w = World([node("n1", cpu="1")], [queue()], [podgroup("elastic", 2, phase="Inqueue")], gang("elastic"))
    assert run(w).bindings == []


def test_bound_pods_count_toward_the_gang():
    # 3 of 4 already bound (e.g. one pod recreated): the fourth alone completes the gang.
    pods = gang("pytest", node_name="n1", phase="Running")
    replacement = pods[-1]
    del replacement["spec"]["nodeName"]
    replacement["status"]["phase"] = "Pending"
    w = World([node("n1")], [queue()], [podgroup("pytest", 4, phase="Running")], pods)
    r = run(w)
    assert r.bindings == [("default", "pytest-worker-2", "n1")]


def test_pods_not_all_created_yet_wait_without_being_called_unschedulable():
    w = World([node("n1")], [queue()], [podgroup("pytest", 4, phase="Inqueue")], gang("pytest")[:2])
    r = run(w)
    assert r.bindings == []
    c = cond(r.podgroup_status[("default", "pytest")], "Unschedulable")
    assert (c["reason"], c["message"]) == ("NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 2, min: 4")
    assert r.pod_conditions == {} and events_of(r, "Pod") == [] and events_of(r, reason="Unschedulable") == []


def test_min_task_member_per_role():
    pods = [pod("j-ps-0", "j", role="ps"), pod("j-worker-0", "j", role="worker"), pod("j-worker-1", "j", role="worker")]
    pg = podgroup("j", 2, phase="Inqueue", min_task_member={"ps": 1, "worker": 1})
    w = World([node("n1")], [queue()], [pg], pods)
    assert {p for _, p, _ in run(w).bindings} == {"j-ps-0", "j-worker-0", "j-worker-1"}
    # without the ps pod the roles are not valid: nothing is bound
    w2 = World([node("n1")], [queue()], [copy.deepcopy(pg)], pods[1:])
    r2 = run(w2)
    assert r2.bindings == []
    assert cond(r2.podgroup_status[("default", "j")], "Unschedulable")["reason"] == "NotEnoughPodsOfTask"


# ---------------------------------------------------------------- ordering

def test_higher_priority_job_goes_first():
    w = World([node("n1", cpu="4")], [queue()],
              [podgroup("low", 4, phase="Inqueue", created="2026-01-01T00:00:00Z"),
               podgroup("high", 4, phase="Inqueue", created="2026-01-01T00:00:05Z", priority_class="urgent")],
              gang("low") + gang("high"))
    r = run(w, priority_classes={"urgent": 1000})
    assert {p.split("-")[0] for _, p, _ in r.bindings} == {"high"}


def test_equal_priority_jobs_go_in_creation_order():
    w = World([node("n1", cpu="4")], [queue()],
              [podgroup("zz-first", 4, phase="Inqueue", created="2026-01-01T00:00:00Z"),
               podgroup("aa-second", 4, phase="Inqueue", created="2026-01-01T00:00:05Z")],
              gang("zz-first", created="2026-01-01T00:00:00Z") + gang("aa-second", created="2026-01-01T00:00:05Z"))
    assert {p.rsplit("-", 2)[0] for _, p, _ in run(w).bindings} == {"zz-first"}


def test_higher_priority_pod_goes_first_within_a_job():
    pods = [pod("j-worker-0", "j", priority=0), pod("j-worker-1", "j", priority=10)]
    w = World([node("n1", cpu="1")], [queue()], [podgroup("j", 1, phase="Inqueue")], pods)
    assert run(w).bindings == [("default", "j-worker-1", "n1")]


def test_enqueue_serves_queues_in_turn_and_keeps_traversing_after_a_refusal():
    # The first job of queue a is too big; the next one still gets in.
    w = World([node("n1", cpu="4")], [queue("a", capability={"cpu": "2"})],
              [podgroup("big", 4, queue="a", min_resources={"cpu": "4"}, created="2026-01-01T00:00:00Z"),
               podgroup("small", 1, queue="a", min_resources={"cpu": "1"}, created="2026-01-01T00:00:01Z")], [])
    r = run(w)
    assert r.podgroup_status[("default", "big")]["phase"] == "Pending"
    assert r.podgroup_status[("default", "small")]["phase"] == "Inqueue"


# ---------------------------------------------------------------- placement

def test_binpack_prefers_the_fuller_node():
    busy = [pod(f"busy-{i}", None, cpu="1", node_name="n2", scheduler="other", phase="Running") for i in range(4)]
    w = World([node("n1"), node("n2")], [queue()], [podgroup("one", 1, phase="Inqueue")], [pod("one-worker-0", "one")] + busy)
    assert run(w).bindings == [("default", "one-worker-0", "n2")]


def test_s9_node_ties_are_broken_by_name_not_at_random():
    w = World([node("n3"), node("n1"), node("n2")], [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one")])
    assert run(w).bindings == [("default", "one-worker-0", "n1")]


def test_gang_spills_to_a_second_node_when_the_first_is_full():
    w = World([node("n1", cpu="2"), node("n2", cpu="2")], [queue()], [podgroup("pytest", 4, phase="Inqueue")],
              gang("pytest"))
    r = run(w)
    assert sorted(n for _, _, n in r.bindings) == ["n1", "n1", "n2", "n2"]


def test_unschedulable_node_is_skipped():
    w = World([node("n1", unschedulable=True), node("n2")], [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one")])
    assert run(w).bindings == [("default", "one-worker-0", "n2")]


def test_only_unschedulable_nodes_give_kube_reason():
    w = World([node("n1", unschedulable=True)], [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one")])
    r = run(w)
    assert r.bindings == []
    assert r.pod_conditions[("default", "one-worker-0")]["message"] == (
        "0/1 nodes are unavailable: 1 node(s) were unschedulable.")


def test_not_ready_node_is_not_in_the_snapshot():
    w = World([node("n1", ready=False), node("n2")], [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one")])
    assert run(w).bindings == [("default", "one-worker-0", "n2")]


def test_node_selector_and_taints():
    taint = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"}, taints=taint), node("n3", labels={"zone": "b"})]
    w = World(nodes, [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one", node_selector={"zone": "b"})])
    assert run(w).bindings == [("default", "one-worker-0", "n3")]
    w2 = World(nodes[:2], [queue()], [podgroup("one", 1, phase="Inqueue")],
               [pod("one-worker-0", "one", node_selector={"zone": "b"})])
    r2 = run(w2)
    assert r2.pod_conditions[("default", "one-worker-0")]["message"] == (
        "0/2 nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {gpu: yes}.")
    tol = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    w3 = World(nodes[:2], [queue()], [podgroup("one", 1, phase="Inqueue")],
               [pod("one-worker-0", "one", node_selector={"zone": "b"}, tolerations=tol)])
    assert run(w3).bindings == [("default", "one-worker-0", "n2")]


def test_pod_number_cap():
    busy = [pod("busy-0", None, cpu="1", node_name="n1", scheduler="other", phase="Running")]
    w = World([node("n1", pods="1")], [queue()], [podgroup("one", 1, phase="Inqueue")], [pod("one-worker-0", "one")] + busy)
    r = run(w)
    assert r.pod_conditions[("default", "one-worker-0")]["message"] == (
        "0/1 nodes are unavailable: 1 node(s) pod number exceeded.")


def test_best_effort_pods_are_placed_by_backfill():
    pods = [pod(f"be-worker-{i}", "be", cpu=None, memory=None) for i in range(2)]
    w = World([node("n1")], [queue()], [podgroup("be", 2, phase="Inqueue")], pods)
    r = run(w)
    assert sorted(p for _, p, _ in r.bindings) == ["be-worker-0", "be-worker-1"]


def test_pipelined_gang_waits_for_releasing_resources():
    # The node's only cpu is held by a terminating pod: the task fits FutureIdle only.
    leaving = pod("old-worker-0", None, cpu="1", node_name="n1", scheduler="other", phase="Running", deleting=True)
    w = World([node("n1", cpu="1")], [queue()], [podgroup("one", 1, phase="Inqueue")], [pod("one-worker-0", "one"), leaving])
    r = run(w)
    assert r.bindings == []
    pc = r.pod_conditions[("default", "one-worker-0")]
    assert (pc["reason"], pc["message"]) == (
        "Unschedulable",
        "Pod default/one-worker-0 can possibly be assigned to n1, once resource is released and minAvailable is satisfied")


def test_pods_of_other_schedulers_are_not_bound_but_hold_resources():
    foreign = pod("foreign", "one", scheduler="default-scheduler")
    hog = pod("hog", None, cpu="15", node_name="n1", scheduler="default-scheduler", phase="Running")
    w = World([node("n1")], [queue()], [podgroup("one", 1, phase="Inqueue"), podgroup("two", 2, phase="Inqueue")],
              [foreign, hog, pod("two-worker-0", "two"), pod("two-worker-1", "two")])
    r = run(w)
    assert r.bindings == []  # "foreign" is not ours; "two" needs 2 cpu, 1 is left
    assert r.pod_conditions[("default", "two-worker-1")]["message"] == (
        "0/1 nodes are unavailable: 1 Insufficient cpu.")
    assert ("default", "foreign") not in r.pod_conditions


def test_gpu_requests_are_placed_on_gpu_nodes():
    nodes = [node("cpu1"), node("gpu1", extra={"nvidia.com/gpu": "2"})]
    w = World(nodes, [queue()], [podgroup("g", 2, phase="Inqueue")],
              [pod("g-worker-0", "g", gpu=1), pod("g-worker-1", "g", gpu=1)])
    r = run(w)
    assert {n for _, _, n in r.bindings} == {"gpu1"}
    assert r.queue_status["default"]["allocated"]["nvidia.com/gpu"] == "2"


# ---------------------------------------------------------------- phases

def test_completed_when_every_scheduled_task_finished():
    w = World([node("n1")], [queue()], [podgroup("done", 4, phase="Running")],
              gang("done", node_name="n1", phase="Succeeded"))
    st = run(w).podgroup_status[("default", "done")]
    assert st["phase"] == "Completed" and st["succeeded"] == 4


def test_failed_tasks_also_complete_the_podgroup():
    pods = gang("done", node_name="n1", phase="Succeeded")
    pods[1]["status"]["phase"] = "Failed"
    w = World([node("n1")], [queue()], [podgroup("done", 4, phase="Running")], pods)
    st = run(w).podgroup_status[("default", "done")]
    assert (st["phase"], st["succeeded"], st["failed"]) == ("Completed", 3, 1)


def test_unknown_when_part_runs_and_the_rest_cannot_be_placed():
    pods = gang("half", node_name="n1", phase="Running")
    for p in pods[2:]:
        del p["spec"]["nodeName"]
        p["status"]["phase"] = "Pending"
    other = pod("hog", None, cpu="14", node_name="n1", scheduler="other", phase="Running")
    w = World([node("n1")], [queue()], [podgroup("half", 4, phase="Running")], pods + [other])
    r = run(w)
    assert r.bindings == []
    st = r.podgroup_status[("default", "half")]
    assert (st["phase"], st["running"]) == ("Unknown", 2)


def test_running_falls_back_to_pending_when_pods_are_gone():
    w = World([node("n1")], [queue()], [podgroup("gone", 4, phase="Running")], [])
    assert run(w).podgroup_status[("default", "gone")]["phase"] == "Pending"


def test_inqueue_never_falls_back_to_pending_by_itself():
    w = World([node("n1")], [queue()], [podgroup("wait", 4, phase="Inqueue")], [])
    r = run(w)
    assert ("default", "wait") not in r.podgroup_status  # unchanged


def test_releasing_pods_with_a_node_count_as_scheduled():
    pods = gang("r", node_name="n1", phase="Pending")  # bound, not started
    pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w = World([node("n1")], [queue()], [podgroup("r", 4, phase="Inqueue")], pods)
    assert run(w).podgroup_status[("default", "r")]["phase"] == "Running"


def test_a_running_gang_losing_a_pod_is_unknown():
    pods = gang("r", node_name="n1", phase="Running")
    pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w = World([node("n1")], [queue()], [podgroup("r", 4, phase="Running")], pods)
    st = run(w).podgroup_status[("default", "r")]
    assert (st["phase"], st["running"]) == ("Unknown", 3)
    c = cond(st, "Unschedulable")
    assert (c["reason"], c["message"]) == ("NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 3, min: 4")


# ---------------------------------------------------------------- snapshot rules

def test_jobs_in_a_missing_queue_are_skipped():
    w = World([node("n1")], [queue()], [podgroup("lost", 1, queue="nope", phase="Inqueue")], [pod("lost-worker-0", "lost")])
    r = run(w)
    assert r.bindings == [] and r.podgroup_status == {}


def test_pods_without_a_podgroup_are_ignored():
    w = World([node("n1")], [queue()], [], [pod("orphan", "nope"), pod("plain", None)])
    r = run(w)
    assert r.bindings == [] and r.pod_conditions == {}


def test_bad_objects_are_skipped_not_fatal():
    bad_pod = pod("bad-worker-0", "one", cpu="lots")
    bad_node = node("broken", cpu="many")
    w = World([bad_node, node("n1"), {"kind": "Node"}], [queue(), {"metadata": {}}],
              [podgroup("one", 1, phase="Inqueue"), podgroup("neg", -1)],
              [bad_pod, pod("one-worker-0", "one"), {"metadata": {"name": 5}}])
    snap = w.snapshot()
    assert len(snap.skipped) >= 5
    r = run_session(snap, SchedulerConfig(), NOW)
    assert r.bindings == [("default", "one-worker-0", "n1")]
    assert any("bad-worker-0" in s and "cpu" in s for s in r.skipped)


def test_same_input_same_output():
    def world():
        return World([node(f"n{i}", cpu="5") for i in range(5)], [queue()],
                     [podgroup(f"j{i}", 4, phase="Inqueue") for i in range(6)],
                     [p for i in range(6) for p in gang(f"j{i}")])
    a = run_session(world().snapshot(), SchedulerConfig(), NOW)
    b = run_session(world().snapshot(), SchedulerConfig(), NOW)
    assert a == b and a.bindings


def test_a_snapshot_serves_one_session():
    snap = seed_world().snapshot()
    run_session(snap, SchedulerConfig(), NOW)
    with pytest.raises(ValueError, match="one session"):
        run_session(snap, SchedulerConfig(), NOW)


def test_unknown_plugin_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"tiers\[1\]: unknown plugin 'drf'"):
        run_session(seed_world().snapshot(), SchedulerConfig(tiers=(("gang",), ("drf",))), NOW)


def test_allocate_without_enqueue_admits_pending_jobs_itself():
    w = seed_world()
    r = run(w, SchedulerConfig(actions=("allocate", "backfill")))
    assert len(r.bindings) == 4
    assert r.podgroup_status[("default", "pytest")]["phase"] == "Inqueue"


def test_gang_without_container_requests_is_placed():
    # A PyTorchJob whose containers set no resources: the master is BestEffort and the
    # workers' only requests are their init container's. The queue's deserved share is
    # then empty, which must not read as "overused" (the gang would never place).
    from phalanx.scheduler import testing as T
    from phalanx.scheduler.framework import run_session as _run
    pods = [T.pod("j-master-0", "j", cpu=None, memory=None)]
    for i in range(3):
        p = T.pod(f"j-worker-{i}", "j", cpu=None, memory=None)
        p["spec"]["initContainers"] = [{"name": "init-pytorch", "image": "alpine:3.10", "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}}}]
        pods.append(p)
    w = T.World([T.node("n1")], [T.queue("default"), T.queue("root")], [T.podgroup("j", 4, phase="Inqueue")], pods)
    r = _run(w.snapshot(), now=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert sorted(b[1] for b in r.bindings) == ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"]


def test_extra_scheduler_names_are_served_too():
    w = World([node("n1")], [queue()], [podgroup("one", 1, phase="Inqueue")],
              [pod("one-worker-0", "one", scheduler="default-scheduler")])
    assert run(w).bindings == []  # volcano alone leaves it to another scheduler
    served = SchedulerConfig(extra_scheduler_names=("default-scheduler",))
    assert run(w, served, scheduler_names=served.scheduler_names).bindings == [("default", "one-worker-0", "n1")]
