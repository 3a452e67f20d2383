"""`runtime.heap.HeapKeeper`: survivors of a batch are frozen (never walked by a collection
again), and a full collection every interval still frees a cycle dropped after it was frozen."""

from __future__ import annotations

import pytest

import gc
import weakref

from runtime.heap import HeapKeeper


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


def test_without_automatic_collection_only_the_keeper_collects_and_close_turns_it_back_on():
    assert gc.isenabled()
    keeper = HeapKeeper(automatic_collection=False)
    try:
        assert not gc.isenabled()
        node = Node()
        alive = weakref.ref(node)
        del node  # a cycle made during the poll: no automatic collection frees it
        for _ in range(10_000):
            [[] for _ in range(10)]  # allocations that would have triggered young collections
        assert alive() is not None
        keeper.after_batch()  # the young collection after the poll does
        assert alive() is None
    finally:
        keeper.close()
    assert gc.isenabled() and gc.get_freeze_count() == 0  # the process's collection as it was


def test_a_plan_runs_with_automatic_collection_paused_and_it_comes_back_as_it_was():
    import gc

    from runtime.heap import automatic_collection_paused

    assert gc.isenabled()
    with automatic_collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with automatic_collection_paused():
            raise RuntimeError("a plan that fails")
    assert gc.isenabled()
    gc.disable()
    try:
        with automatic_collection_paused():
            pass
        assert not gc.isenabled(), "a collection off before stays off"
    finally:
        gc.enable()
