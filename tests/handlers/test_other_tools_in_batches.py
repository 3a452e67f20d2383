"""Moves of other tools through whole micro-batches (issue 19 item 2): the state keeps them, the
alerts say so once per move, `list`/`status` show them, and a step of ours another tool cancelled
is re-planned at the next observation."""

from __future__ import annotations

import json
from dataclasses import replace

from handler_builders import (T0, alerts, cluster_events, commands, partition_event, reassign, request,
                              simple_cluster, tick)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handlers.plans import compute_plan
from planning.placement.placer import Goal
from schemas.errors import ReassignerError

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from planning.model import TopicPartition
from planning.movement.external import compute_external_moves
from reassigner.operator.views import compute_external_rows, compute_reassignment_rows, compute_status, status_to_json
from planning.movement.completion import APPLIED_VIEW_MARGIN_MS
from state.stored_forms import (external_move_from_storage, meta_to_storage, reassignment_from_storage,
                                reassignment_to_storage)
from state.model import ControllerState
from tests.settings_defaults import default_policy

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
POLICY = default_policy(max_partition_movements=10, max_movements_per_broker=10, max_leader_movements=10)


class Run:
    """Batches in a row, each checked: the external moves kept from the changes are those found
    from nothing."""

    def __init__(self):
        self.cluster = simple_cluster(6, {"t": (2, 3)})  # t-0 (0, 1, 2), t-1 (1, 2, 3)
        self.batch = 0
        self.decision = None
        self.state = ControllerState()
        self.step(cluster_events(self.cluster, T0))

    def step(self, events=(), requests=(), at=None):
        at = at if at is not None else T0 + 1000 * self.batch
        self.decision = decide(self.state, BatchInputs(self.batch, at, tuple(events), requests=tuple(requests)),
                               POLICY)
        self.batch += 1
        self.state = self.decision.state
        full = compute_external_moves({}, self.state.cluster, self.state.reassignments, 0, None).moves
        assert set(self.state.external_moves) == set(full)
        return self.decision

    def applied(self, at):
        """The executor's ok CommandResult of the step in flight of t-0, stamped `at`."""
        record = self.state.reassignments[A]
        number = record.in_flight.number
        result = {"schema_version": 1, "event_time": at, "id": f"res-{number}", "key": "t-0",
                  "command_id": record.command_id("ReassignmentStep", number), "command_kind": "ReassignmentStep",
                  "epoch": 0, "reassignment_id": record.reassignment_id, "step": number, "ok": True,
                  "error_code": None, "message": ""}
        decision = decide(self.state, BatchInputs(self.batch, at, command_results=(result,)), POLICY)
        self.batch += 1
        self.state, self.decision = decision.state, decision
        return decision

    def show(self, tp, at=None, **fields):
        """A PartitionState event of `tp` with `fields` changed (the epoch bumped)."""
        old = self.state.cluster.partition(tp)
        new = replace(old, leader_epoch=old.leader_epoch + 1, **fields)
        return self.step([partition_event(new, at if at is not None else T0 + 1000 * self.batch)], at=at)


