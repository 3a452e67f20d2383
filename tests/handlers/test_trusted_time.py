"""Time from the clock that can be trusted (regression: one record with an event time in year 3000
ended every grace period at once: a dead broker was healed 88 s after the kill, not 300 s)."""

from __future__ import annotations

from handler_builders import T0, alerts, broker_event, cluster_events, commands, simple_cluster, tick

from handlers.decide import MAX_CLOCK_SKEW_MS, decide
from handlers.micro_batch import BatchInputs
from state.model import ControllerState
from tests.settings_defaults import default_policy

YEAR_3000_MS = 32_503_680_000_000
POLICY = default_policy(broker_failure_grace_seconds=300)


def down_broker_state():
    cluster = simple_cluster(4, {"t": (8, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0), clock_ms=T0), POLICY).state
    down = broker_event(cluster.broker(1), T0 + 1000, state="FENCED")
    return decide(state, BatchInputs(1, T0 + 1000, (down,), clock_ms=T0 + 1000), POLICY).state


def test_a_record_from_the_future_cannot_end_a_grace_period():
    state = down_broker_state()
    forged = tick(YEAR_3000_MS)
    decision = decide(state, BatchInputs(2, YEAR_3000_MS, requests=(forged,), clock_ms=T0 + 2000), POLICY)
    assert not alerts(decision, "PlanCreated") and not commands(decision, "ReassignmentStep"), "healed at once"
    [skew] = alerts(decision, "ClockSkew")
    assert skew["details"]["records"] == "1"
    later = decide(decision.state, BatchInputs(3, T0 + 3000, requests=(tick(T0 + 3000),), clock_ms=T0 + 3000), POLICY)
    assert not alerts(later, "PlanCreated"), "the clamped time must not linger in the state either"
    healed = decide(later.state, BatchInputs(4, T0 + 302_000, requests=(tick(T0 + 302_000),),
                                             clock_ms=T0 + 302_000), POLICY)
    assert alerts(healed, "PlanCreated"), "the grace still ends on time"


def test_a_few_minutes_of_skew_between_hosts_is_trusted():
    state = down_broker_state()
    ahead = T0 + 2000 + MAX_CLOCK_SKEW_MS - 1
    decision = decide(state, BatchInputs(2, ahead, requests=(tick(ahead),), clock_ms=T0 + 2000), POLICY)
    assert not alerts(decision, "ClockSkew") and decision.state.last_batch == 2
