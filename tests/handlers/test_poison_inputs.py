"""One bad request costs one RequestRejected, never the pipeline, and nothing it says can make a
message the producer refuses (regression: a `Cancel` with a 400 KB id made an alert over the
1 MB limit, and the pipeline crash-looped re-publishing its outbox)."""

from __future__ import annotations

from handler_builders import T0, alerts, cluster_events, request, simple_cluster
from hypothesis import given
from hypothesis import strategies as st

import handlers.requests as requests_module
from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from handlers.outbox import Outbox
from schemas.codec import encode
from state.model import ControllerState
from tests.settings_defaults import default_policy

PRODUCER_LIMIT = 1_000_000


def settled_state() -> ControllerState:
    return decide(ControllerState(), BatchInputs(0, T0, cluster_events(simple_cluster(3), T0)),
                  default_policy()).state


def test_a_cancel_with_a_huge_id_is_rejected_with_a_message_that_fits():
    state = settled_state()
    huge = request("Cancel", {"topic": None, "partition": None, "keep": False}, T0 + 1000, "x" * 400_000)
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(huge,)), default_policy())
    [rejected] = alerts(decision, "RequestRejected")
    assert rejected["details"]["error_code"] == "INVALID_REQUEST" and "400,000 characters" in rejected["message"]
    assert all(len(encode(m.schema, m.record)) < PRODUCER_LIMIT for m in decision.outbox)


def test_a_request_that_fails_half_way_changes_nothing_and_the_rest_is_applied(monkeypatch):
    def breaks_after_a_change(context, request_id, fields):
        context.state = context.state.with_changes(config={"mode": "observe"})
        context.outbox.alert("ConfigChanged", "INFO", request_id, "half done")
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setitem(requests_module.HANDLERS, "Tick", breaks_after_a_change)
    state = settled_state()
    inputs = BatchInputs(1, T0 + 1000, requests=(
        request("Tick", {}, T0 + 1000, "broken"),
        request("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": "3"},
                T0 + 1000, "fine")))
    decision = decide(state, inputs, default_policy())
    [rejected] = alerts(decision, "RequestRejected")
    assert rejected["subject"] == "broken" and rejected["details"]["error_code"] == "UNKNOWN_SERVER_ERROR"
    [changed] = alerts(decision, "ConfigChanged")  # the broken request's alert was rolled back
    assert changed["subject"] == "fine"
    assert decision.state.config == {"reassignment.max.concurrent.partition.movements": "3"}
    ids = [a["id"] for a in alerts(decision)]
    assert ids == [f"alert-1-{n}" for n in range(len(ids))], "alert ids stay contiguous"


@given(subject=st.text(max_size=600_000), message=st.text(max_size=600_000),
       details=st.dictionaries(st.text(max_size=2000), st.text(max_size=300_000), max_size=3))
def test_no_alert_exceeds_the_producer_limit(subject, message, details):
    outbox = Outbox(1, T0, 1)
    outbox.alert("BadEvent", "WARNING", subject, message, details)
    [sent] = outbox.messages
    assert len(encode("Alert", sent.record)) < PRODUCER_LIMIT
