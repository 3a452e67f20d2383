"""The stepping memo changes the cost of a decision, never the decision (planning.movement.advance,
COST): random plans, faults and cancels run through the simulator with every decision taken
twice — from the memo of the previous one (told what changed since, as the driver does), and
from nothing — and the two must agree."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_simulator_invariants import clusters, fault_events, limits_strategy, params_strategy, targets_for

import planning.simulation.driver as driver
from planning.movement.advance import compute_stepping
from planning.simulation.driver import run_plan
from tests.settings_defaults import STALL_TIMEOUT


@pytest.fixture
def twin_decisions(monkeypatch):
    """Every decision of the simulator made with and without the memo; returns the counts."""
    seen = {"decisions": 0, "from_memo": 0, "told_what_changed": 0}

    def twin(records, view, limits, now, stall_timeout, *, start_steps=True, memo=None, changed=None):
        remembered = compute_stepping(records, view, limits, now, stall_timeout, start_steps=start_steps, memo=memo,
                                      changed=changed)
        fresh = compute_stepping(dict(records), view, limits, now, stall_timeout, start_steps=start_steps)
        assert remembered.started == fresh.started
        assert dict(remembered.reassignments) == fresh.reassignments
        assert (remembered.elections, remembered.finished, remembered.stalled) == \
            (fresh.elections, fresh.finished, fresh.stalled)
        assert remembered.memo.order == fresh.memo.order
        assert dict(remembered.memo.waiting).keys() == dict(fresh.memo.waiting).keys()
        assert remembered.memo.unsettled == fresh.memo.unsettled
        assert remembered.memo.in_flight == fresh.memo.in_flight
        # `replaced` names exactly the records that are not the objects passed in (the driver's
        # idle decisions rely on it)
        assert remembered.replaced == {tp for tp, r in remembered.reassignments.items() if r is not records.get(tp)}
        seen["decisions"] += 1
        seen["from_memo"] += memo is not None
        seen["told_what_changed"] += changed is not None
        return remembered

    monkeypatch.setattr(driver, "compute_stepping", twin)
    return seen


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_decisions_from_the_memo_equal_decisions_from_nothing(twin_decisions, data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    events = data.draw(fault_events(cluster, log_dirs=False))
    # Equivalence only (the twin asserts it at every decision); the invariants are
    # test_simulator_invariants' business.
    run_plan(cluster, targets, data.draw(limits_strategy), data.draw(params_strategy), events,
             stall_timeout=STALL_TIMEOUT)


def test_the_twin_check_runs_and_uses_the_memo(twin_decisions):
    from planning.model import Broker, Cluster, PartitionState, Topic
    from planning.movement.batches import Limits

    brokers = tuple(Broker(b) for b in range(6))
    parts = tuple(PartitionState("t", n, (n % 3, (n + 1) % 3), (n % 3, (n + 1) % 3), n % 3, size_bytes=10**8)
                  for n in range(30))
    cluster = Cluster(brokers, (Topic("t", parts),))
    targets = {p.tp: (3 + p.partition % 3, 3 + (p.partition + 1) % 3) for p in parts}
    report = run_plan(cluster, targets, Limits(2, 1, 1, 2), stall_timeout=STALL_TIMEOUT)
    assert report.finished and twin_decisions["from_memo"] > 10 and twin_decisions["told_what_changed"] > 10
