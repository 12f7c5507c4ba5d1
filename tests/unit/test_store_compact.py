"""The compact stored form (store/compact.py): packed per kind once trained, the
same JSON back, dictionaries trained again as a kind's writes grow, and a
store that packs reads, lists, watches and updates as one that does not."""
from __future__ import annotations

import asyncio
import json

from phalanx.objects.clock import FakeClock
from phalanx.store import Store
from phalanx.store.compact import Packed, Packer, text_of


def pod_json(i: int, phase: str = "Pending") -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"job-{i // 10}-worker-{i % 10}", "namespace": "default", "uid": f"uid-{i:08d}",
        "labels": {"job": f"job-{i // 10}", "index": str(i % 10)}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", str(i)]}]},
        "status": {"phase": phase, "podIP": f"10.0.{i // 256}.{i % 256}"}}, separators=(",", ":"))


def test_a_kind_is_packed_once_trained_and_unpacks_to_the_same_json() -> None:
    p = Packer(train_after=50)
    out = [p.pack("Pod", pod_json(i)) for i in range(200)]
    assert all(o.__class__ is str for o in out[:49])  # sampled, not packed yet
    packed = [o for o in out[50:]]
    assert all(isinstance(o, Packed) for o in packed)
    assert [text_of(o) for o in out] == [pod_json(i) for i in range(200)]
    assert sum(len(o.data) for o in packed) < sum(len(pod_json(i)) for i in range(50, 200)) / 4
    assert p.pack("Service", pod_json(1)).__class__ is str  # each kind its own dictionary


def test_the_dictionary_is_trained_again_as_writes_grow_and_old_values_stay_readable() -> None:
    p = Packer(train_after=50)
    early = [p.pack("Pod", pod_json(i)) for i in range(100)]
    late = [p.pack("Pod", pod_json(i, "Running")) for i in range(100, 700)]  # trained again at 500
    assert early[60]._dec is not late[-1]._dec  # type: ignore[union-attr]
    assert [text_of(o) for o in early + late] == [pod_json(i) for i in range(100)] + \
        [pod_json(i, "Running") for i in range(100, 700)]


async def test_a_packing_store_reads_lists_watches_and_updates_as_a_plain_one() -> None:
    def uids():
        n = iter(range(1, 10**6))
        return lambda: f"00000000-0000-4000-8000-{next(n):012x}"
    stores = [Store(None, FakeClock(), uid_factory=uids()),
              Store(None, FakeClock(), uid_factory=uids(), packer=Packer(train_after=20))]
    results = []
    for store in stores:
        w = store.watch("Pod", None, "0")
        for i in range(60):
            store.create(json.loads(pod_json(i)))
        for i in range(0, 60, 7):
            pod = store.get("Pod", f"job-{i // 10}-worker-{i % 10}", "default")
            pod["status"]["phase"] = "Running"
            store.update_status(pod)
        events = []
        while w.pending():
            ev = await asyncio.wait_for(w.__anext__(), 1)
            events.append((ev.type, ev.object["metadata"]["name"], ev.object["status"]["phase"]))
        items, rv = store.list("Pod", "default", label_selector="index=3")
        late = store.watch("Pod", None, None)  # a new watch starts from the stored objects
        added = []
        while late.pending():
            added.append((await asyncio.wait_for(late.__anext__(), 1)).object)
        results.append((events, items, rv, added))
        w.close()
        late.close()
    for a, b in zip(results[0], results[1]):
        assert a == b
    assert len(results[0][3]) == 60
