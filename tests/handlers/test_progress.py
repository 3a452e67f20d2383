"""Movement progress (SPEC 5.3): completion gates the next step, in the same batch; bad input and
replays (SPEC 6, 7)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from handler_builders import (
    T0,
    alerts,
    assert_encodes,
    broker_event,
    cluster_events,
    commands,
    partition_event,
    reassign,
    request,
    simple_cluster,
    snapshot_end,
    tick,
    topic_event,
)

from handlers.micro_batch import BadRecord, BatchInputs
from handlers.decide import decide
from handlers.progress import compute_throttle_marker
from tests.settings_defaults import default_policy
from state.model import ControllerState
from planning.model import TopicPartition
from planning.movement.eta import ReplicationMeter

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
POLICY = default_policy(max_partition_movements=10, max_movements_per_broker=10, max_leader_movements=10)


def started(policy=POLICY):
    """t-0 (0,1,2) -> (0,1,3): one step; t-1 (1,2,3) -> (4,5,1): several steps."""
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(
        reassign({A: (0, 1, 3), B: (4, 5, 1)}, T0 + 1000, "r1"),)), policy)
    return cluster, decision


def step_target(decision, tp):
    return [tuple(c["payload"][1]["target_replicas"]) for c in commands(decision, "ReassignmentStep")
            if c["payload"][1]["partition"] == tp.partition]


def test_completion_events_advance_exactly_the_completed_partitions():
    cluster, first = started()
    assert step_target(first, A) == [(0, 1, 3)] and step_target(first, B) == [(4, 1, 2, 3)]
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1,
                     log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(done_a, T0 + 2000),)), POLICY)
    assert [a["subject"] for a in alerts(second, "ReassignmentCompleted")] == ["t-0"]
    assert not commands(second), "t-1 has not moved: no new step for it"
    assert A not in second.state.reassignments and second.state.reassignments[B].steps_done == 0
    done_b1 = replace(cluster.partition(B), replicas=(4, 1, 2, 3), isr=(1, 2, 3, 4), leader=4, leader_epoch=1,
                      log_dirs=())
    third = decide(second.state, BatchInputs(3, T0 + 3000, (partition_event(done_b1, T0 + 3000),)), POLICY)
    assert step_target(third, B) == [(4, 1, 3)], "the next step (2 dropped), in the same batch"
    assert third.state.reassignments[B].steps_done == 1
    assert third.state.reassignments[B].in_flight.number == 2
    assert commands(third)[0]["id"] == "r1/t-1:2:ReassignmentStep"


def test_an_isr_that_has_not_caught_up_holds_the_step():
    cluster, first = started()
    lagging = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1), leader=0, leader_epoch=1, log_dirs=())
    held = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(lagging, T0 + 2000),)), POLICY)
    assert not held.outbox
    assert held.state.reassignments[A].in_flight is not None
    caught_up = replace(lagging, isr=(0, 1, 3))
    done = decide(held.state, BatchInputs(3, T0 + 3000, (partition_event(caught_up, T0 + 3000),)), POLICY)
    assert alerts(done, "ReassignmentCompleted")


def test_a_new_leader_is_elected_once_its_step_is_otherwise_complete():
    cluster, first = started()
    not_leading = replace(cluster.partition(B), replicas=(4, 1, 2, 3), isr=(1, 2, 3, 4), leader=1,
                          leader_epoch=1, log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(not_leading, T0 + 2000),)), POLICY)
    elect = commands(second, "ElectLeader")
    assert [(c["id"], c["payload"][1]["preferred_leader"]) for c in elect] == [("r1/t-1:1:ElectLeader", 4)]
    again = decide(second.state, BatchInputs(3, T0 + 3000, requests=()), POLICY)
    assert not commands(again), "one election per step"


def test_a_stalled_step_alerts_once_and_cancels_with_stall_action_cancel():
    policy = replace(POLICY, step_stall_timeout_seconds=60, stall_action="cancel")
    _, first = started(policy)
    from handler_builders import tick
    quiet = decide(first.state, BatchInputs(2, T0 + 30_000, requests=(tick(T0 + 30_000),)), policy)
    assert not quiet.outbox
    late = decide(quiet.state, BatchInputs(3, T0 + 61_000, requests=(tick(T0 + 61_000),)), policy)
    assert len(alerts(late, "ReassignmentStalled")) == 2
    assert {c["payload"][0] for c in commands(late)} == {"CancelReassignment"}


def test_a_bad_record_goes_to_the_dead_letter_topic_and_the_batch_goes_on():
    cluster = simple_cluster(3)
    p = cluster.partition(A)
    bad = BadRecord("reassigner.isr-changes", 2, 41, b"\x00garbage", "not a valid PartitionState record")
    events = cluster_events(cluster, T0) + (partition_event(replace(p, isr=(p.replicas[0],)), T0),)
    decision = decide(ControllerState(), BatchInputs(0, T0, events, bad_records=(bad,)), default_policy())
    letters = [m for m in decision.outbox if m.topic_suffix == "dead-letter"]
    assert len(letters) == 1 and letters[0].record["value"] == b"\x00garbage"
    assert letters[0].record["expected_schema"] == "PartitionState"
    assert [a["kind"] for a in alerts(decision)][0] == "BadEvent"
    assert decision.state.cluster.partition(A).isr == (p.replicas[0],), "the next event is still applied"
    assert_encodes(decision.outbox)


def test_a_malformed_event_is_reported_and_the_rest_applied():
    cluster = simple_cluster(3)
    broken = ("PartitionState", {"key": "t-9", "topic": "t"})
    decision = decide(ControllerState(), BatchInputs(0, T0, (broken,) + cluster_events(cluster, T0)), default_policy())
    assert [a["kind"] for a in alerts(decision)] == ["BadEvent"]
    assert decision.state.cluster.partition(A) is not None


def test_a_stale_partition_event_is_ignored():
    cluster = simple_cluster(3)
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    newer = replace(cluster.partition(A), leader_epoch=5, isr=cluster.partition(A).replicas)
    state = decide(state, BatchInputs(1, T0 + 1, (partition_event(newer, T0 + 1),)), default_policy()).state
    older = replace(newer, leader_epoch=4, isr=(newer.replicas[0],))
    after = decide(state, BatchInputs(2, T0 + 2, (partition_event(older, T0 + 2),)), default_policy()).state
    assert after.cluster.partition(A) == state.cluster.partition(A)


def test_replaying_a_batch_on_the_same_state_decides_the_same_outbox():
    cluster, first = started()
    bad = BadRecord("reassigner.requests", 0, 7, b"?", "bad")
    lagging = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1)
    inputs = BatchInputs(2, T0 + 2000, (partition_event(lagging, T0 + 2000),),
                         (reassign({TopicPartition("t", 1): (5, 4, 3)}, T0 + 2000, "r2", additional=True),),
                         bad_records=(bad,))
    one, two = decide(first.state, inputs, POLICY), decide(first.state, inputs, POLICY)
    assert one.outbox == two.outbox and one.state == two.state
    assert one.outbox


def test_a_failed_step_alerts_and_gives_up_on_the_partition():
    _, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    result = {"schema_version": 1, "event_time": T0 + 2000, "id": "res-1", "key": step["key"],
              "command_id": step["id"], "command_kind": "ReassignmentStep", "epoch": 0,
              "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": False,
              "error_code": "INVALID_REPLICA_ASSIGNMENT", "message": "broker 3 is gone"}
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(result,)), POLICY)
    failed = alerts(decision, "CommandFailed")
    assert len(failed) == 1 and failed[0]["details"]["error_code"] == "INVALID_REPLICA_ASSIGNMENT"
    assert A not in decision.state.reassignments
    unknown = dict(result, reassignment_id="nope/t-0")
    assert not decide(first.state, BatchInputs(2, T0 + 2000, command_results=(unknown,)), POLICY).outbox


def test_a_failed_step_reported_twice_in_one_batch_gives_up_once():
    """Regression: the second copy of a result (the executor redelivers at least once) met the
    record the first had just dropped, and deciding the batch raised KeyError."""
    _, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    result = {"schema_version": 1, "event_time": T0 + 2000, "id": "res-1", "key": step["key"],
              "command_id": step["id"], "command_kind": "ReassignmentStep", "epoch": 0,
              "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": False,
              "error_code": "INVALID_REPLICA_ASSIGNMENT", "message": "broker 3 is gone"}
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(result, dict(result, id="res-2"))),
                      POLICY)
    assert len(alerts(decision, "CommandFailed")) == 1
    assert A not in decision.state.reassignments


def test_a_command_no_pipeline_issued_raises_an_error_and_changes_no_reassignment():
    """Issue 18: the executor refused a forged command (UNKNOWN_EPOCH); the pipeline says so, as
    an ERROR naming the command, and its own reassignments go on untouched."""
    _, first = started()
    forged = {"schema_version": 1, "event_time": T0 + 2000, "id": "res-forged", "key": "t-0",
              "command_id": "forged-1", "command_kind": "ReassignmentStep", "epoch": 1_000_000,
              "reassignment_id": "whatever", "step": 1, "ok": False, "error_code": "UNKNOWN_EPOCH",
              "message": "no pipeline issued it"}
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(forged,)), POLICY)
    (alert,) = alerts(decision, "CommandFailed")
    assert alert["severity"] == "ERROR" and "forged-1" in alert["message"] and "commands topic" in alert["message"]
    assert decision.state.reassignments == first.state.reassignments



@pytest.mark.parametrize(("code", "words"), [
    ("BAD_SIGNATURE", "not signed with the command signing key"),
    ("COMMAND_EXPIRED", "a replay of an old command"),
])
def test_a_command_the_executor_could_not_trust_raises_an_error_naming_its_source(code, words):
    """Issue 18: a forged (unsigned, badly signed) or replayed-old command refused by the executor
    becomes one ERROR naming the command and where it was read; no reassignment changes, even when
    the forged result names a step of ours."""
    _, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    refused = {"schema_version": 3, "event_time": T0 + 2000, "id": "res-refused", "key": "t-0",
               "command_id": step["id"], "command_kind": "ReassignmentStep", "epoch": 0,
               "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": False, "error_code": code,
               "message": "it carries no reassigner-signature header (unsigned); not applied "
                          "(read from reassigner.commands[1]@42, producer's client.id header 'x' (self-declared))"}
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(refused,)), POLICY)
    (alert,) = alerts(decision, "CommandFailed")
    assert alert["severity"] == "ERROR" and alert["subject"] == "commands"
    assert step["id"] in alert["message"] and code in alert["message"] and words in alert["message"]
    assert "reassigner.commands[1]@42" in alert["message"] and "client.id header 'x'" in alert["message"]
    assert alert["details"]["error_code"] == code and "@42" in alert["details"]["executor_message"]
    assert decision.state.reassignments == first.state.reassignments

def _failed(step: dict, code: str, at_ms: int) -> dict:
    return {"schema_version": 1, "event_time": at_ms, "id": f"res-{step['id']}", "key": step["key"],
            "command_id": step["id"], "command_kind": "ReassignmentStep", "epoch": 0,
            "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": False,
            "error_code": code, "message": f"{code} from the controller"}


def test_a_step_failing_for_a_transient_reason_is_retried_with_a_new_command_then_given_up():
    """Issue 16 item 2: timeouts and the like are retried step.retry.max times, 10 s doubling apart,
    each retry a new command id and no alert; past the limit, ReassignmentStalled with the last
    error (tests/handlers/test_step_retries.py: the quiet retries)."""
    policy = replace(POLICY, step_retry_max=2)
    _, first = started(policy)
    state, now = first.state, T0 + 2000
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    ids = [step["id"]]
    for attempt, wait_ms in ((1, 10_000), (2, 20_000)):
        decision = decide(state, BatchInputs(attempt + 1, now, command_results=(_failed(step, "REQUEST_TIMED_OUT", now),)),
                          policy)
        assert not alerts(decision), "retried quietly"
        assert not [c for c in commands(decision, "ReassignmentStep") if c["key"] == "t-0"]  # waits
        record = decision.state.reassignments[A]
        assert record.failed_attempts == attempt and record.in_flight is None
        early = decide(decision.state, BatchInputs(attempt + 10, now + wait_ms - 1000), policy)
        assert not [c for c in commands(early, "ReassignmentStep") if c["key"] == "t-0"]
        now += wait_ms
        later = decide(early.state, BatchInputs(attempt + 20, now), policy)
        (step,) = [c for c in commands(later, "ReassignmentStep") if c["key"] == "t-0"]
        ids.append(step["id"])
        state = later.state
    assert len(set(ids)) == 3  # every retry a command the executor has not seen
    decision = decide(state, BatchInputs(40, now, command_results=(_failed(step, "REQUEST_TIMED_OUT", now),)), policy)
    (stalled,) = alerts(decision, "ReassignmentStalled")
    assert stalled["severity"] == "ERROR" and "3 times in a row" in stalled["message"]
    assert "REQUEST_TIMED_OUT from the controller" in stalled["message"]
    assert A not in decision.state.reassignments


def test_a_permanent_step_failure_names_what_to_do():
    _, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(
        _failed(step, "CLUSTER_AUTHORIZATION_FAILED", T0 + 2000),)), POLICY)
    (failed,) = alerts(decision, "CommandFailed")
    assert failed["severity"] == "ERROR" and "grant the executor's principal ALTER" in failed["message"]
    assert A not in decision.state.reassignments


def test_a_completed_step_forgets_earlier_failures():
    from planning.movement.reassignment import complete_step, fail_step

    _, first = started()
    record = first.state.reassignments[A]
    failed = fail_step(record, 100.0, "timed out")
    assert (failed.failed_attempts, failed.retry_at, failed.steps_done) == (1, 110.0, record.steps_done + 1)
    assert fail_step(failed, 200.0, "again").retry_at == 220.0
    from planning.movement.reassignment import start_step

    running = start_step(failed, record.in_flight.step, 300.0)
    done = complete_step(running)
    assert (done.failed_attempts, done.retry_at, done.last_error) == (0, None, "")


def test_each_step_carries_its_throttle_and_one_clear_follows_once_nothing_moves():
    """Issue 19 item 1: no SetThrottle racing the steps on another partition of the commands
    topic; each step carries the rate, and the clear is numbered after every step it ends."""
    policy = replace(POLICY, throttle_bytes_per_sec=10_000_000, logdir_throttle_bytes_per_sec=5_000_000)
    cluster, first = started(policy)
    assert not commands(first, "SetThrottle")
    steps = commands(first, "ReassignmentStep")
    assert len(steps) == 2 and all(
        (s["payload"][1]["throttle_rate_bytes_per_sec"], s["payload"][1]["throttle_log_dir_rate_bytes_per_sec"])
        == (10_000_000, 5_000_000) for s in steps)
    issued_at = {s["payload"][1]["throttle_sequence"] for s in steps}
    step_a = next(s["payload"][1] for s in steps if s["key"] == "t-0")
    assert (step_a["throttle_leader_broker_ids"], step_a["throttle_follower_broker_ids"]) == ([0, 1, 2], [3]), \
        "leader throttle on the current replicas, follower throttle on the added one"
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    moving_b = replace(cluster.partition(B), replicas=(4, 1, 2, 3), adding=(4,), leader_epoch=1, log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(done_a, T0 + 2000),
                                                             partition_event(moving_b, T0 + 2000))), policy)
    assert not commands(second, "ClearThrottle"), "t-1 still moves"
    assert any(k.startswith("Throttle:") for k in second.state.open_alerts)
    cancel = {"schema_version": 1, "event_time": T0 + 3000, "id": "c", "key": "c", "requested_by": None,
              "payload": ("Cancel", {"topic": "t", "partition": 1, "keep": True})}
    state = decide(second.state, BatchInputs(3, T0 + 3000, requests=(cancel,)), policy).state
    back = replace(cluster.partition(B), leader_epoch=2)
    last = decide(state, BatchInputs(4, T0 + 4000, (partition_event(back, T0 + 4000),)), policy)
    (clear,) = commands(last, "ClearThrottle")
    fields = clear["payload"][1]
    assert {p["partition"] for p in fields["partitions"]} == {0, 1}
    assert set(fields["broker_ids"]) == {0, 1, 2, 3, 4}  # t-0 (0,1,2)->(0,1,3), t-1 first step (4,1,2,3)
    assert fields["throttle_sequence"] > max(issued_at)
    assert clear["id"] == f"throttle-{fields['throttle_sequence']}:0:ClearThrottle"
    assert not any(k.startswith("Throttle:") for k in last.state.open_alerts)
    assert_encodes(last.outbox)
    again = decide(last.state, BatchInputs(5, T0 + 5000, requests=(
        reassign({A: (0, 1, 2)}, T0 + 5000, "r2"),)), policy)
    (later,) = commands(again, "ReassignmentStep")
    assert later["payload"][1]["throttle_sequence"] >= fields["throttle_sequence"], \
        "a step issued after the clear is not removed by it, whichever the executor reads first"


def test_the_clear_names_the_live_brokers_and_a_down_one_is_cleared_when_it_is_back():
    """Kafka serves a broker's configs on the broker: a ClearThrottle naming a down broker fails
    as a whole (and leaves the topics' lists throttled; CI's flapping-broker test met it). The
    clear names the live brokers and the partitions; the down broker is cleared once it is back;
    a broker that left the cluster is dropped."""
    policy = replace(POLICY, throttle_bytes_per_sec=10_000_000)
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    first = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({A: (0, 1, 3)}, T0 + 1000, "r1"),)), policy)
    assert commands(first, "ReassignmentStep")
    two = cluster.broker(2)
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    ended = decide(first.state, BatchInputs(2, T0 + 2000, (broker_event(two, T0 + 2000, "FENCED"),
                                                            partition_event(done_a, T0 + 2000))), policy)
    (clear,) = commands(ended, "ClearThrottle")
    assert clear["payload"][1]["broker_ids"] == [0, 1, 3]
    assert [(p["topic"], p["partition"]) for p in clear["payload"][1]["partitions"]] == [("t", 0)]
    assert [k for k in ended.state.open_alerts if k.startswith("Throttle:")] == [
        compute_throttle_marker([2], [], 10_000_000)]
    still = decide(ended.state, BatchInputs(3, T0 + 3000, requests=(tick(T0 + 3000),)), policy)
    assert not commands(still, "ClearThrottle"), "broker 2 is still down: nothing to clear yet"
    back = decide(still.state, BatchInputs(4, T0 + 4000, (broker_event(two, T0 + 4000, "UNFENCED"),)), policy)
    (again,) = commands(back, "ClearThrottle")
    assert (again["payload"][1]["broker_ids"], again["payload"][1]["partitions"]) == ([2], [])
    assert not any(k.startswith("Throttle:") for k in back.state.open_alerts)
    assert_encodes(back.outbox)
    gone = ended.state.with_cluster(replace(ended.state.cluster, brokers=tuple(
        b for b in ended.state.cluster.brokers if b.id != 2)))
    left = decide(gone, BatchInputs(4, T0 + 4000, requests=(tick(T0 + 4000),)), policy)
    assert not commands(left, "ClearThrottle"), "a broker that left the cluster holds nothing to clear"
    assert not any(k.startswith("Throttle:") for k in left.state.open_alerts)


def _throttled_movement_ended():
    """t-0 (0,1,2) -> (0,1,3) throttled, done: its ClearThrottle over brokers 0-3 and t-0."""
    policy = replace(POLICY, throttle_bytes_per_sec=10_000_000)
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    first = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({A: (0, 1, 3)}, T0 + 1000, "r1"),)), policy)
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    ended = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(done_a, T0 + 2000),)), policy)
    (clear,) = commands(ended, "ClearThrottle")
    assert (clear["payload"][1]["broker_ids"], clear["payload"][1]["partitions"][0]["partition"]) == ([0, 1, 2, 3], 0)
    return policy, cluster, ended, clear


def _result(command: dict, at_ms: int, code: str | None = None) -> dict:
    """The executor's CommandResult of a throttle command: ok, or failed with `code`."""
    return {"schema_version": 1, "event_time": at_ms, "id": f"res-{command['id']}", "key": command["key"],
            "command_id": command["id"], "command_kind": command["payload"][0], "epoch": command["epoch"],
            "reassignment_id": None, "step": 0, "ok": code is None, "error_code": code,
            "message": f"{code}: describe configs of broker 2" if code else ""}


