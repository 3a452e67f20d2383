"""The driver's garbage collection: a young collection after every micro-batch, a full one
rarely.

WHY. The driver holds the whole controller state — at a million replicas several million
long-lived objects (partitions, reassignment records, the stepping memo) — and every batch
replaces a few of them. CPython's full (generation 2) collection walks every tracked object: at
100,000 partitions it took 0.3 s each, 262 times in a run of 1,415 batches, 31 % of the driver's
CPU (benchmarks/bench_decision_path.py with gc callbacks; BENCHMARKS.md). The state is acyclic
(frozen dataclasses, tuples, maps): reference counting frees what a batch replaces, and the
cycle collector finds nothing there.

THE RULE. After each batch, `after_batch` collects the young generations (what the batch made:
the short-lived cycles of exceptions and client libraries are freed there) and then freezes the
survivors (`gc.freeze`: moved to the permanent generation, never walked again). Every
`full_every_seconds` it unfreezes and runs one full collection, so that a cycle that became
garbage after it was frozen is freed too: memory stays bounded, the pause is paid once in that
interval instead of every few batches.
"""

from __future__ import annotations

import gc
import time
from typing import Callable


class HeapKeeper:
    """See the module docstring. `clock` gives seconds (monotonic)."""

    def __init__(self, full_every_seconds: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_seconds = full_every_seconds
        self.clock = clock
        self._last_full = clock()

    def after_batch(self) -> None:
        gc.collect(1)
        if self.clock() - self._last_full >= self.full_every_seconds:
            gc.unfreeze()
            gc.collect()
            self._last_full = self.clock()
        gc.freeze()
