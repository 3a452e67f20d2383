"""Prometheus metrics and the progress estimates of the status server, from hand-built states."""

from __future__ import annotations

from state.model import ControllerState
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import Reassignment, StepInFlight
from planning.movement.partition_steps import Step
from reassigner.operator.status_server import AlertBook, ProgressTracker, StateCache, render_metrics
from reassigner.operator.views import compute_status

TP = TopicPartition("orders", 0)
BROKERS = tuple(Broker(i) for i in (1, 2, 3, 4))


def state(replicas, adding=(), in_flight=True, steps_done=0, last_batch=5, present=True) -> ControllerState:
    partition = PartitionState("orders", 0, replicas, isr=tuple(b for b in replicas if b not in adding),
                               leader=replicas[0], size_bytes=1000, adding=adding)
    step = StepInFlight(Step((2, 3, 4), adding=(4,), removing=(1,)), steps_done + 1, 0.0) if in_flight else None
    reassignments = {TP: Reassignment("r1", TP, (1, 2, 3), (2, 3, 4), in_flight=step, steps_done=steps_done)} if present else {}
    return ControllerState(cluster=Cluster(BROKERS, (Topic("orders", (partition,)),)), reassignments=reassignments,
                           last_batch=last_batch)


def test_metrics_text_format_and_counters_survive_a_finished_reassignment():
    tracker = ProgressTracker()
    running = compute_status(state((1, 2, 3, 4), adding=(4,)), 1)
    tracker.observe(running, now=10.0)
    text = render_metrics(running, tracker, {"DiskFailed": 2}, {"REASSIGNMENT_IN_PROGRESS": 1}, now=12.5)
    lines = text.splitlines()
    assert "reassigner_steps_in_flight 1" in lines and "reassigner_steps_completed_total 0" in lines
    assert 'reassigner_alerts_total{kind="DiskFailed"} 2' in lines and 'reassigner_alerts_total{kind="BadEvent"} 0' in lines
    assert "reassigner_executor_errors_total 1" in lines and "reassigner_pipeline_lag_seconds 2.5" in lines
    assert all(line.startswith("#") or len(line.split(" ")) == 2 for line in lines)

    done = compute_status(state((2, 3, 4), present=False, last_batch=6), 1)
    tracker.observe(done, now=20.0)
    text = render_metrics(done, tracker, {}, {}, now=20.0)
    assert "reassigner_steps_completed_total 1" in text.splitlines()
    assert "reassigner_bytes_moved_total 1000" in text.splitlines()  # one replica of a 1000-byte partition
    assert "reassigner_pipeline_lag_seconds 0" in text.splitlines()


def test_alert_book_keeps_the_last_alerts_and_counts_all():
    book = AlertBook(capacity=2)
    for i in range(3):
        book.add_alert({"id": f"a{i}", "event_time": 0, "severity": "INFO", "kind": "BrokerAdded",
                        "subject": "broker-4", "message": "", "details": {}})
    book.add_result({"ok": False, "error_code": None})
    assert [a["id"] for a in book.recent()] == ["a1", "a2"]
    assert book.counts() == ({"BrokerAdded": 3}, {"UNKNOWN": 1}, 1)


def test_state_cache_loads_at_most_once_per_ttl_and_keeps_the_last_state_on_error():
    now = [0.0]
    calls = []

    def load():
        calls.append(now[0])
        if len(calls) == 2:
            raise ConnectionError("redis away")
        return ControllerState(last_batch=len(calls))

    cache = StateCache(load, ttl=1.0, clock=lambda: now[0])
    assert cache.get().last_batch == 1 and cache.get().last_batch == 1 and len(calls) == 1
    now[0] = 1.5
    assert cache.get().last_batch == 1 and "redis away" in cache.error
    now[0] = 3.0
    assert cache.get().last_batch == 3 and cache.error is None


def test_log_dir_moves_and_dir_usage_are_shown_and_measured():
    from planning.model import LogDir
    from planning.movement.log_dirs import LogDirTask
    from reassigner.operator.views import status_to_json

    brokers = (Broker(1, log_dirs=(LogDir("/d/a", replica_bytes=3000, replica_count=3),
                                   LogDir("/d/b", replica_bytes=0, replica_count=0,
                                          future_replicas=frozenset({TP})))),) + BROKERS[1:]
    partition = PartitionState("orders", 0, (1, 2), (1, 2), 1, size_bytes=1000, log_dirs=("/d/a", None))
    copying = LogDirTask(TP, 1, "/d/b", "/d/a", 1000, "dirs of broker 1 unbalanced", "b3-dirs-1", 1, 100.0)
    waiting = LogDirTask(TopicPartition("orders", 1), 1, "/d/b", "/d/a", 500, "dirs of broker 1 unbalanced",
                         "b3-dirs-1")
    controller = ControllerState(cluster=Cluster(brokers, (Topic("orders", (partition,)),)),
                                 log_dir_moves={copying.key: copying, waiting.key: waiting})
    view = compute_status(controller, 1, now_seconds=130.0)
    first = status_to_json(view)["log_dir_moves"][0]
    assert (first["state"], first["future_replica"], first["current_dir"], first["age_seconds"]) == \
        ("copying", True, "/d/a", 30.0)
    assert [m.state for m in view.log_dir_moves] == ["copying", "waiting"]
    assert view.brokers[0].dirs == (("/d/a", 3, 3000), ("/d/b", 0, 0))
    lines = render_metrics(view, ProgressTracker(), {}, {}, now=1.0).splitlines()
    assert 'reassigner_log_dir_moves{state="copying"} 1' in lines and 'reassigner_log_dir_moves{state="waiting"} 1' in lines
    assert "reassigner_log_dir_move_bytes 1500" in lines
    assert 'reassigner_log_dir_bytes{broker="1",dir="/d/a"} 3000' in lines


def test_bytes_rate_and_time_left_are_exported_once_measured():
    from planning.movement.eta import ReplicationMeter

    running = state((1, 2, 3, 4), adding=(4,))
    lines = render_metrics(compute_status(running, 1, now_seconds=10.0), ProgressTracker(), {}, {}, now=1.0).splitlines()
    assert "reassigner_bytes_to_move 1000" in lines and "reassigner_bytes_left 1000" in lines
    assert not any(line.startswith("reassigner_replication_rate_bytes_per_second ") for line in lines)  # unknown yet
    measured = running.with_changes(replication_meter=ReplicationMeter(0, 500))
    lines = render_metrics(compute_status(measured, 1, now_seconds=10.0), ProgressTracker(), {}, {}, now=1.0).splitlines()
    assert "reassigner_replication_rate_bytes_per_second 50" in lines and "reassigner_time_left_seconds 20" in lines