def _snapshot(cluster, at_ms: int, snapshot_id: str) -> tuple[str, dict]:
    """A snapshot's END marker that says which Kafka runs (as the watcher writes it)."""
    schema, record = snapshot_end(cluster, at_ms, snapshot_id)
    return schema, {**record, "kafka_release": "4.1", "kafka_metadata_level": 27, "kafka_capabilities": []}


def _throttle_markers(state) -> list[str]:
    return sorted(k for k in state.open_alerts if k.startswith(("Throttle:", "ClearThrottle")))


def test_a_failed_clear_is_asked_again_at_the_next_snapshot_once_nothing_moves():
    """The executor could not apply the movement's ClearThrottle (a broker died between our view
    and the command): the rates and the topics' lists stay set. A result names its command only,
    so the state kept what the clear clears; at the next snapshot it goes back into the marker
    and is cleared again — not at once, so a broker that keeps refusing is no loop."""
    policy, cluster, ended, clear = _throttled_movement_ended()
    failed = decide(ended.state, BatchInputs(3, T0 + 3000, command_results=(
        _result(clear, T0 + 3000, "KAFKA_TIMEOUT"),)), policy)
    (alert,) = alerts(failed, "CommandFailed")
    assert not commands(failed, "ClearThrottle"), "not at once: a broker that refuses would loop"
    quiet = decide(failed.state, BatchInputs(4, T0 + 4000, requests=(tick(T0 + 4000),)), policy)
    assert not commands(quiet, "ClearThrottle")
    again = decide(quiet.state, BatchInputs(5, T0 + 5000, (_snapshot(cluster, T0 + 5000, "snap-2"),)), policy)
    (retry,) = commands(again, "ClearThrottle")
    assert (retry["payload"][1]["broker_ids"], retry["payload"][1]["partitions"]) == (
        clear["payload"][1]["broker_ids"], clear["payload"][1]["partitions"])
    assert retry["payload"][1]["throttle_sequence"] > clear["payload"][1]["throttle_sequence"]
    assert retry["id"] == f"throttle-{retry['payload'][1]['throttle_sequence']}:0:ClearThrottle"
    assert_encodes(again.outbox)
    assert alert["subject"] == "throttle" and "asked again at the next snapshot" in alert["message"]
    ok = decide(again.state, BatchInputs(6, T0 + 6000, (_snapshot(cluster, T0 + 6000, "snap-3"),),
                                         command_results=(_result(retry, T0 + 6000),)), policy)
    assert not ok.outbox and not _throttle_markers(ok.state), "cleared: nothing left to ask"


