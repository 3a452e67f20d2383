"""A move whose end the reassignment list shows before the metadata does
(`compute_lagging_reassignments`): the poll keeps the move until the metadata has caught up.

Regression: on the real stack, Kafka's tool moved outside-0 from [1, 2] to [1, 3]; one poll read the
list after the move ended and the metadata from a broker that still listed [1, 3, 2]. The
pipeline took [1, 3, 2] for a settled partition and stepped our plan [3, 2] by removing 1 alone,
with no copy to broker 2 announced (tests/scenarios/test_other_tools.py, CI of 2e71880)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from runtime.clients.cluster_merge import compute_lagging_reassignments, compute_observation
from runtime.clients.cluster_observation import BrokerObservation, PartitionList, PartitionObservation

BROKERS = [BrokerObservation(b, None, "h", 9000 + b, False) for b in (1, 2, 3, 4)]
OTHERS = [PartitionObservation("t", n, (1, 2), (1, 2), 1, 0) for n in range(1, 6)]


def poll(partition: PartitionObservation, listed: dict, previous=None, listing=PartitionList.of):
    """One poll as `cluster_poll` merges it: the list patched, then the merge."""
    answer = listing([partition, *OTHERS])
    reassignments = listed if previous is None else compute_lagging_reassignments(previous, answer, listed)
    return compute_observation(BROKERS, answer, {"t": "id"}, reassignments, [], {"t": 1}, previous)


def moving(replicas, isr):
    return PartitionObservation("t", 0, tuple(replicas), tuple(isr), replicas[0], 0)


def test_a_move_the_list_ended_while_the_metadata_still_lists_its_replicas_is_kept_until_it_catches_up():
    for listing in (PartitionList.of, list):
        during = poll(moving([1, 3, 2], [1, 2]), {("t", 0): ((3,), (2,))}, listing=listing)
        assert during.partitions[("t", 0)].adding == (3,)
        stale = poll(moving([1, 3, 2], [1, 2, 3]), {}, during, listing)  # the list says done, the metadata not yet
        assert (stale.partitions[("t", 0)].adding, stale.partitions[("t", 0)].removing) == ((3,), (2,))
        assert stale.merge_index().reassigning == {("t", 0)}
        still = poll(moving([1, 3, 2], [1, 2, 3]), {}, stale, listing)  # a broker whose cache lags for two polls
        assert still.partitions[("t", 0)].removing == (2,)
        caught_up = poll(moving([1, 3], [1, 3]), {}, still, listing)
        settled = caught_up.partitions[("t", 0)]
        assert (settled.replicas, settled.adding, settled.removing) == ((1, 3), (), ())
        assert caught_up.merge_index().reassigning == frozenset()


def test_a_move_that_only_added_in_sync_brokers_ends_with_the_same_replicas_and_is_not_kept():
    during = poll(moving([1, 2, 3], [1, 2]), {("t", 0): ((3,), ())})
    ended = poll(moving([1, 2, 3], [1, 2, 3]), {}, during)
    assert ended.partitions[("t", 0)].adding == () and not ended.merge_index().reassigning


def test_a_move_that_only_added_is_kept_while_the_added_broker_is_out_of_sync():
    """Kafka ends a move only with its targets in sync: the list's word is the lagging cancel's."""
    during = poll(moving([1, 2, 3], [1, 2]), {("t", 0): ((3,), ())})
    cancelled = poll(moving([1, 2, 3], [1, 2]), {}, during)
    assert cancelled.partitions[("t", 0)].adding == (3,)
    assert poll(moving([1, 2], [1, 2]), {}, cancelled).partitions[("t", 0)].adding == ()


def test_a_listed_move_and_a_first_poll_are_taken_as_the_list_says():
    during = poll(moving([1, 3, 2], [1, 2]), {("t", 0): ((3,), (2,))})
    listed = {("t", 0): ((3,), (2,)), ("t", 1): ((2,), ())}
    assert compute_lagging_reassignments(during, PartitionList.of([moving([1, 3, 2], [1, 2]), *OTHERS]),
                                         listed) is listed
    from runtime.clients.cluster_observation import EMPTY

    assert compute_lagging_reassignments(EMPTY, [moving([1, 3, 2], [1, 2])], {}) == {}


def test_a_move_ended_while_its_topic_was_deleted_is_not_kept():
    during = poll(moving([1, 3, 2], [1, 2]), {("t", 0): ((3,), (2,))})
    assert compute_lagging_reassignments(during, PartitionList.of(OTHERS), {}) == {}


@settings(max_examples=200, deadline=None)
@given(st.permutations([1, 2, 3, 4]), st.integers(0, 2), st.integers(0, 1), st.booleans(), st.booleans())
def test_a_kept_move_always_keeps_the_models_invariant_and_is_let_go_once_the_replicas_change(
        order, adds, removes, in_sync, same_order):
    """Whatever the move, a kept one has adding and removing within the replicas, and the first
    poll whose replicas differ from the move's ends it."""
    target = tuple(order[:2])
    adding = tuple(order[2:2 + adds])
    removing = target[:removes]
    kept_target = tuple(b for b in target if b not in removing)
    replicas = (*kept_target, *adding, *removing)
    isr = replicas if in_sync else kept_target
    listing = PartitionList.of if same_order else list
    during = poll(moving(replicas, kept_target), {("t", 0): (adding, removing)}, listing=listing)
    lagging = poll(moving(replicas, isr), {}, during, listing)
    p = lagging.partitions[("t", 0)]
    assert set(p.adding) <= set(p.replicas) and set(p.removing) <= set(p.replicas)
    assert (p.adding, p.removing) in {((), ()), (adding, removing)}
    if removing or not in_sync:
        assert (p.adding, p.removing) == (adding, removing)
    ended = poll(replace(moving(replicas, isr), replicas=(*kept_target, *adding), isr=(*kept_target, *adding)),
                 {}, lagging, listing)
    assert (ended.partitions[("t", 0)].adding, ended.partitions[("t", 0)].removing) == ((), ())
