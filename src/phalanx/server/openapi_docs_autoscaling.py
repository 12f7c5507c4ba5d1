"""Descriptions of the autoscaling/v2 schemas (what ``kubectl explain hpa`` prints).

Keyed like ``openapi_docs.DESCRIPTIONS`` (model class name, then wire field name; ``""`` the type's own
text), which merges them in.
"""
from __future__ import annotations

_TARGET = "The target value, average value or average utilization of the metric."
_CURRENT = "The current value of the metric, as the autoscaler last read it."
_METRIC = "The name (and optional label selector) of the metric."

AUTOSCALING_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "HorizontalPodAutoscaler": {
        "": "HorizontalPodAutoscaler scales the replicas of a workload with a scale subresource (a PyTorchJob's "
            "Worker replicas) after the metrics named in its spec.",
        "spec": "The target to scale, its bounds and the metrics that decide.",
        "status": "What the autoscaler last saw and decided.",
    },
    "HorizontalPodAutoscalerSpec": {
        "": "The desired behaviour of the autoscaler.",
        "scaleTargetRef": "The object to scale (kind, name, apiVersion); its scale subresource is read and written.",
        "minReplicas": "The lowest replica count the autoscaler scales down to (default 1).",
        "maxReplicas": "The highest replica count the autoscaler scales up to; at least minReplicas.",
        "metrics": "The metrics to compute the desired replica count from (the highest proposal wins); "
                   "default: 80% average CPU utilization.",
        "behavior": "Scaling rules for each direction (stabilization window, policies); default: the controller's.",
    },
    "CrossVersionObjectReference": {
        "": "A reference to an object by kind, name and API version.",
        "kind": "Kind of the referent.", "name": "Name of the referent.", "apiVersion": "API version of the referent.",
    },
    "MetricSpec": {
        "": "One metric to scale on: its source type and the source's fields.",
        "type": "The metric source: ContainerResource, External, Object, Pods or Resource.",
        "object": "A metric describing one object (Type Object).",
        "pods": "A metric averaged over the target's pods (Type Pods).",
        "resource": "A resource (cpu, memory) of the target's pods, as their requests see it (Type Resource).",
        "containerResource": "A resource of one container of each pod (Type ContainerResource).",
        "external": "A metric from outside the cluster (Type External).",
    },
    "MetricIdentifier": {"": "Identifies a metric.", "name": "The metric's name.",
                         "selector": "Labels narrowing the metric's series (all when unset)."},
    "MetricTarget": {
        "": "The value a metric should have.",
        "type": "Utilization, Value or AverageValue.",
        "value": "The target value of the metric (a quantity).",
        "averageValue": "The target value of the metric averaged over the pods (a quantity).",
        "averageUtilization": "The target average of the resource's use, in percent of the pods' requests.",
    },
    "ObjectMetricSource": {"": "A metric describing one object.", "describedObject": "The object the metric is about.",
                           "target": _TARGET, "metric": _METRIC},
    "PodsMetricSource": {"": "A metric of each pod of the target, averaged.", "metric": _METRIC, "target": _TARGET},
    "ResourceMetricSource": {"": "A resource of the target's pods, summed over their containers.",
                             "name": "The resource's name (cpu, memory).", "target": _TARGET},
    "ContainerResourceMetricSource": {"": "A resource of one container of each of the target's pods.",
                                      "name": "The resource's name (cpu, memory).", "target": _TARGET,
                                      "container": "The name of the container in the pods."},
    "ExternalMetricSource": {"": "A metric from outside the cluster.", "metric": _METRIC, "target": _TARGET},
    "HorizontalPodAutoscalerBehavior": {"": "Scaling rules for scaling up and down.",
                                        "scaleUp": "Rules when scaling up (default: at once, +4 pods or +100% per "
                                                   "15 s, whichever is more).",
                                        "scaleDown": "Rules when scaling down (default: the controller's "
                                                     "stabilization window, -100% per 15 s)."},
    "HPAScalingRules": {
        "": "How fast one direction may scale.",
        "stabilizationWindowSeconds": "Seconds of past recommendations considered: scaling up takes their lowest, "
                                      "down their highest (0 to 3600).",
        "selectPolicy": "Which policy applies when several do: Max (the biggest change, default), Min or Disabled.",
        "policies": "The changes allowed per period (at least one).",
        "tolerance": "The ratio of current to desired metric value within which no scaling happens "
                     "(default: the controller's, 0.1).",
    },
    "HPAScalingPolicy": {"": "One allowed change per period.", "type": "Pods or Percent.",
                         "value": "How many pods, or what percent of the current ones (greater than zero).",
                         "periodSeconds": "The period the change is counted over (1 to 1800 seconds)."},
    "HorizontalPodAutoscalerStatus": {
        "": "What the autoscaler last saw and decided.",
        "observedGeneration": "The generation of the autoscaler last seen.",
        "lastScaleTime": "When the autoscaler last changed the replica count.",
        "currentReplicas": "The replica count of the target, as the autoscaler last saw it.",
        "desiredReplicas": "The replica count the autoscaler last decided on.",
        "currentMetrics": "The last value of each metric of the spec, in order.",
        "conditions": "AbleToScale, ScalingActive and ScalingLimited, with their reasons.",
    },
    "MetricStatus": {"": "The last reading of one metric.", "type": "The metric source type.",
                     "object": "An Object metric's reading.", "pods": "A Pods metric's reading.",
                     "resource": "A Resource metric's reading.", "containerResource": "A ContainerResource "
                     "metric's reading.", "external": "An External metric's reading."},
    "MetricValueStatus": {"": "A metric's current value.", "value": "The current value (a quantity).",
                          "averageValue": "The current value averaged over the pods (a quantity).",
                          "averageUtilization": "The current average use, in percent of the pods' requests."},
    "ObjectMetricStatus": {"": "An Object metric's reading.", "metric": _METRIC, "current": _CURRENT,
                           "describedObject": "The object the metric is about."},
    "PodsMetricStatus": {"": "A Pods metric's reading.", "metric": _METRIC, "current": _CURRENT},
    "ResourceMetricStatus": {"": "A Resource metric's reading.", "name": "The resource's name.", "current": _CURRENT},
    "ContainerResourceMetricStatus": {"": "A ContainerResource metric's reading.", "name": "The resource's name.",
                                      "current": _CURRENT, "container": "The name of the container in the pods."},
    "ExternalMetricStatus": {"": "An External metric's reading.", "metric": _METRIC, "current": _CURRENT},
    "HorizontalPodAutoscalerCondition": {
        "": "One condition of the autoscaler.",
        "type": "AbleToScale, ScalingActive or ScalingLimited.",
        "status": "True, False or Unknown.",
        "lastTransitionTime": "When the condition last changed its status.",
        "reason": "Why the condition has its status, in one CamelCase word.",
        "message": "Why the condition has its status, in words.",
    },
}