def test_a_clear_the_executor_refused_as_expired_is_asked_again_at_the_next_snapshot():
    """An executor away longer than it remembers command ids refuses the clear unapplied
    (COMMAND_EXPIRED): it cleared nothing, so it goes again as a failed one does."""
    policy, cluster, ended, clear = _throttled_movement_ended()
    refused = decide(ended.state, BatchInputs(3, T0 + 3000, command_results=(
        _result(clear, T0 + 3000, "COMMAND_EXPIRED"),)), policy)
    (alert,) = alerts(refused, "CommandFailed")
    assert alert["severity"] == "ERROR" and not commands(refused, "ClearThrottle")
    again = decide(refused.state, BatchInputs(4, T0 + 4000, (_snapshot(cluster, T0 + 4000, "snap-2"),)), policy)
    (retry,) = commands(again, "ClearThrottle")
    assert retry["payload"][1]["broker_ids"] == clear["payload"][1]["broker_ids"]


def test_an_ok_clear_or_a_failed_set_throttle_asks_for_no_clear():
    """A clear that succeeds changes nothing (nothing more is asked); a failed SetThrottle is not
    turned into a clear (the marker of its steps still names the brokers)."""
    policy, cluster, ended, clear = _throttled_movement_ended()
    set_throttle = {**clear, "id": "throttle-1:0:SetThrottle", "payload": ("SetThrottle", {})}
    results = (_result(clear, T0 + 3000), _result(set_throttle, T0 + 3000, "KAFKA_TIMEOUT"))
    answered = decide(ended.state, BatchInputs(3, T0 + 3000, command_results=results), policy)
    (alert,) = alerts(answered, "CommandFailed")
    assert alert["message"] == "SetThrottle failed: KAFKA_TIMEOUT: describe configs of broker 2"
    assert not commands(answered) and not _throttle_markers(answered.state)
    later = decide(answered.state, BatchInputs(4, T0 + 4000, (_snapshot(cluster, T0 + 4000, "snap-2"),)), policy)
    assert not commands(later, "ClearThrottle")


