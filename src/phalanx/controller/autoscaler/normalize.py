"""From the metrics' proposal to the replica count applied (kube-controller-manager's normalization). Pure.

Each HPA keeps a ``History``: its recent recommendations and, with ``behavior``, its recent scale events.
Without ``behavior`` the proposal is stabilized (the highest recommendation of the downscale window, so a
scale down waits until every recent proposal agrees), then clamped to [minReplicas, maxReplicas] and to a
scale up of at most max(2 x current, 4). With ``behavior`` each direction has its own stabilization window
(up: the lowest recent recommendation, down: the highest) and its policies limit the change per period,
counting the scale events of that period. Each step says why as the condition it sets (AbleToScale,
ScalingLimited), in the controller's words. Times are given (``now``): a fake clock drives the tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from phalanx.api.autoscaling import DISABLED_SELECT, MIN_SELECT, PERCENT_POLICY, PODS_POLICY

Obj = dict[str, Any]

DEFAULT_DOWNSCALE_STABILIZATION = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
_INT32_MAX, _INT32_MIN = 2**31 - 1, -(2**31)

STABILIZED_DOWN = ("ScaleDownStabilized",
                   "recent recommendations were higher than current one, applying the highest recent recommendation")
STABILIZED_UP = ("ScaleUpStabilized",
                 "recent recommendations were lower than current one, applying the lowest recent recommendation")
READY = ("ReadyForNewScale", "recommended size matches current size")
WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
SCALE_UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
SCALE_DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")


@dataclass
class Recommendation:
    replicas: int
    at: datetime


@dataclass
class ScaleEvent:
    change: int
    at: datetime
    outdated: bool = False


@dataclass
class History:
    """What the controller remembers of one HPA between syncs (forgotten when the HPA goes)."""

    recommendations: list[Recommendation] = field(default_factory=list)
    scale_up: list[ScaleEvent] = field(default_factory=list)
    scale_down: list[ScaleEvent] = field(default_factory=list)

    def record_initial(self, current: int, now: datetime) -> None:
        """The first sync's recommendation is the current count."""
        if not self.recommendations:
            self.recommendations.append(Recommendation(current, now))


@dataclass(frozen=True)
class Normalized:
    """The count to apply and the conditions that say why: AbleToScale (True) and ScalingLimited."""

    replicas: int
    able: tuple[str, str]
    limited: bool
    limit: tuple[str, str]


def _record(history: History, index: int | None, replicas: int, now: datetime) -> None:
    if index is not None:
        history.recommendations[index] = Recommendation(replicas, now)
    else:
        history.recommendations.append(Recommendation(replicas, now))


def stabilize(history: History, proposed: int, window: float, now: datetime) -> int:
    """stabilizeRecommendation: the highest recommendation of the window (this one recorded)."""
    cutoff = now - timedelta(seconds=window)
    highest, old = proposed, None
    for i, rec in enumerate(history.recommendations):
        if rec.at < cutoff:
            old = i
        elif rec.replicas > highest:
            highest = rec.replicas
    _record(history, old, proposed, now)
    return highest


def clamp(current: int, desired: int, low: int, high: int) -> tuple[int, tuple[str, str]]:
    """convertDesiredReplicasWithRules: [low, high], and a scale up of at most max(2 x current, 4)."""
    up_limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    most, why = (up_limit, SCALE_UP_LIMIT) if high > up_limit else (high, TOO_MANY)
    if desired < low:
        return low, TOO_FEW
    if desired > most:
        return most, why
    return desired, WITHIN_RANGE


def normalize(history: History, current: int, proposed: int, low: int, high: int, window: float,
              now: datetime) -> Normalized:
    """normalizeDesiredReplicas: an HPA without ``behavior``."""
    stabilized = stabilize(history, proposed, window, now)
    replicas, limit = clamp(current, stabilized, low, high)
    return Normalized(replicas, STABILIZED_DOWN if stabilized != proposed else READY, replicas != stabilized, limit)


# ---- with behavior ----------------------------------------------------------------------------------


def _window(rules: Obj, default: float) -> float:
    v = rules.get("stabilizationWindowSeconds")
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else default


def stabilize_with_behavior(history: History, current: int, proposed: int, up_window: float, down_window: float,
                            now: datetime) -> tuple[int, tuple[str, str]]:
    """stabilizeRecommendationWithBehaviors: between the lowest recommendation of the up window and the
    highest of the down window, starting from the current count (this one recorded)."""
    up_cutoff, down_cutoff = now - timedelta(seconds=up_window), now - timedelta(seconds=down_window)
    up, down, old = proposed, proposed, None
    for i, rec in enumerate(history.recommendations):
        if rec.at > up_cutoff:
            up = min(rec.replicas, up)
        if rec.at > down_cutoff:
            down = max(rec.replicas, down)
        if rec.at < up_cutoff and rec.at < down_cutoff:
            old = i
    recommendation = min(max(current, up), down)
    _record(history, old, proposed, now)
    return recommendation, STABILIZED_UP if proposed >= current else STABILIZED_DOWN


