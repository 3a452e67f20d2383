"""`streams.heap.HeapKeeper`: survivors of a batch are frozen (never walked by a collection
again), and a full collection every interval still frees a cycle dropped after it was frozen."""

from __future__ import annotations

import gc
import weakref

from streams.heap import HeapKeeper


class Node:
    def __init__(self) -> None:
        self.other = self


def test_survivors_are_frozen_and_the_periodic_full_collection_frees_a_dropped_cycle():
    now = [0.0]
    keeper = HeapKeeper(full_every_seconds=600, clock=lambda: now[0])
    try:
        node = Node()
        alive = weakref.ref(node)
        keeper.after_batch()
        assert gc.get_freeze_count() > 0
        del node  # a cycle: only the cycle collector can free it, and it is frozen
        keeper.after_batch()
        gc.collect()  # even a full collection does not walk the frozen generation
        assert alive() is not None
        now[0] = 601.0
        keeper.after_batch()
        assert alive() is None
        assert gc.get_freeze_count() > 0  # frozen again after the full collection
    finally:
        gc.unfreeze()