def test_a_failed_clear_waits_for_a_down_broker_and_goes_again_when_one_of_its_brokers_is_back():
    """Between snapshots, a broker of the failed clear coming back asks it again; the clear names
    the live brokers only, and a broker still down waits in the marker (the down-broker rule)."""
    policy, cluster, ended, clear = _throttled_movement_ended()
    two, three = cluster.broker(2), cluster.broker(3)
    failed = decide(ended.state, BatchInputs(3, T0 + 3000, (broker_event(two, T0 + 3000, "FENCED"),
                                                            broker_event(three, T0 + 3000, "FENCED")),
                                             command_results=(_result(clear, T0 + 3000, "KAFKA_TIMEOUT"),)), policy)
    assert not commands(failed, "ClearThrottle")
    back = decide(failed.state, BatchInputs(4, T0 + 4000, (broker_event(three, T0 + 4000, "UNFENCED"),)), policy)
    (retry,) = commands(back, "ClearThrottle")
    assert (retry["payload"][1]["broker_ids"], [p["partition"] for p in retry["payload"][1]["partitions"]]) == (
        [0, 1, 3], [0])
    assert [k for k in back.state.open_alerts if k.startswith("Throttle:")] == [compute_throttle_marker([2], [])]
    last = decide(back.state, BatchInputs(5, T0 + 5000, (broker_event(two, T0 + 5000, "UNFENCED"),)), policy)
    (rest,) = commands(last, "ClearThrottle")
    assert (rest["payload"][1]["broker_ids"], rest["payload"][1]["partitions"]) == ([2], [])


