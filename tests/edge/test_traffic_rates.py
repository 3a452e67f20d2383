"""A partition's bytes in and out from two samples of its offsets (`reassigner.edge.traffic`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reassigner.edge.traffic import TrafficSample, TrafficWindow, compute_partition_traffic

KEY = ("orders", 3)


def window(before, after, seconds=10.0, committed_before=None, committed_after=None):
    return TrafficWindow(TrafficSample(1_000, {KEY: before}, committed_before),
                         # round, not int: 2 * 262.143 s is 524285.99999... ms in floating point, and
                         # a truncated window made the property fail (hypothesis found it)
                         TrafficSample(1_000 + round(seconds * 1000), {KEY: after}, committed_after))


def test_bytes_in_and_out_are_the_offsets_advance_times_the_mean_record_size():
    # 10,000 records in 1 MB: 100 B a record; 1,000 produced in 10 s; two groups read 500 and
    # 2,000 records; a group seen only in the later sample (new, or its first commit) adds nothing.
    rates = compute_partition_traffic(
        window((0, 9_000), (0, 10_000), 10.0, {KEY: {"a": 100, "b": 7_000}},
               {KEY: {"a": 600, "b": 9_000, "new": 10_000}}), KEY, 1_000_000)
    assert rates.bytes_in_per_sec == pytest.approx(10_000.0)
    assert rates.bytes_out_per_sec == pytest.approx(25_000.0)
    assert rates.window_ms == 10_000


def test_the_mean_record_size_counts_only_the_records_still_in_the_log():
    # Retention deleted records 0..4,999: the 1 MB holds 5,000 records of 200 B.
    rates = compute_partition_traffic(window((0, 9_000), (5_000, 10_000)), KEY, 1_000_000)
    assert rates.bytes_in_per_sec == pytest.approx(1_000 * 200 / 10)


@pytest.mark.parametrize("before, after, size, expected_in", [
    ((0, 10_000), (0, 10_000), None, 0.0),  # nothing produced: 0, whatever the size
    ((0, 10_000), (0, 9_000), 1_000, None),  # the end went back: re-created or truncated
    ((0, 9_000), (0, 10_000), None, None),  # no size: the records weigh nothing known
    ((0, 9_000), (10_000, 10_000), 0, None),  # every record deleted: no mean size
])
def test_what_cannot_be_known_is_none_and_nothing_produced_is_zero(before, after, size, expected_in):
    assert compute_partition_traffic(window(before, after), KEY, size).bytes_in_per_sec == expected_in


def test_bytes_out_is_unknown_without_groups_and_a_reset_group_adds_nothing():
    assert compute_partition_traffic(window((0, 1), (0, 2)), KEY, 100).bytes_out_per_sec is None
    reset = window((0, 100), (0, 100), 10.0, {KEY: {"a": 90}}, {KEY: {"a": 0}})
    assert compute_partition_traffic(reset, KEY, 100).bytes_out_per_sec == 0.0
    unread = window((0, 100), (0, 100), 10.0, {}, {})
    assert compute_partition_traffic(unread, KEY, 100).bytes_out_per_sec == 0.0  # no group reads it


def test_a_partition_sampled_once_or_an_empty_window_has_no_rates():
    only_later = TrafficWindow(TrafficSample(0, {}), TrafficSample(10_000, {KEY: (0, 5)}))
    assert compute_partition_traffic(only_later, KEY, 100) is None
    assert compute_partition_traffic(window((0, 1), (0, 2), seconds=0), KEY, 100) is None


offsets = st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(sorted).map(tuple)


@given(offsets, offsets, st.integers(0, 10**9) | st.none(), st.integers(1, 10**6),
       st.dictionaries(st.sampled_from("abc"), st.integers(0, 10**6)),
       st.dictionaries(st.sampled_from("abc"), st.integers(0, 10**6)))
def test_rates_are_never_negative_and_halve_over_twice_the_window(before, after, size, millis, c1, c2):
    one = compute_partition_traffic(window(before, after, millis / 1000, {KEY: c1}, {KEY: c2}), KEY, size)
    two = compute_partition_traffic(window(before, after, 2 * millis / 1000, {KEY: c1}, {KEY: c2}), KEY, size)
    for rate, doubled in ((one.bytes_in_per_sec, two.bytes_in_per_sec),
                          (one.bytes_out_per_sec, two.bytes_out_per_sec)):
        assert (rate is None) == (doubled is None)
        if rate is not None:
            assert rate >= 0 and doubled == pytest.approx(rate / 2)