def _changed_in(period: float, events: list[ScaleEvent], now: datetime) -> int:
    cutoff = now - timedelta(seconds=period)
    return sum(e.change for e in events if e.at > cutoff)


def _policies(rules: Obj) -> list[Obj]:
    return [p for p in rules.get("policies") or [] if isinstance(p, dict)]


def _period_start(current: int, policy: Obj, history: History, now: datetime) -> int:
    period = float(policy.get("periodSeconds") or 0)
    return current - _changed_in(period, history.scale_up, now) + _changed_in(period, history.scale_down, now)


def scale_up_limit(current: int, history: History, rules: Obj, now: datetime) -> int:
    """calculateScaleUpLimitWithScalingRules: the most replicas the up policies allow now."""
    select = rules.get("selectPolicy")
    if select == DISABLED_SELECT:
        return current
    pick, result = (min, _INT32_MAX) if select == MIN_SELECT else (max, _INT32_MIN)
    for policy in _policies(rules):
        start, value = _period_start(current, policy, history, now), int(policy.get("value") or 0)
        if policy.get("type") == PODS_POLICY:
            result = pick(result, start + value)
        elif policy.get("type") == PERCENT_POLICY:
            result = pick(result, math.ceil(start * (1 + value / 100)))
    return result


def scale_down_limit(current: int, history: History, rules: Obj, now: datetime) -> int:
    """calculateScaleDownLimitWithBehaviors: the fewest replicas the down policies allow now."""
    select = rules.get("selectPolicy")
    if select == DISABLED_SELECT:
        return current
    pick, result = (max, _INT32_MIN) if select == MIN_SELECT else (min, _INT32_MAX)
    for policy in _policies(rules):
        start, value = _period_start(current, policy, history, now), int(policy.get("value") or 0)
        if policy.get("type") == PODS_POLICY:
            result = pick(result, start - value)
        elif policy.get("type") == PERCENT_POLICY:
            result = pick(result, int(start * (1 - value / 100)))
    return result


def rate_limited(history: History, current: int, desired: int, low: int, high: int, up: Obj, down: Obj,
                 now: datetime) -> tuple[int, tuple[str, str]]:
    """convertDesiredReplicasWithBehaviorRate: the bounds and the policies' rate."""
    if desired > current:
        limit = max(scale_up_limit(current, history, up, now), current)
        most, why = (limit, SCALE_UP_LIMIT) if high > limit else (high, TOO_MANY)
        if desired > most:
            return most, why
    elif desired < current:
        limit = min(scale_down_limit(current, history, down, now), current)
        least, why = (limit, SCALE_DOWN_LIMIT) if low < limit else (low, TOO_FEW)
        if desired < least:
            return least, why
    return desired, WITHIN_RANGE


def normalize_with_behavior(history: History, behavior: Obj, current: int, proposed: int, low: int, high: int,
                            default_down_window: float, now: datetime) -> Normalized:
    """normalizeDesiredReplicasWithBehaviors; a scale-down window left unset is the controller's."""
    up, down = _rules(behavior.get("scaleUp")), _rules(behavior.get("scaleDown"))
    stabilized, why = stabilize_with_behavior(history, current, proposed, _window(up, 0.0),
                                              _window(down, default_down_window), now)
    able = why if stabilized != proposed else READY
    replicas, limit = rate_limited(history, current, stabilized, low, high, up, down, now)
    return Normalized(replicas, able, replicas != stabilized, limit)


def _rules(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _longest_period(rules: Any) -> float:
    return float(max((int(p.get("periodSeconds") or 0) for p in _policies(rules if isinstance(rules, dict) else {})),
                     default=0))


def store_scale_event(history: History, behavior: Obj | None, previous: int, new: int, now: datetime) -> None:
    """storeScaleEvent: remember a rescale for the policies' periods (only with ``behavior``); an event
    older than the direction's longest period is overwritten."""
    if behavior is None:
        return
    up = new > previous
    events = history.scale_up if up else history.scale_down
    cutoff = now - timedelta(seconds=_longest_period(behavior.get("scaleUp" if up else "scaleDown")))
    for e in events:
        if e.at < cutoff:
            e.outdated = True
    event = ScaleEvent(abs(new - previous), now)
    reuse = [i for i, e in enumerate(events) if e.outdated]
    if reuse:
        events[reuse[-1]] = event
    else:
        events.append(event)


__all__ = ["DEFAULT_DOWNSCALE_STABILIZATION", "History", "Normalized", "clamp", "normalize",
           "normalize_with_behavior", "rate_limited", "scale_down_limit", "scale_up_limit", "stabilize",
           "stabilize_with_behavior", "store_scale_event"]