def test_a_failed_clear_joins_the_marker_of_a_movement_in_flight_and_goes_with_its_clear():
    """A clear issued while steps fly would take their throttles away: the failed clear's brokers
    and partitions join the marker of the movement in flight, and one clear covers both when it
    ends."""
    policy, cluster, ended, clear = _throttled_movement_ended()
    failed = decide(ended.state, BatchInputs(3, T0 + 3000, requests=(reassign({B: (4, 5, 1)}, T0 + 3000, "r2"),),
                                             command_results=(_result(clear, T0 + 3000, "KAFKA_TIMEOUT"),)), policy)
    assert commands(failed, "ReassignmentStep") and not commands(failed, "ClearThrottle")
    moving_b = replace(cluster.partition(B), replicas=(4, 1, 2, 3), adding=(4,), leader_epoch=1, log_dirs=())
    flying = decide(failed.state, BatchInputs(4, T0 + 4000, (partition_event(moving_b, T0 + 4000),
                                                             _snapshot(cluster, T0 + 4000, "snap-2"))), policy)
    assert not commands(flying, "ClearThrottle"), "t-1 still moves"
    (marker,) = [k for k in flying.state.open_alerts if k.startswith("Throttle:")]
    assert ["t", 0] in json.loads(marker[len("Throttle:"):])["partitions"]
    cancel = request("Cancel", {"topic": "t", "partition": 1, "keep": True}, T0 + 5000, "c1")
    state = decide(flying.state, BatchInputs(5, T0 + 5000, requests=(cancel,)), policy).state
    back = replace(cluster.partition(B), leader_epoch=2)
    last = decide(state, BatchInputs(6, T0 + 6000, (partition_event(back, T0 + 6000),)), policy)
    (together,) = commands(last, "ClearThrottle")
    assert sorted(p["partition"] for p in together["payload"][1]["partitions"]) == [0, 1]
    assert set(together["payload"][1]["broker_ids"]) >= {0, 1, 2, 3, 4}


