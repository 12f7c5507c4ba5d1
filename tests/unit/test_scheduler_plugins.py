"""Plugin formulas and the framework's vote rules, against hand computations
(Volcano's binpack, nodeorder, proportion, overcommit)."""
from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from phalanx.scheduler import SchedulerConfig, Snapshot, run_session
from phalanx.scheduler.fit_errors import FitErrors, sorted_histogram
from phalanx.scheduler.plugins import PLUGINS
from phalanx.scheduler.plugins.predicates import match_node_selector_term, node_affinity_matches, tolerates
from phalanx.scheduler.resources import pod_resources
from phalanx.scheduler.session import ABSTAIN, PERMIT, REJECT, Plugin, Session
from phalanx.scheduler.testing import World, gang, node, pod, podgroup, queue

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
MI = 1024 * 1024
GI = 1024 * MI


def open_session(world: World, config: SchedulerConfig | None = None) -> Session:
    config = config or SchedulerConfig()
    ssn = Session(world.snapshot(), config, NOW)
    ssn.open([[PLUGINS[n](config) for n in tier] for tier in config.tiers])
    return ssn


def plugin(ssn: Session, name: str) -> Plugin:
    return next(p for p in ssn.plugins if p.name == name)


def only(config_kw: dict) -> SchedulerConfig:
    """A config whose tier 2 scores with a single plugin."""
    return SchedulerConfig(**config_kw)


# ---------------------------------------------------------------- scores

def score_of(world: World, config: SchedulerConfig, task_name: str, node_name: str) -> float:
    ssn = open_session(world, config)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == task_name)
    n = next(n for n in ssn.nodes if n.name == node_name)
    return ssn.node_score(task, n)


def binpack_only(**kw) -> SchedulerConfig:
    return SchedulerConfig(leastrequested_weight=0, balancedresource_weight=0, nodeaffinity_weight=0, **kw)


def nodeorder_only(**kw) -> SchedulerConfig:
    base = dict(binpack_weight=0, leastrequested_weight=0, balancedresource_weight=0, nodeaffinity_weight=0)
    base.update(kw)
    return SchedulerConfig(**base)


def one_pod_on_node_world(task_cpu="1", task_mem="100Mi") -> World:
    resident = pod("resident", None, cpu="1", memory="100Mi", node_name="n1", scheduler="other", phase="Running")
    return World([node("n1", cpu="16", memory="64Gi")], [queue()], [podgroup("j", 1, phase="Inqueue")],
                 [pod("j-worker-0", "j", cpu=task_cpu, memory=task_mem), resident])


def test_binpack_score_formula():
    s = score_of(one_pod_on_node_world(), binpack_only(binpack_weight=1), "j-worker-0", "n1")
    assert s == pytest.approx(100 * ((2 / 16) + (200 * MI / (64 * GI))) / 2)


def test_binpack_weights_per_resource_and_plugin_weight():
    s = score_of(one_pod_on_node_world(), binpack_only(binpack_weight=10, binpack_cpu=3, binpack_memory=1),
                 "j-worker-0", "n1")
    assert s == pytest.approx(10 * 100 * (3 * (2 / 16) + 1 * (200 * MI / (64 * GI))) / 4)


def test_binpack_scores_zero_when_the_task_overflows_a_resource():
    w = one_pod_on_node_world(task_cpu="16")
    assert score_of(w, binpack_only(binpack_weight=1), "j-worker-0", "n1") == 0.0


def test_binpack_ignores_gpu_unless_listed():
    w = World([node("g", extra={"nvidia.com/gpu": "4"})], [queue()], [podgroup("j", 1, phase="Inqueue")],
              [pod("j-worker-0", "j", cpu="1", memory="100Mi", gpu=2)])
    plain = score_of(w, binpack_only(binpack_weight=1), "j-worker-0", "g")
    assert plain == pytest.approx(100 * (1 / 16 + 100 * MI / (64 * GI)) / 2)
    with_gpu = score_of(w, binpack_only(binpack_weight=1, binpack_resources={"nvidia.com/gpu": 1}), "j-worker-0", "g")
    assert with_gpu == pytest.approx(100 * (1 / 16 + 100 * MI / (64 * GI) + 2 / 4) / 3)


def test_binpack_weight_zero_disables_the_plugin():
    assert score_of(one_pod_on_node_world(), binpack_only(binpack_weight=0), "j-worker-0", "n1") == 0.0


def test_least_requested_is_kube_integer_arithmetic():
    s = score_of(one_pod_on_node_world(), nodeorder_only(leastrequested_weight=1), "j-worker-0", "n1")
    cpu = (16000 - 2000) * 100 // 16000                     # 87
    mem = (64 * GI - 200 * MI) * 100 // (64 * GI)           # 99
    assert s == (cpu + mem) // 2 == 93


