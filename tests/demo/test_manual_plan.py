"""The demo operator's manual plan for the cancel scene (`plan_manual_moves`)."""

from hypothesis import given
from hypothesis import strategies as st

from reassigner.dev.harness.world import plan_manual_moves

A0, A1, A2 = ("archive", 0), ("archive", 1), ("archive", 2)


def test_one_replica_is_replaced_by_the_lowest_broker_that_does_not_hold_it():
    assert plan_manual_moves({A0: [3, 1, 5]}, {A0: {1, 3, 4, 5}}, 2) == {A0: [3, 1, 4]}


def test_a_replica_on_a_broker_that_may_not_host_it_is_the_one_replaced():
    assert plan_manual_moves({A0: [3, 1, 5]}, {A0: {3, 4, 5}}, 2) == {A0: [3, 4, 5]}


def test_a_partition_on_every_usable_broker_is_left_out_instead_of_shrinking():
    # Seen in a demo run: all of 3, 4 and 5 held it and broker 1 could not; the old plan
    # builder dropped a replica (RF 3 -> 2) and the product moved nothing.
    replicas = {A0: [3, 4, 5], A1: [4, 5, 1], A2: [5, 3, 4]}
    hosts = {A0: {3, 4, 5}, A1: {1, 3, 4, 5}, A2: {1, 3, 4, 5}}
    assert plan_manual_moves(replicas, hosts, 2) == {A1: [4, 5, 3], A2: [5, 3, 1]}


def test_at_most_count_partitions():
    replicas = {A0: [1, 2], A1: [1, 2], A2: [1, 2]}
    assert len(plan_manual_moves(replicas, {tp: {1, 2, 3} for tp in replicas}, 2)) == 2


@given(st.dictionaries(st.tuples(st.just("t"), st.integers(0, 9)),
                       st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True), max_size=8),
       st.sets(st.integers(1, 6)), st.integers(0, 3))
def test_every_target_keeps_the_replication_factor_and_adds_exactly_one_host(replicas, hosts, count):
    usable = {tp: set(hosts) for tp in replicas}
    targets = plan_manual_moves(replicas, usable, count)
    assert len(targets) <= count
    for tp, target in targets.items():
        assert len(target) == len(set(target)) == len(replicas[tp])
        added = set(target) - set(replicas[tp])
        assert len(added) == 1 and added <= usable[tp]


def test_replica_disagreements_name_partitions_the_product_sees_otherwise():
    from types import SimpleNamespace

    from planning.model import TopicPartition
    from reassigner.dev.harness.stage import replica_disagreements

    state = SimpleNamespace(cluster=SimpleNamespace(partitions_by_tp={
        TopicPartition("archive", 0): SimpleNamespace(replicas=(5, 3, 4)),
        TopicPartition("archive", 1): SimpleNamespace(replicas=(3, 5))}))
    kafka = {A0: {"replicas": [3, 4, 5]}, A1: {"replicas": [4, 5, 3]}, A2: {"replicas": [1, 3, 4]}}
    assert replica_disagreements(kafka, state) == [
        "archive-1: Kafka [3, 4, 5], product [3, 5]", "archive-2: Kafka [1, 3, 4], product unknown"]
