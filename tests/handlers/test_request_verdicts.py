"""Issue 19 items 3-4 in the pipeline: one verdict per request, proposals rejected and expired,
recommission, pause/resume, and why a waiting partition waits."""

from __future__ import annotations

from dataclasses import replace

import pytest
from handler_builders import T0, Loop, alerts, assert_encodes, cluster_events, commands, reassign, request, simple_cluster
from hypothesis import given, strategies as st

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from handlers.proposals import compute_expired
from handlers.waiting import MAX_WAITING_REASONS, compute_waiting
from planning.model import TopicPartition
from planning.movement.batches import Deferral
from planning.movement.reassignment import Reassignment
from state.model import ControllerState, Proposal
from tests.settings_defaults import default_policy

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def bootstrapped(policy=None, cluster=None) -> ControllerState:
    cluster = cluster or simple_cluster(5, {"t": (4, 3)})
    return decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy or default_policy()).state


def action(kind: str, at_ms: int, request_id: str, **fields) -> dict:
    req = request("Tick", {}, at_ms, request_id)
    return {**req, "action": {"kind": kind, "proposal_id": fields.get("proposal_id"),
                              "broker_ids": fields.get("broker_ids", [])}}


def verdicts(decision, request_id: str) -> list[dict]:
    return [a for a in alerts(decision) if a["subject"] == request_id
            and a["kind"] in ("RequestAccepted", "RequestRejected")]


# --- one verdict per request ------------------------------------------------------------------


@pytest.mark.parametrize("kind, fields", [
    ("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [3, 4, 0], "log_dirs": None}]}),
    ("Reassign", {"version": 1, "additional": False, "partitions": [  # already there: nothing to do
        {"topic": "t", "partition": 0, "replicas": [0, 1, 2], "log_dirs": None}]}),
    ("Rebalance", {"topics": []}),
    ("Decommission", {"broker_ids": [4]}),
    ("SetConfig", {"key": "reassignment.paused", "value": "true"}),
])
def test_every_accepted_request_gets_one_request_accepted_alert_last(kind, fields):
    state = bootstrapped()
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(request(kind, fields, T0 + 1000, "r-9"),)),
                      default_policy())
    [verdict] = verdicts(decision, "r-9")
    assert verdict["kind"] == "RequestAccepted" and verdict["details"]["kind"] == kind
    request_alerts = [a for a in alerts(decision) if a["subject"] == "r-9"]
    assert request_alerts[-1] is verdict  # after the alerts of what it did, whose text it repeats
    for earlier in request_alerts[:-1]:
        assert earlier["message"] in verdict["message"]
    assert_encodes(decision.outbox)


def test_a_reassign_verdict_carries_the_plan_summary():
    decision = decide(bootstrapped(), BatchInputs(1, T0 + 1000, requests=(reassign({TP0: (3, 4, 0)}, T0 + 1000, "r-1"),)),
                      default_policy())
    [verdict] = verdicts(decision, "r-1")
    assert verdict["details"]["plan_id"] == "r-1" and verdict["details"]["executed"] == "true"
    assert "moving" in verdict["message"] and verdict["details"]["alerts"] == "PlanCreated"


def test_ticks_get_no_verdict():
    decision = decide(bootstrapped(), BatchInputs(1, T0 + 1000, requests=(request("Tick", {}, T0 + 1000, "tick-1"),)),
                      default_policy())
    assert not alerts(decision)


def test_an_unknown_action_kind_is_rejected_as_an_invalid_request():
    state = bootstrapped()
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(action("Explode", T0 + 1000, "x-1"),)), default_policy())
    [verdict] = verdicts(decision, "x-1")
    assert verdict["kind"] == "RequestRejected" and verdict["details"]["error_code"] == "INVALID_REQUEST"
    assert decision.state.with_changes(last_batch=state.last_batch) == state


# --- proposals: reject, expiry ------------------------------------------------------------------


def with_proposal(state: ControllerState, proposal_id: str = "p-1", created_at_ms: int = T0) -> ControllerState:
    return state.with_changes(proposals={proposal_id: Proposal(proposal_id, {TP0: (3, 4, 0)}, "broker 4 added",
                                                               created_at_ms)})


def test_reject_drops_the_proposal_and_says_so():
    state = with_proposal(bootstrapped(default_policy(mode="approve")))
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(action("Reject", T0 + 1000, "rj-1", proposal_id="p-1"),)),
                      default_policy(mode="approve"))
    assert not decision.state.proposals and not commands(decision)
    [rejected] = alerts(decision, "ProposalRejected")
    assert rejected["subject"] == "p-1" and rejected["details"]["request_id"] == "rj-1"
    assert verdicts(decision, "rj-1")[0]["kind"] == "RequestAccepted"
    assert_encodes(decision.outbox)


def test_rejecting_an_unknown_proposal_is_refused_and_names_the_waiting_ones():
    state = with_proposal(bootstrapped())
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(action("Reject", T0 + 1000, "rj-2", proposal_id="nope"),)),
                      default_policy())
    [verdict] = verdicts(decision, "rj-2")
    assert verdict["kind"] == "RequestRejected" and "p-1" in verdict["message"]
    assert "p-1" in decision.state.proposals


