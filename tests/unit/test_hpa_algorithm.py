"""The HPA's pure decision core (controller/autoscaler: calculator, normalize, decide) on a fake clock:
replica proposals from measurements, tolerance, pod grouping, stabilization, bounds, behavior policies,
and one sync's status, conditions and events in kube-controller-manager's words."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from phalanx.controller.autoscaler import calculator as calc
from phalanx.controller.autoscaler import normalize as norm
from phalanx.controller.autoscaler.decide import PodUsage, Scale, Settings, decide, set_condition, tolerances_of
from phalanx.objects.clock import format_time

T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=timezone.utc)
READY_LONG_AGO = T0 - timedelta(minutes=10)
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
REASON_UP = "cpu resource utilization (percentage of request) above target"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def pod(name: str, cpu: str | None = "500m", phase: str = "Running", started: datetime = READY_LONG_AGO,
        ready: str = "True", ready_at: datetime | None = None, deleting: bool = False, limit: str | None = None,
        containers: int = 1) -> dict:
    resources: dict = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    meta: dict = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = format_time(T0)
    return {"metadata": meta,
            "spec": {"containers": [{"name": "pytorch" if i == 0 else f"side{i}", "resources": resources}
                                    for i in range(containers)]},
            "status": {"phase": phase, "startTime": format_time(started),
                       "conditions": [{"type": "Ready", "status": ready,
                                       "lastTransitionTime": format_time(ready_at or started)}]}}


def metric(milli: int, when: datetime = T0, window: float = 15.0) -> calc.PodMetric:
    return calc.PodMetric(milli, when, window)


R = calc.Readiness()
TOL = calc.Tolerances()


# --------------------------------------------------------------------------- calculator


def test_utilization_proposal_is_ceil_of_ratio_times_ready_pods():
    pods = [pod("p0")]
    assert calc.resource_replicas(1, 50, "cpu", TOL, pods, {"p0": metric(1000)}, R, T0) == (4, 200, 1000)
    pods = [pod("p0"), pod("p1")]
    # (600 + 400) / (500 + 500) = 100% against 50%: twice the pods.
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, {"p0": metric(600), "p1": metric(400)}, R, T0) == (4, 100, 500)


def test_within_the_tolerance_the_current_count_stays():
    pods = [pod("p0"), pod("p1")]
    used = {"p0": metric(270), "p1": metric(270)}  # 54% of request against 50%: ratio 1.08
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, used, R, T0)[0] == 2
    assert calc.resource_replicas(2, 50, "cpu", calc.Tolerances(0.05, 0.05), pods, used, R, T0)[0] == 3
    assert TOL.within(0.9) and TOL.within(1.1) and not TOL.within(0.89) and not TOL.within(1.11)


def test_a_scale_down_is_proposed_when_use_is_below_target():
    pods = [pod(f"p{i}") for i in range(3)]
    used = {f"p{i}": metric(50) for i in range(3)}  # 10% against 50%
    assert calc.resource_replicas(3, 50, "cpu", TOL, pods, used, R, T0)[0] == 1


def test_requests_missing_or_from_limits():
    with pytest.raises(calc.MetricError, match="^missing request for cpu in container pytorch of Pod p0$"):
        calc.resource_replicas(1, 50, "cpu", TOL, [pod("p0", cpu=None)], {"p0": metric(100)}, R, T0)
    assert calc.requests_of([pod("p0", cpu=None, limit="2")], "cpu") == {"p0": 2000}
    assert calc.requests_of([pod("p0", containers=2)], "cpu") == {"p0": 1000}
    assert calc.requests_of([pod("p0", containers=2)], "cpu", container="side1") == {"p0": 500}


def test_no_pods_or_no_usable_metrics_is_an_error():
    with pytest.raises(calc.MetricError, match="^no pods returned by selector while calculating replica count$"):
        calc.resource_replicas(1, 50, "cpu", TOL, [], {}, R, T0)
    with pytest.raises(calc.MetricError, match=r"^did not receive metrics for targeted pods \(pods might be unready\)$"):
        calc.resource_replicas(1, 50, "cpu", TOL, [pod("p0", phase="Pending")], {"p0": metric(900)}, R, T0)


def test_failed_and_deleting_pods_are_ignored_pending_ones_unready_unmeasured_ones_missing():
    pods = [pod("a"), pod("b", phase="Failed"), pod("c", deleting=True), pod("d", phase="Pending"), pod("e")]
    g = calc.group_pods(pods, {"a": metric(1), "b": metric(1), "c": metric(1), "d": metric(1)}, "cpu", R, T0)
    assert (g.ready, g.ignored, g.unready, g.missing) == (1, {"b", "c"}, {"d"}, {"e"})


def test_missing_pods_count_as_their_request_on_a_scale_down_and_nothing_on_a_scale_up():
    pods = [pod("p0"), pod("p1")]
    # p0 at 10%: alone it proposes 1; p1 (missing) counts as 100% of its request: (50+500)/1000 = 55% -> ratio 1.1.
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, {"p0": metric(50)}, R, T0)[0] == 2
    # p0 at 200%: p1 counts as 0: (1000+0)/1000 = 100% -> ratio 2 -> 4.
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, {"p0": metric(1000)}, R, T0)[0] == 4


def test_unready_pods_count_as_nothing_on_a_scale_up_only():
    pods = [pod("p0"), pod("p1", phase="Pending")]
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, {"p0": metric(1000)}, R, T0)[0] == 4  # 1000/1000 -> 2x2
    assert calc.resource_replicas(2, 50, "cpu", TOL, pods, {"p0": metric(50)}, R, T0)[0] == 1  # unready left out


def test_a_starting_pods_cpu_counts_once_a_whole_window_was_measured_after_it_became_ready():
    start = T0 - timedelta(seconds=60)
    ready_at = T0 - timedelta(seconds=10)
    p = pod("p0", started=start, ready_at=ready_at)
    assert calc.group_pods([p], {"p0": metric(1, T0, 15.0)}, "cpu", R, T0).unready == {"p0"}  # window began before ready
    assert calc.group_pods([p], {"p0": metric(1, T0, 5.0)}, "cpu", R, T0).ready == 1
    not_ready = pod("p0", started=start, ready="False")
    assert calc.group_pods([not_ready], {"p0": metric(1, T0, 1.0)}, "cpu", R, T0).unready == {"p0"}
    # After the initialization period: unready only if never ready (its readiness changed within the delay).
    old = T0 - timedelta(minutes=6)
    never = pod("p0", started=old, ready="False", ready_at=old + timedelta(seconds=5))
    assert calc.group_pods([never], {"p0": metric(1)}, "cpu", R, T0).unready == {"p0"}
    lost = pod("p0", started=old, ready="False", ready_at=old + timedelta(seconds=60))
    assert calc.group_pods([lost], {"p0": metric(1)}, "cpu", R, T0).ready == 1
    assert calc.group_pods([p], {"p0": metric(1, T0, 15.0)}, "memory", R, T0).ready == 1  # only cpu waits


def test_average_value_targets_compare_the_average_use():
    pods = [pod("p0"), pod("p1")]
    used = {"p0": metric(500), "p1": metric(300)}  # average 400m against 200m
    assert calc.raw_resource_replicas(2, 200, "cpu", TOL, pods, used, R, T0) == (4, 400)
    assert calc.raw_resource_replicas(2, 390, "cpu", TOL, pods, used, R, T0) == (2, 400)  # within tolerance
    # A missing pod on a scale down counts as the target: 950m against 1000m is within the tolerance.
    assert calc.raw_resource_replicas(2, 1000, "cpu", TOL, pods, {"p0": metric(900)}, R, T0) == (2, 900)


# --------------------------------------------------------------------------- normalize


def test_a_scale_down_waits_for_the_stabilization_window():
    h = norm.History()
    h.record_initial(3, at(0))
    n = norm.normalize(h, 3, 1, 1, 5, 300.0, at(60))
    assert (n.replicas, n.able) == (3, norm.STABILIZED_DOWN)
    n = norm.normalize(h, 3, 1, 1, 5, 300.0, at(200))
    assert n.replicas == 3
    n = norm.normalize(h, 3, 1, 1, 5, 300.0, at(301))  # the initial 3 is older than the window now
    assert (n.replicas, n.able, n.limited, n.limit) == (1, norm.READY, False, norm.WITHIN_RANGE)


def test_scale_ups_are_not_stabilized():
    h = norm.History()
    h.record_initial(1, at(0))
    assert norm.normalize(h, 1, 3, 1, 5, 300.0, at(15)).replicas == 3


def test_bounds_and_the_scale_up_rate_clamp_the_proposal():
    assert norm.clamp(1, 10, 1, 10) == (4, norm.SCALE_UP_LIMIT)  # max(2 x 1, 4)
    assert norm.clamp(3, 10, 1, 10) == (6, norm.SCALE_UP_LIMIT)
    assert norm.clamp(1, 10, 1, 3) == (3, norm.TOO_MANY)
    assert norm.clamp(2, 0, 1, 3) == (1, norm.TOO_FEW)
    assert norm.clamp(2, 3, 1, 3) == (3, norm.WITHIN_RANGE)
    h = norm.History()
    n = norm.normalize(h, 1, 4, 1, 3, 300.0, at(0))
    assert (n.replicas, n.limited, n.limit) == (3, True, norm.TOO_MANY)


def test_behavior_policies_limit_the_change_per_period():
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}}
    h = norm.History()
    h.record_initial(1, at(0))
    n = norm.normalize_with_behavior(h, behavior, 1, 5, 1, 10, 300.0, at(0))
    assert (n.replicas, n.limited, n.limit) == (2, True, norm.SCALE_UP_LIMIT)
    norm.store_scale_event(h, behavior, 1, 2, at(0))
    assert norm.normalize_with_behavior(h, behavior, 2, 5, 1, 10, 300.0, at(30)).replicas == 2  # 1 pod per 60 s
    assert norm.normalize_with_behavior(h, behavior, 2, 5, 1, 10, 300.0, at(61)).replicas == 3
    # Scale down: the unset window is the controller's; then at most -50% per period.
    down = norm.normalize_with_behavior(norm.History(), behavior, 8, 1, 1, 10, 0.0, at(0))
    assert (down.replicas, down.limit) == (4, norm.SCALE_DOWN_LIMIT)


def test_behavior_select_policies_and_stabilization_windows():
    rules = {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
    h = norm.History()
    assert norm.scale_up_limit(10, h, {**rules, "selectPolicy": "Max"}, T0) == 20
    assert norm.scale_up_limit(10, h, {**rules, "selectPolicy": "Min"}, T0) == 14
    assert norm.scale_up_limit(10, h, {**rules, "selectPolicy": "Disabled"}, T0) == 10
    assert norm.scale_down_limit(10, h, {**rules, "selectPolicy": "Max"}, T0) == 0
    assert norm.scale_down_limit(10, h, {**rules, "selectPolicy": "Min"}, T0) == 6
    h.recommendations = [norm.Recommendation(2, at(0)), norm.Recommendation(6, at(50))]
    assert norm.stabilize_with_behavior(h, 4, 5, 60.0, 0.0, at(55)) == (4, norm.STABILIZED_UP)  # lowest of up window: 2
    h.recommendations = [norm.Recommendation(6, at(50))]
    assert norm.stabilize_with_behavior(h, 4, 1, 0.0, 60.0, at(55)) == (4, norm.STABILIZED_DOWN)  # highest: 6, <= current


def test_old_scale_events_are_overwritten():
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 10}]}}
    h = norm.History()
    norm.store_scale_event(h, behavior, 1, 2, at(0))
    norm.store_scale_event(h, behavior, 2, 4, at(20))
    assert [(e.change, e.at) for e in h.scale_up] == [(2, at(20))]
    norm.store_scale_event(h, None, 4, 5, at(30))  # no behavior: nothing kept
    assert len(h.scale_up) == 1


# --------------------------------------------------------------------------- decide


def hpa(metrics=None, low=1, high=3, status=None, behavior=None) -> dict:
    spec = {"scaleTargetRef": {"kind": "PyTorchJob", "name": "ej", "apiVersion": "kubeflow.org/v1"},
            "minReplicas": low, "maxReplicas": high, "metrics": metrics or [CPU]}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"metadata": {"name": "ej", "namespace": "default"}, "spec": spec, "status": status or {"desiredReplicas": 0}}


SEL = "training.kubeflow.org/job-name=ej,training.kubeflow.org/replica-type=worker"


def usage(milli: int, container: str = "pytorch") -> PodUsage:
    return PodUsage({container: milli}, T0, 15.0)


def conds(status: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_a_busy_worker_scales_up_in_the_controllers_words():
    h = norm.History()
    d = decide(hpa(), Scale(1, 1, SEL), [pod("ej-worker-0")], {"ej-worker-0": usage(1000)}, h, Settings(), T0)
    assert (d.rescale_to, d.reason) == (3, REASON_UP)
    assert conds(d.status) == {
        "AbleToScale": ("True", "ReadyForNewScale", "recommended size matches current size"),
        "ScalingActive": ("True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count "
                                                      "from cpu resource utilization (percentage of request)"),
        "ScalingLimited": ("True", "TooManyReplicas", "the desired replica count is more than the maximum replica count"),
    }
    d.rescaled(h, None, at(1))
    assert d.events == [("Normal", "SuccessfulRescale", f"New size: 3; reason: {REASON_UP}")]
    assert conds(d.status)["AbleToScale"] == ("True", "SucceededRescale",
                                              "the HPA controller was able to update the target scale to 3")
    assert {k: v for k, v in d.status.items() if k != "conditions"} == {
        "currentReplicas": 1, "desiredReplicas": 3, "lastScaleTime": format_time(at(1)),
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 200,
                                                                                       "averageValue": "1"}}}]}


def test_no_change_keeps_the_count_and_the_last_scale_time():
    status = {"desiredReplicas": 2, "lastScaleTime": format_time(READY_LONG_AGO)}
    pods = [pod("a"), pod("b")]
    d = decide(hpa(status=status), Scale(2, 2, SEL), pods, {"a": usage(250), "b": usage(260)}, norm.History(),
               Settings(), T0)
    assert d.rescale_to is None and d.events == []
    assert d.status["desiredReplicas"] == 2 and d.status["lastScaleTime"] == format_time(READY_LONG_AGO)
    assert d.status["currentMetrics"][0]["resource"]["current"] == {"averageUtilization": 51, "averageValue": "255m"}


def test_a_failed_scale_read_is_reported_and_nothing_else_changes():
    d = decide(hpa(), 'pytorchjobs.kubeflow.org "ej" not found', [], {}, norm.History(), Settings(), T0)
    assert d.events == [("Warning", "FailedGetScale", 'pytorchjobs.kubeflow.org "ej" not found')]
    assert d.status == {"desiredReplicas": 0, "conditions": [{
        "type": "AbleToScale", "status": "False", "reason": "FailedGetScale", "lastTransitionTime": format_time(T0),
        "message": "the HPA controller was unable to get the target's current scale: "
                   'pytorchjobs.kubeflow.org "ej" not found'}]}


def test_a_target_at_zero_replicas_is_not_scaled():
    d = decide(hpa(), Scale(0, 0, SEL), [], {}, norm.History(), Settings(), T0)
    assert d.rescale_to is None
    assert conds(d.status)["ScalingActive"] == ("False", "ScalingDisabled",
                                                "scaling is disabled since the replica count of the target is zero")


def test_outside_the_bounds_the_count_is_brought_back_without_metrics():
    d = decide(hpa(high=3), Scale(5, 5, SEL), [], {}, norm.History(), Settings(), T0)
    assert (d.rescale_to, d.reason) == (3, "Current number of replicas above Spec.MaxReplicas")
    d = decide(hpa(low=2), Scale(1, 1, SEL), [], {}, norm.History(), Settings(), T0)
    assert (d.rescale_to, d.reason) == (2, "Current number of replicas below Spec.MinReplicas")


def test_a_scale_without_a_selector_cannot_be_measured():
    d = decide(hpa(), Scale(1, 0, ""), [], {}, norm.History(), Settings(), T0)
    assert d.events == [("Warning", "SelectorRequired", "selector is required"),
                        ("Warning", "FailedComputeMetricsReplicas", "selector is required")]
    assert conds(d.status)["ScalingActive"] == ("False", "InvalidSelector", "the HPA target's scale is missing a selector")
    assert d.status["currentReplicas"] == 1 and d.status["desiredReplicas"] == 0


def test_metrics_without_a_metrics_api_here_fail_as_on_a_cluster_without_one():
    pods_metric = {"type": "Pods", "pods": {"metric": {"name": "packets"},
                                            "target": {"type": "AverageValue", "averageValue": "1k"}}}
    d = decide(hpa(metrics=[pods_metric]), Scale(1, 1, SEL), [pod("a")], {}, norm.History(), Settings(), T0)
    inner = ("unable to get metric packets: unable to fetch metrics from custom metrics API: no custom metrics API "
             "(custom.metrics.k8s.io) registered")
    assert d.events == [("Warning", "FailedGetPodsMetric", inner),
                        ("Warning", "FailedComputeMetricsReplicas",
                         f"invalid metrics (1 invalid out of 1), first error is: failed to get pods metric value: {inner}")]
    assert conds(d.status)["ScalingActive"] == ("False", "FailedGetPodsMetric",
                                                f"the HPA was unable to compute the replica count: {inner}")
    assert d.status["currentMetrics"] == [{"type": ""}]
    external = {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}}
    d = decide(hpa(metrics=[external]), Scale(1, 1, SEL), [pod("a")], {}, norm.History(), Settings(), T0)
    assert d.events[0] == ("Warning", "FailedGetExternalMetric",
                           "unable to get external metric default/queue/nil: unable to fetch metrics from external "
                           "metrics API: the server could not find the requested resource "
                           "(get queue.external.metrics.k8s.io)")


def test_unmeasured_pods_and_other_resources_fail_the_resource_metric():
    d = decide(hpa(), Scale(1, 1, SEL), [pod("a")], {}, norm.History(), Settings(), T0)
    inner = "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from " \
            "resource metrics API"
    assert d.events[0] == ("Warning", "FailedGetResourceMetric", inner)
    assert d.events[1][2] == f"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource " \
                             f"metric value: {inner}"
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}
    d = decide(hpa(metrics=[memory]), Scale(1, 1, SEL), [pod("a")], {"a": usage(100)}, norm.History(), Settings(), T0)
    assert d.events[0][1:] == ("FailedGetResourceMetric", "failed to get memory usage: unable to get metrics for "
                                                          "resource memory: the embedded cluster measures only cpu")


def test_one_valid_metric_still_scales_up_but_not_down():
    bad = {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                                        "metric": {"name": "rps"}, "target": {"type": "Value", "value": "10"}}}
    d = decide(hpa(metrics=[CPU, bad]), Scale(1, 1, SEL), [pod("a")], {"a": usage(1000)}, norm.History(), Settings(), T0)
    assert d.rescale_to == 3 and d.error and d.error.startswith("invalid metrics (1 invalid out of 2)")
    assert d.events[0] == ("Warning", "FailedGetObjectMetric",
                           "unable to get metric rps: Service on default s/unable to fetch metrics from custom metrics "
                           "API: no custom metrics API (custom.metrics.k8s.io) registered")
    assert d.metrics is not None and d.metrics[1] == {"type": ""}  # written with the rescale
    pods = [pod("a"), pod("b")]
    d = decide(hpa(metrics=[CPU, bad]), Scale(2, 2, SEL), pods, {"a": usage(10), "b": usage(10)}, norm.History(),
               Settings(), T0)
    assert d.rescale_to is None and conds(d.status)["ScalingActive"][1] == "FailedGetObjectMetric"


def test_container_resource_and_average_value_targets():
    per_container = {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "pytorch", "target": {"type": "Utilization", "averageUtilization": 50}}}
    u = {"a": PodUsage({"pytorch": 1000, "side1": 0}, T0, 15.0)}
    d = decide(hpa(metrics=[per_container]), Scale(1, 1, SEL), [pod("a", containers=2)], u, norm.History(), Settings(), T0)
    assert d.rescale_to == 3
    assert d.reason == "cpu container resource utilization (percentage of request) above target"
    d.rescaled(norm.History(), None, T0)
    assert d.status["currentMetrics"] == [{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "pytorch", "current": {"averageUtilization": 200, "averageValue": "1"}}}]
    average = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "250m"}}}
    d = decide(hpa(metrics=[average]), Scale(1, 1, SEL), [pod("a")], {"a": usage(500)}, norm.History(), Settings(), T0)
    assert (d.rescale_to, d.reason) == (2, "cpu resource above target")
    assert d.metrics is not None and d.metrics[0]["resource"]["current"] == {"averageValue": "500m"}


def test_rescale_failure_is_reported():
    d = decide(hpa(), Scale(1, 1, SEL), [pod("a")], {"a": usage(1000)}, norm.History(), Settings(), T0)
    d.rescale_failed("Operation cannot be fulfilled", T0)
    assert d.events == [("Warning", "FailedRescale", f"New size: 3; reason: {REASON_UP}; error: Operation cannot be "
                                                     "fulfilled")]
    assert conds(d.status)["AbleToScale"] == ("False", "FailedUpdateScale", "the HPA controller was unable to update "
                                                                            "the target scale: Operation cannot be fulfilled")
    assert "lastScaleTime" not in d.status and d.status["desiredReplicas"] == 0


def test_scale_down_after_the_window_end_to_end():
    h = norm.History()
    pods = [pod(f"p{i}") for i in range(3)]
    idle = {f"p{i}": usage(10) for i in range(3)}
    d = decide(hpa(), Scale(3, 3, SEL), pods, idle, h, Settings(downscale_stabilization=60.0), T0)
    assert d.rescale_to is None and conds(d.status)["AbleToScale"][1] == "ScaleDownStabilized"
    d = decide(hpa(status=d.status), Scale(3, 3, SEL), pods, idle, h, Settings(downscale_stabilization=60.0), at(61))
    assert (d.rescale_to, d.reason) == (1, "All metrics below target")


def test_conditions_move_their_transition_time_only_when_their_status_changes():
    status: dict = {}
    set_condition(status, "AbleToScale", "True", "A", "a", T0)
    set_condition(status, "AbleToScale", "True", "B", "b", at(10))
    assert status["conditions"] == [{"type": "AbleToScale", "status": "True", "reason": "B", "message": "b",
                                     "lastTransitionTime": format_time(T0)}]
    set_condition(status, "AbleToScale", "False", "C", "c", at(20))
    assert status["conditions"][0]["lastTransitionTime"] == format_time(at(20))


def test_tolerances_come_from_the_behavior_per_direction():
    assert tolerances_of(hpa(), 0.1) == calc.Tolerances(0.1, 0.1)
    h = hpa(behavior={"scaleUp": {"tolerance": "50m"}, "scaleDown": {"tolerance": "0"}})
    assert tolerances_of(h, 0.1) == calc.Tolerances(0.0, 0.05)


def test_a_selector_that_does_not_parse_is_reported():
    d = decide(hpa(), Scale(1, 1, "a in (b"), [], {}, norm.History(), Settings(), T0)
    reason, msg = conds(d.status)["ScalingActive"][1:]
    assert reason == "InvalidSelector" and msg.startswith("couldn't convert selector into a corresponding internal "
                                                          "selector object: ")
    assert d.events[0][:2] == ("Warning", "InvalidSelector") and d.events[1][1] == "FailedComputeMetricsReplicas"
