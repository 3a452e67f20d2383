"""Random clusters, targets, limits and faults through steps + batches + the simulated cluster.

At every decision the driver checks the safety invariants (limits, min ISR on completion,
no replica targeted to a dead/draining broker or offline dir, one step per partition); these
tests assert it saw no violation and that every reassignment ended at its target — or back at
its original replicas when cancelled.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.movement.batches import Limits
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import ReassignmentState
from planning.simulation.driver import CancelReassignments, FailLogDir, KillBroker, RestartBroker, RestoreLogDir, run_plan
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from tests.settings_defaults import STALL_TIMEOUT, default_limits

DIRS = ("/d1", "/d2")


@st.composite
def clusters(draw):
    n_brokers = draw(st.integers(3, 8))
    racks = draw(st.booleans())
    brokers = tuple(Broker(b, rack=f"r{b % 3}" if racks else None, log_dirs=tuple(LogDir(d) for d in DIRS))
                    for b in range(n_brokers))
    topics = []
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(3, n_brokers)))
        min_isr = draw(st.integers(1, rf))
        parts = []
        for n in range(draw(st.integers(1, 6))):
            replicas = tuple(draw(st.permutations(range(n_brokers)))[:rf])
            parts.append(PartitionState(
                f"t{t}", n, replicas, replicas, replicas[0],
                size_bytes=draw(st.one_of(st.none(), st.integers(0, 5 * 10**8))),
                log_dirs=tuple(draw(st.sampled_from(DIRS)) for _ in replicas)))
        topics.append(Topic(f"t{t}", tuple(parts), min_isr))
    return Cluster(brokers, tuple(topics))


@st.composite
def targets_for(draw, cluster):
    n_brokers = len(cluster.brokers)
    targets = {}
    for p in cluster.partitions():
        if draw(st.booleans()):
            m = cluster.min_isr(p.topic)
            rf = draw(st.integers(max(m, len(p.replicas) - 1), min(n_brokers, len(p.replicas) + 1)))
            targets[p.tp] = tuple(draw(st.permutations(range(n_brokers)))[:rf])
    return targets


@st.composite
def fault_events(draw, cluster, log_dirs: bool = True):
    """Faults during a run: maybe a broker down for a while, maybe a dir offline for a while
    (`log_dirs`), maybe a cancel of everything (keeping or reverting)."""
    events = []
    if draw(st.booleans()):
        broker = draw(st.integers(0, len(cluster.brokers) - 1))
        start = draw(st.floats(0, 30))
        events += [KillBroker(start, broker), RestartBroker(start + draw(st.floats(1, 100)), broker)]
    if log_dirs and draw(st.booleans()):
        broker = draw(st.integers(0, len(cluster.brokers) - 1))
        start = draw(st.floats(0, 30))
        events += [FailLogDir(start, broker, DIRS[0]), RestoreLogDir(start + draw(st.floats(1, 100)), broker, DIRS[0])]
    if draw(st.booleans()):
        events.append(CancelReassignments(draw(st.floats(0, 40)), keep=draw(st.booleans())))
    return events


limits_strategy = st.builds(Limits, st.integers(1, 6), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4))
params_strategy = st.builds(SimulationParams, bytes_per_sec=st.sampled_from([10**8, 3 * 10**8]),
                            tick_seconds=st.sampled_from([1.0, 5.0]), default_size_bytes=st.just(2 * 10**8),
                            max_seconds=st.just(50_000.0))


def assert_reached_targets(report, targets, cluster):
    assert report.invariant_violations == ()
    assert report.finished, report
    for tp, target in targets.items():
        record = report.reassignments.get(tp)
        if record is not None and record.reason.startswith("cancelled"):
            continue
        assert report.final_replicas[tp] == target
    for tp, record in report.reassignments.items():
        assert record.state is ReassignmentState.DONE


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_plans_end_at_their_targets_without_breaking_invariants(data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    report = run_plan(cluster, targets, data.draw(limits_strategy), data.draw(params_strategy),
                      stall_timeout=STALL_TIMEOUT)
    assert_reached_targets(report, targets, cluster)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_transient_faults_mid_run_keep_the_invariants_and_the_plan_completes(data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    broker = data.draw(st.integers(0, len(cluster.brokers) - 1))
    start = data.draw(st.floats(0, 30))
    down_for = data.draw(st.floats(1, 200))
    if data.draw(st.booleans()):
        events = [KillBroker(start, broker), RestartBroker(start + down_for, broker)]
    else:
        path = data.draw(st.sampled_from(DIRS))
        events = [FailLogDir(start, broker, path), RestoreLogDir(start + down_for, broker, path)]
    report = run_plan(cluster, targets, data.draw(limits_strategy), data.draw(params_strategy), events,
                      stall_timeout=STALL_TIMEOUT)
    assert_reached_targets(report, targets, cluster)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_cancel_mid_run_reverts_every_cancelled_partition(data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    keep = data.draw(st.booleans())
    report = run_plan(cluster, targets, data.draw(limits_strategy), data.draw(params_strategy),
                      [CancelReassignments(data.draw(st.floats(0, 20)), keep=keep)], stall_timeout=STALL_TIMEOUT)
    assert_reached_targets(report, targets, cluster)
    for tp, record in report.reassignments.items():
        if record.reason.startswith("cancelled") and not keep:
            assert report.final_replicas[tp] == record.original_replicas


def test_a_permanently_dead_broker_blocks_only_the_partitions_that_need_it():
    brokers = tuple(Broker(b) for b in range(6))
    parts = (PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, size_bytes=10),
             PartitionState("t", 1, (0, 1, 2), (0, 1, 2), 0, size_bytes=10))
    cluster = Cluster(brokers, (Topic("t", parts, 2),))
    targets = {parts[0].tp: (0, 1, 3), parts[1].tp: (0, 1, 5)}
    report = run_plan(cluster, targets, default_limits(), SimulationParams(bytes_per_sec=1, max_seconds=200),
                      [KillBroker(0.0, 5)], stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    assert report.final_replicas[parts[0].tp] == (0, 1, 3)
    assert report.final_replicas[parts[1].tp] == (0, 1, 2) and not report.finished


def test_fetch_bandwidth_is_shared_among_the_replicas_a_broker_copies():
    brokers = tuple(Broker(b) for b in range(4))
    parts = tuple(PartitionState("t", n, (0, 1), (0, 1), 0, size_bytes=size) for n, size in ((0, 100), (1, 300)))
    sim = SimulatedCluster(Cluster(brokers, (Topic("t", parts, 1),)), SimulationParams(bytes_per_sec=100))
    for p in parts:
        sim.submit_step(p.tp, (0, 1, 3))
    sim.tick(1.0)  # 50 bytes each
    assert all(3 not in sim.partition(p.tp).isr for p in parts)
    sim.tick(1.0)  # partition 0 done at 100; its spare share goes to partition 1
    assert sim.partition(parts[0].tp).replicas == (0, 1, 3)
    sim.tick(2.0)  # 100 + 200 = 300 for partition 1
    assert sim.partition(parts[1].tp).replicas == (0, 1, 3)


def test_peak_replicas_per_partition_stays_within_the_larger_list_plus_r():
    brokers = tuple(Broker(b) for b in range(10))
    p = PartitionState("t", 0, (0, 1, 2, 3, 4), (0, 1, 2, 3, 4), 0, size_bytes=10)
    report = run_plan(Cluster(brokers, (Topic("t", (p,), 1),)), {p.tp: (5, 6, 7, 8, 9)},
                      default_limits(max_replica_movements=2), SimulationParams(bytes_per_sec=10),
                      stall_timeout=STALL_TIMEOUT)
    assert report.finished and report.steps == 4
    # (5, 0, 1, 2, 3, 4) while 6 is added: |CR| + 1 = 7 = max(|CR0|, |FTR|) + R
    assert report.peak_replicas_per_partition == 7
    assert report.invariant_violations == ()


def test_a_pure_removal_waits_for_a_restarted_target_replica_to_rejoin_the_isr():
    """Broker 2, the new home of an RF-1 partition, restarts mid-move; the next step drops the
    old replica 0 while 2 is still out of the ISR. Kafka finishes a reassignment only when every
    target replica is in sync, not once the *adding* ones are: finishing then would leave the
    partition with no in-sync replica."""
    dirs = tuple(LogDir(d) for d in DIRS)
    brokers = tuple(Broker(i, log_dirs=dirs) for i in range(5))

    def part(topic: str, n: int, replicas: tuple[int, ...], size: int | None = None):
        return PartitionState(topic, n, replicas, replicas, replicas[0], size, (DIRS[0],))

    cluster = Cluster(brokers, (
        Topic("t0", (part("t0", 0, (1,)), part("t0", 1, (0,)), part("t0", 2, (0,))), 1),
        Topic("t1", tuple(part("t1", n, (0,)) for n in range(3)), 1),
        Topic("t2", (part("t2", 0, (0,)), part("t2", 1, (0,), 0), part("t2", 2, (0,)),
                     part("t2", 3, (0,))), 1)))
    tp = TopicPartition
    targets = {tp("t0", 0): (0,), tp("t1", 2): (0,), tp("t2", 0): (1,), tp("t2", 1): (2,)}
    params = SimulationParams(bytes_per_sec=10**8, tick_seconds=5.0, default_size_bytes=2 * 10**8,
                              max_seconds=50_000.0)
    report = run_plan(cluster, targets, Limits(1, 1, 1, 1), params,
                      [KillBroker(21.0, 2), RestartBroker(26.0, 2)], stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    assert report.finished and report.final_replicas[tp("t2", 1)] == (2,)


def test_a_step_cancelled_in_kafka_is_not_judged_as_a_completed_step():
    """Found by hypothesis: a one-in-one-out step (0, 1) → (0, 2) cancelled mid-copy went back to
    (0, 1) and was then checked as if it had completed with only broker 0 of its target in sync."""
    dirs = (LogDir("/d1"), LogDir("/d2"))
    parts = tuple(PartitionState("t0", n, (0, 1), (0, 1), 0, log_dirs=("/d1", "/d1")) for n in range(6))
    cluster = Cluster(tuple(Broker(b, log_dirs=dirs) for b in range(3)), (Topic("t0", parts, 2),))
    targets = {parts[0].tp: (0, 2)}
    report = run_plan(cluster, targets, Limits(1, 1, 1, 1),
                      SimulationParams(bytes_per_sec=10**8, tick_seconds=1.0, default_size_bytes=2 * 10**8),
                      [CancelReassignments(1.0, keep=False)], stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    assert report.final_replicas[parts[0].tp] == (0, 1)
