"""Moves of other tools: shown, respected, and a step of ours another tool
cancelled or replaced is noticed at the next observation and re-planned.

Kafka's views are the simulated cluster's (`SimulatedCluster`: KIP-455's replicas, adding and
removing), the other tool is its Admin API called directly (`submit_step`, `cancel`), as
`kafka-reassign-partitions.sh --execute` / `--cancel` would.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.advance import compute_stepping
from planning.movement.completion import (
    APPLIED_VIEW_MARGIN_MS,
    compute_shown_target,
    is_step_finishing,
    is_step_interrupted,
    is_view_conclusive,
    shows_step,
)
from planning.movement.external import ExternalMove, compute_external_moves
from planning.movement.partition_steps import Step
from planning.movement.reassignment import note_step_applied, note_step_viewed, start_reassignment, start_step
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from tests.settings_defaults import STALL_TIMEOUT, default_limits

BROKERS = tuple(range(1, 7))
LIMITS = default_limits(max_partition_movements=10, max_leader_movements=10, max_movements_per_broker=10)
HELD = "moved by another tool"


def cluster_of(replicas_by_partition: list[tuple[int, ...]]) -> Cluster:
    parts = tuple(PartitionState("t", i, r, r, r[0], size_bytes=1000) for i, r in enumerate(replicas_by_partition))
    return Cluster(tuple(Broker(b) for b in BROKERS), (Topic("t", parts, 1),))


def tp(i: int) -> TopicPartition:
    return TopicPartition("t", i)


replica_sets = st.lists(st.sampled_from(BROKERS), min_size=3, max_size=3, unique=True).map(tuple)


TRIPLES = tuple(permutations(BROKERS, 3))


def other_target(current: tuple[int, ...], data) -> tuple[int, ...]:
    """A target another tool picks: three brokers, not the current set."""
    return data.draw(st.sampled_from([t for t in TRIPLES if set(t) != set(current)]))


def decide(records, cluster, now=100.0, start_steps=True):
    return compute_stepping(records, cluster, LIMITS, now, STALL_TIMEOUT, start_steps=start_steps)


# --- shown ----------------------------------------------------------------------------------------


def test_the_shown_target_is_the_replicas_less_the_removing_ones():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    sim.submit_step(tp(0), (4, 3, 2))
    moving = sim.partition(tp(0))
    assert moving.replicas == (1, 4, 3, 2) and compute_shown_target(moving) == {2, 3, 4}
    assert compute_shown_target(cluster_of([(1, 2, 3)]).partition(tp(0))) == {1, 2, 3}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_move_of_another_tool_is_never_stepped_and_its_plan_waits_with_the_reason(data):
    n = data.draw(st.integers(1, 5))
    start = [data.draw(replica_sets) for _ in range(n)]
    sim = SimulatedCluster(cluster_of(start), SimulationParams(bytes_per_sec=1))
    foreign = data.draw(st.sets(st.integers(0, n - 1)))
    for i in foreign:
        sim.submit_step(tp(i), other_target(start[i], data))
    records = {}
    for i in data.draw(st.sets(st.integers(0, n - 1), min_size=1)):
        records[tp(i)] = start_reassignment(f"r/{i}", tp(i), start[i], other_target(start[i], data))
    cluster = sim.snapshot()
    decision = decide(records, cluster)
    assert not {p.tp for p in decision.started} & {tp(i) for i in foreign}
    reasons = {d.tp: d.reason for d in decision.deferred}
    for i in foreign:
        if tp(i) in records and tp(i) in reasons:
            assert reasons[tp(i)].startswith(HELD), reasons[tp(i)]
    update = compute_external_moves({}, cluster, decision.reassignments, 5, None)
    assert set(update.moves) == {tp(i) for i in foreign}
    assert all(update.moves[tp(i)].held == (tp(i) in records) for i in foreign)


def test_a_plan_waits_until_the_other_tools_move_ended_then_steps_from_where_it_left_the_partition():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=10_000))
    sim.submit_step(tp(0), (1, 2, 4))  # the other tool
    records = {tp(0): start_reassignment("r/0", tp(0), (1, 2, 3), (1, 5, 6))}
    held = decide(records, sim.snapshot())
    assert not held.started and held.deferred[0].reason.startswith(HELD)
    sim.tick(1.0)  # its move completes
    assert sim.partition(tp(0)).replicas == (1, 2, 4)
    free = decide(held.reassignments, sim.snapshot(), now=101.0)
    (planned,) = free.started
    assert set(planned.step.adding) <= {5, 6} and set(planned.step.removing) <= {2, 4}, \
        f"{planned.step}: not from the replicas the other tool left"


# --- interrupted ------------------------------------------------------------------------------------


def running(sim: SimulatedCluster, target=(1, 2, 4)):
    """A reassignment of t-0 towards `target` whose first step Kafka runs and the view showed."""
    records = {tp(0): start_reassignment("r/0", tp(0), sim.partition(tp(0)).replicas, target)}
    first = decide(records, sim.snapshot(), now=100.0)
    (planned,) = first.started
    sim.submit_step(tp(0), planned.step.target)
    seen = decide(first.reassignments, sim.snapshot(), now=101.0)
    assert seen.reassignments[tp(0)].in_flight.seen_in_kafka and not seen.interrupted
    return seen.reassignments, planned


def test_a_step_cancelled_by_another_tool_is_noticed_at_the_next_view_and_stepped_again():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records, planned = running(sim)
    sim.cancel(tp(0))  # kafka-reassign-partitions.sh --cancel
    after = decide(records, sim.snapshot(), now=102.0)  # long before the stall timeout
    assert [t for t, _ in after.interrupted] == [tp(0)] and not after.stalled
    message = after.interrupted[0][1]
    assert "cancelled by another tool" in message and "[3, 1, 2]" in message
    record = after.reassignments[tp(0)]
    assert record.steps_done == 1 and record.in_flight.number == 2, "re-planned at once, with a new number"
    assert after.started[0].step.target == planned.step.target, "the same step again, from the same replicas"


def test_a_step_replaced_by_another_tool_ends_and_the_partition_waits_for_that_move():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records, _ = running(sim)
    sim.submit_step(tp(0), (5, 6, 3))  # another tool's --execute replaces our reassignment
    after = decide(records, sim.snapshot(), now=102.0)
    assert [t for t, _ in after.interrupted] == [tp(0)] and "replaced by another tool" in after.interrupted[0][1]
    assert not after.started and after.reassignments[tp(0)].in_flight is None
    assert after.deferred[0].reason.startswith(HELD)
    update = compute_external_moves({}, sim.snapshot(), after.reassignments, 7, [tp(0)])
    assert update.started == (tp(0),) and update.moves[tp(0)].held


def test_a_view_older_than_the_step_is_not_a_cancel():
    """The pre-submit race: the step was decided, the executor has not applied it yet (or the
    watcher polled before it did); the view shows the replicas from before, or a move of another
    tool that our step then replaces. Neither ends the step."""
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records = {tp(0): start_reassignment("r/0", tp(0), (1, 2, 3), (1, 2, 4))}
    first = decide(records, sim.snapshot(), now=100.0)
    before = decide(first.reassignments, sim.snapshot(), now=100.5)
    assert not before.interrupted and before.reassignments[tp(0)].in_flight.number == 1
    assert not before.reassignments[tp(0)].in_flight.seen_in_kafka
    sim.submit_step(tp(0), (5, 6, 3))  # another tool, before our step reached Kafka
    foreign = decide(before.reassignments, sim.snapshot(), now=101.0)
    assert not foreign.interrupted and foreign.reassignments[tp(0)].in_flight.number == 1
    assert not foreign.reassignments[tp(0)].in_flight.seen_in_kafka, "another tool's move is not our step"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_only_a_step_once_shown_and_shown_no_more_is_interrupted(data):
    current, target = data.draw(replica_sets), data.draw(replica_sets)
    sim = SimulatedCluster(cluster_of([current]), SimulationParams(bytes_per_sec=1))
    if set(target) == set(current):
        return
    record = start_reassignment("r/0", tp(0), current, target)
    first = decide({tp(0): record}, sim.snapshot(), now=100.0)
    if not first.started:
        return
    step = first.started[0].step
    seen = data.draw(st.booleans())
    if seen:
        sim.submit_step(tp(0), step.target)
        first = decide(first.reassignments, sim.snapshot(), now=100.5)
    # Whatever another tool does next (nothing, cancel, another target), or our step completes:
    action = data.draw(st.sampled_from(["nothing", "cancel", "replace", "complete"]))
    if action == "cancel" and sim.partition(tp(0)).reassigning:
        sim.cancel(tp(0))
    elif action == "replace":
        sim.submit_step(tp(0), other_target(tuple(step.target), data))
    elif action == "complete" and seen:
        sim.tick(10_000.0)
    view = sim.snapshot()
    after = decide(first.reassignments, view, now=101.0)
    partition = view.partition(tp(0))
    was_seen = first.reassignments[tp(0)].in_flight.seen_in_kafka
    expected = was_seen and not shows_step(partition, step) and not is_step_finishing(partition, step)
    assert bool(after.interrupted) == expected
    assert is_step_interrupted(partition, step, was_seen) == expected
    if not was_seen:
        assert after.reassignments[tp(0)].in_flight is not None, "an unseen step stays in flight (stall timeout)"
    assert not ({p.tp for p in after.started} & {p.tp for p in view.partitions() if p.reassigning})


# --- interrupted before any poll showed it ---------------------------------------------------------

APPLIED_MS = 100_400  # when the executor reported step 1 applied (its CommandResult's event time)


def submitted(sim: SimulatedCluster, target=(1, 2, 4)):
    """A reassignment of t-0 whose first step was decided at 100 s and applied in Kafka by the
    executor, which reported it at `APPLIED_MS`; no view has shown it yet."""
    records = {tp(0): start_reassignment("r/0", tp(0), sim.partition(tp(0)).replicas, target)}
    first = decide(records, sim.snapshot(), now=100.0)
    (planned,) = first.started
    sim.submit_step(tp(0), planned.step.target)
    return {tp(0): note_step_applied(first.reassignments[tp(0)], 1, APPLIED_MS)}, planned


def viewed(records, at_ms: int):
    return {t: note_step_viewed(r, at_ms) for t, r in records.items()}


def test_a_step_cancelled_before_any_poll_showed_it_is_noticed_at_the_first_view_read_after_the_apply():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records, planned = submitted(sim)
    sim.cancel(tp(0))  # kafka-reassign-partitions.sh --cancel, before the watcher polled
    view = sim.snapshot()
    assert not view.partition(tp(0)).reassigning and not shows_step(view.partition(tp(0)), planned.step)
    # A poll that began before the apply (it may have ended after it) proves nothing.
    early = decide(viewed(records, APPLIED_MS - 1), view, now=100.5)
    assert not early.interrupted and early.reassignments[tp(0)].in_flight.number == 1
    # The first poll that began reading after the apply tells it.
    after = decide(viewed(early.reassignments, APPLIED_MS + APPLIED_VIEW_MARGIN_MS), view, now=101.5)
    assert [t for t, _ in after.interrupted] == [tp(0)] and not after.stalled
    assert "cancelled by another tool" in after.interrupted[0][1]
    record = after.reassignments[tp(0)]
    assert record.steps_done == 1 and record.in_flight.number == 2, "re-planned at once, with a new number"
    assert after.started[0].step.target == planned.step.target


def test_a_step_replaced_before_any_poll_showed_it_ends_and_the_partition_waits_for_that_move():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records, _ = submitted(sim)
    sim.submit_step(tp(0), (5, 6, 3))  # another tool's --execute, before the watcher polled
    after = decide(viewed(records, APPLIED_MS + 5000), sim.snapshot(), now=105.0)
    assert [t for t, _ in after.interrupted] == [tp(0)] and "replaced by another tool" in after.interrupted[0][1]
    assert not after.started and after.deferred[0].reason.startswith(HELD)


def test_a_step_completed_before_any_poll_showed_it_is_complete_not_interrupted():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1_000_000))
    records, planned = submitted(sim, target=(1, 2, 4))
    sim.tick(10.0)  # the copy is done before the watcher polls
    assert sim.partition(tp(0)).replicas == planned.step.target
    after = decide(viewed(records, APPLIED_MS + 5000), sim.snapshot(), now=105.0)
    assert not after.interrupted and after.completed == (tp(0),)


def test_a_view_read_within_the_margin_after_the_apply_proves_nothing_yet():
    """The replicas come from a broker's metadata, which may lag the controller that accepted
    the step, and the executor's and the watcher's clocks may differ a little."""
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records, _ = submitted(sim)
    stale = cluster_of([(1, 2, 3)])  # a broker that has not heard of the step yet
    soon = decide(viewed(records, APPLIED_MS + APPLIED_VIEW_MARGIN_MS - 1), stale, now=100.5)
    assert not soon.interrupted and soon.reassignments[tp(0)].in_flight.number == 1


def test_the_view_and_the_apply_may_be_told_in_either_order():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    records = {tp(0): start_reassignment("r/0", tp(0), (1, 2, 3), (1, 2, 4))}
    first = decide(records, sim.snapshot(), now=100.0)
    record = first.reassignments[tp(0)]
    view_first = note_step_applied(note_step_viewed(record, APPLIED_MS + 2000), 1, APPLIED_MS)
    apply_first = note_step_viewed(note_step_applied(record, 1, APPLIED_MS), APPLIED_MS + 2000)
    assert view_first == apply_first and is_view_conclusive(view_first.in_flight)
    assert note_step_applied(record, 2, APPLIED_MS) is record, "another step's result changes nothing"
    assert note_step_applied(apply_first, 1, APPLIED_MS + 9) is apply_first, "the first report is kept"
    assert note_step_viewed(apply_first, APPLIED_MS + 1000) is apply_first, "an older view is not kept"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_view_read_after_the_apply_ends_a_step_exactly_when_kafka_no_longer_runs_it(data):
    """Kafka applies our step at a (ms), the executor reports it at a + d, another tool may act
    at a + c (cancel, replace) or the step completes; the watcher's poll begins at v and shows
    Kafka as it was then. The step is interrupted exactly when that view was read after the
    report (plus the margin) and shows neither our step running nor its target; never on a view
    of the step running or done, or of the time before it."""
    current, target = data.draw(replica_sets), data.draw(replica_sets)
    if set(target) == set(current):
        return
    sim = SimulatedCluster(cluster_of([current]), SimulationParams(bytes_per_sec=1))
    first = decide({tp(0): start_reassignment("r/0", tp(0), current, target)}, sim.snapshot(), now=100.0)
    if not first.started:
        return
    step = first.started[0].step
    applied = 100_100
    reported = applied + data.draw(st.integers(0, 3000))
    acted = applied + data.draw(st.integers(0, 3000))
    polled = applied + data.draw(st.integers(-3000, 6000))
    action = data.draw(st.sampled_from(["nothing", "cancel", "replace", "complete"]))
    before_step = sim.snapshot()
    sim.submit_step(tp(0), step.target)
    running = sim.snapshot()
    if action == "cancel":
        sim.cancel(tp(0))
    elif action == "replace":
        sim.submit_step(tp(0), other_target(tuple(step.target), data))
    elif action == "complete":
        sim.tick(10_000.0)
    view = before_step if polled < applied else running if polled < acted else sim.snapshot()
    record = note_step_viewed(note_step_applied(first.reassignments[tp(0)], 1, reported), polled)
    after = decide({tp(0): record}, view, now=101.0)
    partition = view.partition(tp(0))
    gone = action in ("cancel", "replace") and view is not running and view is not before_step
    expected = gone and polled >= reported + APPLIED_VIEW_MARGIN_MS and not shows_step(partition, step)
    assert bool(after.interrupted) == expected
    if view is running or (view is not before_step and action in ("nothing", "complete")):
        assert not after.interrupted, "Kafka runs or ran our step"
    if not expected and tp(0) not in after.completed:
        assert after.reassignments[tp(0)].in_flight.number == 1, "it stays in flight"


# --- kept incrementally ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_external_moves_kept_from_the_changes_equal_those_found_from_nothing(data):
    n = 4
    start = [data.draw(replica_sets) for _ in range(n)]
    sim = SimulatedCluster(cluster_of(start), SimulationParams(bytes_per_sec=500))
    records: dict = {}
    moves: dict = {}
    view = sim.snapshot()
    for round_ in range(data.draw(st.integers(1, 6))):
        before_view, before_records = view, dict(records)
        for i in data.draw(st.sets(st.integers(0, n - 1), max_size=2)):
            p = sim.partition(tp(i))
            choice = data.draw(st.sampled_from(["move", "cancel", "ours", "drop", "fly"]))
            if choice == "move":
                sim.submit_step(tp(i), other_target(p.replicas, data))
            elif choice == "cancel" and p.reassigning:
                sim.cancel(tp(i))
            elif choice == "ours":
                records[tp(i)] = start_reassignment(f"r/{i}", tp(i), p.replicas, other_target(p.replicas, data))
            elif choice == "drop":
                records.pop(tp(i), None)
            elif choice == "fly" and tp(i) in records and records[tp(i)].in_flight is None:
                records[tp(i)] = start_step(records[tp(i)], Step(other_target(p.replicas, data)), 1.0)
        sim.tick(data.draw(st.sampled_from([0.0, 1.0, 5.0])))
        view = sim.snapshot()
        changed = {p.tp for p in view.partitions() if before_view.partition(p.tp) is not p}
        changed |= {t for t in set(records) | set(before_records) if records.get(t) is not before_records.get(t)}
        moves = compute_external_moves(moves, view, records, round_, changed).moves
        full = compute_external_moves({}, view, records, round_, None).moves
        assert {t: (m.replicas, m.adding, m.removing) for t, m in moves.items()} == \
               {t: (m.replicas, m.adding, m.removing) for t, m in full.items()}
        assert all(m.held for t, m in moves.items() if t in records), "a plan of ours waits on it"


def test_a_move_keeps_its_first_time_and_another_move_gets_a_new_one():
    sim = SimulatedCluster(cluster_of([(1, 2, 3)]), SimulationParams(bytes_per_sec=1))
    sim.submit_step(tp(0), (1, 2, 4))
    first = compute_external_moves({}, sim.snapshot(), {}, 1000, [tp(0)])
    assert first.started == (tp(0),) and first.moves[tp(0)] == ExternalMove((3, 1, 2, 4), (4,), (3,), 1000)
    same = compute_external_moves(first.moves, sim.snapshot(), {}, 2000, [tp(0)])
    assert same.moves is first.moves and not same.started
    record = start_reassignment("r/0", tp(0), (1, 2, 3), (4, 5, 6))
    held = compute_external_moves(first.moves, sim.snapshot(), {tp(0): record}, 3000, [tp(0)])
    assert held.held == (tp(0),) and held.moves[tp(0)] == replace(first.moves[tp(0)], held=True)
    sim.submit_step(tp(0), (1, 2, 5))
    other = compute_external_moves(held.moves, sim.snapshot(), {}, 4000, [tp(0)])
    assert other.started == (tp(0),) and other.moves[tp(0)].since_ms == 4000
    sim.cancel(tp(0))
    ended = compute_external_moves(other.moves, sim.snapshot(), {}, 5000, [tp(0)])
    assert ended.ended == (tp(0),) and not ended.moves


def test_a_view_caught_between_the_reassignment_end_and_the_list_shrink_is_no_interruption():
    """Regression (scenario 7, 2026-11-26): step [3, 5, 4] -> [3, 5, 6] seen running, then one poll
    showed no reassignment and replicas [3, 5, 6, 4] (the reassignment list and the replicas come
    from different brokers). That is the step finishing, not a cancel: a cancel takes the added
    replica 6 away again. The product took it for a cancel and planned the partition again."""
    step = Step((3, 5, 6), (6,), (4,), False, False)
    caught = PartitionState("t", 0, (3, 5, 6, 4), (3, 5, 6, 4), 3)
    assert is_step_finishing(caught, step) and not is_step_interrupted(caught, step, True)
    cancelled = PartitionState("t", 0, (3, 5, 4), (3, 5, 4), 3)  # the added replica gone again
    assert not is_step_finishing(cancelled, step) and is_step_interrupted(cancelled, step, True)
    replaced = PartitionState("t", 0, (3, 5, 6, 1), (3, 5, 6, 1), 3)  # a replica the step never removes
    assert is_step_interrupted(replaced, step, True)
    shrinking = Step((3, 5), (), (4,), False, False)  # a step that only removes: Kafka's original is a superset
    assert not is_step_finishing(PartitionState("t", 0, (3, 5, 4), (3, 5, 4), 3), shrinking)