def test_a_dead_broker_is_not_throttled():
    """A heal moves replicas off a dead broker: its configs can be neither read nor written."""
    policy = replace(POLICY, throttle_bytes_per_sec=10_000_000)
    cluster = simple_cluster(6, {"t": (2, 3)})
    dead = cluster_events(cluster, T0)
    state = decide(ControllerState(), BatchInputs(0, T0, dead), policy).state
    state = state.with_cluster(replace(state.cluster, brokers=tuple(
        replace(b, alive=False) if b.id == 2 else b for b in state.cluster.brokers)))
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({A: (0, 1, 3)}, T0 + 1000, "r1"),)), policy)
    (step,) = [c["payload"][1] for c in commands(decision, "ReassignmentStep")]
    assert (step["throttle_leader_broker_ids"], step["throttle_follower_broker_ids"]) == ([0, 1], [3])


def test_steps_carry_no_throttle_without_a_rate_and_no_clear_follows():
    """The movement is marked with nothing throttled (so that a rate set while it flies reaches
    its steps: test_adaptive_throttle); when it ends the marker goes, and no ClearThrottle."""
    cluster, first = started()
    assert all(s["payload"][1].get("throttle_rate_bytes_per_sec") is None for s in commands(first, "ReassignmentStep"))
    assert [k for k in first.state.open_alerts if k.startswith("Throttle:")] == [compute_throttle_marker([], [], 0)]
    assert_encodes(first.outbox)
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    moving_b = replace(cluster.partition(B), replicas=(4, 1, 2, 3), adding=(4,), leader_epoch=1, log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(done_a, T0 + 2000),
                                                             partition_event(moving_b, T0 + 2000))), POLICY)
    cancel = {"schema_version": 1, "event_time": T0 + 3000, "id": "c", "key": "c", "requested_by": None,
              "payload": ("Cancel", {"topic": "t", "partition": 1, "keep": True})}
    state = decide(second.state, BatchInputs(3, T0 + 3000, requests=(cancel,)), POLICY).state
    back = replace(cluster.partition(B), leader_epoch=2)
    last = decide(state, BatchInputs(4, T0 + 4000, (partition_event(back, T0 + 4000),)), POLICY)
    assert not last.state.compute_records_in_flight()
    assert not commands(last, "ClearThrottle") and not commands(last, "SetThrottle")
    assert not any(k.startswith("Throttle:") for k in last.state.open_alerts)


