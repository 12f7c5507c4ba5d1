"""One scheduling cycle, in the sense of Volcano's framework/framework.go: open a session, run the actions, close it.

A pure function: snapshot in, decisions out. ``run_session`` opens a Session
(the configured plugins register in tier order), runs the configured actions
(enqueue, allocate, backfill), and closes it as Volcano's CloseSession does:
plugins write their conditions, then the job updater recomputes every job's
PodGroup status, its pending pods' PodScheduled=False condition and every
queue's status. Only what changed is returned; the shell writes it. This is
where the plugin registry (``plugins.PLUGINS``) is read: the session itself
knows plugins only as ``Plugin`` objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from phalanx.scheduler.actions import ACTIONS
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.job_updater import JobUpdater, write_admission_conditions
from phalanx.scheduler.plugins import PLUGINS
from phalanx.scheduler.session import Event, Session
from phalanx.scheduler.snapshot import Snapshot


@dataclass
class SessionResult:
    bindings: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, pod, node), commit order
    podgroup_status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    queue_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_conditions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    session_uid: str = ""
    skipped: list[str] = field(default_factory=list)  # objects the snapshot could not read

    @property
    def empty(self) -> bool:
        return not (self.bindings or self.podgroup_status or self.queue_status or self.pod_conditions or self.events)


def check_config(config: SchedulerConfig) -> None:
    """Unknown action or plugin names are refused, naming the field."""
    for a in config.actions:
        if a not in ACTIONS:
            raise ValueError(f"actions: unknown action {a!r}; known: {', '.join(ACTIONS)}")
    for t, tier in enumerate(config.tiers):
        for p in tier:
            if p not in PLUGINS:
                raise ValueError(f"tiers[{t}]: unknown plugin {p!r}; known: {', '.join(PLUGINS)}")


def open_session(snapshot: Snapshot, config: SchedulerConfig, now: datetime,
                 session_uid: str | None = None) -> Session:
    """A Session over the snapshot (which it consumes), the configured plugins registered."""
    ssn = Session(snapshot, config, now, session_uid)
    ssn.open([[PLUGINS[name](config) for name in tier] for tier in config.tiers])
    return ssn


def close_session(ssn: Session) -> SessionResult:
    """Admission conditions, then the plugins' close, then the job updater."""
    result = SessionResult(bindings=list(ssn.bindings), session_uid=ssn.uid, skipped=list(ssn.snapshot.skipped))
    write_admission_conditions(ssn)
    ssn.close()
    updater = JobUpdater(ssn)
    updater.update_all()
    result.podgroup_status = updater.podgroup_status
    result.queue_status = updater.queue_status
    result.pod_conditions = updater.pod_conditions
    result.events = ssn.events
    return result


def run_session(snapshot: Snapshot, config: SchedulerConfig | None = None, now: datetime | None = None,
                session_uid: str | None = None) -> SessionResult:
    """Run enqueue/allocate/backfill over the snapshot (which it consumes)."""
    if now is None:
        raise ValueError("now is required (pure core: the caller owns the clock)")
    config = config or SchedulerConfig()
    check_config(config)
    ssn = open_session(snapshot, config, now, session_uid)
    for action in config.actions:
        ACTIONS[action](ssn)
    return close_session(ssn)


__all__ = ["SessionResult", "check_config", "close_session", "open_session", "run_session"]
