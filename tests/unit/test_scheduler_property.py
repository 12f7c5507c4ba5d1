"""Random clusters and gangs, several sessions each: the invariants that must
never break (a gang is placed all or nothing; a queue's capability is never exceeded)."""
from __future__ import annotations

import copy
import random
from datetime import datetime, timedelta, timezone

import pytest

from phalanx.objects.quantity import parse_quantity
from phalanx.scheduler import SchedulerConfig, run_session
from phalanx.scheduler.testing import World, node, pod, podgroup, queue

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def random_world(rng: random.Random) -> World:
    nodes = []
    for i in range(rng.randint(1, 6)):
        nodes.append(node(f"n{i}", cpu=str(rng.randint(1, 16)), memory=f"{rng.choice([2, 4, 16, 64])}Gi",
                          pods=str(rng.choice([2, 5, 110])), unschedulable=rng.random() < 0.1))
    queues = [queue("root"), queue("default", capability=rng.choice([None, {"cpu": str(rng.randint(1, 12))}]))]
    for q in range(rng.randint(0, 2)):
        cap = rng.choice([None, {"cpu": str(rng.randint(1, 12))}, {"cpu": str(rng.randint(1, 12)), "memory": "8Gi"}])
        queues.append(queue(f"q{q}", weight=rng.randint(1, 3), capability=cap, parent="root"))
    pgs, pods = [], []
    for j in range(rng.randint(1, 8)):
        name = f"j{j}"
        replicas = rng.randint(1, 6)
        mm = rng.randint(1, replicas)
        cpu = rng.choice(["500m", "1", "2", "3"])
        mem = rng.choice(["100Mi", "1Gi", "3Gi"])
        minres = rng.choice([None, {"cpu": str(parse_quantity(cpu) * mm), "memory": f"{int(parse_quantity(mem) * mm)}"}])
        q = rng.choice([q["metadata"]["name"] for q in queues if q["metadata"]["name"] != "root"])
        pgs.append(podgroup(name, mm, queue=q, min_resources=minres, phase=rng.choice([None, "Pending", "Inqueue"]),
                            created=f"2026-01-01T00:00:{j:02d}Z", priority_class=rng.choice([None, "hi"])))
        created = rng.randint(mm, replicas) if rng.random() < 0.8 else rng.randint(0, replicas)
        for r in range(created):
            pods.append(pod(f"{name}-worker-{r}", name, cpu=cpu, memory=mem, priority=rng.choice([None, 0, 5])))
    return World(nodes, queues, pgs, pods)


def requests(p: dict) -> tuple[float, float]:
    res = p["spec"]["containers"][0]["resources"].get("limits") or {}
    return parse_quantity(res.get("cpu", 0)), parse_quantity(res.get("memory", 0))


def holding(p: dict) -> bool:
    return bool(p["spec"].get("nodeName")) and p["status"]["phase"] not in ("Succeeded", "Failed")


def check_invariants(w: World, result) -> None:
    # 1. a job that got bindings has at least minMember pods placed
    bound_jobs = {p.rsplit("-", 2)[0] for _, p, _ in result.bindings}
    for pg in w.podgroups:
        name = pg["metadata"]["name"]
        if name not in bound_jobs:
            continue
        placed = [p for p in w.pods if p["metadata"]["annotations"].get("scheduling.k8s.io/group-name") == name
                  and p["spec"].get("nodeName")]
        assert len(placed) >= pg["spec"]["minMember"], f"partial gang {name}: {len(placed)} < {pg['spec']['minMember']}"
    # 2. nodes are never overcommitted (cpu, memory, pod count)
    for n in w.nodes:
        alloc = n["status"]["allocatable"]
        on = [p for p in w.pods if holding(p) and p["spec"]["nodeName"] == n["metadata"]["name"]]
        cpu = sum(requests(p)[0] for p in on)
        mem = sum(requests(p)[1] for p in on)
        assert cpu <= parse_quantity(alloc["cpu"]) + 1e-9
        assert mem <= parse_quantity(alloc["memory"]) + 1e-9
        assert len(on) <= int(alloc["pods"])
        if n["spec"].get("unschedulable"):
            assert not on
    # 3. a queue's capability is never exceeded by what its jobs hold
    queue_of = {pg["metadata"]["name"]: pg["spec"]["queue"] for pg in w.podgroups}
    for q in w.queues:
        cap = (q["spec"].get("capability") or {})
        held = [p for p in w.pods if holding(p)
                and queue_of.get(p["metadata"]["annotations"].get("scheduling.k8s.io/group-name")) == q["metadata"]["name"]]
        if "cpu" in cap:
            assert sum(requests(p)[0] for p in held) <= parse_quantity(cap["cpu"]) + 1e-9
        if "memory" in cap:
            assert sum(requests(p)[1] for p in held) <= parse_quantity(cap["memory"]) + 1e-9
    # 4. only Pending pods of ours get PodScheduled=False
    for (ns, name) in result.pod_conditions:
        assert not w.pod(name, ns)["spec"].get("nodeName")


