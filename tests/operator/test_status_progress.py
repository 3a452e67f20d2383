"""The status page's numbers (issue 19 item 7), pure: bytes moved / to move, rate and time left per
reassignment, disk usage per broker and dir, and the overall progress of a movement counting the
reassignments that finished (regression: the bar and `status` read 0 % with 12 of 15 partitions
done, since a finished reassignment leaves the state; the pipeline's replication meter now counts
them, so the state alone says 80 %). The figures are the movement meter's (`views.progress`):
its properties are tests/operator/test_progress_meter.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.eta import FinishedWork, ReplicationMeter, add_finished_work, compute_finished_work
from planning.movement.partition_steps import compute_next_step
from planning.movement.reassignment import Reassignment, StepInFlight
from reassigner.operator.views import compute_progress, compute_status, compute_status_document, status_to_json
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


def finished_state(count: int, finished: int) -> ControllerState:
    """`movement_state(count)` after its first `finished` reassignments completed (all their steps
    done) and left the state, counted in the meter as the pipeline counts them."""
    whole = movement_state(count)
    steps = compute_status(whole, 1).reassignments[0].steps_estimated
    ended = [replace(r, steps_done=steps) for tp, r in sorted(whole.reassignments.items()) if tp.partition < finished]
    meter = add_finished_work(ReplicationMeter(since_ms=0), compute_finished_work(ended, whole.cluster))
    return replace(whole, reassignments={tp: r for tp, r in whole.reassignments.items() if tp.partition >= finished},
                   replication_meter=meter)


def test_twelve_of_fifteen_finished_read_eighty_percent_from_the_state_alone():
    view = compute_status(finished_state(15, 12), 1, 2_000.0)
    assert sum(r.steps_done for r in view.reassignments) == 0 and len(view.reassignments) == 3  # none started
    assert view.movement.fraction == pytest.approx(0.8)
    for movement in (status_to_json(view)["movement"],  # `reassigner status --json`
                     status_to_json(view)["progress"],  # the same object, for readers of its older form
                     compute_status_document(view, [], "c", None, 2_000.0)["movement"]):  # /api/status
        assert (movement["partitions_done"], movement["partitions_total"]) == (12, 15)
        assert movement["fraction"] == pytest.approx(0.8)
        assert movement["bytes_to_move"] == 15 * 10 * MB and movement["bytes_moved"] == 12 * 10 * MB


def test_nothing_moving_has_no_overall_progress():
    view = compute_status(ControllerState(cluster=movement_state(2).cluster), 1)
    assert view.movement.partitions_total == 0 and view.movement.fraction is None
    assert compute_status_document(None, [], "c", None, 0.0)["movement"]["fraction"] is None


def test_bytes_rate_and_time_left_per_reassignment_and_overall():
    meter = ReplicationMeter(since_ms=0, bytes_copied=20 * MB)  # 20 MB in 10 s: 2 MB/s
    view = compute_status(movement_state(3, in_flight=2, meter=meter), 1, now_seconds=10.0)
    assert view.progress.rate_bytes_per_second == pytest.approx(2 * MB) and view.progress.rate_source == "observed"
    running, waiting = view.reassignments[0], view.reassignments[2]
    assert running.rate_bytes_per_second == pytest.approx(1 * MB)  # its share: 2 steps in flight
    assert waiting.rate_bytes_per_second is None
    assert running.bytes_to_move == 10 * MB and running.bytes_moved == 0
    # One pipe at 2 MB/s: the two in flight end after 10 and 20 MB, the waiting one after 30 MB;
    # the header is the last row, all 30 MB left / 2 MB/s (regression: rows sharing the rate
    # made one big row queued last count at half the rate, 20 s here).
    second = view.reassignments[1]
    assert sorted([running.time_left_seconds, second.time_left_seconds]) == pytest.approx([5.0, 10.0])
    assert waiting.time_left_seconds == pytest.approx(15.0)
    assert view.movement.bytes_to_move == 30 * MB and view.movement.time_left_seconds == pytest.approx(15.0)
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


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 30), st.data())
def test_finishing_never_lowers_the_overall_fraction_of_reassignments_at_rest(count, data):
    """Reassignments not started that finish one by one, counted in the meter as the pipeline
    counts them: the bar only rises, and ends at 1."""
    state = movement_state(count)
    steps = compute_status(state, 1).reassignments[0].steps_estimated
    meter = ReplicationMeter(since_ms=0)
    alive = sorted(state.reassignments)
    last = compute_progress(state, None).movement.fraction
    while alive:
        alive.pop(data.draw(st.integers(0, len(alive) - 1)))
        meter = add_finished_work(meter, FinishedWork(1, steps, 10 * MB))
        state = replace(state, reassignments={t: state.reassignments[t] for t in alive}, replication_meter=meter)
        fraction = compute_progress(state, None).movement.fraction
        assert fraction >= last
        last = fraction
    assert last == 1.0 and compute_progress(state, None).movement.partitions_done == count
