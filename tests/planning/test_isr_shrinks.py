"""ISR shrinks outside the moves (`planning.movement.isr_shrinks`), pure: what counts as a loss,
what counts as moving, and the ten-minute window of one-minute buckets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from planning.model import PartitionState
from planning.movement.isr_shrinks import (BUCKET_MS, WINDOW_MS, add_isr_shrinks, compute_isr_losses,
                                           count_isr_shrinks, count_isr_shrinks_since, is_moving)

T0 = 1_800_000_000_000


def state(isr, replicas=(1, 2, 3), adding=(), removing=()) -> PartitionState:
    return PartitionState("t", 0, tuple(replicas), isr=tuple(isr), leader=isr[0] if isr else None,
                          adding=tuple(adding), removing=tuple(removing))


def test_a_loss_is_a_broker_out_of_the_isr_still_among_the_replicas():
    assert compute_isr_losses(state((1, 2, 3)), state((1, 3))) == (2,)
    assert compute_isr_losses(state((1, 2, 3)), state((1,))) == (2, 3)
    assert compute_isr_losses(state((1, 3)), state((1, 2, 3))) == ()  # a rejoin
    assert compute_isr_losses(state((1, 2, 3)), state((1, 3), replicas=(1, 3, 4))) == ()  # 2 left the replicas
    assert compute_isr_losses(None, state((1,))) == ()  # first seen: nothing lost


def test_a_partition_kafka_or_the_product_moves_is_moving():
    assert not is_moving(state((1, 2, 3)), state((1, 3)), False)
    assert is_moving(state((1, 2, 3)), state((1, 3)), True)
    assert is_moving(state((1, 2, 3)), state((1, 3), replicas=(1, 2, 3, 4), adding=(4,)), False)
    assert is_moving(state((1, 2, 3), replicas=(1, 2, 3, 4), adding=(4,)), state((1, 3)), False)  # it just ended


def test_the_window_counts_per_broker_and_forgets_after_ten_minutes():
    window = add_isr_shrinks({}, [(1, T0), (1, T0 + 1_000), (2, T0 + 90_000)], T0 + 90_000)
    assert count_isr_shrinks(window, 1, T0 + 90_000) == 2 and count_isr_shrinks(window, 2, T0 + 90_000) == 1
    assert count_isr_shrinks(window, 3, T0 + 90_000) == 0
    later = T0 + WINDOW_MS + BUCKET_MS
    assert count_isr_shrinks(window, 1, later) == 0  # read past the window: not counted
    pruned = add_isr_shrinks(window, [], later)
    assert 1 not in pruned and count_isr_shrinks(pruned, 2, later) == 1  # written: the old bucket goes
    assert add_isr_shrinks(pruned, [], later) is pruned  # nothing to change: the same window
    assert add_isr_shrinks(pruned, [(1, T0)], later) is pruned  # a loss older than the window


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3 * WINDOW_MS)), max_size=60),
       st.integers(0, 3 * WINDOW_MS))
def test_the_window_is_bounded_positive_and_counts_what_is_within_it(losses, now):
    window = {}
    for broker, at in sorted(losses, key=lambda item: item[1]):
        window = add_isr_shrinks(window, [(broker, T0 + at)], T0 + max(at, 0))
    window = add_isr_shrinks(window, [], T0 + now)
    for broker, buckets in window.items():
        assert buckets and len(buckets) <= WINDOW_MS // BUCKET_MS + 1
        assert all(count > 0 and bucket <= latest < bucket + BUCKET_MS for bucket, count, latest in buckets)
        assert list(buckets) == sorted(buckets)
    last = max((at for _, at in losses), default=0)
    if now >= last:  # every loss was recorded before `now`: the count is what falls within it
        for broker in range(6):
            expected = sum(1 for b, at in losses if b == broker
                           and (T0 + at) - (T0 + at) % BUCKET_MS + BUCKET_MS > T0 + now - WINDOW_MS)
            assert count_isr_shrinks(window, broker, T0 + now) == expected


def test_a_shrink_after_a_change_in_the_bucket_the_change_fell_in_counts_since_it():
    """Regression: the throttle changed at T0 + 5 s, a shrink at T0 + 7 s (same ten-second bucket)
    was not counted since the change, as only buckets that began after it were read."""
    before = add_isr_shrinks({}, [(1, T0 + 3_000)], T0 + 3_000)
    assert count_isr_shrinks_since(before, 1, T0 + 5_000) == 0, "answered by the change: not again"
    assert count_isr_shrinks_since(before, 1, T0 + 3_000) == 0, "a change at its time answered it"
    after = add_isr_shrinks(before, [(1, T0 + 7_000)], T0 + 7_000)
    assert after[1] == ((T0, 2, T0 + 7_000),)
    assert count_isr_shrinks_since(after, 1, T0 + 5_000) >= 1
    assert count_isr_shrinks_since(after, 1, T0 + 8_000) == 0
