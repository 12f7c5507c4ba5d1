"""Actions run in order in every session; each only asks the session (never a plugin)."""
from __future__ import annotations

from typing import Callable

from phalanx.scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from phalanx.scheduler.session import Session

ACTIONS: dict[str, Callable[[Session], None]] = {
    "enqueue": enqueue.execute,
    "allocate": allocate.execute,
    "preempt": preempt.execute,
    "reclaim": reclaim.execute,
    "backfill": backfill.execute,
}
