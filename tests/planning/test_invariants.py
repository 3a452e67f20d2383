"""The one safety invariant checker (`planning.simulation.invariants`): each rule on a worked
example, the numbers in its message, and properties — a limit is reported exactly when it is
exceeded, and what the batch rule starts never breaks a rule."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.advance import compute_stepping
from planning.movement.batches import PlannedStep
from planning.movement.cancel import compute_reassign_request
from planning.movement.partition_steps import Step
from planning.movement.reassignment import Reassignment, ReassignmentState, StepInFlight
from planning.simulation.invariants import (
    InFlightCounts,
    InvariantLimits,
    MovingPartition,
    PartitionSample,
    Rule,
    check_completed,
    check_kafka_moves_are_ours,
    check_limits,
    check_min_isr_while_reassigning,
    check_started,
    check_targets_unchanged,
    count_in_flight,
    moving_of_steps,
    moving_shown_by_kafka,
    steps_in_flight,
)
from test_simulator_invariants import clusters, targets_for
from tests.settings_defaults import STALL_TIMEOUT, default_limits

ALL = InvariantLimits(max_partition_movements=2, max_leader_movements=1, max_movements_per_broker=2,
                      max_replica_movements=1)


def tp(n: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, n)


def cluster_of(*partitions: PartitionState, min_isr: int = 2, dead=(), draining=(), brokers=range(6)) -> Cluster:
    return Cluster(tuple(Broker(b, alive=b not in dead, draining=b in draining) for b in brokers),
                   (Topic("t", partitions, min_isr),))


def part(n: int, replicas=(0, 1, 2), isr=None, **fields) -> PartitionState:
    return PartitionState("t", n, tuple(replicas), tuple(replicas if isr is None else isr), replicas[0], **fields)


def planned(n: int, target, adding=(), removing=()) -> PlannedStep:
    return PlannedStep(tp(n), Step(tuple(target), tuple(adding), tuple(removing)))


def messages(violations) -> list[str]:
    return [str(v) for v in violations]


# -- rule 1: limits ----------------------------------------------------------------------------


def test_the_docstring_example_kafka_shows_three_moving_two_moving_leadership():
    samples = [PartitionSample(tp(0, "orders"), (2, 3, 4), leader=1, reassigning=True),
               PartitionSample(tp(1, "orders"), (3, 1, 4), leader=2, reassigning=True),
               PartitionSample(tp(2, "orders"), (3, 1, 4), leader=3, reassigning=True)]
    counts = count_in_flight(moving_shown_by_kafka(samples))
    assert counts == InFlightCounts(partitions=3, leader_movements=2, busiest_broker=0)
    found = check_limits(counts, InvariantLimits(max_partition_movements=2, max_leader_movements=1))
    assert messages(found) == ["3 partitions moving > P = 2", "2 leader movements > L = 1"]
    assert {v.rule for v in found} == {Rule.LIMITS}


def test_steps_in_flight_count_per_broker_once_per_step():
    steps = {tp(0): Step((3, 1, 2), adding=(3,), removing=(0,), leader_movement=True),
             tp(1): Step((3, 2, 4), adding=(3, 4), removing=(0, 1)),
             tp(2): Step((0, 3, 5), adding=(3, 5), removing=(1, 2))}
    counts = count_in_flight(moving_of_steps(steps))
    assert counts == InFlightCounts(partitions=3, leader_movements=1, busiest_broker=3)  # broker 3
    assert messages(check_limits(counts, ALL)) == ["3 partitions moving > P = 2", "3 movements on one broker > B = 2"]


def test_a_limit_the_observer_does_not_know_is_not_judged():
    assert check_limits(InFlightCounts(100, 100, 100), InvariantLimits()) == ()


def test_the_steps_in_flight_are_those_of_the_records_that_have_one():
    step = Step((0, 1, 3), adding=(3,), removing=(2,))
    records = {tp(0): Reassignment("r:0", tp(0), (0, 1, 2), (0, 1, 3), in_flight=StepInFlight(step, 1, 0.0)),
               tp(1): Reassignment("r:1", tp(1), (0, 1, 2), (0, 1, 4))}
    assert steps_in_flight(records) == {tp(0): step}


def test_kafka_shows_leadership_moving_when_the_target_does_not_start_with_the_leader():
    leaderless = PartitionSample(tp(0), (1, 2), leader=None, reassigning=True)
    stays = PartitionSample(tp(1), (0, 1, 2, 3), leader=1, removing=(0,), adding=(3,), reassigning=True)
    unknown = PartitionSample(tp(2), (4, 5), reassigning=True, described=False)
    idle = PartitionSample(tp(3), (4, 5), leader=0)
    moving = moving_shown_by_kafka([leaderless, stays, unknown, idle])
    assert [(m.tp, m.leader_movement) for m in moving] == [(tp(0), True), (tp(1), False), (tp(2), False)]
    assert moving[1].moved_brokers == {0, 3}


@settings(max_examples=200)
@given(st.lists(st.tuples(st.booleans(), st.frozensets(st.integers(0, 5), max_size=4)), max_size=12),
       st.integers(1, 12), st.integers(1, 12), st.integers(1, 12))
def test_a_limit_is_reported_exactly_when_what_is_in_flight_exceeds_it(flying, p, l, b):
    moving = [MovingPartition(tp(n), leader, brokers) for n, (leader, brokers) in enumerate(flying)]
    per_broker = {x: sum(x in brokers for _, brokers in flying) for x in range(6)}
    found = messages(check_limits(count_in_flight(moving), InvariantLimits(p, l, b)))
    expected = []
    if len(flying) > p:
        expected.append(f"{len(flying)} partitions moving > P = {p}")
    if sum(leader for leader, _ in flying) > l:
        expected.append(f"{sum(leader for leader, _ in flying)} leader movements > L = {l}")
    if max(per_broker.values()) > b:
        expected.append(f"{max(per_broker.values())} movements on one broker > B = {b}")
    assert found == expected


# -- the steps one decision starts (rules 1d, 2a, 3, 4a) --------------------------------------


def test_a_sound_step_breaks_no_rule():
    cluster = cluster_of(part(0))
    assert check_started([planned(0, (0, 1, 3), adding=(3,), removing=(2,))], cluster, ALL) == ()


def test_two_steps_for_one_partition_or_a_step_while_kafka_reassigns_it():
    cluster = cluster_of(part(0), part(1, (0, 1, 2, 4), adding=(4,), removing=(0,)))
    found = check_started([planned(0, (0, 1, 3), (3,), (2,)), planned(0, (0, 1, 5), (5,), (2,)),
                           planned(1, (1, 2, 5), (5,), (0, 4))], cluster, InvariantLimits())
    assert messages(found) == [
        "t-0: two steps started by one decision",
        "t-1: a step to [1, 2, 5] while Kafka reassigns it (adding [4], removing [0])",
    ]
    assert {v.rule for v in found} == {Rule.ONE_STEP}


def test_a_step_below_min_isr():
    found = check_started([planned(0, (0,), removing=(1, 2))], cluster_of(part(0), min_isr=2), InvariantLimits())
    assert messages(found) == ["t-0: step to [0] leaves 1 replicas, fewer than min ISR 2"]
    assert found[0].rule is Rule.MIN_ISR and found[0].tp == tp(0)


def test_replicas_targeted_to_dead_draining_or_unknown_brokers_or_kept_offline():
    cluster = cluster_of(part(0, offline_replicas=(2,), isr=(0, 1)), dead=(3,), draining=(4,))
    found = check_started([planned(0, (0, 1, 2, 3, 4, 9), adding=(3, 4, 9))], cluster, InvariantLimits())
    assert messages(found) == [
        "t-0: replica targeted to broker 3, which is dead",
        "t-0: replica targeted to broker 4, which is draining",
        "t-0: replica targeted to broker 9, which is unknown",
        "t-0: step keeps the offline replica on broker 2",
    ]
    assert {v.rule for v in found} == {Rule.TARGETS}


def test_a_broker_whose_every_dir_is_offline_takes_no_new_replica():
    brokers = (Broker(0), Broker(1), Broker(2), Broker(3, log_dirs=(LogDir("/a", online=False),)))
    cluster = Cluster(brokers, (Topic("t", (part(0),), 1),))
    found = check_started([planned(0, (0, 1, 2, 3), adding=(3,))], cluster, InvariantLimits())
    assert messages(found) == ["t-0: replica targeted to broker 3, which is without an online log dir"]


def test_a_step_beyond_r_unless_it_restores_min_isr_or_drops_an_offline_replica():
    r1 = InvariantLimits(max_replica_movements=1)
    healthy = cluster_of(part(0), min_isr=1)
    found = check_started([planned(0, (0, 3, 4), adding=(3, 4), removing=(1, 2))], healthy, r1)
    assert messages(found) == ["t-0: step to [0, 3, 4] adds 2 and drops 2 replicas > R = 1 (min ISR deficit 0)"]
    under = cluster_of(part(0, (0, 1, 2), isr=(0,)), min_isr=3)  # deficit 2: may add 2
    assert check_started([planned(0, (0, 1, 2, 3, 4), adding=(3, 4))], under, r1) == ()
    offline = cluster_of(part(0, (0, 1, 2), isr=(0,), offline_replicas=(1, 2)), min_isr=1, dead=(1, 2))
    assert check_started([planned(0, (0, 3), adding=(3,), removing=(1, 2))], offline, r1) == ()


# -- completion (rule 2b) ----------------------------------------------------------------------


def record(target, state=ReassignmentState.RUNNING, steps_done=0, in_flight=True) -> Reassignment:
    step = Step(tuple(target), adding=(3,), removing=(2,))
    return Reassignment("r:0", tp(0), (0, 1, 2), (0, 1, 3), steps_done=steps_done, state=state,
                        in_flight=StepInFlight(step, steps_done + 1, 0.0) if in_flight else None)


def test_a_step_that_completed_with_too_few_in_sync():
    before = {tp(0): record((0, 1, 3))}
    after = {tp(0): record((0, 1, 3), steps_done=1, in_flight=False)}
    view = cluster_of(part(0, (0, 1, 3), isr=(0,)), min_isr=2)
    found = check_completed(before, after, view)
    assert messages(found) == ["t-0: step to [0, 1, 3] completed with 1 in sync, fewer than min ISR 2"]
    assert check_completed(before, after, cluster_of(part(0, (0, 1, 3), isr=(0, 3)), min_isr=2)) == ()
    assert check_completed(before, before, view) == ()  # nothing ended


def test_a_step_kafka_reverted_on_cancel_did_not_complete():
    before = {tp(0): record((0, 1, 3), state=ReassignmentState.CANCELLING)}
    after = {tp(0): record((0, 1, 3), state=ReassignmentState.REVERTING, steps_done=1, in_flight=False)}
    reverted = cluster_of(part(0, (0, 1, 2), isr=(0,)), min_isr=2)
    assert check_completed(before, after, reverted) == ()


# -- what Kafka shows from outside (rules 2c, 4b, 4c) -------------------------------------------


def test_under_min_isr_while_reassigning_counts_only_with_every_replica_live():
    base = PartitionSample(tp(0), (0, 1, 2, 3), isr=(0,), leader=0, adding=(3,), removing=(2,), min_isr=2,
                           reassigning=True)
    found = check_min_isr_while_reassigning([base])
    assert messages(found) == ["t-0 under min ISR (1 < 2) while reassigning, every replica live"]
    assert found[0].rule is Rule.MIN_ISR
    assert check_min_isr_while_reassigning([replace(base, offline=(1,))]) == ()  # a failure, not a step
    assert check_min_isr_while_reassigning([replace(base, reassigning=False)]) == ()
    assert check_min_isr_while_reassigning([replace(base, described=False)]) == ()
    assert check_min_isr_while_reassigning([replace(base, isr=(0, 1))]) == ()


def test_kafka_moves_nothing_without_a_step_of_ours():
    assert check_kafka_moves_are_ours([tp(0)], {tp(0), tp(1)}) == ()
    found = check_kafka_moves_are_ours([tp(2), tp(0), tp(1)], [tp(0)])
    assert messages(found) == ["Kafka moves ['t-1', 't-2'] with no step in flight"]
    assert found[0].rule is Rule.ONE_STEP


def test_a_target_that_changes_between_two_close_samples_is_a_second_step():
    before = {tp(0): frozenset({2, 3, 4}), tp(1): frozenset({1, 2, 3})}
    after = {tp(0): frozenset({2, 3, 5}), tp(1): (3, 2, 1), tp(2): frozenset({4})}
    found = check_targets_unchanged(before, after)
    assert messages(found) == ["t-0: a second step (to [2, 3, 5]) while the step to [2, 3, 4] was in flight"]
    assert found[0].rule is Rule.ONE_STEP and found[0].tp == tp(0)


# -- the batch rule never starts what the checker refuses --------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_first_decision_on_a_random_plan_breaks_no_rule(data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    limits = default_limits(
        max_partition_movements=data.draw(st.integers(1, 6)), max_leader_movements=data.draw(st.integers(1, 4)),
        max_replica_movements=data.draw(st.integers(1, 3)), max_movements_per_broker=data.draw(st.integers(1, 4)))
    current = {p.tp: p.replicas for p in cluster.partitions()}
    records = compute_reassign_request({}, targets, current, request_id="prop")
    decision = compute_stepping(records, cluster, limits, 0.0, STALL_TIMEOUT)
    judged = InvariantLimits.of(limits)
    assert check_started(decision.started, cluster, judged) == ()
    counts = count_in_flight(moving_of_steps(steps_in_flight(decision.reassignments)))
    assert check_limits(counts, judged) == ()
