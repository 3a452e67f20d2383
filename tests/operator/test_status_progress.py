"""The status page's numbers (issue 19 item 7), pure: bytes moved / to move, rate and time left per
reassignment, disk usage per broker and dir, and the overall progress of a movement counting the
reassignments that finished (regression: the bar read 0 % with 12 of 15 partitions done, since a
finished reassignment leaves the state)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.eta import ReplicationMeter
from planning.movement.partition_steps import compute_next_step
from planning.movement.reassignment import Reassignment, StepInFlight
from reassigner.operator.status_server import compute_status_document
from reassigner.operator.views import (Movement, ReassignmentRow, advance_movement, compute_overall_progress,
                                       compute_status, status_to_json)
from state.model import ControllerState, Proposal

MB = 1 << 20
DIRS = (LogDir("/data/a", total_bytes=100 * MB, usable_bytes=25 * MB, replica_bytes=70 * MB, replica_count=7),
        LogDir("/data/b", online=False))
BROKERS = tuple(Broker(b, f"/dc1/r{b}", log_dirs=DIRS) for b in (1, 2, 3, 4))


def movement_state(count: int, in_flight: int = 0, meter: ReplicationMeter = ReplicationMeter()) -> ControllerState:
    """`count` partitions moving (1,2,3) → (2,3,4), 10 MB each; the first `in_flight` mid-step."""
    partitions, reassignments = [], {}
    for p in range(count):
        tp = TopicPartition("orders", p)
        flight = None
        replicas, isr, adding, removing = (1, 2, 3), (1, 2, 3), (), ()
        if p < in_flight:
            step = compute_next_step((1, 2, 3), (2, 3, 4), (1, 2, 3), 1, 1)
            replicas, adding, removing = tuple(dict.fromkeys(step.target + (1, 2, 3))), step.adding, step.removing
            flight = StepInFlight(step, 1, 1_000.0)
        partitions.append(PartitionState("orders", p, replicas, isr, 1, size_bytes=10 * MB, adding=adding,
                                         removing=removing))
        reassignments[tp] = Reassignment(f"r:orders-{p}", tp, (1, 2, 3), (2, 3, 4), in_flight=flight)
    return ControllerState(cluster=Cluster(BROKERS, (Topic("orders", tuple(partitions)),)),
                           reassignments=reassignments, replication_meter=meter)


def test_twelve_of_fifteen_finished_read_eighty_percent_not_zero():
    first = compute_status(movement_state(15), 1, 2_000.0)
    followed = advance_movement(Movement(), first.reassignments)
    assert compute_overall_progress(followed).fraction == 0.0
    later = movement_state(15)
    later = ControllerState(cluster=later.cluster,
                            reassignments={tp: r for tp, r in later.reassignments.items() if tp.partition >= 12})
    view = compute_status(later, 1, 2_000.0)
    assert view.overall_progress == 0.0  # the state alone: the 3 left, none started
    followed = advance_movement(followed, view.reassignments)
    document = compute_status_document(view, [], "c", None, 2_000.0, followed)
    movement = document["movement"]
    assert (movement["partitions_done"], movement["partitions_total"]) == (12, 15)
    assert movement["fraction"] == pytest.approx(0.8)
    assert movement["bytes_to_move"] == 15 * 10 * MB and movement["bytes_moved"] == 12 * 10 * MB


def test_a_new_movement_starts_after_nothing_moved():
    movement = advance_movement(Movement(), compute_status(movement_state(2), 1).reassignments)
    movement = advance_movement(movement, ())
    assert compute_overall_progress(movement).partitions_total == 0
    assert compute_overall_progress(movement).fraction is None


def test_bytes_rate_and_time_left_per_reassignment_and_overall():
    meter = ReplicationMeter(since_ms=0, bytes_copied=20 * MB)  # 20 MB in 10 s: 2 MB/s
    view = compute_status(movement_state(3, in_flight=2, meter=meter), 1, now_seconds=10.0)
    assert view.replication_rate == pytest.approx(2 * MB)
    running, waiting = view.reassignments[0], view.reassignments[2]
    assert running.rate_bytes_per_second == pytest.approx(1 * MB)  # its share: 2 steps in flight
    assert waiting.rate_bytes_per_second is None
    assert running.bytes_to_move == 10 * MB and running.bytes_moved == 0
    assert running.time_left_seconds == pytest.approx(10.0)  # 10 MB at 1 MB/s
    assert view.bytes_to_move == 30 * MB and view.time_left_seconds == pytest.approx(15.0)  # 30 MB at 2 MB/s
    row = status_to_json(view)["reassignments"][0]
    assert row["rate_bytes_per_second"] == pytest.approx(MB) and row["bytes_left"] == 10 * MB


def test_disk_usage_per_broker_and_dir_and_proposals_with_their_moves():
    state = ControllerState(cluster=movement_state(1).cluster, proposals={"p-1": Proposal(
        "p-1", {TopicPartition("orders", 0): (4, 2, 3)}, "broker 4 added", 1_000)})
    document = status_to_json(compute_status(state, 1))
    disks = document["disks"]
    assert [(d["broker_id"], d["path"], d["online"]) for d in disks[:2]] == [(1, "/data/a", True), (1, "/data/b", False)]
    assert disks[0]["used_fraction"] == pytest.approx(0.75) and disks[0]["replica_bytes"] == 70 * MB
    assert disks[1]["used_fraction"] is None
    (proposal,) = document["proposal_details"]
    assert proposal["proposal_id"] == "p-1" and proposal["reason"] == "broker 4 added"
    assert proposal["moves"][0]["adding"] == [4] and proposal["moves"][0]["removing"] == [1]


def rows(entries) -> tuple[ReassignmentRow, ...]:
    return tuple(ReassignmentRow("t", i, rid, "RUNNING", None, (), (), (), (), (), done, estimated, done, False,
                                 None, None, None, "", bytes_to_move=to_move, bytes_moved=moved)
                 for i, (rid, done, estimated, to_move, moved) in enumerate(entries))


ENTRY = st.tuples(st.sampled_from([f"r{i}" for i in range(8)]), st.integers(0, 6), st.one_of(st.none(), st.integers(0, 6)),
                  st.integers(0, 10**9), st.integers(0, 10**9))


@given(st.lists(st.lists(ENTRY, max_size=8, unique_by=lambda e: e[0]), max_size=8))
def test_overall_progress_is_a_fraction_and_finished_ones_count_done(states):
    movement = Movement()
    for entries in states:
        before = movement
        movement = advance_movement(movement, rows(entries))
        progress = compute_overall_progress(movement)
        assert progress.fraction is None or 0.0 <= progress.fraction <= 1.0
        assert 0 <= progress.bytes_moved <= progress.bytes_to_move
        assert 0 <= progress.partitions_done <= progress.partitions_total
        if entries:  # every reassignment seen in this movement is still counted, finished or not
            assert set(movement.entries) == set(before.entries) | {e[0] for e in entries}
            left = {rid for rid in before.entries if rid not in {e[0] for e in entries}}
            assert {rid for rid, e in movement.entries.items() if e.finished} == left
            assert all(e.steps_done == e.steps_estimated and e.bytes_moved == e.bytes_to_move
                       for rid, e in movement.entries.items() if rid in left)
        else:
            assert movement == Movement()


@given(st.integers(1, 30), st.data())
def test_finishing_never_lowers_the_overall_fraction_of_reassignments_at_rest(count, data):
    """Reassignments not started (0 steps done) that finish one by one: the bar only rises."""
    alive = [(f"r{i}", 0, data.draw(st.integers(1, 5)), 100, 0) for i in range(count)]
    movement = advance_movement(Movement(), rows(alive))
    last = compute_overall_progress(movement).fraction
    while alive:
        alive.pop(data.draw(st.integers(0, len(alive) - 1)))
        movement = advance_movement(movement, rows(alive))
        if alive:
            fraction = compute_overall_progress(movement).fraction
            assert fraction >= last
            last = fraction
