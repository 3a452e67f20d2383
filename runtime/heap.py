"""The garbage collection of a long-running process that holds a whole cluster: a young
collection after every unit of work (the pipeline driver's micro-batch, the watcher's poll), a
full one rarely.

WHY. The driver holds the whole controller state — at a million replicas several million
long-lived objects (partitions, reassignment records, the stepping memo) — and every batch
replaces a few of them; the watcher holds its last view (every partition, every replica of
every dir) and each poll replaces what changed. CPython's full (generation 2) collection walks
every tracked object: at 100,000 partitions it took the driver 0.3 s each, 262 times in a run
of 1,415 batches, 31 % of its CPU (benchmarks/bench_decision_path.py with gc callbacks); at
300,000 partitions it took the watcher 1.0-1.2 s every few polls (BENCHMARKS.md). Both hold
acyclic data (frozen dataclasses, tuples, maps): reference counting frees what a batch or a
poll replaces, and the cycle collector finds nothing there.

THE RULE. After each unit of work, `after_batch` collects the young generations (what it made:
the short-lived cycles of exceptions and client libraries are freed there) and then freezes the
survivors (`gc.freeze`: moved to the permanent generation, never walked again). Every
`full_every_seconds` it unfreezes and runs one full collection, so that a cycle that became
garbage after it was frozen is freed too: memory stays bounded, the pause is paid once in that
interval instead of every few batches.

WITHOUT AUTOMATIC COLLECTION (`automatic_collection=False`, the watcher). A poll allocates the
decoded answers of the whole cluster (millions of objects at 300,000 partitions), which live
until the next poll. With automatic collection on, they pass through the young generations into
the old one during the poll, and a freeze leaves so few unfrozen old objects that every poll's
survivors trigger full collections (208 in 24 polls, 21 s; 37 and 60 s with no freeze at all;
benchmarks/bench_watcher_heap.py). So the keeper turns automatic collection off while it is in
use: reference counting still frees every acyclic object the moment it is dropped, and the one
young collection after each poll walks that poll's objects once and frees its cycles.

A PLAN (`automatic_collection_paused`). The planners hold a few million tracked objects at
300,000 partitions (the cluster, a record per partition with its lists and sets, the bytes
planner's sorted ledgers) and allocate millions of short-lived tuples; every allocation burst
promotes survivors, and full collections walk them all again and again: 29 % of the bytes
planner's CPU (benchmarks/bench_bytes_balance.py case f, 38.5 -> 27.3 s). Their data is acyclic
too, so whoever runs a plan (the pipeline's decision, `reassigner plan`, `simulate`, the
benchmarks) runs it with automatic collection off, and puts it back as it was after. The
planners themselves stay pure: no process-wide switch inside them.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Callable, Iterator


class HeapKeeper:
    """See the module docstring. `clock` gives seconds (monotonic). With
    `automatic_collection=False` CPython's automatic collection is off from here until `close`.
    `close` gives the process its collection back as it was: the frozen objects back to the old
    generation, automatic collection on if it was (a process that goes on after the keeper's
    loop, a test run among others, must not keep a heap frozen behind its back)."""

    def __init__(self, full_every_seconds: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 automatic_collection: bool = True) -> None:
        self.full_every_seconds = full_every_seconds
        self.clock = clock
        self._last_full = clock()
        self._was_enabled = gc.isenabled()
        if not automatic_collection:
            gc.disable()

    def close(self) -> None:
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def after_batch(self) -> None:
        gc.collect(1)
        if self.clock() - self._last_full >= self.full_every_seconds:
            gc.unfreeze()
            gc.collect()
            self._last_full = self.clock()
        gc.freeze()


@contextmanager
def automatic_collection_paused() -> Iterator[None]:
    """CPython's automatic (cycle) collection off for the block, back as it was after, even on
    error (module doc, A PLAN). Reference counting still frees every acyclic object at once."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
