"""Volcano-shaped gang scheduler.

Pure core: ``Snapshot.build(...)`` then ``run_session(snapshot, config, now)``
-> ``SessionResult``. Shell: ``phalanx.scheduler.scheduler.Scheduler``.
"""
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.framework import SessionResult, run_session
from phalanx.scheduler.snapshot import Snapshot

__all__ = ["SchedulerConfig", "SessionResult", "Snapshot", "run_session"]
