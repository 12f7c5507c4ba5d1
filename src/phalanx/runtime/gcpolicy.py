"""The cyclic garbage collector's policy for the long-running programs (API
server, operator, scheduler): how often a full collection may stall the loop.

Their heaps hold every watched object, and a full (generation 2) collection
walks all of them: 100-300 ms at a few thousand pods, about once a second
while pods arrive, with CPython's default of one per 10 generation-1
collections. Their cyclic garbage is small (a scheduler session releases its
jobs and tasks), so full collections are made ten times rarer, and what
exists once the program has started (modules, configuration) is frozen out
of every collection.
"""
from __future__ import annotations

import gc

FULL_COLLECTION_EVERY = 100  # generation-1 collections between full ones (CPython's default: 10)


def tune_for_long_running() -> None:
    """Call once, after start-up imports."""
    gc.collect()
    gc.freeze()
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, FULL_COLLECTION_EVERY)