def test_a_proposal_expires_after_the_setting_and_not_before():
    policy = default_policy(mode="approve", proposal_expiry_seconds=60)
    state = with_proposal(bootstrapped(policy))
    early = decide(state, BatchInputs(1, T0 + 59_999, requests=(request("Tick", {}, T0 + 59_999, "t1"),)), policy)
    assert "p-1" in early.state.proposals and not alerts(early, "ProposalExpired")
    late = decide(early.state, BatchInputs(2, T0 + 60_000, requests=(request("Tick", {}, T0 + 60_000, "t2"),)), policy)
    assert not late.state.proposals
    [expired] = alerts(late, "ProposalExpired")
    assert expired["subject"] == "p-1" and expired["severity"] == "WARNING"
    again = decide(late.state, BatchInputs(3, T0 + 61_000, requests=(request("Tick", {}, T0 + 61_000, "t3"),)), policy)
    assert not alerts(again, "ProposalExpired")  # once


@given(ages=st.lists(st.integers(min_value=0, max_value=10**9), max_size=20),
       expiry=st.floats(min_value=0.001, max_value=10**6, allow_nan=False))
def test_exactly_the_proposals_at_least_as_old_as_the_expiry_expire(ages, expiry):
    now = 2 * 10**9
    proposals = {f"p{i}": Proposal(f"p{i}", {}, "r", now - age) for i, age in enumerate(ages)}
    expired = compute_expired(proposals, now, expiry)
    assert expired == sorted(expired)
    for pid, proposal in proposals.items():
        assert (pid in expired) == (now - proposal.created_at_ms >= expiry * 1000)


def test_an_approve_names_the_request_in_the_plan_so_its_verdict_is_found():
    policy = default_policy(mode="approve")
    state = with_proposal(bootstrapped(policy))
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(request("Approve", {"proposal_id": "p-1"}, T0 + 1000, "ap-1"),)),
                      policy)
    [plan] = alerts(decision, "PlanCreated")
    assert plan["details"]["request_id"] == "ap-1"
    assert verdicts(decision, "ap-1")[0]["kind"] == "RequestAccepted"


# --- recommission -------------------------------------------------------------------------------


def test_recommission_undoes_a_decommission():
    policy = default_policy()
    state = bootstrapped(policy)
    drained = decide(state, BatchInputs(1, T0 + 1000, requests=(request("Decommission", {"broker_ids": [4]}, T0 + 1000, "dc-1"),)),
                     policy)
    assert drained.state.cluster.broker(4).draining
    back = decide(drained.state, BatchInputs(2, T0 + 2000, requests=(action("Recommission", T0 + 2000, "rc-1", broker_ids=[4]),)),
                  policy)
    assert not back.state.cluster.broker(4).draining
    [alert] = alerts(back, "BrokerRecommissioned")
    assert alert["subject"] == "rc-1" and int(alert["details"]["moving_off"]) >= 1  # the drain's moves go on
    assert verdicts(back, "rc-1")[0]["kind"] == "RequestAccepted"
    assert_encodes(back.outbox)


@pytest.mark.parametrize("brokers, code", [([2], "INVALID_REQUEST"), ([42], "INVALID_REPLICA_ASSIGNMENT"),
                                           ([], "INVALID_REQUEST")])
def test_recommission_of_a_broker_not_draining_or_unknown_is_refused(brokers, code):
    state = bootstrapped()
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(action("Recommission", T0 + 1000, "rc-2", broker_ids=brokers),)),
                      default_policy())
    [verdict] = verdicts(decision, "rc-2")
    assert verdict["kind"] == "RequestRejected" and verdict["details"]["error_code"] == code


# --- pause / resume -----------------------------------------------------------------------------


def test_pause_holds_new_steps_and_resume_lets_them_start():
    loop = Loop.start(simple_cluster(5, {"t": (4, 3)}), default_policy())
    loop.step()
    paused = loop.step([request("SetConfig", {"key": "reassignment.paused", "value": "true"}, loop.now_ms, "pause-1")])
    assert verdicts(paused, "pause-1")[0]["kind"] == "RequestAccepted"
    planned = loop.step([reassign({TP0: (3, 4, 0)}, loop.now_ms, "r-1")])
    assert alerts(planned, "PlanCreated") and not commands(planned, "ReassignmentStep")
    assert TP0 in loop.state.reassignments  # planned, waiting
    loop.sim.tick(5.0)
    assert not commands(loop.step(), "ReassignmentStep")
    resumed = loop.step([request("SetConfig", {"key": "reassignment.paused", "value": "false"}, loop.now_ms, "resume-1")])
    assert commands(resumed, "ReassignmentStep")


# --- why a partition waits ----------------------------------------------------------------------


def test_a_guard_refusal_is_kept_in_the_state_until_the_step_starts():
    cluster = simple_cluster(5, {"t": (4, 3)})
    busy = replace(cluster.partition(TP1), adding=(4,), replicas=(1, 2, 3, 4))  # another tool moves it
    cluster = cluster.with_partitions([busy])
    state = bootstrapped(cluster=cluster)
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(
        reassign({TP1: (1, 2, 0)}, T0 + 1000, "r-1"),)), default_policy())
    assert "Kafka shows the partition reassigning" in decision.state.waiting[TP1]


@given(st.lists(st.tuples(st.integers(0, 3), st.text(min_size=1, max_size=5)), max_size=30))
def test_waiting_reasons_are_the_first_refusal_of_active_reassignments_only(deferrals):
    active = {TopicPartition("t", p): Reassignment(f"x/t-{p}", TopicPartition("t", p), (0,), (1,))
              for p in (0, 1)}
    waiting = compute_waiting([Deferral(TopicPartition("t", p), why) for p, why in deferrals], active)
    assert set(waiting) <= set(active) and len(waiting) <= MAX_WAITING_REASONS
    for tp, why in waiting.items():
        assert why == next(w for p, w in deferrals if TopicPartition("t", p) == tp)
