"""Garbage-collector settings for a long-running control plane.

CPython's cyclic collector runs a generation-0 pass every 700 net container
allocations, and every 10th/100th of those a deeper one that walks every
tracked object. A control plane holding thousands of decoded objects (and
allocating a few hundred dicts per store write) spent ~12% of its CPU there
in the 1,000-job burst (benchmarks/jobs_1000.py, GC callbacks: 1.8 s of
~14 s). Almost everything it allocates is freed by reference counting (JSON
dicts and lists hold no cycles), so the collector is made to run rarely: the
objects alive once started (modules, classes, configuration) are moved out of
its reach (``gc.freeze``) and the thresholds are raised. Cyclic garbage is
still collected, only in larger batches.
"""
from __future__ import annotations

import gc

# Generation-0 pass every 50,000 net allocations; deeper passes as CPython's
# defaults space them (every 20th and 20th of the one below).
THRESHOLDS = (50_000, 20, 20)

_done = False


def tune_gc() -> None:
    """Apply the settings above, once per process (idempotent)."""
    global _done
    if _done:
        return
    _done = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
