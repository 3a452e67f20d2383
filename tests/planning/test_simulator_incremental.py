"""The simulator's incremental paths change the cost, never the result:

- `SimulatedCluster.snapshot()` patches the last view; after any sequence of Admin API calls,
  faults and ticks it equals a view built from nothing, and `last_changes` names every
  partition whose state changed since the previous snapshot (what `compute_stepping` is told);
- `run_plan` repeats an idle decision instead of computing it again; with that switched off
  the report is the same (bar the count of decisions computed);
- `SortedChunks` (the memo's candidate orders) behaves as a sorted list, and a change leaves
  the old sequence as it was.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_simulator_invariants import DIRS, clusters, fault_events, limits_strategy, params_strategy, targets_for

import planning.simulation.driver as driver
import planning.sorted_chunks as sorted_chunks
from planning.model import Cluster, Topic
from planning.simulation.driver import run_plan
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from planning.sorted_chunks import SortedChunks
from schemas.errors import ReassignerError
from tests.settings_defaults import STALL_TIMEOUT


def view_from_nothing(sim: SimulatedCluster) -> Cluster:
    """The view the way the simulator built it before it was incremental: every topic and the
    partition index from the simulator's partitions."""
    brokers = tuple(sim._brokers[i] for i in sorted(sim._brokers))
    topics = tuple(Topic(name, tuple(sim._partitions[name][i] for i in sorted(sim._partitions[name])),
                         sim._min_isr[name]) for name in sim._topic_order)
    return Cluster(brokers, topics)


def assert_same_view(view: Cluster, fresh: Cluster) -> None:
    assert view == fresh  # brokers and topics, partition by partition
    assert dict(view.partitions_by_tp) == dict(fresh.partitions_by_tp)
    assert dict(view.topics_by_name) == dict(fresh.topics_by_name)
    assert view.brokers_by_id == fresh.brokers_by_id
    assert view.eligible_broker_ids == fresh.eligible_broker_ids
    assert view.any_cannot_host == fresh.any_cannot_host


@st.composite
def operations(draw, cluster: Cluster):
    n_brokers = len(cluster.brokers)
    tps = [p.tp for p in cluster.partitions()]
    ops = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["submit", "submit", "tick", "tick", "cancel", "elect", "kill", "restart",
                                     "fail_dir", "restore_dir", "drain", "snapshot"]))
        if kind == "submit":
            rf = draw(st.integers(1, min(4, n_brokers)))
            ops.append((kind, draw(st.sampled_from(tps)), tuple(draw(st.permutations(range(n_brokers)))[:rf])))
        elif kind == "tick":
            ops.append((kind, draw(st.sampled_from([0.5, 1.0, 5.0]))))
        elif kind in ("cancel", "elect"):
            ops.append((kind, draw(st.sampled_from(tps))))
        elif kind in ("kill", "restart", "drain"):
            ops.append((kind, draw(st.integers(0, n_brokers - 1))))
        elif kind in ("fail_dir", "restore_dir"):
            ops.append((kind, draw(st.integers(0, n_brokers - 1)), draw(st.sampled_from(DIRS))))
        else:
            ops.append((kind,))
    return ops


def apply(sim: SimulatedCluster, op: tuple) -> None:
    kind = op[0]
    try:
        if kind == "submit":
            sim.submit_step(op[1], op[2])
        elif kind == "tick":
            sim.tick(op[1])
        elif kind == "cancel":
            sim.cancel(op[1])
        elif kind == "elect":
            sim.elect_preferred_leader(op[1])
        elif kind == "kill":
            sim.kill_broker(op[1])
        elif kind == "restart":
            sim.restart_broker(op[1])
        elif kind == "drain":
            sim.set_draining(op[1])
        elif kind == "fail_dir":
            sim.fail_log_dir(op[1], op[2])
        elif kind == "restore_dir":
            sim.restore_log_dir(op[1], op[2])
    except ReassignerError:
        pass  # refused as Kafka refuses it (an invalid target, no reassignment to cancel)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_incremental_snapshot_equals_a_view_built_from_nothing(data):
    cluster = data.draw(clusters())
    sim = SimulatedCluster(cluster, SimulationParams(bytes_per_sec=10**8, default_size_bytes=2 * 10**8))
    previous = sim.snapshot()
    assert_same_view(previous, view_from_nothing(sim))
    for op in data.draw(operations(cluster)):
        apply(sim, op)
        if op[0] != "snapshot" and not data.draw(st.booleans()):
            continue  # several operations between two snapshots, too
        view = sim.snapshot()
        assert_same_view(view, view_from_nothing(sim))
        changed = {tp for tp, p in view.partitions_by_tp.items() if previous.partition(tp) is not p}
        assert changed <= sim.last_changes
        previous = view


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_repeating_idle_decisions_changes_no_report(monkeypatch, data):
    cluster = data.draw(clusters())
    targets = data.draw(targets_for(cluster))
    events = data.draw(fault_events(cluster))
    limits = data.draw(limits_strategy)
    params = data.draw(params_strategy)
    stall = data.draw(st.sampled_from([STALL_TIMEOUT, 7.0]))  # a short one: steps cross it mid-run
    repeated = run_plan(cluster, targets, limits, params, events, stall_timeout=stall)
    with monkeypatch.context() as patch:
        patch.setattr(driver._Idle, "holds", lambda self, sim, records, stall_timeout: False)
        computed = run_plan(cluster, targets, limits, params, events, stall_timeout=stall)
    assert computed.decisions_computed == computed.decisions
    assert repeated.decisions_computed <= repeated.decisions
    for name in driver.SimulationReport.__dataclass_fields__:
        if name != "decisions_computed":
            assert getattr(repeated, name) == getattr(computed, name), name


def test_idle_decisions_are_repeated_while_a_big_partition_copies():
    from planning.model import Broker, PartitionState
    from planning.movement.batches import Limits

    brokers = tuple(Broker(b) for b in range(4))
    p = PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, size_bytes=10**9)
    report = run_plan(Cluster(brokers, (Topic("t", (p,)),)), {p.tp: (3, 1, 2)}, Limits(1, 1, 1, 1),
                      SimulationParams(bytes_per_sec=10**7), stall_timeout=STALL_TIMEOUT)
    # 100 s of copying: a decision per second, computed only when something changed
    assert report.finished and report.decisions > 100 and report.decisions_computed < 10


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 60))), st.sampled_from([1, 2, 3, 512]))
def test_sorted_chunks_behave_as_a_sorted_list_and_persist(monkeypatch_chunk, operations_, chunk):
    monkeypatch_chunk(chunk)
    model: list[int] = []
    seq = SortedChunks()
    history = []
    for insert, item in operations_:
        before = (seq, list(model))
        if insert and item not in model:
            seq = seq.insert(item)
            model = sorted(model + [item])
        elif not insert:
            smaller = seq.remove(item)
            if item in model:
                assert smaller is not None
                seq = smaller
                model.remove(item)
            else:
                assert smaller is None
        history.append(before)
        assert list(seq) == model and len(seq) == len(model)
    for old, was in history:
        assert list(old) == was  # an older sequence never changes
    assert SortedChunks(model) == seq


@pytest.fixture(scope="module")
def monkeypatch_chunk():
    original = sorted_chunks.CHUNK

    def set_chunk(size: int) -> None:
        sorted_chunks.CHUNK = size

    yield set_chunk
    sorted_chunks.CHUNK = original
