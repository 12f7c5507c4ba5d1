"""kubelet's pod start histograms as the node agents feed them: from first sight (and from creation)
to the first status written Running (with every container running), once per pod, on a fake clock."""
from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from phalanx.node.metrics import POD_START_BUCKETS, NodeMetrics, PodStartTracker, all_containers_running
from phalanx.objects.clock import FakeClock, format_time
from phalanx.runtime.probes import exposition

START = "kubelet_pod_start_duration_seconds"
TOTAL = "kubelet_pod_start_total_duration_seconds"


def count(m: NodeMetrics, name: str) -> float:
    return m.registry.get_sample_value(f"{name}_count") or 0.0


def total(m: NodeMetrics, name: str) -> float:
    return m.registry.get_sample_value(f"{name}_sum") or 0.0


def running(*names: str, waiting: tuple[str, ...] = ()) -> dict:
    return {"phase": "Running", "containerStatuses": [
        *({"name": n, "state": {"running": {"startedAt": "x"}}} for n in names),
        *({"name": n, "state": {"waiting": {"reason": "ContainerCreating"}}} for n in waiting)]}


def pod(created: str | None, status: dict | None = None) -> dict:
    meta = {"name": "p", "namespace": "default", "uid": "u1"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"metadata": meta, "status": status or {}}


def test_the_series_are_kubelets():
    m = NodeMetrics(CollectorRegistry())
    fams = {f.name: f for f in text_string_to_metric_families(_body(m))}
    assert {n: f.type for n, f in fams.items()} == {START: "histogram", TOTAL: "histogram"}
    bounds = [s.labels["le"] for s in fams[START].samples if s.name.endswith("_bucket")]
    assert bounds == [*(str(float(b)) for b in POD_START_BUCKETS), "+Inf"]
    assert [s.labels for s in fams[TOTAL].samples if s.name.endswith("_count")] == [{}]  # no labels, as kubelet's


def _body(m: NodeMetrics) -> str:
    body = exposition(m.registry).body  # what /metrics serves
    assert isinstance(body, bytes)
    return body.decode()


def test_a_pod_start_is_observed_once_from_first_sight_and_from_creation():
    clock = FakeClock()
    created = format_time(clock.now())
    clock.advance(1.5)  # the scheduler's wait: before the agent sees the pod
    m = NodeMetrics()
    t = PodStartTracker(m, pod(created), clock.now())
    clock.advance(0.5)
    t.written({"phase": "Pending", "containerStatuses": []}, 2, clock.now())
    assert count(m, START) == 0 and count(m, TOTAL) == 0
    clock.advance(0.5)
    t.written(running("a", waiting=("b",)), 2, clock.now())  # Running, one container not yet
    assert (count(m, START), total(m, START)) == (1, 1.0)
    assert count(m, TOTAL) == 0
    clock.advance(1)
    t.written(running("a", "b"), 2, clock.now())
    assert (count(m, TOTAL), total(m, TOTAL)) == (1, 3.5)
    clock.advance(10)  # a restart in place, Running again: not a pod start
    t.written({"phase": "Running", "containerStatuses": []}, 2, clock.now())
    t.written(running("a", "b"), 2, clock.now())
    assert (count(m, START), count(m, TOTAL)) == (1, 1)


def test_an_adopted_running_pod_is_not_observed():
    m = NodeMetrics()
    clock = FakeClock()
    t = PodStartTracker(m, pod(format_time(clock.now()), running("a")), clock.now())
    t.written(running("a"), 1, clock.now())
    assert (count(m, START), count(m, TOTAL)) == (0, 0)


def test_a_pod_without_a_readable_creation_time_still_counts_its_start():
    m = NodeMetrics()
    clock = FakeClock()
    for created in (None, "not a time"):
        t = PodStartTracker(m, pod(created), clock.now())
        t.written(running("a"), 1, clock.now())
    assert (count(m, START), count(m, TOTAL)) == (2, 0)


def test_no_metrics_no_observation():
    t = PodStartTracker(None, pod(None), FakeClock().now())
    t.written(running("a"), 1, FakeClock().now() + timedelta(seconds=1))
    assert not t.started


def test_all_containers_running():
    assert all_containers_running(running("a", "b"), 2)
    assert not all_containers_running(running("a", waiting=("b",)), 2)
    assert not all_containers_running(running("a"), 2)  # a status not reported yet
    assert not all_containers_running({**running("a"), "phase": "Pending"}, 1)
    assert not all_containers_running({"phase": "Running", "containerStatuses": ["x"]}, 1)
    assert not all_containers_running({"phase": "Running"}, 0)
