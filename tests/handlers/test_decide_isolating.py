"""One input's failure is not the batch's (issue 14, item 2): when deciding a batch raises, the
inputs it fails on become dead letters and `BadEvent`s and the rest of the batch is applied.
A defect is injected into a handler for chosen records, as a real one would meet an odd input."""

from __future__ import annotations

import pytest
from handler_builders import T0, alerts, broker_event, cluster_events, request, simple_cluster

import handlers.decide as decide_module
from handlers.decide import decide, decide_isolating
from handlers.micro_batch import BadRecord, BatchInputs
from state.model import ControllerState
from tests.settings_defaults import default_policy

POLICY = default_policy()
CLUSTER = simple_cluster(4, {"t": (4, 3)})


def config(key: str, value: str, request_id: str) -> dict:
    return request("SetConfig", {"key": key, "value": value}, T0 + 10, request_id)


@pytest.fixture
def defect(monkeypatch):
    """Requests with the given ids, or all of a set together, make `handle_requests` raise."""
    poison: dict[str, object] = {"alone": set(), "together": set()}
    real = decide_module.handle_requests

    def handle_requests(context, requests):
        ids = {r["id"] for r in requests}
        if ids & poison["alone"] or (poison["together"] and poison["together"] <= ids):
            raise ZeroDivisionError("a defect met by an odd input")
        return real(context, requests)

    monkeypatch.setattr(decide_module, "handle_requests", handle_requests)
    return poison


def batch(requests) -> BatchInputs:
    origins = {("requests", i): BadRecord("p.requests", 0, 100 + i, f"raw-{i}".encode(), "")
               for i in range(len(requests))}
    return BatchInputs(1, T0 + 10, cluster_events(CLUSTER, T0), tuple(requests), origins=origins)


def test_the_input_a_batch_fails_on_is_dead_lettered_and_the_rest_applied(defect):
    defect["alone"] = {"poison"}
    requests = [config("throttle.bytes.per.sec", "1000", "a"), config("mode", "observe", "poison"),
                config("reassignment.max.concurrent.leader.movements", "4", "c")]
    with pytest.raises(ZeroDivisionError):
        decide(ControllerState(), batch(requests), POLICY)
    decision = decide_isolating(ControllerState(), batch(requests), POLICY)
    assert decision.state.config == {"throttle.bytes.per.sec": "1000",
                                     "reassignment.max.concurrent.leader.movements": "4"}
    assert len(decision.state.cluster.brokers) == 4  # the events of the batch applied too
    [dead] = [m.record for m in decision.outbox if m.topic_suffix == "dead-letter"]
    assert (dead["source_topic"], dead["source_offset"], dead["value"]) == ("p.requests", 101, b"raw-1")
    assert "ZeroDivisionError: a defect met by an odd input" in dead["reason"]
    [bad_event] = alerts(decision, "BadEvent")
    assert "p.requests[0]@101 not applied" in bad_event["message"]


def test_inputs_that_fail_only_together_keep_the_first(defect):
    defect["together"] = {"a", "c"}
    requests = [config("throttle.bytes.per.sec", "1000", "a"), config("mode", "observe", "b"),
                config("reassignment.max.concurrent.leader.movements", "4", "c")]
    decision = decide_isolating(ControllerState(), batch(requests), POLICY)
    assert decision.state.config == {"throttle.bytes.per.sec": "1000", "mode": "observe"}
    [dead] = [m.record for m in decision.outbox if m.topic_suffix == "dead-letter"]
    assert dead["source_offset"] == 102


def test_a_batch_that_fails_without_any_input_raises(monkeypatch):
    def broken(context):
        raise KeyError("the state itself")

    monkeypatch.setattr(decide_module, "handle_progress", broken)
    with pytest.raises(KeyError):
        decide_isolating(ControllerState(), BatchInputs(1, T0, (broker_event(CLUSTER.broker(1), T0),)), POLICY)


def test_without_a_failure_it_is_decide():
    inputs = batch([config("mode", "observe", "a")])
    assert decide_isolating(ControllerState(), inputs, POLICY) == decide(ControllerState(), inputs, POLICY)
