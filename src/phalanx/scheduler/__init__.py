"""Volcano-shaped gang scheduler.

Pure core: ``Snapshot.build(...)`` then ``run_session(snapshot, config, now)``
-> ``SessionResult``. Shell: ``phalanx.scheduler.scheduler.Scheduler``.
"""
from .config import SchedulerConfig
from .session import SessionResult, run_session
from .snapshot import Snapshot

__all__ = ["SchedulerConfig", "SessionResult", "Snapshot", "run_session"]