@pytest.mark.parametrize("seed", range(150))
def test_random_clusters_keep_the_invariants(seed):
    rng = random.Random(seed)
    w = random_world(rng)
    config = SchedulerConfig()
    for step in range(4):
        now = T0 + timedelta(seconds=step)
        snap_a, snap_b = w.snapshot(priority_classes={"hi": 10}), w.snapshot(priority_classes={"hi": 10})
        result = run_session(snap_a, config, now)
        assert run_session(snap_b, config, now) == result  # deterministic
        w.apply(result)
        check_invariants(w, result)
        # the node agents start bound pods; some finish, freeing room for others
        w.start_bound_pods()
        for p in w.pods:
            if p["status"]["phase"] == "Running" and rng.random() < 0.2:
                p["status"]["phase"] = "Succeeded"


def test_generator_produces_both_bound_and_refused_gangs():
    # Guard against a vacuous property: across seeds, gangs get bound and gangs get refused.
    bound = refused = 0
    for seed in range(60):
        w = random_world(random.Random(seed))
        r = run_session(w.snapshot(priority_classes={"hi": 10}), SchedulerConfig(), T0)
        bound += len(r.bindings)
        refused += sum(1 for st in r.podgroup_status.values()
                       if any(c["type"] == "Unschedulable" and c["status"] == "True" for c in st.get("conditions") or []))
    assert bound > 50 and refused > 20


GARBAGE = [None, 1, "x", [], {}, {"metadata": None}, {"metadata": {"name": 3}}, {"metadata": "m"},
           {"spec": []}, {"spec": {"containers": "c"}}, {"status": {"allocatable": []}}]


def mangle(rng: random.Random, obj):
    """Replace a random nested value by garbage."""
    obj = copy.deepcopy(obj)
    target = obj
    for _ in range(rng.randint(1, 4)):
        if isinstance(target, dict) and target:
            k = rng.choice(sorted(target, key=str))
            if rng.random() < 0.4 or not isinstance(target[k], (dict, list)):
                target[k] = rng.choice(GARBAGE + ["lots", -1, {"a": 1}, [1, 2]])
                return obj
            target = target[k]
        elif isinstance(target, list) and target:
            i = rng.randrange(len(target))
            if rng.random() < 0.4 or not isinstance(target[i], (dict, list)):
                target[i] = rng.choice(GARBAGE)
                return obj
            target = target[i]
    return obj


@pytest.mark.parametrize("seed", range(60))
def test_hostile_objects_never_crash_a_session(seed):
    rng = random.Random(1000 + seed)
    w = random_world(rng)
    for p in w.pods[:3]:
        p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    lists = [w.nodes, w.queues, w.podgroups, w.pods]
    for lst in lists:
        for i in range(len(lst)):
            if rng.random() < 0.3:
                lst[i] = mangle(rng, lst[i])
        lst.extend(rng.sample(GARBAGE, 2))
    result = run_session(w.snapshot(), SchedulerConfig(), T0)
    assert isinstance(result.bindings, list)
