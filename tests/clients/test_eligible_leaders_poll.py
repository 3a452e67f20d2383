"""ELIGIBLE LEADERS (`runtime.clients.cluster_poll`): after the merge, only the partitions under
min ISR or leaderless are asked for their eligible leader replicas, the answer lands in their
observations, a healthy cluster pays nothing, and a failed read loses nothing."""

from __future__ import annotations

from runtime.clients.cluster_merge import compute_changed_partitions, compute_observation
from runtime.clients.cluster_observation import EMPTY, BrokerObservation, PartitionList, PartitionObservation
from runtime.clients.cluster_poll import _with_eligible_leaders
from schemas.errors import KafkaTransientError

BROKERS = [BrokerObservation(b, f"/r{b}", "h", b, False) for b in (1, 2, 3)]
MIN_ISR = {"t": 2, "u": 2}


class EligibleAdmin:
    """Answers DescribeTopicPartitions from `answer`; records the topics asked."""

    def __init__(self, answer=None, fail=False) -> None:
        self.answer = answer or {}
        self.fail = fail
        self.asked: list[list[str]] = []

    def describe_eligible_leaders(self, topics):
        self.asked.append(list(topics))
        if self.fail:
            raise KafkaTransientError("stubbed", "REQUEST_TIMED_OUT")
        return {key: value for key, value in self.answer.items() if key[0] in topics}


def observe(isr_of_t0, previous=None):
    """A poll of topics t (2 partitions) and u (1), all RF 3, min ISR 2; t-0's ISR as given."""
    listed = PartitionList.of([
        PartitionObservation("t", 0, (1, 2, 3), isr_of_t0, isr_of_t0[0] if isr_of_t0 else None, 5),
        PartitionObservation("t", 1, (2, 3, 1), (2, 3, 1), 2, 5),
        PartitionObservation("u", 0, (3, 1, 2), (3, 1, 2), 3, 5),
    ])
    return compute_observation(BROKERS, listed, {"t": "id-t", "u": "id-u"}, {}, [], MIN_ISR, previous)


def test_a_healthy_cluster_asks_nothing_and_keeps_its_observation():
    admin = EligibleAdmin()
    first = observe((1, 2, 3))
    assert _with_eligible_leaders(admin, first, EMPTY) is first
    second = observe((1, 2, 3), first)
    assert _with_eligible_leaders(admin, second, first) is second
    assert admin.asked == []


def test_a_partition_under_min_isr_gets_its_eligible_leaders_and_keeps_them_while_it_stays_so():
    admin = EligibleAdmin({("t", 0): ((2, 3), ())})
    healthy = observe((1, 2, 3))
    shrunk = _with_eligible_leaders(admin, observe((1,), healthy), healthy)
    assert admin.asked == [["t"]]  # its topic alone
    p = shrunk.partitions[("t", 0)]
    assert (p.isr, p.eligible_leaders, p.last_known_elr) == ((1,), (2, 3), ())
    assert shrunk.under_min_isr == {("t", 0)}
    assert shrunk.partitions[("t", 1)] is healthy.partitions[("t", 1)]  # the others untouched
    assert compute_changed_partitions(healthy, shrunk) == {("t", 0)}  # the diff tells it

    same = _with_eligible_leaders(admin, observe((1,), shrunk), shrunk)  # the next poll
    assert admin.asked == [["t"], ["t"]]  # asked again (it is under min ISR still)
    assert same.partitions[("t", 0)] is p  # nothing changed: the same object, no event
    assert compute_changed_partitions(shrunk, same) == frozenset()

    admin.answer = {("t", 0): ((3,), ())}  # broker 2 lost too: it leaves the ELR
    moved = _with_eligible_leaders(admin, observe((1,), same), same)
    assert moved.partitions[("t", 0)].eligible_leaders == (3,)
    assert compute_changed_partitions(same, moved) == {("t", 0)}


def test_a_leaderless_partition_with_no_isr_gets_its_last_known_elr():
    admin = EligibleAdmin({("t", 0): ((), (2, 3))})
    polled = _with_eligible_leaders(admin, observe(()), EMPTY)
    p = polled.partitions[("t", 0)]
    assert (p.leader, p.isr, p.eligible_leaders, p.last_known_elr) == (None, (), (), (2, 3))


def test_back_in_sync_the_eligible_leaders_are_gone_and_nothing_is_asked():
    admin = EligibleAdmin({("t", 0): ((2, 3), ())})
    shrunk = _with_eligible_leaders(admin, observe((1,)), EMPTY)
    healed = _with_eligible_leaders(admin, observe((1, 2, 3), shrunk), shrunk)
    assert admin.asked == [["t"]]
    assert healed.partitions[("t", 0)].eligible_leaders == ()
    assert healed.under_min_isr == frozenset()
    later = observe((1, 2, 3), healed)
    assert _with_eligible_leaders(admin, later, healed) is later  # healthy again: free


def test_a_failed_read_loses_nothing_and_is_tried_at_the_next_poll():
    admin = EligibleAdmin({("t", 0): ((2, 3), ())})
    shrunk = _with_eligible_leaders(admin, observe((1,)), EMPTY)
    admin.fail = True
    failed = _with_eligible_leaders(admin, observe((1,), shrunk), shrunk)
    assert failed.partitions[("t", 0)].eligible_leaders == (2, 3)  # carried by the merge
    assert failed.under_min_isr == {("t", 0)}
    admin.fail = False
    admin.answer = {}
    again = _with_eligible_leaders(admin, observe((1,), failed), failed)
    assert again.partitions[("t", 0)].eligible_leaders == ()
    assert len(admin.asked) == 3
