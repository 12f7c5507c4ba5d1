"""How the store's writes reach SQLite: each at once (write-through), or, under group
commit, staged and committed in batches (one worker-thread transaction, one fsync each)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
from typing import Callable

from phalanx.objects.errors import ApiError
from phalanx.store.sqlite import SqliteBackend
from phalanx.store.watch import HistoryEvent

log = logging.getLogger(__name__)

# One write: (kind, namespace, name, resourceVersion, JSON or None for a deletion).
Op = tuple[str, str | None, str, int, str | None]


class Committer:
    """Persists the store's writes to ``db`` (None: nothing to persist).

    Without group commit, or without a running event loop, ``persist`` writes at
    once and raises ApiError when the storage refuses. With group commit it
    stages the write and its watch event: the batch worker commits everything
    staged meanwhile in one transaction, then sends the batch's events
    (``emit``) and answers its writers (``flush``). A failed batch stays staged
    and is retried; its writers get a 500."""

    def __init__(self, db: SqliteBackend | None, emit: Callable[[HistoryEvent], None], *,
                 group_commit: bool, durable_rv: int) -> None:
        self.db = db
        self._emit = emit
        self.group_commit = group_commit and db is not None
        self.staged: list[Op] = []
        self._staged_events: list[HistoryEvent] = []
        self.durable_rv = durable_rv
        self._worker: asyncio.Task[None] | None = None
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def persist(self, op: Op, ev: HistoryEvent) -> bool:
        """Persist one write; True when it was staged (``ev`` is then sent once
        its batch is committed), False when it is on disk (or there is no disk)
        and the caller sends ``ev``."""
        if self._stage(op, ev):
            return True
        if self.db is not None:
            kind, ns, name, rv, raw = op
            try:
                if raw is None:
                    self.db.delete(kind, ns, name, rv)
                else:
                    self.db.put(kind, ns, name, rv, raw)
            except sqlite3.Error as e:
                what = "deletion of " if raw is None else ""
                log.error("store: cannot persist %s%s %s/%s: %s", what, kind, ns, name, e)
                raise ApiError(f"Internal error occurred: storage write failed: {e}") from e
        return False

    async def flush(self, rv: int) -> None:
        """Return once every write up to resourceVersion ``rv`` is durable and its
        watch events sent; raise ApiError when the storage refused them."""
        if not self.group_commit or self.durable_rv >= rv and not self.staged:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((rv, fut))
        self._start_worker()
        await fut

    def close(self) -> None:
        """Commit what is staged and close the database."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)  # a batch in flight ends first
            self._executor = None
        if self.db is not None and self.staged:
            try:
                self.db.write_batch(self.staged)
            except sqlite3.Error as e:
                log.error("store: cannot persist %d writes at close: %s", len(self.staged), e)
            self.staged.clear()
        if self.db is not None:
            self.db.close()
            self.db = None

    def _stage(self, op: Op, ev: HistoryEvent) -> bool:
        """Stage a write for the next group commit; False when it must commit now."""
        if not self.group_commit:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        self.staged.append(op)
        self._staged_events.append(ev)
        self._start_worker()
        return True

    def _start_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._commit_loop(), name="store-commit")

    async def _commit_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-commit")
        delay = 0.01
        while self.staged:
            ops, events = self.staged, self._staged_events
            self.staged, self._staged_events = [], []
            db = self.db
            try:
                if db is None:
                    raise sqlite3.ProgrammingError("the store is closed")
                await loop.run_in_executor(self._executor, db.write_batch, ops)
            except (sqlite3.Error, RuntimeError) as e:
                # Memory already holds these writes: keep them staged (the disk catches
                # up once it can) and tell their writers the write is not durable.
                log.error("store: cannot persist %d writes: %s", len(ops), e)
                self.staged[:0], self._staged_events[:0] = ops, events
                err = ApiError(f"Internal error occurred: storage write failed: {e}")
                self._answer(ops[-1][3], err)
                if db is None:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.01
            self.durable_rv = ops[-1][3]
            for ev in events:
                self._emit(ev)
            self._answer(self.durable_rv, None)
        self._answer(self.durable_rv, None)

    def _answer(self, rv: int, err: ApiError | None) -> None:
        keep = []
        for target, fut in self._flush_waiters:
            if fut.done():
                continue
            if err is not None:
                fut.set_exception(err)
            elif target <= rv:
                fut.set_result(None)
            else:
                keep.append((target, fut))
        self._flush_waiters = keep
