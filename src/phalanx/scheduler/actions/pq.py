"""A priority queue ordered by a key computed when an item is pushed, as
Volcano's util.PriorityQueue compares with the order function at push/pop."""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    __slots__ = ("_heap", "_key", "_seq")

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._heap: list[tuple[Any, int, T]] = []
        self._key = key
        self._seq = itertools.count()

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, (self._key(item), next(self._seq), item))

    def pop(self) -> T:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
