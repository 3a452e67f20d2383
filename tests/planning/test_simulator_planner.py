"""Planner-driven runs: plan_placement's targets for random goals through the simulated cluster."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.model import Broker, LogDir
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.placer import plan_placement
from planning.simulation.driver import KillBroker, run_plan
from planning.simulation.simulated_cluster import SimulationParams
from test_simulator_invariants import DIRS, clusters, limits_strategy, params_strategy
from tests.settings_defaults import STALL_TIMEOUT


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_simulated_planner_goals_add_and_drain_end_at_their_targets(data):
    cluster = data.draw(clusters())
    n = len(cluster.brokers)
    added = tuple(Broker(n + i, rack=f"r{i % 3}", log_dirs=tuple(LogDir(d) for d in DIRS))
                  for i in range(data.draw(st.integers(0, 2))))
    drain = frozenset(data.draw(st.sets(st.integers(0, n - 1), max_size=1)))
    goal = Goal(add_brokers=added, drain_brokers=drain)
    try:
        plan = plan_placement(cluster, goal)
    except Exception as error:  # an infeasible goal is the planner's business, not the mover's
        if getattr(error, "code", "") in ("PLAN_INFEASIBLE", "INVALID_REPLICA_ASSIGNMENT"):
            return
        raise
    simulated = compute_planning_cluster(cluster, goal)
    report = run_plan(simulated, plan.targets, data.draw(limits_strategy), data.draw(params_strategy),
                      stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    assert report.finished
    for tp, target in plan.targets.items():
        assert report.final_replicas[tp] == target


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_healing_a_dead_broker_keeps_the_invariants(data):
    cluster = data.draw(clusters())
    dead = data.draw(st.integers(0, len(cluster.brokers) - 1))
    view = cluster.with_brokers(b if b.id != dead else Broker(b.id, b.rack, False, False, b.log_dirs)
                                for b in cluster.brokers)
    try:
        plan = plan_placement(view, Goal())
    except Exception as error:
        if getattr(error, "code", "") in ("PLAN_INFEASIBLE", "INVALID_REPLICA_ASSIGNMENT"):
            return
        raise
    params = SimulationParams(bytes_per_sec=10**8, max_seconds=5_000.0)
    report = run_plan(cluster, plan.targets, data.draw(limits_strategy), params, [KillBroker(0.0, dead)],
                      stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    # Every partition that kept a replica in sync is healed to its target; one whose only
    # replicas were on the dead broker cannot be (its data is there) and waits.
    start = cluster.partitions_by_tp
    for tp, target in plan.targets.items():
        survivors = [b for b in start[tp].replicas if b != dead]
        if survivors:
            assert report.final_replicas[tp] == target, (tp, start[tp].replicas, target)