def test_an_ok_cancel_result_lets_the_unchanged_view_count_as_reverted():
    """A cancel that meets a view which never showed its step waits (the view may be stale) until
    the executor confirms the CancelReassignment; then the reassignment is back where it began."""
    cluster, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    cancel = decide(first.state, BatchInputs(2, T0 + 1500, requests=(
        request("Cancel", {"topic": "t", "partition": 0, "keep": False}, T0 + 1500, "c1"),)), POLICY)
    assert [c["payload"][0] for c in commands(cancel) if c["key"] == "t-0"] == ["CancelReassignment"]
    assert cancel.state.reassignments[A].state.value == "cancelling"
    assert not [a for a in alerts(cancel, "ReassignmentCancelled") if a["subject"] == "t-0"], \
        "the view still shows (0, 1, 2) only because nothing was polled since the step started"
    cancel_command = next(c for c in commands(cancel, "CancelReassignment") if c["key"] == "t-0")
    result = {"schema_version": 1, "event_time": T0 + 2000, "id": "res-2", "key": "t-0",
              "command_id": cancel_command["id"], "command_kind": "CancelReassignment", "epoch": 0,
              "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": True,
              "error_code": None, "message": None}
    done = decide(cancel.state, BatchInputs(3, T0 + 2000, command_results=(result,)), POLICY)
    back = [a for a in alerts(done, "ReassignmentCancelled") if a["subject"] == "t-0"]
    assert back and "back at its original replicas [0, 1, 2]" in back[0]["message"]
    assert A not in {tp for tp, r in done.state.reassignments.items() if r.active}