def test_a_move_of_another_tool_is_shown_alerted_once_and_a_plan_waits_on_it():
    run = Run()
    moving = run.show(A, replicas=(0, 1, 2, 4), adding=(4,), removing=(2,))  # kafka-reassign-partitions.sh
    (alert,) = alerts(moving, "ExternalReassignment")
    assert alert["severity"] == "INFO" and alert["subject"] == "t-0" and "another tool" in alert["message"]
    since = run.state.external_moves[A].since_ms
    assert run.step(requests=[tick(T0 + 1000 * run.batch)]) and not alerts(run.decision, "ExternalReassignment")
    planned = run.step(requests=[reassign({A: (3, 4, 5), B: (4, 5, 1)}, T0 + 1000 * run.batch, "r1")])
    assert [c["payload"][1]["partition"] for c in commands(planned, "ReassignmentStep")] == [1], "t-0 is held"
    (held,) = alerts(planned, "ExternalReassignment")
    assert held["severity"] == "WARNING" and "r1/t-0" in held["message"]
    assert run.state.waiting[A].startswith("moved by another tool")
    rows = {(r.topic, r.partition): r for r in compute_reassignment_rows(run.state, 1, None, POLICY)}
    assert rows[("t", 0)].waiting.startswith("moved by another tool")
    (row,) = compute_external_rows(run.state, now_seconds=since / 1000 + 30)
    assert (row.kind, row.adding, row.removing, row.held_by, row.age_seconds) == ("external", (4,), (2,), "r1/t-0", 30)
    assert status_to_json(compute_status(run.state, 1, None, POLICY))["external"][0]["partition"] == 0
    run.step(requests=[tick(T0 + 1000 * run.batch)])
    assert not alerts(run.decision, "ExternalReassignment"), "once per move"
    stored = json.loads(meta_to_storage(run.state)["external_moves"])
    assert dict(external_move_from_storage(m) for m in stored) == run.state.external_moves
    done = run.show(A, replicas=(0, 1, 4), isr=(0, 1, 4), adding=(), removing=())  # the other tool's move ends
    assert not run.state.external_moves
    assert [c["payload"][1]["partition"] for c in commands(done, "ReassignmentStep")] == [0], \
        "then the plan steps t-0 from where the other tool left it"


def started_run():
    run = Run()
    run.step(requests=[reassign({A: (0, 1, 3)}, T0 + 1000 * run.batch, "r1")])
    assert [c["id"] for c in commands(run.decision, "ReassignmentStep")] == ["r1/t-0:1:ReassignmentStep"]
    return run


def test_a_step_cancelled_by_another_tool_is_re_planned_at_the_next_observation():
    run = started_run()
    run.show(A, replicas=(0, 1, 2, 3), adding=(3,), removing=(2,))  # Kafka runs our step
    assert not run.state.external_moves and run.state.reassignments[A].in_flight.seen_in_kafka
    cancelled = run.show(A, replicas=(0, 1, 2), adding=(), removing=())  # kafka-reassign-partitions.sh --cancel
    (alert,) = alerts(cancelled, "ReassignmentInterrupted")
    assert alert["severity"] == "WARNING" and "cancelled by another tool" in alert["message"]
    assert alert["details"]["replicas"] == "[0, 1, 2]"
    assert [c["id"] for c in commands(cancelled, "ReassignmentStep")] == ["r1/t-0:2:ReassignmentStep"]
    assert not alerts(cancelled, "ReassignmentStalled")


def test_a_step_replaced_by_another_tool_waits_for_that_move():
    run = started_run()
    run.show(A, replicas=(0, 1, 2, 3), adding=(3,), removing=(2,))
    replaced = run.show(A, replicas=(0, 1, 2, 5), adding=(5,), removing=(2,))  # another tool's --execute
    assert alerts(replaced, "ReassignmentInterrupted") and not commands(replaced, "ReassignmentStep")
    (external,) = alerts(replaced, "ExternalReassignment")
    assert external["severity"] == "WARNING" and A in run.state.external_moves


def test_a_view_polled_before_our_step_reached_kafka_is_not_a_cancel():
    """The pre-submit race: the watcher polled after the decision (its event time is later than
    the step's start) but before the executor applied the step, and saw another tool's move,
    which our step then replaces in Kafka. Only a view that showed our step can tell that it
    ended; until then the step stays in flight."""
    run = started_run()
    step_at = run.state.reassignments[A].in_flight.started_at
    older = run.show(A, at=int(step_at * 1000) + 1, replicas=(0, 1, 2, 5), adding=(5,), removing=(2,))
    assert not alerts(older, "ReassignmentInterrupted") and not alerts(older, "ExternalReassignment")
    assert run.state.reassignments[A].in_flight.number == 1 and not run.state.external_moves
    ours = run.show(A, replicas=(0, 1, 2, 3), adding=(3,), removing=(2,))
    assert not alerts(ours, "ReassignmentInterrupted") and run.state.reassignments[A].in_flight.seen_in_kafka


