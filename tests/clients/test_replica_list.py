"""A dir's replicas as the adapter decodes them (`ReplicaList`: topics, partitions, future
flags, sizes and lags as plain columns) are the tuple of `ReplicaInDir`s they stand for: the same items, length, slices,
equality (by key, sizes aside) and hash; a dir holding either compares the same; the decoding
of a DescribeLogDirs answer (`compute_log_dirs`) gives them sorted by key."""

from __future__ import annotations

from dataclasses import astuple, replace
from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from runtime.clients.cluster_observation import LogDirObservation, ReplicaInDir, ReplicaList
from runtime.clients.admin_answers import compute_log_dirs

replicas = st.lists(st.builds(ReplicaInDir, st.sampled_from(["a", "b", "orders"]), st.integers(0, 3), st.booleans(),
                              st.integers(0, 10**12), st.integers(0, 9)),
                    max_size=8, unique_by=lambda r: (r.topic, r.partition, r.is_future))


def exactly(items) -> list:
    """Every field, the volatile ones too (which `==` leaves out)."""
    return [astuple(r) for r in items]


@settings(max_examples=300, deadline=None)
@given(replicas, replicas, st.integers(-10, 10), st.integers(-10, 10))
def test_a_replica_list_is_the_tuple_of_its_replicas(first, second, start, stop):
    listed, plain, other = ReplicaList.of(first), tuple(first), tuple(second)
    assert exactly(listed) == exactly(plain) and len(listed) == len(plain)
    assert exactly(listed[start:stop]) == exactly(plain[start:stop])
    assert all(exactly([listed[i]]) == exactly([plain[i]]) for i in range(-len(plain), len(plain)))
    assert listed == plain and plain == listed and listed == ReplicaList.of(plain) and hash(listed) == hash(plain)
    assert listed.keys == tuple((r.topic, r.partition, r.is_future) for r in plain)
    assert (listed.topics, listed.partitions, listed.futures) == (
        tuple(r.topic for r in plain), tuple(r.partition for r in plain), tuple(r.is_future for r in plain))
    for against in (other, ReplicaList.of(other)):  # equal exactly when the keys are
        assert (listed == against) is (plain == other) and (against == listed) is (plain == other)
        assert (listed != against) is (plain != other)
    # New sizes and lags only: still equal (volatile numbers are not compared).
    grown = ReplicaList.of(replace(r, size_bytes=r.size_bytes + 1, offset_lag=r.offset_lag + 1) for r in first)
    assert grown == listed and exactly(grown) != exactly(listed) or not first
    dir_of = lambda held: LogDirObservation(1, "/d", True, None, held, 10, 5)  # noqa: E731
    assert (dir_of(listed) == dir_of(other)) is (plain == other)
    assert (dir_of(listed) == dir_of(ReplicaList.of(other))) is (plain == other)
    assert dir_of(listed).replica_keys == dir_of(plain).replica_keys
    assert dir_of(listed).holds_future_replica is dir_of(plain).holds_future_replica is any(r.is_future for r in plain)


@settings(max_examples=200, deadline=None)
@given(replicas, st.randoms(use_true_random=False))
def test_the_decoded_answer_lists_each_dirs_replicas_sorted_by_key(held, random):
    shuffled = list(held)
    random.shuffle(shuffled)
    by_topic: dict[str, list] = {}
    for r in shuffled:
        by_topic.setdefault(r.topic, []).append(SimpleNamespace(
            partition_index=r.partition, is_future_key=r.is_future, partition_size=r.size_bytes, offset_lag=r.offset_lag))
    answer = [SimpleNamespace(error_code=0, log_dir="/d", total_bytes=10, usable_bytes=-1,
                              topics=[SimpleNamespace(name=name, partitions=parts) for name, parts in by_topic.items()])]
    [decoded] = compute_log_dirs(7, answer)
    assert isinstance(decoded.replicas, ReplicaList)
    assert exactly(decoded.replicas) == exactly(sorted(held))
    assert decoded == LogDirObservation(7, "/d", True, None, tuple(sorted(held)))
    assert (decoded.total_bytes, decoded.usable_bytes) == (10, None)


def test_columns_of_different_lengths_are_refused():
    import pytest

    with pytest.raises(ValueError, match="2 topics but 1 partitions"):
        ReplicaList(("a", "b"), (0,), (False, False))
