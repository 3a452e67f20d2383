"""Each broker's load from its replicas and leaderships, and the smoothing of traffic samples
(`planning.load`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planning.load import TRAFFIC_HORIZON_SECONDS, BrokerLoad, compute_broker_loads, smooth_rate
from planning.model import Broker, Cluster, PartitionState, Topic


def test_followers_carry_bytes_in_and_the_leader_also_replication_and_consumers_out():
    hot = PartitionState("t", 0, (1, 2, 3), (1, 2, 3), 1, 5_000, bytes_in_per_sec=100.0, bytes_out_per_sec=50.0)
    cold = PartitionState("t", 1, (2, 3), (2, 3), 2, 700)  # never measured: no traffic
    leaderless = PartitionState("t", 2, (3, 4), (), None, 10, bytes_in_per_sec=8.0)
    cluster = Cluster(tuple(Broker(b) for b in (1, 2, 3, 4, 5)), (Topic("t", (hot, cold, leaderless)),))
    loads = compute_broker_loads(cluster)
    assert loads[1] == BrokerLoad(1, 1, 5_000, 100.0, 2 * 100.0 + 50.0)
    assert loads[2] == BrokerLoad(2, 1, 5_700, 100.0, 0.0)
    assert loads[3] == BrokerLoad(3, 0, 5_710, 108.0, 0.0)
    assert loads[4] == BrokerLoad(1, 0, 10, 8.0, 0.0)
    assert loads[5] == BrokerLoad()


def test_a_sample_joins_the_mean_by_its_window_and_none_keeps_it():
    assert smooth_rate(None, None, 60_000) is None
    assert smooth_rate(7.0, None, 60_000) == 7.0
    assert smooth_rate(None, 10.0, 60_000) == 10.0  # the first sample is the mean
    weight = 1 - math.exp(-60 / TRAFFIC_HORIZON_SECONDS)
    assert smooth_rate(0.0, 100.0, 60_000) == pytest.approx(100 * weight)  # a one-minute burst: about a fifth
    assert smooth_rate(0.0, 100.0, 3_600_000) == pytest.approx(100.0, rel=1e-4)  # an hour's window: the sample
    assert smooth_rate(5.0, 100.0, 0) == 5.0 and smooth_rate(5.0, 100.0, None) == 5.0


@given(st.floats(0, 1e12), st.floats(0, 1e12), st.integers(1, 10**8))
def test_the_mean_stays_between_the_old_mean_and_the_sample(previous, sample, window_ms):
    mean = smooth_rate(previous, sample, window_ms)
    assert min(previous, sample) - 1e-3 <= mean <= max(previous, sample) + 1e-3


@st.composite
def clusters_and_targets(draw):
    """A cluster of 5 brokers, partitions with sizes and rates (some unmeasured, some
    leaderless), and targets for some of them (plus one the cluster does not show)."""
    from planning.model import TopicPartition

    parts = []
    for i in range(draw(st.integers(1, 12))):
        replicas = tuple(draw(st.permutations(range(5)))[:draw(st.integers(1, 3))])
        leader = draw(st.sampled_from(replicas + (-1,)))
        rate = draw(st.none() | st.floats(0, 1e6))
        parts.append(PartitionState("t", i, replicas, isr=replicas, leader=leader,
                                    size_bytes=draw(st.none() | st.integers(0, 10**9)), bytes_in_per_sec=rate,
                                    bytes_out_per_sec=draw(st.none() | st.floats(0, 1e6))))
    cluster = Cluster(tuple(Broker(b) for b in range(5)), (Topic("t", tuple(parts)),))
    targets = {}
    for p in parts:
        if draw(st.booleans()):
            targets[p.tp] = tuple(draw(st.permutations(range(5)))[:draw(st.integers(1, 3))])
    targets[TopicPartition("gone", 0)] = (0, 1)
    return cluster, targets


@given(clusters_and_targets())
def test_the_loads_after_a_movement_are_the_loads_of_the_cluster_it_leaves(case):
    """`compute_loads_after`, from the changed partitions alone, gives each broker it reports the
    load `compute_broker_loads` gives on the cluster with every target applied (led by its
    first); a broker it leaves out has the same load on both."""
    from dataclasses import replace

    from planning.load import compute_loads_after

    cluster, targets = case
    loads = compute_broker_loads(cluster)
    after = compute_loads_after(cluster, loads, targets)
    moved = cluster.with_partitions(replace(p, replicas=targets[p.tp], isr=targets[p.tp], leader=targets[p.tp][0])
                                    for p in cluster.partitions() if p.tp in targets)
    expected = compute_broker_loads(moved)
    for b in range(5):
        got, want = after.get(b, loads[b]), expected[b]
        assert (got.replicas, got.leaders, got.disk_bytes) == (want.replicas, want.leaders, want.disk_bytes)
        assert math.isclose(got.bytes_in_per_sec, want.bytes_in_per_sec, rel_tol=1e-9, abs_tol=1e-3)
        assert math.isclose(got.network_out_per_sec, want.network_out_per_sec, rel_tol=1e-9, abs_tol=1e-3)
