"""Operator requests (SPEC 5.4, 7): validation codes, cancel and revert, modes, config, approvals."""

from __future__ import annotations

import pytest
from handler_builders import (
    T0,
    Loop,
    alerts,
    assert_encodes,
    cluster_events,
    commands,
    reassign,
    request,
    simple_cluster,
    tick,
)

from handlers.micro_batch import BatchInputs
from handlers.decide import decide
from tests.settings_defaults import default_policy
from state.model import ControllerState
from planning.model import TopicPartition

TP0 = TopicPartition("t", 0)


def bootstrapped(policy=default_policy(), cluster=None):
    cluster = cluster or simple_cluster(5, {"t": (4, 3)})
    decision = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy)
    return decision.state


@pytest.mark.parametrize("payload, code", [
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "nope", "partition": 0, "replicas": [0, 1, 2], "log_dirs": None}]}), "UNKNOWN_TOPIC_OR_PARTITION"),
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 99, "replicas": [0, 1, 2], "log_dirs": None}]}), "UNKNOWN_TOPIC_OR_PARTITION"),
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [0, 0, 2], "log_dirs": None}]}), "INVALID_REPLICA_ASSIGNMENT"),
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [0, 7, 2], "log_dirs": None}]}), "INVALID_REPLICA_ASSIGNMENT"),
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [], "log_dirs": None}]}), "INVALID_REPLICA_ASSIGNMENT"),
    (("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [-1, 2, 3], "log_dirs": None}]}), "INVALID_REPLICA_ASSIGNMENT"),
    (("Reassign", {"version": 1, "additional": False, "partitions": []}), "INVALID_REQUEST"),
    (("Cancel", {"topic": None, "partition": None, "keep": False}), "NO_REASSIGNMENT_IN_PROGRESS"),
    (("Cancel", {"topic": None, "partition": 3, "keep": False}), "INVALID_REQUEST"),
    (("Approve", {"proposal_id": "nope"}), "INVALID_REQUEST"),
    (("SetConfig", {"key": "no.such.key", "value": "1"}), "INVALID_CONFIG"),
    (("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": "0"}), "INVALID_CONFIG"),
    (("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": "x"}), "INVALID_CONFIG"),
    (("Decommission", {"broker_ids": [42]}), "INVALID_REPLICA_ASSIGNMENT"),
    (("Decommission", {"broker_ids": []}), "INVALID_REQUEST"),
    (("Rebalance", {"topics": ["nope"]}), "UNKNOWN_TOPIC_OR_PARTITION"),
    (("Explode", {}), "INVALID_REQUEST"),
    (("Reassign", {"partitions": [{"topic": "t"}]}), "INVALID_REQUEST"),
])
def test_an_invalid_request_is_rejected_with_its_code_and_nothing_else_changes(payload, code):
    state = bootstrapped()
    req = {"schema_version": 1, "event_time": T0 + 1000, "id": "bad-1", "key": "bad-1",
           "requested_by": "tests", "payload": payload}
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(req,)), default_policy())
    assert [(a["kind"], a["details"]["error_code"], a["subject"]) for a in alerts(decision)] == [
        ("RequestRejected", code, "bad-1")]
    assert len(decision.outbox) == 1
    assert decision.state.with_changes(last_batch=state.last_batch) == state
    assert_encodes(decision.outbox)


def test_reassign_without_additional_is_refused_while_others_run_and_joins_with_it():
    state = bootstrapped()
    first = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({TP0: (3, 4, 0)}, T0 + 1000, "r1"),)), default_policy())
    assert commands(first, "ReassignmentStep")
    tp1 = TopicPartition("t", 1)
    refused = decide(first.state, BatchInputs(2, T0 + 2000, requests=(reassign({tp1: (0, 3, 4)}, T0 + 2000, "r2"),)),
                     default_policy())
    assert alerts(refused, "RequestRejected")[0]["details"]["error_code"] == "REASSIGNMENT_IN_PROGRESS"
    joined = decide(first.state, BatchInputs(2, T0 + 2000, requests=(
        reassign({tp1: (0, 3, 4)}, T0 + 2000, "r2", additional=True),)), default_policy())
    assert set(joined.state.reassignments) == {TP0, tp1}
    assert joined.state.reassignments[TP0] == first.state.reassignments[TP0], "running work undisturbed"



