"""The change log of `ControllerState` (`state.model.ChangeLog`): the setters keep it, a write
around them makes it vouch for nothing (the readers then walk everything), and the commit's diff
of the reassignments from the log equals the full one. The decisions it feeds are checked by
tests/handlers/test_stepping_change_log.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition, compute_replaced_partitions
from planning.movement.reassignment import start_reassignment
from state.stored_forms import compute_changed_reassignments
from state.model import ChangeLog, ControllerState

A, B, C = (TopicPartition("t", n) for n in range(3))


def cluster(min_isr: int = 1, isr_of_b=(0, 1)) -> Cluster:
    parts = tuple(PartitionState("t", n, (0, 1), isr_of_b if n == 1 else (0, 1), 0) for n in range(3))
    return Cluster(tuple(Broker(b) for b in range(3)), (Topic("t", parts, min_isr), Topic("u", ())))


def record(tp: TopicPartition, target=(1, 2)):
    return start_reassignment(f"r/{tp}", tp, (0, 1), target)


def stepped(state: ControllerState) -> ControllerState:
    """As `handle_progress` leaves it: a memo made from these records and this cluster."""
    return state.with_stepping(object(), ())  # any object stands for a memo here


def test_the_setters_log_what_they_change_and_only_that():
    state = stepped(ControllerState(cluster=cluster()).with_records({A: record(A), B: record(B)}))
    assert state.compute_stepping_changes() == frozenset()
    moved = state.with_records({A: record(A, (2, 1)), C: record(C)}).with_records({B: None})
    assert moved.compute_stepping_changes() == {A, B, C}
    assert set(moved.reassignments) == {A, C}
    isr = moved.with_cluster(cluster(isr_of_b=(0,)))
    assert isr.compute_stepping_changes() == {A, B, C}
    min_isr = stepped(isr).with_cluster(cluster(min_isr=2))
    assert min_isr.compute_stepping_changes() == {A, B, C}  # every partition of the topic
    brokers = stepped(min_isr).with_cluster(min_isr.cluster.with_brokers([Broker(0), Broker(1)]))
    assert brokers.compute_stepping_changes() == frozenset()  # the memo compares the brokers itself


def test_a_write_around_the_setters_makes_the_log_vouch_for_nothing():
    state = stepped(ControllerState(cluster=cluster()).with_records({A: record(A)}))
    with pytest.raises(TypeError, match="with_records"):
        state.with_changes(reassignments={})
    with pytest.raises(TypeError, match="with_cluster"):
        state.with_changes(cluster=cluster())
    around = replace(state, reassignments={**state.reassignments, B: record(B)})
    assert around.compute_stepping_changes() is None
    assert around.with_records({C: record(C)}).compute_stepping_changes() is None  # and stays so
    assert replace(state, cluster=cluster(min_isr=2)).compute_stepping_changes() is None
    assert replace(state, stepping_memo=object()).compute_stepping_changes() is None
    assert replace(state, change_log=ChangeLog()).compute_stepping_changes() is None
    assert ControllerState().compute_stepping_changes() is None  # loaded or new: no memo, no log


def test_the_commit_diffs_the_logged_records_when_the_log_vouches_for_them():
    before = ControllerState(cluster=cluster()).with_records({A: record(A), B: record(B)})
    after = before.with_batch_opened().with_records({A: record(A, (2, 1)), C: record(C)}).with_records({B: None})
    assert after.compute_batch_changes(before) == {A, B, C}
    assert compute_changed_reassignments(before, after) == \
        compute_changed_reassignments(before, replace(after, change_log=ChangeLog()))
    moves, finished = compute_changed_reassignments(before, after)
    assert set(moves) == {"t:0", "t:2"} and finished == ["t:1"]
    # another `before` than the batch's own: the log does not vouch, the full diff runs
    assert after.compute_batch_changes(after) is None
    assert replace(after, reassignments=dict(after.reassignments)).compute_batch_changes(before) is None


def test_replaced_partitions_are_found_by_identity_and_min_isr():
    one = cluster()
    assert compute_replaced_partitions(one, one.with_brokers([Broker(0)])) == set()
    assert compute_replaced_partitions(one, cluster()) == {A, B, C}  # new objects, equal or not
    isr = one.with_partitions([replace(one.partition(B), isr=(0,))])
    assert compute_replaced_partitions(one, isr) == {B}
    fewer = Cluster(one.brokers, (replace(one.topics[0], partitions=one.topics[0].partitions[:2]),))
    assert compute_replaced_partitions(one, fewer) == {C}
    assert compute_replaced_partitions(fewer, Cluster(one.brokers, ())) == {A, B}
    assert compute_replaced_partitions(one, Cluster(one.brokers, (replace(one.topics[0], min_insync_replicas=2),))) \
        == {A, B, C}
