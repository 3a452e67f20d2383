"""A step the executor could not apply for a transient reason (a broker down, restarting or not
answering: the describe configs of its throttle, the reassignment itself) is retried quietly: no
alert per attempt, one alert for the partition when the retries are given up
(`handlers.results`, RULES). Other failures keep their one alert at once."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from handler_builders import T0, alerts, cluster_events, commands, reassign, simple_cluster

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from handlers.results import RETRIED_STEP_ERRORS
from planning.model import TopicPartition
from state.model import ControllerState
from tests.settings_defaults import default_policy

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
POLICY = default_policy(max_partition_movements=10, max_movements_per_broker=10, max_leader_movements=10)
# What the executor reports when a broker a step touches is down (`runtime.clients.kafka_admin`
# translates kafka-python's errors so): not reachable, not ready, gone from the metadata, silent.
DEAD_BROKER_ERRORS = ("KAFKA_CONNECTION", "NODE_NOT_READY", "UNKNOWN_BROKER_ID", "BROKER_NOT_AVAILABLE",
                      "KAFKA_TIMEOUT", "REQUEST_TIMED_OUT", "CONNECTION_ERROR")


def started(policy):
    """t-0 (0,1,2) -> (0,1,3) and t-1 (1,2,3) -> (4,5,1), their first steps in flight."""
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    return decide(state, BatchInputs(1, T0 + 1000, requests=(
        reassign({A: (0, 1, 3), B: (4, 5, 1)}, T0 + 1000, "r1"),)), policy)


def step_of(decision, tp) -> dict:
    (step,) = [c for c in commands(decision, "ReassignmentStep") if c["key"] == f"{tp.topic}-{tp.partition}"]
    return step


def failed(step: dict, code: str, at_ms: int, message: str | None = None) -> dict:
    return {"schema_version": 1, "event_time": at_ms, "id": f"res-{step['id']}", "key": step["key"],
            "command_id": step["id"], "command_kind": "ReassignmentStep", "epoch": 0,
            "reassignment_id": step["reassignment_id"], "step": step["step"], "ok": False,
            "error_code": code, "message": message or f"{code} from broker 3"}


def describe_configs_failed(step: dict, at_ms: int) -> dict:
    """The result the executor wrote in the flapping-broker run: the step's throttle could not be
    read from the broker that had just been killed."""
    return failed(step, "KAFKA_CONNECTION", at_ms,
                  "describe configs ['leader.replication.throttled.rate', 'follower.replication.throttled.rate'] "
                  "of brokers [0, 1, 2, 3] and topics ['t']: KAFKA_CONNECTION: Connection refused (broker 3)")


@settings(max_examples=40, deadline=None)
@given(retries=st.integers(min_value=0, max_value=4), codes=st.data())
def test_transient_failures_raise_one_alert_for_the_partition_when_given_up(retries, codes):
    """However many times the step is retried, the partition's only alert is the one that gives
    it up: ReassignmentStalled (ERROR) with the count and the last error; every retry is a new
    command; the other partition's step is untouched."""
    policy = replace(POLICY, step_retry_max=retries)
    decision = started(policy)
    state, now, batch = decision.state, T0 + 2000, 2
    step, ids, seen = step_of(decision, A), set(), []
    while A in state.reassignments:
        ids.add(step["id"])
        code = codes.draw(st.sampled_from(sorted(RETRIED_STEP_ERRORS)), label="error")
        decision = decide(state, BatchInputs(batch, now, command_results=(failed(step, code, now),)), policy)
        seen += [a for a in alerts(decision) if a["subject"] == "t-0"]
        state, batch = decision.state, batch + 1
        record = state.reassignments.get(A)
        if record is None:
            break
        assert record.in_flight is None and record.last_error == f"{code} from broker 3"
        now = math.ceil(record.retry_at * 1000)
        decision = decide(state, BatchInputs(batch, now), policy)
        seen += [a for a in alerts(decision) if a["subject"] == "t-0"]
        state, batch, step = decision.state, batch + 1, step_of(decision, A)
    (given_up,) = seen
    assert (given_up["kind"], given_up["severity"]) == ("ReassignmentStalled", "ERROR")
    assert f"{retries + 1} times in a row" in given_up["message"] and f"{code} from broker 3" in given_up["message"]
    assert len(ids) == retries + 1, "every retry is a command the executor has not seen"
    assert state.reassignments[B] == started(policy).state.reassignments[B]


@given(code=st.sampled_from(DEAD_BROKER_ERRORS))
@settings(max_examples=len(DEAD_BROKER_ERRORS), deadline=None)
def test_a_step_failing_on_a_dead_broker_is_retried_without_an_alert(code):
    """The errors a down broker gives are all worth retrying: the step waits for its retry (10 s),
    and the decision says nothing."""
    first = started(POLICY)
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(
        failed(step_of(first, A), code, T0 + 2000),)), POLICY)
    assert not alerts(decision)
    record = decision.state.reassignments[A]
    assert (record.failed_attempts, record.retry_at) == (1, (T0 + 2000) / 1000 + 10)


def test_a_flapping_broker_that_fails_each_step_once_raises_no_alert():
    """The flapping-broker run: the steps of both partitions fail once (describe configs of the
    killed broker), their retries are new commands after 10 s, and nothing is alerted."""
    first = started(POLICY)
    now = T0 + 2000
    results = tuple(describe_configs_failed(step_of(first, tp), now) for tp in (A, B))
    decision = decide(first.state, BatchInputs(2, now, command_results=results), POLICY)
    assert not alerts(decision) and not commands(decision, "ReassignmentStep")
    assert all("describe configs" in decision.state.reassignments[tp].last_error for tp in (A, B))
    retried = decide(decision.state, BatchInputs(3, now + 10_000), POLICY)
    assert not alerts(retried)
    assert {c["key"] for c in commands(retried, "ReassignmentStep")} == {"t-0", "t-1"}
    assert {c["id"] for c in commands(retried, "ReassignmentStep")}.isdisjoint(
        {c["id"] for c in commands(first, "ReassignmentStep")})


def test_a_failure_retrying_cannot_fix_is_still_alerted_at_once():
    first = started(POLICY)
    decision = decide(first.state, BatchInputs(2, T0 + 2000, command_results=(
        failed(step_of(first, A), "POLICY_VIOLATION", T0 + 2000),)), POLICY)
    (alert,) = alerts(decision)
    assert (alert["kind"], alert["severity"], alert["subject"]) == ("CommandFailed", "ERROR", "t-0")
    assert "broker-side policy" in alert["message"] and A not in decision.state.reassignments