def test_a_new_target_for_a_moving_partition_supersedes_it_and_the_plan_says_so():
    state = bootstrapped()
    first = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({TP0: (3, 4, 0)}, T0 + 1000, "r1"),)), default_policy())
    assert alerts(first, "PlanCreated")[0]["details"]["superseded"] == "0"
    tp1 = TopicPartition("t", 1)
    second = decide(first.state, BatchInputs(2, T0 + 2000, requests=(
        reassign({TP0: (4, 3, 0), tp1: (0, 3, 4)}, T0 + 2000, "r2", additional=True),)), default_policy())
    plan = alerts(second, "PlanCreated")[0]
    assert plan["details"]["superseded"] == "1" and plan["details"]["superseded_partitions"] == "t-0"
    assert "superseded" in plan["message"]
    record = second.state.reassignments[TP0]
    assert record.final_target == (4, 3, 0)
    assert record.in_flight == first.state.reassignments[TP0].in_flight, "the step in flight finishes first"
    assert record.reassignment_id == first.state.reassignments[TP0].reassignment_id
    assert not commands(second, "CancelReassignment")

def test_cancel_sends_cancel_reassignment_then_reverts_to_the_original_replicas():
    cluster = simple_cluster(6, {"t": (2, 3)}, size=10**9)
    loop = Loop.start(cluster, default_policy(max_replica_movements=1), bytes_per_sec=10**8)
    loop.step()
    original = loop.sim.partition(TP0).replicas
    loop.step([reassign({TP0: (3, 4, 5)}, loop.now_ms, "r1")])
    loop.run(40, until=lambda lp: lp.state.reassignments[TP0].steps_done >= 1
             and lp.state.reassignments[TP0].in_flight is not None)
    assert loop.sim.partition(TP0).replicas != original
    loop.sim.tick(2.0)
    cancel = loop.step([request("Cancel", {"topic": "t", "partition": 0, "keep": False}, loop.now_ms, "c1")])
    kinds = [c["payload"][0] for c in commands(cancel)]
    assert kinds[0] == "CancelReassignment", "the step in flight is cancelled in Kafka first"
    assert cancel.state.reassignments[TP0].state.value in ("cancelling", "reverting")
    loop.run(300, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert set(loop.sim.partition(TP0).replicas) == set(original)
    cancelled = [a for d in loop.decisions for a in alerts(d, "ReassignmentCancelled") if a["subject"] == "t-0"]
    assert cancelled and "original replicas" in cancelled[-1]["message"]
    revert_steps = [c for d in loop.decisions[-300:] for c in commands(d, "ReassignmentStep")]
    assert revert_steps, "the revert is stepped, not a single jump"


def test_a_step_that_completed_before_the_cancel_is_reverted_from_where_it_ended():
    # The executor answers the cancel NO_REASSIGNMENT_IN_PROGRESS; the revert step must get a new
    # number: the executor would not apply a second `r1/t-0:1:ReassignmentStep`.
    loop = Loop.start(simple_cluster(6, {"t": (2, 3)}), default_policy(max_replica_movements=1))
    loop.step()
    original = loop.sim.partition(TP0).replicas
    first = loop.step([reassign({TP0: (0, 1, 3)}, loop.now_ms, "r1")])
    assert [c["id"] for c in commands(first, "ReassignmentStep")] == ["r1/t-0:1:ReassignmentStep"]
    loop.sim.tick(10.0)
    assert loop.sim.partition(TP0).replicas == (0, 1, 3) and not loop.sim.reassigning()
    cancel = loop.step([request("Cancel", {"topic": "t", "partition": 0, "keep": False}, loop.now_ms, "c1")])
    assert [c["id"] for c in commands(cancel)] == ["r1/t-0:1:CancelReassignment", "r1/t-0:2:ReassignmentStep"]
    assert commands(cancel, "ReassignmentStep")[0]["payload"][1]["adding"] == [2]
    loop.run(60, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert set(loop.sim.partition(TP0).replicas) == set(original)
    cancelled = [a for d in loop.decisions for a in alerts(d, "ReassignmentCancelled") if a["subject"] == "t-0"]
    assert cancelled and "original replicas" in cancelled[-1]["message"]


def test_cancel_with_keep_stops_where_it_is():
    loop = Loop.start(simple_cluster(6, {"t": (2, 3)}, size=10**9), default_policy(), bytes_per_sec=10**8)
    loop.step()
    loop.step([reassign({TP0: (3, 4, 5)}, loop.now_ms, "r1")])
    loop.run(40, until=lambda lp: lp.state.reassignments[TP0].steps_done >= 1)
    where = loop.sim.partition(TP0).replicas
    loop.step([request("Cancel", {"topic": None, "partition": None, "keep": True}, loop.now_ms, "c1")])
    loop.run(60, until=lambda lp: lp.idle())
    assert loop.idle()
    assert set(loop.sim.partition(TP0).replicas) == set(where)


def test_approve_mode_publishes_a_proposal_and_executes_it_on_approval():
    policy = default_policy(mode="approve", broker_add_grace_seconds=0)
    loop = Loop.start(simple_cluster(3, {"t": (6, 2)}), policy)
    loop.step()
    loop.step([request("Rebalance", {"topics": []}, loop.now_ms, "rb-1")])
    decom = loop.step([request("Decommission", {"broker_ids": [2]}, loop.now_ms, "dc-1")])
    ready = alerts(decom, "ProposalReady")
    assert len(ready) == 1 and not commands(decom)
    assert "dc-1" in loop.state.proposals
    loop.sim.tick(1.0)
    go = loop.step([request("Approve", {"proposal_id": "dc-1"}, loop.now_ms, "ap-1")])
    assert commands(go, "ReassignmentStep") and alerts(go, "PlanCreated")
    assert not loop.state.proposals
    loop.run(600, until=lambda lp: lp.idle())
    assert all(2 not in p.replicas for p in loop.sim.snapshot().partitions())


def test_observe_mode_alerts_but_never_commands():
    policy = default_policy(mode="observe", broker_add_grace_seconds=0, broker_failure_grace_seconds=0)
    loop = Loop.start(simple_cluster(4, {"t": (8, 2)}), policy)
    loop.step()
    loop.sim.kill_broker(3)
    kinds = set()
    for reqs in ([], [request("Decommission", {"broker_ids": [1]}, loop.now_ms, "d1")],
                 [reassign({TP0: (1, 2)}, loop.now_ms, "r1")], []):
        decision = loop.step(reqs)
        assert not commands(decision)
        kinds |= {a["kind"] for a in alerts(decision)}
        loop.sim.tick(1.0)
    assert {"BrokerFailed", "PlanCreated"} <= kinds
    assert not loop.state.reassignments


def test_set_config_changes_limits_for_later_refills_never_for_steps_in_flight():
    state = bootstrapped(cluster=simple_cluster(8, {"t": (8, 2)}, size=10**9))
    targets = {TopicPartition("t", n): ((n + 4) % 8, (n + 5) % 8) for n in range(8)}
    policy = default_policy(max_partition_movements=4, max_movements_per_broker=8, max_leader_movements=8)
    first = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign(targets, T0 + 1000, "r1"),)), policy)
    assert len(commands(first, "ReassignmentStep")) == 4
    lower = request("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": "1"},
                    T0 + 2000, "cfg-1")
    second = decide(first.state, BatchInputs(2, T0 + 2000, requests=(lower,)), policy)
    assert not commands(second), "nothing in flight is cancelled, nothing new starts"
    in_flight = [r for r in second.state.reassignments.values() if r.in_flight]
    assert len(in_flight) == 4
    assert second.state.config == {"reassignment.max.concurrent.partition.movements": "1"}
    reset = request("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": None},
                    T0 + 3000, "cfg-2")
    third = decide(second.state, BatchInputs(3, T0 + 3000, requests=(reset,)), policy)
    assert third.state.config == {}


def test_tick_only_moves_time():
    state = bootstrapped()
    decision = decide(state, BatchInputs(1, T0 + 5000, requests=(tick(T0 + 5000),)), default_policy())
    assert decision.outbox == ()
    assert decision.state.with_changes(last_batch=state.last_batch) == state
