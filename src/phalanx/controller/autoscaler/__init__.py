"""The embedded cluster's HorizontalPodAutoscaler controller, as kube-controller-manager runs it.

``calculator`` (a metric's proposal), ``normalize`` (stabilization, bounds, rate) and ``decide`` (one
sync) are pure; ``controller`` reads the target's scale and the pods, measures them and writes.
"""
