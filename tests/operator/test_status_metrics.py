"""Prometheus metrics of the status server (gauges of the state as it is when scraped, counters of
the alerts and results read), from hand-built states."""

from __future__ import annotations

from state.model import ControllerState
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import Reassignment, StepInFlight
from planning.movement.partition_steps import Step
from runtime.metrics import build_status_registry, render_registry
from reassigner.operator.status_sources import AlertBook, StateCache
from reassigner.operator.views.metrics import compute_metric_samples
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


def scrape(view, alert_counts=None, errors_by_code=None) -> list[str]:
    """The lines of /metrics as the status server renders them (prometheus-client)."""
    registry = build_status_registry(lambda: compute_metric_samples(view, alert_counts or {}, errors_by_code or {}))
    return render_registry(registry).decode().splitlines()


def test_metrics_text_format_gauges_of_the_state_and_counters_of_the_topics():
    running = compute_status(state((1, 2, 3, 4), adding=(4,)), 1)
    lines = scrape(running, {"DiskFailed": 2}, {"REASSIGNMENT_IN_PROGRESS": 1})
    assert "reassigner_steps_in_flight 1.0" in lines and "reassigner_reassignments_active 1.0" in lines
    assert 'reassigner_alerts_total{kind="DiskFailed"} 2.0' in lines and 'reassigner_alerts_total{kind="BadEvent"} 0.0' in lines
    assert "reassigner_executor_errors_total 1.0" in lines and "reassigner_pipeline_last_batch 5.0" in lines
    assert "# TYPE reassigner_alerts_total counter" in lines and "# TYPE reassigner_steps_in_flight gauge" in lines
    assert all(line.startswith("#") or len(line.rsplit(" ", 1)) == 2 for line in lines)


def test_the_status_server_counts_nothing_from_the_pages_it_serves():
    """Regression (issue 19): steps and bytes were estimated from the states seen at each request
    (8 steps reported against 31 executed). They are the pipeline's counters now; scraping the
    status server twice around a finished reassignment exports no such counter and changes no value."""
    running = compute_status(state((1, 2, 3, 4), adding=(4,)), 1)
    done = compute_status(state((2, 3, 4), present=False, last_batch=6), 1)
    first, second, again = scrape(running), scrape(done), scrape(done)
    assert second == again
    for lines in (first, second):
        assert not any(line.startswith(("reassigner_steps_completed", "reassigner_bytes_moved",
                                         "reassigner_pipeline_lag_seconds")) for line in lines)
    assert "reassigner_steps_in_flight 0.0" in second and "reassigner_reassignments_active 0.0" in second


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
    lines = scrape(view)
    assert 'reassigner_log_dir_moves{state="copying"} 1.0' in lines and 'reassigner_log_dir_moves{state="waiting"} 1.0' in lines
    assert "reassigner_log_dir_move_bytes 1500.0" in lines
    assert 'reassigner_log_dir_bytes{broker="1",dir="/d/a"} 3000.0' in lines


def test_bytes_rate_and_time_left_are_exported_once_measured():
    from planning.movement.eta import ReplicationMeter

    running = state((1, 2, 3, 4), adding=(4,))
    lines = scrape(compute_status(running, 1, now_seconds=10.0))
    assert "reassigner_bytes_to_move 1000.0" in lines and "reassigner_bytes_left 1000.0" in lines
    assert not any(line.startswith("reassigner_replication_rate_bytes_per_second ") for line in lines)  # unknown yet
    measured = running.with_changes(replication_meter=ReplicationMeter(0, 500))
    lines = scrape(compute_status(measured, 1, now_seconds=10.0))
    assert "reassigner_replication_rate_bytes_per_second 50.0" in lines and "reassigner_time_left_seconds 20.0" in lines


def test_the_status_server_labels_every_sample_with_its_cluster():
    from runtime.metrics import build_status_registry, render_registry

    registry = build_status_registry(lambda: {"reassigner_steps_in_flight": [((), 2.0)],
                                              "reassigner_brokers": [(("alive",), 3.0)]}, "prod-eu")
    lines = render_registry(registry).decode().splitlines()
    assert 'reassigner_steps_in_flight{cluster="prod-eu"} 2.0' in lines
    assert 'reassigner_brokers{cluster="prod-eu",state="alive"} 3.0' in lines