# --- a step of ours cancelled or replaced before any poll showed it -----------------------------------


def test_a_step_cancelled_before_any_poll_showed_it_is_re_planned_at_the_first_view_after_the_apply():
    run = started_run()
    applied_at = T0 + 1000 * run.batch
    run.applied(applied_at)
    # kafka-reassign-partitions.sh --cancel right after the apply: the watcher never saw the step;
    # its next poll shows the replicas as before, with the epoch Kafka bumped for the cancel.
    cancelled = run.show(A, at=applied_at + APPLIED_VIEW_MARGIN_MS + 500)
    (alert,) = alerts(cancelled, "ReassignmentInterrupted")
    assert "cancelled by another tool" in alert["message"] and alert["details"]["replicas"] == "[0, 1, 2]"
    assert [c["id"] for c in commands(cancelled, "ReassignmentStep")] == ["r1/t-0:2:ReassignmentStep"]
    assert not alerts(cancelled, "ReassignmentStalled") and not run.state.external_moves


def test_the_view_may_come_before_the_executors_result():
    """The watcher's events and the executor's results travel on different topics: the view read
    after the apply may be decided in an earlier batch than the result that dates the apply."""
    run = started_run()
    applied_at = T0 + 1000 * run.batch
    early = run.show(A, at=applied_at + 3000)
    assert not alerts(early, "ReassignmentInterrupted") and run.state.reassignments[A].in_flight.number == 1
    told = run.applied(applied_at)
    assert alerts(told, "ReassignmentInterrupted")
    assert [c["id"] for c in commands(told, "ReassignmentStep")] == ["r1/t-0:2:ReassignmentStep"]


def test_a_poll_that_began_before_the_apply_is_no_view_of_the_step():
    run = started_run()
    applied_at = T0 + 1000 * run.batch + 5000
    run.show(A, at=applied_at - 1)  # began reading before the apply, published after it
    quiet = run.applied(applied_at)
    assert not alerts(quiet, "ReassignmentInterrupted") and run.state.reassignments[A].in_flight.number == 1


def test_a_step_replaced_before_any_poll_showed_it_waits_for_the_other_move():
    run = started_run()
    applied_at = T0 + 1000 * run.batch
    run.applied(applied_at)
    replaced = run.show(A, at=applied_at + 2000, replicas=(0, 1, 2, 5), adding=(5,), removing=(2,))
    (alert,) = alerts(replaced, "ReassignmentInterrupted")
    assert "replaced by another tool" in alert["message"] and not commands(replaced, "ReassignmentStep")
    (external,) = alerts(replaced, "ExternalReassignment")
    assert external["severity"] == "WARNING" and A in run.state.external_moves


def test_a_step_completed_before_any_poll_showed_it_is_completed():
    run = started_run()
    applied_at = T0 + 1000 * run.batch
    run.applied(applied_at)
    done = run.show(A, at=applied_at + 2000, replicas=(0, 1, 3), isr=(0, 1, 3))
    assert not alerts(done, "ReassignmentInterrupted") and alerts(done, "ReassignmentCompleted")


def test_the_apply_and_view_times_are_stored_with_the_step():
    run = started_run()
    applied_at = T0 + 1000 * run.batch
    run.show(A, at=applied_at - 10)
    run.applied(applied_at)
    record = run.state.reassignments[A]
    assert (record.in_flight.applied_at_ms, record.in_flight.viewed_at_ms) == (applied_at, applied_at - 10)
    assert reassignment_from_storage(A, reassignment_to_storage(record)) == record
    older = json.loads(reassignment_to_storage(record))
    older["in_flight"] = older["in_flight"][:5]  # a state written before these times were kept
    loaded = reassignment_from_storage(A, json.dumps(older))
    assert loaded.in_flight == replace(record.in_flight, applied_at_ms=None, viewed_at_ms=None)


