"""The indexes a `Cluster` carries to the next one (`with_topics`) stay those a fresh cluster
builds: the partition map and the replica count per broker."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, PartitionState, Topic

BROKERS = tuple(Broker(b) for b in range(5))


def topic(name: str, placements: list) -> Topic:
    return Topic(name, tuple(PartitionState(name, n, r, r, r[0]) for n, r in enumerate(placements)), 1)


replicas = st.permutations(range(5)).flatmap(lambda order: st.integers(1, 3).map(lambda k: tuple(order[:k])))
changes = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                             st.one_of(st.none(), st.lists(replicas, min_size=1, max_size=4))),
                   min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(replicas, min_size=1, max_size=4), changes)
def test_the_carried_indexes_equal_fresh_ones(first, steps):
    cluster = Cluster(BROKERS, (topic("a", first),))
    assert cluster.replica_count_by_broker and cluster.partitions_by_tp  # built: carried from now on
    for name, placements in steps:
        kept = tuple(t for t in cluster.topics if t.name != name)
        if placements is not None:  # the topic replaced: same partitions changed, or more, or new
            old = cluster.topics_by_name.get(name)
            if old is not None and len(placements) == len(old.partitions):
                placements = [p if i % 2 else old.partitions[i].replicas for i, p in enumerate(placements)]
                new = Topic(name, tuple(q if q.replicas == p else PartitionState(name, i, p, p, p[0])
                                        for i, (q, p) in enumerate(zip(old.partitions, placements))), 1)
            else:
                new = topic(name, placements)
            kept = kept + (new,)
        cluster = cluster.with_topics(BROKERS, kept, {name})
        assert "replica_count_by_broker" in cluster.__dict__ and "partitions_by_tp" in cluster.__dict__
        fresh = Cluster(BROKERS, cluster.topics)
        assert cluster.replica_count_by_broker == fresh.replica_count_by_broker
        assert dict(cluster.partitions_by_tp) == dict(fresh.partitions_by_tp)


def test_what_is_derived_from_the_brokers_is_made_once_per_brokers_tuple():
    calls = []

    def count_racks(brokers):
        calls.append(len(brokers))
        return sum(1 for b in brokers if b.rack)

    cluster = Cluster(BROKERS, (topic("a", [(0, 1)]),))
    assert cluster.derive_from_brokers(("racks",), count_racks) == 0
    # A batch that changed a topic only: the very same brokers tuple, the memo carried.
    moved = cluster.with_topics(BROKERS, (topic("a", [(2, 3)]),), {"a"})
    assert moved.derive_from_brokers(("racks",), count_racks) == 0 and calls == [5]
    # Other brokers (equal or not): made again, for them.
    racked = moved.with_topics(tuple(Broker(b, rack="r1") for b in range(5)), moved.topics, ())
    assert racked.derive_from_brokers(("racks",), count_racks) == 5 and calls == [5, 5]
    assert moved.derive_from_brokers(("racks",), count_racks) == 0  # the earlier cluster's stays its own
    # Another key is another computation.
    assert racked.derive_from_brokers(("racks", "again"), lambda brokers: -1) == -1
