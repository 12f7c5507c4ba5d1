"""Hash-consing of shared decoded objects (issue 21, ``store.decode.Interner``): equal
subtrees of different objects become one object, and nothing a reader sees changes."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from phalanx.objects.clock import FakeClock
from phalanx.sim.arrivals import resolve
from phalanx.sim.runner import Simulation
from phalanx.sim.workload import parse_workload
from phalanx.store import Store, decode
from phalanx.store.decode import Interner, SharedEvent, mutated_shared_objects


def pod(name: str, rank: str, node: str = "") -> dict:
    env = [{"name": "MASTER_ADDR", "value": "job-master-0"}, {"name": "RANK", "value": rank}]
    spec: dict = {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"], "env": env,
                                  "resources": {"limits": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"job": "job"},
                         "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job", "uid": "u1"}]},
            "spec": spec, "status": {"phase": "Pending"}}


def decoded(obj: dict, interner: Interner, old: dict | None = None) -> dict:
    """``obj`` as a shared watcher gets it: decoded from its JSON, then interned."""
    fresh = json.loads(json.dumps(obj))
    interner.intern(fresh, old)
    return fresh


def test_equal_subtrees_of_two_objects_become_one_and_values_stay_equal() -> None:
    it = Interner()
    a, b = pod("w-0", "1"), pod("w-1", "2")
    da, db = decoded(a, it), decoded(b, it)
    assert da == a and db == b
    assert da["metadata"]["ownerReferences"] is db["metadata"]["ownerReferences"]
    assert da["metadata"]["labels"] is db["metadata"]["labels"]
    ca, cb = da["spec"]["containers"][0], db["spec"]["containers"][0]
    assert ca is not cb  # the RANK differs ...
    assert ca["env"][0] is cb["env"][0] and ca["env"][1] is not cb["env"][1]  # ... only there
    assert ca["command"] is cb["command"] and ca["resources"] is cb["resources"]
    assert da["metadata"] is not db["metadata"] and da["spec"] is not db["spec"]  # sections stay per object
    assert da["metadata"]["name"] == "w-0" and db["metadata"]["name"] == "w-1"


def test_short_strings_are_interned_long_ones_left_alone() -> None:
    it = Interner()
    long_cmd = "x" * 100
    objs = [decoded({"kind": "Pod", "spec": {"nodeName": "node-1", "cmd": [long_cmd, "sh"]}}, it) for _ in range(2)]
    assert objs[0]["kind"] is objs[1]["kind"]
    assert objs[0]["spec"]["nodeName"] is objs[1]["spec"]["nodeName"]
    assert objs[0]["spec"]["cmd"] is objs[1]["spec"]["cmd"]  # the list is shared as a whole


def test_equality_is_json_equality_type_strict() -> None:
    it = Interner()
    values = [{"x": 1}, {"x": 1.0}, {"x": True}, {"x": "1"}, [1], [True], [1.0]]
    got = [decoded({"spec": {"v": v}}, it)["spec"]["v"] for v in values]
    for i, g in enumerate(got):
        assert json.dumps(g) == json.dumps(values[i])
        assert all(g is not h for h in got[:i])
    again = decoded({"spec": {"v": {"x": 1.0}}}, it)["spec"]["v"]
    assert again is got[1] and type(again["x"]) is float


def test_values_of_the_previous_version_are_kept_as_they_are() -> None:
    it = Interner()
    first = decoded(pod("w-0", "1"), it)
    second = json.loads(json.dumps(pod("w-0", "1", node="n1")))
    second["metadata"]["labels"] = first["metadata"]["labels"]  # what reuse_unchanged shares
    it.intern(second, first)
    assert second["metadata"]["labels"] is first["metadata"]["labels"]
    assert second["spec"]["containers"] is first["spec"]["containers"]  # found in the table
    assert second["spec"]["nodeName"] == "n1"


def test_the_table_is_bounded_and_what_it_dropped_stays_shared() -> None:
    it = Interner(max_bytes=200)
    first = [decoded({"spec": {"v": [i, "pad" * 10]}}, it) for i in range(3)]
    for i in range(3, 40):  # many distinct values: the generation holding the first ones is dropped
        decoded({"spec": {"v": [i, "pad" * 10]}}, it)
    assert sum(len(k) for k in (*it._new, *it._old)) <= 2 * (200 + 40)
    late = decoded({"spec": {"v": [0, "pad" * 10]}}, it)
    assert late["spec"]["v"] == first[0]["spec"]["v"] and late["spec"]["v"] is not first[0]["spec"]["v"]
    assert first[0]["spec"]["v"] == [0, "pad" * 10]


def test_a_value_found_in_the_old_generation_moves_to_the_new_one() -> None:
    it = Interner(max_bytes=60)
    keep = decoded({"spec": {"v": ["kept", 1]}}, it)["spec"]["v"]
    for i in range(6):
        decoded({"spec": {"v": ["other", i]}}, it)
        assert decoded({"spec": {"v": ["kept", 1]}}, it)["spec"]["v"] is keep  # used on and on: kept


async def test_shared_watchers_of_a_store_with_an_interner_share_across_objects() -> None:
    store = Store(None, FakeClock(), interner=Interner())
    w = store.watch("Pod", "default", None, shared=True)
    plain = store.watch("Pod", "default", None)
    store.create(pod("w-0", "1"))
    store.create(pod("w-1", "2"))
    a, b = [(await asyncio.wait_for(w.__anext__(), 1)).object for _ in range(2)]
    pa, pb = [(await asyncio.wait_for(plain.__anext__(), 1)).object for _ in range(2)]
    assert a["spec"]["containers"][0]["command"] is b["spec"]["containers"][0]["command"]
    assert pa["spec"]["containers"][0]["command"] is not pb["spec"]["containers"][0]["command"]  # private copies
    assert a == pa == store.get("Pod", "w-0", "default") and b == pb
    w.close()
    plain.close()


def test_shared_event_without_an_interner_shares_nothing_across_objects() -> None:
    a = SharedEvent(json.dumps(pod("w-0", "1"))).shared()
    b = SharedEvent(json.dumps(pod("w-1", "2"))).shared()
    assert a["metadata"]["ownerReferences"] == b["metadata"]["ownerReferences"]
    assert a["metadata"]["ownerReferences"] is not b["metadata"]["ownerReferences"]


WORKLOAD = {
    "cluster": {"nodes": 4, "cpu": 8, "memory": "32Gi"},
    "sim": {"backoffBase": "10s", "backoffCap": "1m"},
    "generator": {"seed": 3, "horizon": "2h", "arrivalRate": 6,
                  "replicas": {"dist": "choice", "values": [1, 2, 4], "weights": [1, 1, 1]},
                  "duration": {"dist": "lognormal", "median": "10m", "sigma": 0.5, "max": "1h"},
                  "failureProbability": 0.3, "kinds": {"PyTorchJob": 1, "TFJob": 1}, "cpu": 2, "memory": "4Gi"},
}


def test_no_component_of_a_simulation_changes_an_interned_object() -> None:
    """Every controller, the scheduler, the agents and the recorders read interned objects
    in a simulation (restarts, failures, deletions included): none may change one, or it
    would change every object sharing the value."""
    decode.set_checking(True)
    try:
        sim = Simulation(resolve(parse_workload(WORKLOAD, "t"), Path("."), "t"))
        try:
            result = sim.run()
        finally:
            sim.close()
        assert len(result.records) > 5 and any(r.restarts for r in result.records)
        assert len(decode._checked) > 500
        assert mutated_shared_objects() == []
    finally:
        decode.set_checking(False)