def test_the_replication_meter_counts_completed_steps_and_the_views_give_bytes_and_time_left():
    from reassigner.operator.views import compute_status

    cluster, first = started()
    assert first.state.replication_meter.since_ms == T0 + 1000 and first.state.replication_meter.bytes_copied == 0
    size = cluster.partition(A).size_bytes
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 11_000, (partition_event(done_a, T0 + 11_000),)), POLICY)
    assert second.state.replication_meter.bytes_copied == size  # one replica of t-0 copied in 10 s
    view = compute_status(second.state, 1, now_seconds=(T0 + 11_000) / 1000)
    assert view.progress.rate_bytes_per_second == size / 10
    (row,) = view.reassignments  # t-1: (1,2,3) -> (4,5,1) adds two replicas, none in sync yet
    assert (row.bytes_to_move, row.bytes_moved) == (2 * size, 0)
    assert row.time_left_seconds == 2 * size / (size / 10)  # alone in flight: the whole rate
    assert view.movement.time_left_seconds == 20.0 and view.movement.bytes_left == 2 * size


def test_the_meter_counts_the_reassignments_that_ended_and_resets_when_the_movement_ends():
    """Issue 19 item 7: t-0 completes and leaves the state; the meter keeps it (1 step, its
    bytes), so the overall progress is the state's alone; the movement's end resets it."""
    from reassigner.operator.views import compute_status, status_to_json

    cluster, first = started()
    size = cluster.partition(A).size_bytes
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    second = decide(first.state, BatchInputs(2, T0 + 11_000, (partition_event(done_a, T0 + 11_000),)), POLICY)
    assert A not in second.state.reassignments
    meter = second.state.replication_meter
    assert (meter.finished, meter.finished_steps, meter.finished_bytes) == (1, 1, size)
    movement = status_to_json(compute_status(second.state, 1, now_seconds=(T0 + 11_000) / 1000))["movement"]
    assert (movement["partitions_done"], movement["partitions_total"]) == (1, 2)
    assert movement["bytes_moved"] == size and movement["bytes_to_move"] == 3 * size  # t-1 adds two
    assert 0 < movement["fraction"] < 1
    topic = cluster.topics_by_name["t"]
    gone = decide(second.state, BatchInputs(3, T0 + 12_000, (topic_event(topic, T0 + 12_000, deleted=True),)), POLICY)
    assert not gone.state.reassignments  # t-1 dropped with its topic: the movement is over
    assert gone.state.replication_meter == ReplicationMeter()


def test_a_reassignment_dropped_with_its_topic_counts_as_ended_while_others_move():
    cluster = simple_cluster(6, {"t": (1, 3), "u": (1, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), POLICY).state
    tu = TopicPartition("u", 0)
    moving = decide(state, BatchInputs(1, T0 + 1000, requests=(
        reassign({A: (0, 1, 3), tu: (3, 4, 5)}, T0 + 1000, "r1"),)), POLICY)
    assert set(moving.state.reassignments) == {A, tu}
    deleted = topic_event(cluster.topics_by_name["u"], T0 + 2000, deleted=True)
    gone = decide(moving.state, BatchInputs(2, T0 + 2000, (deleted,)), POLICY)
    assert set(gone.state.reassignments) == {A}
    meter = gone.state.replication_meter
    assert (meter.finished, meter.finished_steps) == (1, 0) and meter.since_ms == T0 + 1000


def test_a_rebuilt_throttle_marker_is_cleared_only_once_kafka_moves_none_of_its_partitions():
    """A state rebuilt from Kafka after the store was lost (`streams.store_recovery`) carries the
    marker of the throttled steps published, with no reassignment of ours: Kafka's own view of
    the move (an external move now) holds the clear back, its end lets it go."""
    policy = replace(POLICY, throttle_bytes_per_sec=10_000_000)
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    state = state.with_changes(open_alerts=state.open_alerts | {compute_throttle_marker([1, 2, 3, 4], [("t", 1)])})
    moving_b = replace(cluster.partition(B), replicas=(4, 1, 2, 3), adding=(4,), removing=(3,), leader_epoch=1)
    moving = decide(state, BatchInputs(1, T0 + 1000, (partition_event(moving_b, T0 + 1000),)), policy)
    assert B in moving.state.external_moves and not commands(moving, "ClearThrottle"), "Kafka still moves t-1"
    done_b = replace(cluster.partition(B), replicas=(4, 1, 2), isr=(4, 1, 2), leader_epoch=2)
    done = decide(moving.state, BatchInputs(2, T0 + 2000, (partition_event(done_b, T0 + 2000),)), policy)
    (clear,) = commands(done, "ClearThrottle")
    assert clear["payload"][1]["broker_ids"] == [1, 2, 3, 4]
    assert not any(k.startswith("Throttle:") for k in done.state.open_alerts)
