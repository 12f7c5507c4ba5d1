"""Watch plumbing for the Store: per-watcher queues and the event history.

Events are kept as serialized JSON (shared with the stored objects), so the
history costs little memory and every delivery parses a fresh copy that the
consumer may mutate freely.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable, Iterable, NamedTuple, cast

from phalanx.objects.errors import ApiError, Gone
from phalanx.objects.watch import WatchEvent
from phalanx.store import codec
from phalanx.store.decode import SharedEvent, decode_shared


class HistoryEvent(NamedTuple):
    rv: int
    kind: str
    namespace: str | None
    type: str
    raw: str
    name: str = ""


class History:
    """A ring buffer of the most recent events, the watch cache.

    ``horizon`` is the oldest resourceVersion a watch may start from: every event
    after it is still in the buffer.
    """

    def __init__(self, size: int, horizon: int = 0) -> None:
        self._events: deque[HistoryEvent] = deque()
        self._size = max(1, size)
        self.horizon = horizon

    def append(self, ev: HistoryEvent) -> None:
        self._events.append(ev)
        if len(self._events) > self._size:
            self.horizon = self._events.popleft().rv

    def since(self, rv: int, kind: str, namespace: str | None) -> list[HistoryEvent]:
        """Events of ``kind`` (in ``namespace`` when given) with resourceVersion > rv, oldest first."""
        if rv < self.horizon:
            raise Gone(f"too old resource version: {rv} ({self.horizon})")
        out: list[HistoryEvent] = []
        for ev in reversed(self._events):
            if ev.rv <= rv:
                break
            if ev.kind == kind and (namespace is None or ev.namespace == namespace):
                out.append(ev)
        out.reverse()
        return out

    def __len__(self) -> int:
        return len(self._events)


class Watcher:
    """One watch stream: an async iterator of ``WatchEvent``.

    The store pushes events synchronously; the consumer awaits them. A consumer
    that falls more than ``max_pending`` events behind is cut off with ``Gone``
    (as the apiserver drops slow watchers), so it relists instead of growing
    memory without bound.
    """

    def __init__(
        self,
        kind: str,
        namespace: str | None,
        max_pending: int,
        on_close: Callable[["Watcher"], None],
        *,
        shared: bool = False,
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.shared = shared
        self._pending: deque[tuple[str, str | SharedEvent]] = deque()
        self._max_pending = max_pending
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: ApiError | None = None
        self._on_close = on_close

    # -- producer side (the store) --------------------------------------------

    def push(self, type_: str, raw: str | SharedEvent) -> bool:
        """Queue an event; a ``SharedEvent`` is the same for every watcher of it.
        True when this watcher will take the shared object (``SharedEvent.hold``)."""
        if self._closed:
            return False
        if len(self._pending) >= self._max_pending:
            self.fail(Gone(
                f"watch of {self.kind} fell behind by more than {self._max_pending} events; relist"
            ))
            return False
        shared = raw.__class__ is SharedEvent
        if shared and not self.shared:
            raw = cast(str, raw.raw)  # type: ignore[union-attr]  # hold no decoded object for nothing (kept until taken)
            shared = False
        self._pending.append((type_, raw))
        self._wake()
        return shared

    def push_many(self, events: Iterable[tuple[str, str]]) -> None:
        for t, raw in events:
            self.push(t, raw)

    def fail(self, error: ApiError) -> None:
        """End the stream with ``error`` (after the events already queued)."""
        if self._closed:
            return
        self._error = error
        self._detach()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _detach(self) -> None:
        self._closed = True
        self._on_close(self)

    # -- consumer side -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def pending(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Stop the stream; a consumer blocked in ``__anext__`` ends its loop."""
        if not self._closed:
            self._detach()
        for _, item in self._pending:
            if item.__class__ is SharedEvent:
                item.release()  # never to be taken here: no longer held for this watcher
        self._pending.clear()
        self._error = None
        self._wake()

    def __aiter__(self) -> "Watcher":
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._pending:
                t, raw = self._pending.popleft()
                if raw.__class__ is SharedEvent:
                    return WatchEvent(t, raw.shared())
                return WatchEvent(t, decode_shared(raw) if self.shared else codec.loads(raw))  # type: ignore[arg-type]
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