# --- a plan made while another tool moves a partition ------------------------------------------------


def test_a_plan_made_while_another_tool_moves_a_partition_starts_from_that_moves_target_and_waits():
    run = Run()
    run.show(A, replicas=(0, 1, 2, 4), adding=(4,), removing=(2,))  # another tool: (0, 1, 2) -> (0, 1, 4)
    planned = run.step(requests=[request("Decommission", {"broker_ids": [0]}, T0 + 1000 * run.batch, "d1")])
    record = run.state.reassignments[A]
    assert record.original_replicas == (0, 1, 4), "from where the other tool's move takes it"
    assert len(record.final_target) == 3 and 0 not in record.final_target, \
        f"{record.final_target}: planned from Kafka's combined list"
    assert not [c for c in commands(planned, "ReassignmentStep") if c["key"] == "t-0"], "held"
    assert run.state.waiting[A].startswith("moved by another tool")
    (plan,) = alerts(planned, "PlanCreated")
    assert plan["details"]["waiting_on_other_tools"] == "1" and "another tool is moving" in plan["message"]
    (held,) = alerts(planned, "ExternalReassignment")
    assert held["severity"] == "WARNING" and "d1/t-0" in held["message"]
    done = run.show(A, replicas=(0, 1, 4), isr=(0, 1, 4), adding=(), removing=())  # the other tool's move ends
    (step,) = [c for c in commands(done, "ReassignmentStep") if c["key"] == "t-0"]
    assert set(step["payload"][1]["removing"]) <= {0, 1, 4}, "then it steps from where that move left it"


def test_a_plan_that_leaves_the_partition_where_the_other_tool_takes_it_makes_no_reassignment():
    run = Run()
    run.show(A, replicas=(0, 1, 2, 3), adding=(3,), removing=(2,))  # another tool: (0, 1, 2) -> (0, 1, 3)
    planned = run.step(requests=[reassign({A: (0, 1, 3)}, T0 + 1000 * run.batch, "r1")])
    assert A not in run.state.reassignments and not commands(planned, "ReassignmentStep")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_plan_made_while_other_tools_move_partitions_is_the_plan_of_where_those_moves_end(data):
    """Whatever other tools are moving, a plan (a drain, a rebalance) is the one made on the
    cluster where their moves ended: never one planned from Kafka's combined replica lists."""
    cluster = simple_cluster(6, {"t": (6, 3), "u": (4, 2)})
    running, ended = [], []
    for p in cluster.partitions():
        rf = len(p.replicas)
        target = data.draw(st.none() | st.permutations(range(6)).map(lambda order, rf=rf: tuple(order[:rf])))
        if target is None or set(target) == set(p.replicas):
            running.append(p)
            ended.append(p)
            continue
        removing = tuple(b for b in p.replicas if b not in target)
        adding = tuple(b for b in target if b not in p.replicas)
        running.append(replace(p, replicas=target + removing, adding=adding, removing=removing))
        ended.append(replace(p, replicas=target, isr=target, leader=target[0], log_dirs=("/d0",) * rf))
    goal = data.draw(st.sampled_from([Goal(drain_brokers=frozenset({data.draw(st.integers(0, 5))}), heal=False,
                                           rebalance=False), Goal()]))
    try:
        _, after, _ = compute_plan(ControllerState(cluster=cluster.with_partitions(ended)), POLICY, goal)
    except ReassignerError:
        return
    _, during, _ = compute_plan(ControllerState(cluster=cluster.with_partitions(running)), POLICY, goal)
    assert during == after
    assert all(len(t) == len(cluster.partition(tp).replicas) for tp, t in during.items())
