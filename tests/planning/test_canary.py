"""The canary's layout, latency summaries and baseline (`planning.movement.canary`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planning.model import Broker
from planning.movement.canary import (BASELINE_WINDOWS, MIN_SAMPLES, RECENT_WINDOWS, STALE_WINDOWS,
                                      add_canary_window, compute_canary_layout, summarize_latencies, update_baseline)


def brokers(ids, racks=3, dead=(), draining=()):
    return [Broker(i, rack=f"/dc{i % racks}/r{i // racks}", alive=i not in dead, draining=i in draining) for i in ids]


def test_a_new_cluster_gets_one_partition_led_by_each_broker_with_followers_on_other_racks():
    layout = compute_canary_layout(brokers(range(1, 7)), {}, 3)
    assert layout.partitions == 6 and not layout.changed
    assert {replicas[0] for replicas in layout.assignment.values()} == set(range(1, 7))
    for replicas in layout.assignment.values():
        assert len({r % 3 for r in replicas}) == 3, replicas  # three DCs


def test_an_added_broker_gets_a_new_partition_and_nothing_else_moves():
    first = compute_canary_layout(brokers(range(1, 7)), {}, 3)
    second = compute_canary_layout(brokers(range(1, 8)), first.assignment, 3)
    assert second.partitions == 7 and second.led_by[7] == 6
    assert not second.changed
    assert second.assignment[6][0] == 7


def test_a_removed_broker_hands_its_partition_on_and_no_partition_is_lost():
    first = compute_canary_layout(brokers(range(1, 7)), {}, 3)
    gone = first.led_by[4]
    second = compute_canary_layout(brokers(range(1, 7), dead=(4,)), first.assignment, 3)
    assert second.partitions == 6 and 4 not in second.led_by
    assert all(4 not in replicas for p, replicas in second.assignment.items() if p in second.led_by.values())
    # Back: broker 4 leads the partition left without a leader.
    third = compute_canary_layout(brokers(range(1, 7)), second.assignment, 3)
    assert third.led_by[4] == gone and third.partitions == 6


def test_fewer_brokers_than_the_replication():
    layout = compute_canary_layout(brokers([1, 2]), {}, 3)
    assert sorted(layout.assignment.values()) == [(1, 2), (2, 1)]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sets(st.integers(0, 9), min_size=1), st.sets(st.integers(0, 9))), min_size=1,
                max_size=6),
       st.integers(1, 4), st.integers(1, 4))
def test_every_eligible_broker_leads_one_partition_whatever_came_before(history, racks, replication):
    assignment: dict[int, tuple[int, ...]] = {}
    for present, dead in history:
        cluster = brokers(sorted(present), racks, dead=dead)
        eligible = {b.id for b in cluster if b.eligible}
        layout = compute_canary_layout(cluster, assignment, replication)
        assert layout.partitions >= len(assignment)  # Kafka only adds partitions
        assert set(layout.led_by) == eligible
        assert len(set(layout.led_by.values())) == len(eligible)
        for b, p in layout.led_by.items():
            replicas = layout.assignment[p]
            assert replicas[0] == b and len(set(replicas)) == len(replicas) == min(replication, len(eligible))
            assert set(replicas) <= eligible
            top = {r % racks for r in replicas}
            assert len(top) == min(len(replicas), len({e % racks for e in eligible}))  # the rack rule
        assert set(layout.changed) <= set(assignment)
        again = compute_canary_layout(cluster, layout.assignment, replication)
        assert not again.changed and again.partitions == layout.partitions  # stable once placed
        assignment = dict(layout.assignment)


def test_percentiles_by_nearest_rank_and_too_few_samples_say_nothing():
    samples = [(1, float(ms)) for ms in range(1, 101)] + [(2, 5.0)] * (MIN_SAMPLES - 1)
    summary = summarize_latencies(samples)
    assert (summary[1].p50_ms, summary[1].p99_ms, summary[1].samples) == (50.0, 99.0, 100)
    assert summary[2].p99_ms is None and summary[2].samples == MIN_SAMPLES - 1


def test_the_baseline_is_the_median_of_idle_windows_only():
    kept, baseline = (), None
    for p99 in (10.0, 12.0, 11.0):
        kept, baseline = update_baseline(kept, p99, moving=False)
    assert baseline == 11.0
    kept, baseline = update_baseline(kept, 500.0, moving=True)  # a movement's window: not the baseline
    assert baseline == 11.0 and len(kept) == 3
    for _ in range(BASELINE_WINDOWS):
        kept, baseline = update_baseline(kept, 20.0, moving=False)
    assert len(kept) == BASELINE_WINDOWS and baseline == 20.0
    assert update_baseline((), None, moving=False) == ((), None)


def window(at_ms: int, p99: float | None, window_ms: int = 10_000) -> dict:
    return {"event_time": at_ms, "window_ms": window_ms, "samples": 100, "partition": 0,
            "produce_p50_ms": None if p99 is None else p99 / 2, "produce_p99_ms": p99}


def test_a_reading_keeps_the_windows_just_before_the_newest_and_forgets_them_after_a_gap():
    """The throttle cuts on a run of windows over the SLO, not on one (throttle_control HEALTH):
    the reading keeps the p99s of the windows before the newest, oldest first, with the ones of
    too few samples as None; a replay changes nothing; after a gap of more than STALE_WINDOWS
    windows the earlier ones are no longer the windows just before and are dropped."""
    reading = None
    for n, p99 in enumerate((11.0, None, 30.0, 40.0)):
        reading = add_canary_window(reading, window((n + 1) * 10_000, p99), moving=True)
    assert (reading.p99_ms, reading.earlier_p99s) == (40.0, (None, 30.0))
    assert len(reading.earlier_p99s) == RECENT_WINDOWS - 1
    assert add_canary_window(reading, window(40_000, 99.0), moving=True) is reading, "a replay"
    after_gap = add_canary_window(reading, window(40_000 + (STALE_WINDOWS + 1) * 10_000, 12.0), moving=True)
    assert (after_gap.p99_ms, after_gap.earlier_p99s) == (12.0, ())
    within = add_canary_window(reading, window(40_000 + STALE_WINDOWS * 10_000, 12.0), moving=True)
    assert within.earlier_p99s == (30.0, 40.0)


def test_a_broker_replacing_a_removed_one_takes_its_idle_partition():
    first = compute_canary_layout(brokers(range(1, 7)), {}, 3)
    swapped = compute_canary_layout(brokers([1, 2, 3, 5, 6, 7]), first.assignment, 3)
    assert swapped.partitions == 6 and swapped.led_by[7] == first.led_by[4]
    assert swapped.changed[first.led_by[4]][0] == 7
