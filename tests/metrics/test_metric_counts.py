"""The pipeline's counts of a committed batch (`runtime.metrics.compute_batch_counts`), from what
real decisions of the pure handlers report (`handlers.micro_batch.BatchReport`), and the counting
functions of every process. Steps and bytes are counted once per committed batch by the
pipeline, whatever anyone looks at."""

from __future__ import annotations

from dataclasses import replace


from handlers.decide import decide
from handlers.micro_batch import BadRecord, BatchInputs
from planning.model import TopicPartition
from runtime import metrics
from runtime.metrics import BatchCounts, compute_batch_counts, compute_in_flight
from state.model import ControllerState
from tests.handlers.handler_builders import (T0, cluster_events, commands, partition_event, reassign, request,
                                             simple_cluster)
from tests.settings_defaults import default_policy

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
POLICY = default_policy(max_partition_movements=10, max_movements_per_broker=10, max_leader_movements=10)


def started():
    """t-0 (0,1,2) -> (0,1,3): one step; t-1 (1,2,3) -> (4,5,1): several steps."""
    cluster = simple_cluster(6, {"t": (2, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), POLICY).state
    inputs = BatchInputs(1, T0 + 1000, requests=(reassign({A: (0, 1, 3), B: (4, 5, 1)}, T0 + 1000, "r1"),))
    return cluster, state, inputs, decide(state, inputs, POLICY)


def sample(name: str, **labels: str) -> float:
    """The sample as the process counting it holds it (each process has its own registry)."""
    return sum(metrics.process_registry(p).get_sample_value(name, labels) or 0.0 for p in metrics.PROCESSES)


def test_started_steps_are_counted_from_the_commands_and_the_gauges_from_the_state():
    _, before, inputs, first = started()
    counts = compute_batch_counts(first.state, inputs, first.report, T0 + 3000)
    assert counts.steps_started == 2 and counts.commands["ReassignmentStep"] == 2
    assert counts.steps_completed == 0 and counts.bytes_moved == 0
    assert (counts.reassignments_active, counts.steps_in_flight) == (2, 2)
    assert counts.inputs == {("Request", "applied"): 1}
    assert counts.alerts.get("PlanCreated", 0) + counts.alerts.get("RequestAccepted", 0) >= 1
    assert counts.lag_seconds == 2.0  # the request's event time to the commit


def test_a_completed_step_is_counted_once_with_its_bytes_also_when_its_reassignment_ends():
    cluster, _, _, first = started()
    size = cluster.partition(A).size_bytes
    assert size
    done_a = replace(cluster.partition(A), replicas=(0, 1, 3), isr=(0, 1, 3), leader=0, leader_epoch=1, log_dirs=())
    inputs = BatchInputs(2, T0 + 2000, (partition_event(done_a, T0 + 2000),))
    second = decide(first.state, inputs, POLICY)
    assert A not in second.state.reassignments  # its last step: the record left the state
    counts = compute_batch_counts(second.state, inputs, second.report, T0 + 2000)
    assert (counts.steps_completed, counts.bytes_moved, counts.steps_started) == (1, size, 0)
    assert counts.inputs == {("PartitionState", "applied"): 1}
    assert (counts.reassignments_active, counts.steps_in_flight) == (1, 1)
    # The same event again changes nothing: nothing more is counted.
    again = decide(second.state, replace(inputs, batch_id=3), POLICY)
    assert compute_batch_counts(again.state, inputs, again.report, T0 + 2000).steps_completed == 0

    done_b1 = replace(cluster.partition(B), replicas=(4, 1, 2, 3), isr=(1, 2, 3, 4), leader=4, leader_epoch=1,
                      log_dirs=())
    inputs = BatchInputs(4, T0 + 3000, (partition_event(done_b1, T0 + 3000),))
    third = decide(second.state, inputs, POLICY)
    counts = compute_batch_counts(third.state, inputs, third.report, T0 + 3000)
    assert (counts.steps_completed, counts.steps_started, counts.bytes_moved) == (1, 1, size)  # and the next starts
    assert third.state.reassignments[B].steps_done == 1


def test_a_failed_step_and_a_cancelled_step_are_no_completed_steps():
    _, _, _, first = started()
    step = next(c for c in commands(first, "ReassignmentStep") if c["key"] == "t-0")
    failed = {"schema_version": 1, "event_time": T0 + 2000, "id": "res-1", "key": "t-0", "command_id": step["id"],
              "command_kind": "ReassignmentStep", "epoch": 0, "reassignment_id": step["reassignment_id"],
              "step": step["step"], "ok": False, "error_code": "REQUEST_TIMED_OUT", "message": "timed out"}
    inputs = BatchInputs(2, T0 + 2000, command_results=(failed,))
    decision = decide(first.state, inputs, POLICY)
    assert decision.state.reassignments[A].steps_done == 1  # the failed step used its number
    counts = compute_batch_counts(decision.state, inputs, decision.report, T0 + 2000)
    assert counts.steps_completed == 0 and counts.inputs == {("CommandResult", "applied"): 1}

    cancel = decide(first.state, BatchInputs(2, T0 + 1500, requests=(
        request("Cancel", {"topic": "t", "partition": 0, "keep": False}, T0 + 1500, "c1"),)), POLICY)
    command = next(c for c in commands(cancel, "CancelReassignment") if c["key"] == "t-0")
    result = dict(failed, id="res-2", command_id=command["id"], command_kind="CancelReassignment", ok=True,
                  error_code=None, message=None)
    done = decide(cancel.state, BatchInputs(3, T0 + 2000, command_results=(result,)), POLICY)
    assert done.report.steps_completed == ()


def test_undecodable_and_failed_inputs_are_rejected_under_their_schema():
    cluster, _, _, first = started()
    bad = BadRecord("reassigner.isr-changes", 0, 7, b"\x00garbage", "not a valid PartitionState record")
    inputs = BatchInputs(2, T0 + 2000, (partition_event(cluster.partition(B), T0 + 2000),), bad_records=(bad,))
    decision = decide(first.state, inputs, POLICY)
    counts = decision.report.inputs
    assert counts == {("PartitionState", "applied"): 1, ("PartitionState", "rejected"): 1}


def test_the_in_flight_set_kept_by_the_caller_gives_the_same_counts():
    _, before, inputs, first = started()
    kept = compute_batch_counts(first.state, inputs, first.report, T0 + 3000,
                                compute_in_flight(first.state))
    assert kept == compute_batch_counts(first.state, inputs, first.report, T0 + 3000)


def test_counting_a_committed_batch_moves_the_counters_by_its_counts():
    before = {name: sample(name) for name in ("reassigner_pipeline_batches_total", "reassigner_steps_completed_total",
                                              "reassigner_bytes_moved_total", "reassigner_steps_started_total")}
    started_steps = sample("reassigner_pipeline_commands_total", kind="ReassignmentStep")
    metrics.count_committed_batch(BatchCounts(inputs={("Request", "applied"): 2}, commands={"ReassignmentStep": 3},
                                              alerts={"PlanCreated": 1}, steps_started=3, steps_completed=2,
                                              bytes_moved=5000, reassignments_active=4, steps_in_flight=3,
                                              lag_seconds=1.5), committed_at=1234.0)
    assert sample("reassigner_pipeline_batches_total") == before["reassigner_pipeline_batches_total"] + 1
    assert sample("reassigner_steps_completed_total") == before["reassigner_steps_completed_total"] + 2
    assert sample("reassigner_bytes_moved_total") == before["reassigner_bytes_moved_total"] + 5000
    assert sample("reassigner_steps_started_total") == before["reassigner_steps_started_total"] + 3
    assert sample("reassigner_pipeline_commands_total", kind="ReassignmentStep") == started_steps + 3
    assert sample("reassigner_steps_in_flight") == 3 and sample("reassigner_reassignments_active") == 4
    assert sample("reassigner_pipeline_lag_seconds") == 1.5
    assert sample("reassigner_pipeline_last_batch_timestamp_seconds") == 1234.0


def test_the_watcher_and_executor_counts():
    polls, failed = sample("reassigner_watcher_polls_total", outcome="ok"), \
        sample("reassigner_watcher_polls_total", outcome="REQUEST_TIMED_OUT")
    isr = sample("reassigner_watcher_events_total", type="PartitionState")
    snapshots = sample("reassigner_watcher_snapshot_duration_seconds_count")
    metrics.count_poll([("isr-changes", "t-0", {}), ("isr-changes", "t-1", {}), ("broker-membership", "1", {})],
                       {"observe": 0.1, "diff": 0.01, "publish": 0.02, "total": 0.13}, snapshot_seconds=0.5)
    metrics.count_failed_poll("REQUEST_TIMED_OUT")
    assert sample("reassigner_watcher_polls_total", outcome="ok") == polls + 1
    assert sample("reassigner_watcher_polls_total", outcome="REQUEST_TIMED_OUT") == failed + 1
    assert sample("reassigner_watcher_events_total", type="PartitionState") == isr + 2
    assert sample("reassigner_watcher_snapshot_duration_seconds_count") == snapshots + 1

    ok = sample("reassigner_executor_commands_total", kind="ReassignmentStep", outcome="ok")
    busy = sample("reassigner_executor_commands_total", kind="ReassignmentStep", outcome="REASSIGNMENT_IN_PROGRESS")
    stale = sample("reassigner_executor_refused_commands_total", reason="STALE_EPOCH")
    metrics.count_command_outcome("ReassignmentStep", True, None, 0.2)
    metrics.count_command_outcome("ReassignmentStep", False, "REASSIGNMENT_IN_PROGRESS", 0.2)
    metrics.count_refused_command("STALE_EPOCH")
    assert sample("reassigner_executor_commands_total", kind="ReassignmentStep", outcome="ok") == ok + 1
    assert sample("reassigner_executor_commands_total", kind="ReassignmentStep",
                  outcome="REASSIGNMENT_IN_PROGRESS") == busy + 1
    assert sample("reassigner_executor_refused_commands_total", reason="STALE_EPOCH") == stale + 1


def test_every_metric_is_defined_once_with_the_product_prefix():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    defining = []
    for path in [*root.glob("reassigner/**/*.py"), *root.glob("runtime/**/*.py"), *root.glob("streams/*.py"),
                 *root.glob("handlers/*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Counter", "Gauge", "Histogram",
                                                                                  "Summary", "Info", "Enum"):
                if node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("reassigner"):
                    defining.append((path.relative_to(root).as_posix(), node.args[0].value))
    assert {file for file, _ in defining} == {"runtime/metrics.py"}
    names = [name for _, name in defining]
    assert len(names) == len(set(names))