def test_least_requested_counts_pods_without_requests_as_100m_and_200mi():
    resreq, init, (nz_cpu, nz_mem) = pod_resources({"containers": [{"name": "c"}]})
    assert resreq == {} and init == {} and (nz_cpu, nz_mem) == (100.0, 200 * MI)
    w = one_pod_on_node_world(task_cpu=None, task_mem=None)
    s = score_of(w, nodeorder_only(leastrequested_weight=1), "j-worker-0", "n1")
    assert s == ((16000 - 1100) * 100 // 16000 + (64 * GI - 300 * MI) * 100 // (64 * GI)) // 2


def test_most_requested():
    s = score_of(one_pod_on_node_world(), nodeorder_only(mostrequested_weight=1), "j-worker-0", "n1")
    assert s == (2000 * 100 // 16000 + (200 * MI) * 100 // (64 * GI)) // 2


def test_balanced_resource():
    s = score_of(one_pod_on_node_world(), nodeorder_only(balancedresource_weight=1), "j-worker-0", "n1")
    fc, fm = 2 / 16, 200 * MI / (64 * GI)
    assert s == int((1 - abs(fc - fm) / 2) * 100) == 93


def test_balanced_resource_with_gpu_uses_three_fractions():
    w = World([node("g", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": "4"})], [queue()],
              [podgroup("j", 1, phase="Inqueue")], [pod("j-worker-0", "j", cpu="2", memory="8Gi", gpu=1)])
    s = score_of(w, nodeorder_only(balancedresource_weight=1), "j-worker-0", "g")
    fr = [2 / 8, 8 / 32, 1 / 4]
    mean = sum(fr) / 3
    std = math.sqrt(sum((f - mean) ** 2 for f in fr) / 3)
    assert s == int((1 - std) * 100) == 100


def test_preferred_node_affinity_adds_its_weights():
    p = pod("j-worker-0", "j")
    p["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
    w = World([node("a", labels={"zone": "a"}), node("b", labels={"zone": "b"})], [queue()],
              [podgroup("j", 1, phase="Inqueue")], [p])
    cfg = nodeorder_only(nodeaffinity_weight=2)
    assert (score_of(w, cfg, "j-worker-0", "a"), score_of(w, cfg, "j-worker-0", "b")) == (0, 14)
    assert run_session(w.snapshot(), SchedulerConfig(), NOW).bindings == [("default", "j-worker-0", "b")]


def test_default_weights_put_the_second_seed_pod_on_the_same_node():
    # Hand check of the default sum on the seed shapes (1 pod on n1, n2 empty).
    w = World([node("n1"), node("n2")], [queue()], [podgroup("j", 1, phase="Inqueue")],
              [pod("j-worker-0", "j"), pod("resident", None, node_name="n1", scheduler="other", phase="Running")])
    cfg = SchedulerConfig()
    full, empty = score_of(w, cfg, "j-worker-0", "n1"), score_of(w, cfg, "j-worker-0", "n2")
    assert full == pytest.approx(10 * 100 * (2 / 16 + 200 * MI / (64 * GI)) / 2 + 93 + 93)
    assert full > empty


# ---------------------------------------------------------------- feasible-node sampling

@pytest.mark.parametrize("n, expected", [(1, 1), (100, 100), (101, 100), (1000, 420), (5000, 500), (20000, 1000)])
def test_num_nodes_to_find_is_volcanos_adaptive_rule(n, expected):
    assert SchedulerConfig().num_feasible_nodes_to_find(n) == expected


def test_identical_nodes_share_one_class():
    w = World([node(f"n{i:04d}") for i in range(1000)], [queue()], [podgroup("j", 4, phase="Inqueue")], gang("j"))
    ssn = open_session(w)
    assert ssn.index.class_count == 1
    result = run_session(w.snapshot(), SchedulerConfig(), NOW)
    assert {n for _, _, n in result.bindings} == {"n0000"}


def test_search_prefers_fuller_nodes_among_many():
    busy = [pod(f"busy-{i}", None, cpu="8", node_name=f"n{i:03d}", scheduler="other", phase="Running")
            for i in range(150, 200)]
    w = World([node(f"n{i:03d}") for i in range(200)], [queue()], [podgroup("j", 1, phase="Inqueue")],
              [pod("j-worker-0", "j")] + busy)
    assert run_session(w.snapshot(), SchedulerConfig(), NOW).bindings == [("default", "j-worker-0", "n150")]


def test_match_fields_by_node_name_is_checked_per_node():
    p = pod("j-worker-0", "j")
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    w = World([node("n1"), node("n2"), node("n3")], [queue()], [podgroup("j", 1, phase="Inqueue")], [p])
    assert run_session(w.snapshot(), SchedulerConfig(), NOW).bindings == [("default", "j-worker-0", "n2")]


# ---------------------------------------------------------------- proportion

def two_queue_world(request_a: int, request_b: int, weights=(2, 1), cpu_per_node="4", nodes=3, **qa) -> World:
    pods = [pod(f"a-worker-{i}", "a", cpu="1") for i in range(request_a)]
    pods += [pod(f"b-worker-{i}", "b", cpu="1") for i in range(request_b)]
    return World([node(f"n{i}", cpu=cpu_per_node) for i in range(nodes)],
                 [queue("qa", weights[0], **qa), queue("qb", weights[1])],
                 [podgroup("a", 1, queue="qa", phase="Inqueue"), podgroup("b", 1, queue="qb", phase="Inqueue")], pods)


def test_deserved_is_split_by_weight():
    ssn = open_session(two_queue_world(12, 12))
    prop = plugin(ssn, "proportion")
    assert prop.deserved("qa")[0] == pytest.approx(8000)  # millicores
    assert prop.deserved("qb")[0] == pytest.approx(4000)


def test_deserved_is_capped_by_request_and_the_rest_flows_to_others():
    ssn = open_session(two_queue_world(2, 12))
    prop = plugin(ssn, "proportion")
    assert prop.deserved("qa")[0] == pytest.approx(2000)
    assert prop.deserved("qb")[0] == pytest.approx(10000)


def test_deserved_is_capped_by_capability():
    ssn = open_session(two_queue_world(12, 12, capability={"cpu": "3"}))
    prop = plugin(ssn, "proportion")
    assert prop.deserved("qa")[0] == pytest.approx(3000)
    assert prop.deserved("qb")[0] == pytest.approx(9000)


def test_guarantee_is_reserved_from_the_others_real_capability():
    w = two_queue_world(12, 12, guarantee={"cpu": "10"})
    ssn = open_session(w)
    prop = plugin(ssn, "proportion")
    assert prop.attrs["qb"].real_capability[0] == pytest.approx(2000)
    assert prop.deserved("qa")[0] >= 10000 - 0.1


def test_allocation_follows_the_weighted_shares():
    r = run_session(two_queue_world(12, 12).snapshot(), SchedulerConfig(), NOW)
    per_queue = {"a": 0, "b": 0}
    for _, p, _ in r.bindings:
        per_queue[p[0]] += 1
    assert per_queue == {"a": 8, "b": 4}
    assert r.queue_status["qa"]["allocated"]["cpu"] == "8"
    assert r.queue_status["qb"]["allocated"]["cpu"] == "4"


def test_overused_queue_is_skipped():
    w = two_queue_world(4, 0)
    ssn = open_session(w)
    q = ssn.queues["qa"]
    assert not ssn.overused(q)
    prop = plugin(ssn, "proportion")
    prop.attrs["qa"].allocated[0] = prop.attrs["qa"].deserved[0]
    prop.attrs["qa"].allocated[1] = prop.attrs["qa"].deserved[1]
    assert ssn.overused(q)


# ---------------------------------------------------------------- overcommit

def overcommit_world(inqueue_cpu: str, new_cpu: str) -> World:
    # "held" sits in another queue, so that only overcommit (cluster-wide) sees it.
    return World([node("n1", cpu="10")], [queue(), queue("other")],
                 [podgroup("held", 1, queue="other", min_resources={"cpu": inqueue_cpu}, phase="Inqueue",
                           created="2026-01-01T00:00:00Z"),
                  podgroup("new", 1, min_resources={"cpu": new_cpu}, created="2026-01-01T00:00:01Z")], [])


def test_overcommit_admits_up_to_factor_times_the_cluster():
    assert run_session(overcommit_world("8", "4").snapshot(), SchedulerConfig(), NOW) \
        .podgroup_status[("default", "new")]["phase"] == "Inqueue"          # 8 + 4 <= 12
    r = run_session(overcommit_world("8", "5").snapshot(), SchedulerConfig(), NOW)
    st = r.podgroup_status[("default", "new")]
    assert st["phase"] == "Pending"                                            # 8 + 5 > 12
    assert st["conditions"][0]["message"] == (
        "cluster resources insufficient: cpu needed 5, available 4 "
        "(allocatable 10 x overcommit-factor 1.2, used 0, inqueue 8)")


def test_overcommit_factor_is_configurable_and_below_one_means_default():
    r = run_session(overcommit_world("8", "4").snapshot(), SchedulerConfig(overcommit_factor=1.0), NOW)
    assert r.podgroup_status[("default", "new")]["phase"] == "Pending"
    r = run_session(overcommit_world("8", "4").snapshot(), SchedulerConfig(overcommit_factor=0.5), NOW)
    assert r.podgroup_status[("default", "new")]["phase"] == "Inqueue"


def test_admitted_jobs_in_one_session_count_against_the_next():
    w = World([node("n1", cpu="10")], [queue()],
              [podgroup(f"j{i}", 1, min_resources={"cpu": "5"}, created=f"2026-01-01T00:00:0{i}Z") for i in range(4)], [])
    r = run_session(w.snapshot(), SchedulerConfig(), NOW)
    assert [r.podgroup_status[("default", f"j{i}")]["phase"] for i in range(4)] == ["Inqueue", "Inqueue", "Pending", "Pending"]


# ---------------------------------------------------------------- votes

class Voter(Plugin):
    def __init__(self, config, vote: int, name: str) -> None:
        super().__init__(config)
        self.vote = vote
        self.name = name

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_job_enqueueable_fn(lambda job: self.vote)


@pytest.mark.parametrize("tiers, expected", [
    ([[ABSTAIN], [ABSTAIN]], True),
    ([[PERMIT], [REJECT]], True),     # a tier with a Permit decides
    ([[ABSTAIN], [PERMIT, REJECT]], False),  # any Reject within the tier wins
    ([[REJECT], [PERMIT]], False),
    ([[ABSTAIN, PERMIT], [REJECT]], True),
])
def test_enqueueable_vote_combination(tiers, expected):
    w = World([node("n1")], [queue()], [podgroup("j", 1)], [])
    cfg = SchedulerConfig()
    ssn = Session(w.snapshot(), cfg, NOW)
    ssn.open([[Voter(cfg, v, f"v{t}{i}") for i, v in enumerate(tier)] for t, tier in enumerate(tiers)])
    assert ssn.job_enqueueable(next(iter(ssn.jobs.values()))) is expected


def test_order_keys_compare_plugin_by_plugin_then_creation_then_name():
    w = World([node("n1")], [queue()],
              [podgroup("b", 1, created="2026-01-01T00:00:00Z"), podgroup("a", 1, created="2026-01-01T00:00:00Z"),
               podgroup("c", 1, created="2025-12-31T00:00:00Z", priority_class="hi")], [])
    cfg = SchedulerConfig()
    ssn = Session(Snapshot.build(w.nodes, w.queues, w.podgroups, w.pods, {"hi": 5}), cfg, NOW)
    ssn.open([[PLUGINS[n](cfg) for n in tier] for tier in cfg.tiers])
    order = sorted(ssn.jobs.values(), key=ssn.job_order_key)
    assert [j.name for j in order] == ["c", "a", "b"]


# ---------------------------------------------------------------- predicates and messages

def test_tolerations():
    assert tolerates([{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}], "k", "v", "NoSchedule")
    assert not tolerates([{"key": "k", "operator": "Equal", "value": "w"}], "k", "v", "NoSchedule")
    assert tolerates([{"operator": "Exists"}], "any", "x", "NoExecute")
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], "k", "v", "NoSchedule")


@pytest.mark.parametrize("expr, ok", [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
    ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
    ({"key": "gpu", "operator": "DoesNotExist"}, True),
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "cores", "operator": "Gt", "values": ["8"]}, True),
    ({"key": "cores", "operator": "Lt", "values": ["8"]}, False),
    ({"key": "cores", "operator": "Gt", "values": ["x"]}, False),
    ({"key": "zone", "operator": "Bogus", "values": ["a"]}, False),
])
def test_node_selector_requirements(expr, ok):
    w = World([node("n1", labels={"zone": "a", "cores": "16"})], [queue()], [], [])
    n = w.snapshot().nodes[0]
    assert match_node_selector_term({"matchExpressions": [expr]}, n) is ok
    assert node_affinity_matches({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}, n) is ok


def test_fit_errors_message_and_byte_ordered_histogram():
    fe = FitErrors()
    fe.add("Insufficient cpu", 10)
    fe.add("node(s) pod number exceeded", 4)
    assert fe.error() == "0/14 nodes are unavailable: 10 Insufficient cpu, 4 node(s) pod number exceeded."
    assert FitErrors(err="preset").error() == "preset"
    assert sorted_histogram({"Pending": 4, "minAvailable": 4}) == ["4 Pending", "4 minAvailable"]


def test_pod_resources_take_the_init_container_peak_for_fit_only():
    spec = {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}]}
    resreq, init, _ = pod_resources(spec)
    assert resreq == {"cpu": 1000.0, "memory": 100 * MI}
    assert init == {"cpu": 2000.0, "memory": 100 * MI}


def test_requests_win_over_limits_and_ephemeral_storage_is_ignored():
    spec = {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "ephemeral-storage": "1Gi"},
                                                       "requests": {"cpu": "500m"}}}]}
    resreq, _, _ = pod_resources(spec)
    assert resreq == {"cpu": 500.0}
