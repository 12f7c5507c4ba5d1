"""Job condition mechanics, exactly as kubeflow ``pkg/util/status.go`` (docs/REFERENCE.md §6.1).

- Once ``Failed`` is True the list is frozen.
- Same type, status and reason: nothing changes (not even the message).
- Same type and status, other reason: replaced, ``lastTransitionTime`` kept.
- Otherwise appended at the end after ``filter_out``: Running and Restarting
  remove each other; Failed/Succeeded turn an existing Running to False
  (keeping its reason and times); Created is never removed.

``StatusWriter`` wraps these for the per-kind rules and ties events to the
condition changes that really happened, so a reconcile that changes nothing
emits nothing.
"""
from __future__ import annotations

import copy
from datetime import datetime

from phalanx.controller.fields import as_dict, as_list
from phalanx.objects.clock import format_time
from phalanx.objects.meta import Obj

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
SUSPENDED = "Suspended"
FAILED = "Failed"

# (event type "Normal"/"Warning", reason, message), recorded on the job.
Event = tuple[str, str, str]


def conditions_of(status: Obj) -> list[Obj]:
    return [c for c in as_list(as_dict(status).get("conditions")) if isinstance(c, dict)]


def get_condition(status: Obj, ctype: str) -> Obj | None:
    for c in conditions_of(status):
        if c.get("type") == ctype:
            return c
    return None


def has_condition(status: Obj, ctype: str, value: str = "True") -> bool:
    c = get_condition(status, ctype)
    return c is not None and c.get("status") == value


def is_succeeded(status: Obj) -> bool:
    return has_condition(status, SUCCEEDED)


def is_failed(status: Obj) -> bool:
    return has_condition(status, FAILED)


def is_finished(status: Obj) -> bool:
    return is_succeeded(status) or is_failed(status)


def new_condition(ctype: str, value: str, reason: str, message: str, now: datetime) -> Obj:
    t = format_time(now)
    return {
        "type": ctype, "status": value, "reason": reason, "message": message,
        "lastUpdateTime": t, "lastTransitionTime": t,
    }


def filter_out(conditions: list[Obj], ctype: str) -> list[Obj]:
    out = []
    for c in conditions:
        t = c.get("type")
        if ctype == RESTARTING and t == RUNNING:
            continue
        if ctype == RUNNING and t == RESTARTING:
            continue
        if t == ctype:
            continue
        if ctype in (FAILED, SUCCEEDED) and t == RUNNING:
            c = {**c, "status": "False"}
        out.append(c)
    return out


def set_condition(status: Obj, cond: Obj) -> bool:
    """Apply ``cond`` to ``status["conditions"]`` in place; True if anything changed."""
    if is_failed(status):
        return False
    current = get_condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return False
    cond = dict(cond)
    if current is not None and current.get("status") == cond["status"]:
        cond["lastTransitionTime"] = current.get("lastTransitionTime", cond["lastTransitionTime"])
    status["conditions"] = filter_out(conditions_of(status), cond["type"]) + [cond]
    return True


def update_job_conditions(status: Obj, ctype: str, value: str, reason: str, message: str, now: datetime) -> bool:
    """``UpdateJobConditions``: the one entry point the original uses."""
    return set_condition(status, new_condition(ctype, value, reason, message, now))


def _same(a: Obj, b: Obj) -> bool:
    return all(a.get(k) == b.get(k) for k in ("type", "status", "reason", "message"))


class StatusWriter:
    """A mutable job status plus the events its condition changes call for.

    Within one reconcile a condition can flip and flip back (TF re-applies
    Restarting after Running removed it); ``finish`` keeps the old timestamps of
    any condition that ends up identical to one already there, and emits a
    condition's event only if that condition is really new.
    """

    def __init__(self, kind: str, name: str, namespace: str, status: Obj, now: datetime) -> None:
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.now = now
        self.before = as_dict(status)  # read only: the status as reconciled (callers' object, never changed)
        self.status: Obj = copy.deepcopy(as_dict(status))
        self._condition_events: list[tuple[Obj, Event]] = []
        self.events: list[Event] = []

    def reason(self, suffix: str) -> str:
        """``NewReason``: ``<Kind><Reason>``."""
        return f"{self.kind}{suffix}"

    def set(
        self, ctype: str, reason: str, message: str, value: str = "True",
        event: str | None = None, event_reason: str | None = None,
    ) -> bool:
        """Set a condition; ``event`` ("Normal"/"Warning") records one with the
        condition's reason (or ``event_reason``) and message if the condition
        is new at the end of the reconcile."""
        cond = new_condition(ctype, value, reason, message, self.now)
        changed = set_condition(self.status, cond)
        if event is not None:
            self._condition_events.append((cond, (event, event_reason or reason, message)))
        return changed

    def condition(self, ctype: str) -> Obj | None:
        return get_condition(self.status, ctype)

    def has(self, ctype: str, value: str = "True") -> bool:
        return has_condition(self.status, ctype, value)

    def set_completion_time(self) -> None:
        if not self.status.get("completionTime"):
            self.status["completionTime"] = format_time(self.now)

    def set_start_time(self) -> None:
        if not self.status.get("startTime"):
            self.status["startTime"] = format_time(self.now)

    def event(self, etype: str, reason: str, message: str) -> None:
        self.events.append((etype, reason, message))

    def finish(self) -> tuple[Obj, list[Event]]:
        """The final status and the events to record, in order."""
        old = conditions_of(self.before)
        conds = []
        for c in conditions_of(self.status):
            prev = next((p for p in old if _same(p, c)), None)
            if prev is not None:
                c = {**c, "lastUpdateTime": prev.get("lastUpdateTime", c.get("lastUpdateTime")),
                     "lastTransitionTime": prev.get("lastTransitionTime", c.get("lastTransitionTime"))}
            conds.append(c)
        if conds or "conditions" in self.status:
            self.status["conditions"] = conds
        events = list(self.events)
        seen: set[Event] = set()
        for cond, ev in self._condition_events:
            final = any(_same(cond, c) for c in conds)
            before = any(_same(cond, p) for p in old)
            if final and not before and ev not in seen:
                seen.add(ev)
                events.append(ev)
        return self.status, events
