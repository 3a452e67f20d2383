"""`request ...` answers (issue 19 items 3-4), the pure parts: the new requests' builders, the
local checks against the cluster's metadata (the pipeline's own guards), the verdict, a
proposal's moves and Kafka's JSON, and why a waiting partition waits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from handlers.micro_batch import BatchInputs
from handlers.decide import decide
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.partition_steps import compute_next_step
from planning.movement.reassignment import Reassignment, StepInFlight
from planning.snapshot import reassignment_from_json
from schemas.errors import InvalidInputError, InvalidReplicaAssignmentError, UnknownTopicOrPartitionError
from reassigner.operator.requests import (
    build_cancel_request, build_decommission_request, build_pause_request, build_reassign_request,
    build_rebalance_request, build_recommission_request, build_reject_request, compute_verdict,
    describe_request, validate_locally, verdict_to_json,
)
from reassigner.operator.views import (compute_proposal_view, compute_reassignment_rows,
                                       proposal_to_reassignment_json)
from schemas.codec import decode, encode
from state.model import ControllerState, Proposal
from tests.settings_defaults import default_policy

ENVELOPE = {"request_id": "r-1", "now_ms": 1_700_000_000_000, "requested_by": "ops@host"}
CLUSTER = Cluster(tuple(Broker(b, f"r{b}") for b in (1, 2, 3, 4)),
                  (Topic("orders", tuple(PartitionState("orders", p, (1, 2, 3), (1, 2, 3), 1, size_bytes=10)
                                         for p in range(2))),))


def reassign(replicas, topic="orders", partition=0):
    return build_reassign_request({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas}]}, "plan.json", additional=False, **ENVELOPE)


# --- builders -----------------------------------------------------------------------------------


def test_reject_and_recommission_travel_as_actions_with_a_tick_payload():
    for request, kind in ((build_reject_request(" p-1 ", **ENVELOPE), "Reject"),
                          (build_recommission_request([3, 1, 3], **ENVELOPE), "Recommission")):
        decoded = decode("Request", encode("Request", request))
        assert decoded["payload"] == ("Tick", {}) and decoded["action"]["kind"] == kind
        assert describe_request(request)["kind"] == kind
    assert build_reject_request("p-1", **ENVELOPE)["action"]["proposal_id"] == "p-1"
    assert build_recommission_request([3, 1, 3], **ENVELOPE)["action"]["broker_ids"] == [1, 3]


@pytest.mark.parametrize("build", [lambda: build_reject_request("  ", **ENVELOPE),
                                   lambda: build_recommission_request([], **ENVELOPE),
                                   lambda: build_recommission_request([-1], **ENVELOPE)])
def test_bad_reject_and_recommission_fail_at_once(build):
    with pytest.raises(InvalidInputError):
        build()


def test_pause_and_resume_are_the_paused_flag():
    assert build_pause_request(True, **ENVELOPE)["payload"] == ("SetConfig", {"key": "reassignment.paused", "value": "true"})
    assert build_pause_request(False, **ENVELOPE)["payload"][1]["value"] == "false"


# --- local checks: the pipeline's guards on the cluster's metadata --------------------------------


@pytest.mark.parametrize("request_, error", [
    (reassign([1, 2, 9]), InvalidReplicaAssignmentError),
    (reassign([1, 1, 2]), InvalidReplicaAssignmentError),
    (reassign([1, 2, 3, 4, 5]), InvalidReplicaAssignmentError),
    (reassign([1, 2, 3], topic="nope"), UnknownTopicOrPartitionError),
    (reassign([1, 2, 3], partition=7), UnknownTopicOrPartitionError),
    (build_decommission_request([9], **ENVELOPE), InvalidReplicaAssignmentError),
    (build_recommission_request([9], **ENVELOPE), InvalidReplicaAssignmentError),
    (build_rebalance_request(["nope"], **ENVELOPE), UnknownTopicOrPartitionError),
    (build_cancel_request("nope", None, False, **ENVELOPE), UnknownTopicOrPartitionError),
    (build_cancel_request("orders", 5, False, **ENVELOPE), UnknownTopicOrPartitionError),
])
def test_what_the_pipeline_would_refuse_is_refused_before_publishing(request_, error):
    with pytest.raises(error):
        validate_locally(request_, CLUSTER)


@pytest.mark.parametrize("request_", [reassign([4, 2, 3]), build_decommission_request([4], **ENVELOPE),
                                      build_rebalance_request([], **ENVELOPE),
                                      build_cancel_request("orders", 1, True, **ENVELOPE),
                                      build_reject_request("p-1", **ENVELOPE)])
def test_a_request_the_metadata_allows_passes(request_):
    validate_locally(request_, CLUSTER)


@given(st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=5))
def test_the_local_check_and_the_pipeline_agree_on_any_replica_list(replicas):
    """One concept, one place: what the CLI refuses, the pipeline refuses with the same code."""
    request = reassign(replicas)
    try:
        validate_locally(request, CLUSTER)
        local = None
    except InvalidInputError as error:
        local = error.code
    state = ControllerState(cluster=CLUSTER)
    decision = decide(state, BatchInputs(0, 1_700_000_000_000, requests=({**request, "schema_version": 4},)),
                      default_policy())
    verdict = [a for a in (m.record for m in decision.outbox if m.schema == "Alert")
               if a["kind"] in ("RequestAccepted", "RequestRejected")][0]
    if local is not None:
        assert verdict["kind"] == "RequestRejected" and verdict["details"]["error_code"] == local
    else:
        assert verdict["kind"] == "RequestAccepted"


# --- the verdict ----------------------------------------------------------------------------------


def test_the_verdict_is_the_request_accepted_or_rejected_alert_about_the_request():
    accepted = {"kind": "RequestAccepted", "subject": "r-1", "message": "Reassign request r-1 accepted: moving 1",
                "details": {"plan_id": "r-1"}}
    rejected = {"kind": "RequestRejected", "subject": "r-1", "message": "request r-1 rejected: ...",
                "details": {"error_code": "INVALID_REPLICA_ASSIGNMENT"}}
    assert compute_verdict(accepted, "r-1").accepted
    assert compute_verdict(rejected, "r-1").error_code == "INVALID_REPLICA_ASSIGNMENT"
    assert compute_verdict(accepted, "r-2") is None
    assert compute_verdict({**accepted, "kind": "PlanCreated"}, "r-1") is None
    assert verdict_to_json(None, "r-1", 60)["verdict"] == "timed-out"
    assert verdict_to_json(compute_verdict(rejected, "r-1"), "r-1")["error_code"] == "INVALID_REPLICA_ASSIGNMENT"


# --- proposals: show ------------------------------------------------------------------------------


def test_a_proposal_shows_its_moves_and_kafkas_json_round_trips():
    proposal = Proposal("p-1", {TopicPartition("orders", 0): (4, 2, 3), TopicPartition("orders", 1): (1, 2, 4)},
                        "broker 4 added", 1_700_000_000_000)
    state = ControllerState(cluster=CLUSTER, proposals={"p-1": proposal})
    view = compute_proposal_view(state, "p-1", default_policy(proposal_expiry_seconds=3600))
    assert [(m.partition, m.adding, m.removing) for m in view.moves] == [(0, (4,), (1,)), (1, (4,), (3,))]
    assert view.replica_moves == 2 and view.expires_at_ms == 1_700_000_000_000 + 3_600_000
    document = json.loads(json.dumps(proposal_to_reassignment_json(view)))
    parsed = reassignment_from_json(document, "proposal")
    assert {tp: replicas for tp, (replicas, _dirs) in parsed.items()} == dict(proposal.targets)
    with pytest.raises(InvalidInputError, match="p-1"):
        compute_proposal_view(state, "nope")


# --- why a partition waits -------------------------------------------------------------------------


def waiting_state(config=None) -> ControllerState:
    """orders-0 has a step in flight through broker 4; orders-1 wants a step through broker 4 too."""
    step = compute_next_step((1, 2, 3), (4, 2, 3), (1, 2, 3), 1, 1)
    flying = Reassignment("r/orders-0", TopicPartition("orders", 0), (1, 2, 3), (4, 2, 3),
                          in_flight=StepInFlight(step, 1, 1_700_000_000.0))
    waiting = Reassignment("r/orders-1", TopicPartition("orders", 1), (1, 2, 3), (1, 2, 4))
    return ControllerState(cluster=CLUSTER, reassignments={flying.tp: flying, waiting.tp: waiting},
                           config=config or {})


def reasons(state, policy) -> dict:
    return {r.partition: r.waiting for r in compute_reassignment_rows(state, 1, 1_700_000_010.0, policy)}


def test_a_waiting_partition_says_which_limit_holds_it():
    assert reasons(waiting_state(), default_policy(max_movements_per_broker=1)) == {
        0: None, 1: "waits for a slot: broker 4 has 1 movements in flight, limit B = 1"}
    assert "limit P = 1" in reasons(waiting_state(), default_policy(max_partition_movements=1))[1]


def test_the_pipelines_stored_reason_and_pause_and_observe_come_first():
    stored = waiting_state().with_changes(waiting={TopicPartition("orders", 1): "step leaves 1 in-sync replicas"})
    assert reasons(stored, default_policy())[1] == "step leaves 1 in-sync replicas"
    assert reasons(waiting_state({"reassignment.paused": "true"}), default_policy())[1].startswith("paused")
    assert reasons(waiting_state({"mode": "observe"}), default_policy())[1].startswith("mode observe")
    assert reasons(waiting_state(), None)[1] == "its next step starts at the next decision"


# --- the CLI, through the real entry point (no cluster needed) -------------------------------------


def test_the_new_request_commands_are_listed_and_documented():
    from operator_helpers import run_cli

    result = run_cli("request", "--help")
    assert result.returncode == 0
    for command in ("reject", "show", "recommission", "pause", "resume"):
        assert command in result.stdout
    assert "--no-wait" in run_cli("request", "rebalance", "--help").stdout


@pytest.mark.parametrize("arguments, says", [
    (("request", "reject", " ", "--bootstrap-server", "127.0.0.1:1"), "[INVALID_REQUEST] reject: give the proposal id"),
    (("request", "recommission", "--broker", "-1", "--bootstrap-server", "127.0.0.1:1"), "broker ids are 0 or more"),
    (("request", "recommission"), "Missing option '--broker'"),
    (("request", "pause", "--timeout", "0"), "Invalid value for '--timeout'"),
    (("request", "show"), "Missing argument 'proposal_id'"),
])
def test_new_request_mistakes_fail_in_one_line_with_exit_2(arguments, says):
    from operator_helpers import run_cli

    result = run_cli(*arguments)
    assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr, result.stderr
