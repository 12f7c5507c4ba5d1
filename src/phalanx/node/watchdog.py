"""The memory watchdog: memory limits of containers that have no memory cgroup, enforced by polling.

Over its limit, a container's process group is SIGKILLed and the instance marked OOM (on disk too).
"""
from __future__ import annotations

import asyncio
import logging
import signal
from typing import Callable

from phalanx.node import instancefiles as files
from phalanx.node import limits
from phalanx.node.instances import Instance, killpg, same_process

log = logging.getLogger(__name__)


class MemoryWatchdog:
    """Polls, every ``interval`` seconds, the resident memory a cgroup could not
    reclaim (``limits.tree_rss``) of the instances ``watched()`` returns (running,
    memory-limited, without a memory cgroup); ends by itself when there are none."""

    def __init__(self, watched: Callable[[], list[Instance]], interval: float) -> None:
        self.watched = watched
        self.interval = interval
        self.task: asyncio.Task[None] | None = None

    def ensure(self) -> None:
        """Run the watchdog (in the event loop) unless it runs already."""
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name="oom-watchdog")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.task = None

    async def _run(self) -> None:
        while True:
            watched = [i for i in self.watched() if i.running and i.watchdog and not i.oom]
            if not watched:
                self.task = None
                return
            for inst in watched:
                if inst.pid is None or inst.memory_limit is None or not same_process(inst):
                    continue
                if limits.tree_rss(inst.pid) > inst.memory_limit:
                    log.info("container %s over its memory limit %d: killing", inst.container, inst.memory_limit)
                    inst.oom = True
                    try:  # remembered on disk, so an agent restarted meanwhile still says OOMKilled
                        files.oom_path(inst.log_path).touch()
                    except OSError:
                        pass
                    killpg(inst.pid, signal.SIGKILL)
            await asyncio.sleep(self.interval)
