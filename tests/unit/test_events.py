"""EventRecorder: v1 Event shape (docs/REFERENCE.md golden 54) and client-go-style correlation."""
from __future__ import annotations

import asyncio
import re

from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock, format_time
from phalanx.runtime.events import EventRecorder, EventSink, build_event, record
from phalanx.store import Store


def setup() -> tuple[Store, LocalClient, FakeClock]:
    clock = FakeClock()
    store = Store(None, clock)
    return store, LocalClient(store), clock


def make_pod(store: Store, name: str = "pytest-worker-0") -> dict:
    return store.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": "default"}, "spec": {}})


async def test_event_shape() -> None:
    store, client, clock = setup()
    p = make_pod(store)
    rec = EventRecorder(client, "volcano", clock)
    await rec.record(p, "Normal", "Scheduled", "Successfully assigned default/pytest-worker-0 to las1")
    [ev] = store.list("Event", "default")[0]
    assert re.fullmatch(r"pytest-worker-0\.[0-9a-f]{16}", ev["metadata"]["name"])
    assert ev["involvedObject"] == {"kind": "Pod", "namespace": "default", "name": "pytest-worker-0",
                                    "uid": p["metadata"]["uid"], "apiVersion": "v1",
                                    "resourceVersion": p["metadata"]["resourceVersion"]}
    assert ev["source"] == {"component": "volcano"} and ev["reportingComponent"] == "volcano"
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == format_time(clock.now())
    assert (ev["count"], ev["type"], ev["reason"]) == (1, "Normal", "Scheduled")


async def test_identical_events_are_counted_within_ten_minutes() -> None:
    store, client, clock = setup()
    p = make_pod(store)
    rec = EventRecorder(client, "volcano", clock)
    await rec.record(p, "Warning", "FailedScheduling", "0/1 nodes are available")
    first = clock.now()
    clock.advance(60)
    await rec.record(p, "Warning", "FailedScheduling", "0/1 nodes are available")
    clock.advance(60)
    await rec.record(p, "Warning", "FailedScheduling", "0/1 nodes are available")
    [ev] = store.list("Event", "default")[0]
    assert ev["count"] == 3
    assert ev["firstTimestamp"] == format_time(first)
    assert ev["lastTimestamp"] == format_time(clock.now())

    await rec.record(p, "Warning", "FailedScheduling", "another message")  # different message: new event
    clock.advance(11 * 60)
    await rec.record(p, "Warning", "FailedScheduling", "0/1 nodes are available")  # window passed: new event
    evs = store.list("Event", "default")[0]
    assert sorted(e["count"] for e in evs) == [1, 1, 3]
    assert len({e["metadata"]["name"] for e in evs}) == 3  # unique names under a standing clock


async def test_identical_events_recorded_concurrently_are_folded() -> None:
    # A round's events are written together: repeats wait for the first and count on it,
    # also when the answer to a write takes a while (group commit).
    store, client, clock = setup()
    p = make_pod(store)

    class Waiting:
        async def create(self, obj):
            out = await client.create(obj)
            await asyncio.sleep(0.01)
            return out

        async def patch(self, *args):
            out = await client.patch(*args)
            await asyncio.sleep(0.01)
            return out

    rec = EventRecorder(Waiting(), "pytorchjob-controller", clock)
    await asyncio.gather(*(rec.record(p, "Warning", "FailedCreatePod", "Error creating: quota") for _ in range(3)),
                         rec.record(p, "Normal", "Other", "x"))
    evs = store.list("Event", "default")[0]
    assert sorted((e["reason"], e["count"]) for e in evs) == [("FailedCreatePod", 3), ("Other", 1)]


async def test_deleted_event_is_recreated() -> None:
    store, client, clock = setup()
    p = make_pod(store)
    rec = EventRecorder(client, "c", clock)
    await rec.record(p, "Normal", "R", "m")
    [ev] = store.list("Event", "default")[0]
    store.delete("Event", ev["metadata"]["name"], "default")
    await rec.record(p, "Normal", "R", "m")
    [ev2] = store.list("Event", "default")[0]
    assert ev2["count"] == 1 and ev2["metadata"]["name"] != ev["metadata"]["name"]


async def test_cluster_scoped_objects_get_events_in_default() -> None:
    store, client, clock = setup()
    q = store.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "root"}})
    await record(client, q, "Normal", "Created", "queue created", component="volcano", clock=clock)
    [ev] = store.list("Event")[0]
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"]


async def test_record_never_raises(caplog) -> None:
    store, client, clock = setup()
    store.close()

    def broken(obj: dict, old: dict | None) -> dict:
        raise RuntimeError("store is down")

    store2 = Store(None, clock, admission=broken)
    rec = EventRecorder(LocalClient(store2), "c", clock)
    await rec.record({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}, "Normal", "R", "m")
    assert "could not record event R" in caplog.text
    await rec.record({"kind": "Pod", "metadata": {"name": "p"}}, "Bogus", "R", "m")
    assert "unsupported event type" in caplog.text


def test_build_event_is_pure() -> None:
    clock = FakeClock()
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "j", "namespace": "ns", "uid": "u"}}
    ev = build_event(obj, "Normal", "R", "m", "training-operator", clock.now(), 0x18b02c9d60ea1a3d)
    assert ev["metadata"] == {"name": "j.18b02c9d60ea1a3d", "namespace": "ns"}
    assert ev["involvedObject"] == {"kind": "PyTorchJob", "namespace": "ns", "name": "j", "uid": "u",
                                    "apiVersion": "kubeflow.org/v1"}


class GatedClient:
    """An API that takes each Event create only once ``gate`` is set, keeping the messages it wrote."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.written: list[str] = []

    async def create(self, obj):
        await self.gate.wait()
        self.written.append(obj["message"])
        return {**obj, "metadata": {**obj["metadata"]}}


async def test_the_sink_writes_in_the_background_and_drops_past_its_queue():
    gate = asyncio.Event()
    slow = GatedClient(gate)
    written = slow.written

    sink = EventSink(EventRecorder(slow, "test"), workers=1, max_queued=3)  # type: ignore[arg-type]
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    sink.emit(p, "Normal", "R", "m0")
    for _ in range(3):
        await asyncio.sleep(0)  # the worker takes m0 and waits on the server
    for i in range(1, 6):
        sink.emit(p, "Normal", "R", f"m{i}")  # returns at once: nothing is written yet
    assert written == []
    gate.set()
    await sink.flush()
    # m0 was being written, m1..m3 filled the queue, m4 and m5 were dropped.
    assert written == ["m0", "m1", "m2", "m3"] and sink.dropped == 2
    await sink.stop()


async def test_a_sink_whose_stop_is_cancelled_leaves_no_writer_behind() -> None:
    """A stop cut short (its task cancelled while it flushes) still ends the writers: none writes after it."""
    gate = asyncio.Event()
    slow = GatedClient(gate)
    written = slow.written

    sink = EventSink(EventRecorder(slow, "test"), workers=2)  # type: ignore[arg-type]
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    for i in range(10):
        sink.emit(p, "Normal", "R", f"m{i}")
    stopping = asyncio.create_task(sink.stop(timeout=30))
    for _ in range(5):
        await asyncio.sleep(0)
    stopping.cancel()
    await asyncio.gather(stopping, return_exceptions=True)
    gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert written == []  # the writers were ended with the stop, not left to write later
