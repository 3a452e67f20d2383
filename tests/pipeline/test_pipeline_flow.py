"""The pipeline against the real stack: events shaped as the watcher publishes them go into real
Kafka topics, the real Spark query decides with state in real Redis, commands and alerts come out
on real topics. Event times drive the clock (no ticks), so grace periods are deterministic."""

from __future__ import annotations

import uuid
from typing import Callable

import pytest

from planning.model import TopicPartition
from state.model import ControllerState
from tests.waiting import eventually
from harness import (
    T0,
    Harness,
    alerts_of,
    broker_event,
    commands_of,
    log_dir_event,
    partition_event,
    request,
    topic_event,
)

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow]

GRACE_SECONDS = 5
MAX_PARTITION_MOVEMENTS = 2


@pytest.fixture
def pipeline(local_stack, spark, redis_client, redis_url, tmp_path):
    from confluent_kafka import Producer

    from runtime.settings import compute_policy
    from runtime.settings import load_settings
    from runtime.clients.kafka_admin import ensure_topics
    from streams.query import compute_topic_names, run_pipeline
    from streams.runner import PipelineRunner

    prefix = f"p{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        bootstrap_servers=local_stack.bootstrap_servers, redis_url=redis_url, topic_prefix=prefix,
        cluster_name=prefix, broker_add_grace_seconds=GRACE_SECONDS,
        broker_failure_grace_seconds=GRACE_SECONDS, max_partition_movements=MAX_PARTITION_MOVEMENTS,
        max_leader_movements=MAX_PARTITION_MOVEMENTS, max_replica_movements=1,
        max_movements_per_broker=MAX_PARTITION_MOVEMENTS, trigger_interval="300 milliseconds",
        tick_interval_seconds=0,
    )
    # One partition per topic: the tests rely on the order they send in.
    ensure_topics(local_stack.bootstrap_servers, None, compute_topic_names(settings), 1, replication_factor=1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 1})
    policy = compute_policy(settings)
    runner = PipelineRunner(settings, redis_client, producer, policy)
    query = run_pipeline(spark, settings, runner, {}, tmp_path / "checkpoint", tick_interval_seconds=0)
    harness = Harness(local_stack.bootstrap_servers, prefix, prefix)
    yield harness, runner
    query.stop()
    runner.close()
    harness.close()
    producer.flush(10)


def send_cluster(harness: Harness, runner, brokers=(1, 2, 3), partitions=4, at=T0) -> None:
    """The watcher's first view of the cluster; returns once the pipeline has applied it."""
    for broker in brokers:
        harness.send("broker-membership", broker_event(broker, "UNFENCED", at))
    harness.send("topic-state", topic_event("orders", partitions, at))
    for p in range(partitions):
        harness.send("isr-changes", partition_event("orders", p, [1, 2, 3], at, leader=1))
    eventually(lambda: len(runner.state.cluster.partitions_by_tp) >= partitions, 60, 0.2,
               what="the pipeline applied the first view")


def tick(harness: Harness, at: int) -> None:
    harness.send("requests", request("Tick", {}, at))


def steps(harness: Harness, timeout: float = 20, at_least: int = 0) -> list[dict]:
    return commands_of(harness.read("commands", lambda seen: len(commands_of(seen, "ReassignmentStep"))
                                    >= at_least, timeout), "ReassignmentStep")


def all_steps(harness: Harness) -> list[dict]:
    """Every ReassignmentStep on the commands topic, read to its end (after `settle`: all there
    will be for what was sent)."""
    return commands_of(harness.read_to_end("commands"), "ReassignmentStep")


def settle(runner, what: str, applied: Callable[[ControllerState], bool] = lambda state: True,
           timeout: float = 30) -> None:
    """Wait until the pipeline's state shows `applied` (by default: whatever it shows now) and the
    batch that got it there has published its outbox, so that everything the pipeline decided up
    to `what` is on the output topics; fails naming `what` otherwise."""
    def applied_state() -> ControllerState | None:
        state = runner.state
        return state if applied(state) else None

    batch = eventually(applied_state, timeout, what=f"the pipeline applied {what}").last_batch
    eventually(lambda: all(pending > batch for pending, _ in runner.store.pending_outbox()), timeout,
               what=f"batch {batch} ({what}) published")


def test_a_broker_added_leads_after_the_grace_period_to_at_most_p_steps(pipeline):
    harness, runner = pipeline
    send_cluster(harness, runner)
    harness.send("broker-membership", broker_event(4, "UNFENCED", T0 + 1000))

    def broker_4_added(seen: list[dict]) -> list[dict]:
        return [a for a in alerts_of(seen, "BrokerAdded") if a["subject"] == "broker-4"]

    assert broker_4_added(harness.read("alerts", broker_4_added))
    # Broker 4's BrokerAdded is out: the pipeline has applied all that was sent, and its next
    # batch is the tick's.
    before_tick = runner.state.last_batch

    tick(harness, T0 + 1000 + GRACE_SECONDS * 1000 - 1500)  # still within the grace period
    settle(runner, "the tick within the grace period", lambda state: state.last_batch > before_tick)
    assert all_steps(harness) == []

    tick(harness, T0 + 1000 + GRACE_SECONDS * 1000 + 500)
    started = steps(harness, at_least=1)
    assert 1 <= len(started) <= MAX_PARTITION_MOVEMENTS
    for command in started:
        assert 4 in command["payload"][1]["target_replicas"]
        assert command["epoch"] == runner.state.epoch
    assert alerts_of(harness.read("alerts", lambda seen: alerts_of(seen, "PlanCreated")), "PlanCreated")


def test_completion_advances_exactly_the_completed_partitions_and_an_isr_behind_holds(pipeline):
    harness, runner = pipeline
    send_cluster(harness, runner)
    harness.send("broker-membership", broker_event(4, "UNFENCED", T0 + 1000))
    tick(harness, T0 + 1000 + GRACE_SECONDS * 1000 + 500)
    first = steps(harness, at_least=MAX_PARTITION_MOVEMENTS)
    assert len(first) == MAX_PARTITION_MOVEMENTS
    done, behind = first[0]["payload"][1], first[1]["payload"][1]
    now = T0 + 20_000
    # `done`: Kafka finished its step (replicas == target, all in sync, the new leader leads).
    target = done["target_replicas"]
    harness.send("isr-changes", partition_event("orders", done["partition"], target, now,
                                                leader=target[0], epoch=1))
    # `behind`: the new replica was added but has not joined the ISR.
    target_behind = behind["target_replicas"]
    harness.send("isr-changes", partition_event(
        "orders", behind["partition"], target_behind, now, epoch=1,
        isr=[b for b in target_behind if b not in behind["adding"]], leader=1))
    later = steps(harness, at_least=MAX_PARTITION_MOVEMENTS + 1)[len(first):]
    assert later, "the completed partition's slot was not refilled"
    assert all(c["payload"][1]["partition"] != behind["partition"] for c in later)
    assert len(later) == 1  # exactly one slot freed: P stays the bound
    settle(runner, "both partitions' new state", lambda state: all(
        state.cluster.partition(TopicPartition("orders", fields["partition"])).leader_epoch == 1
        for fields in (done, behind)))
    assert len(all_steps(harness)) == MAX_PARTITION_MOVEMENTS + 1


def test_a_cancel_yields_a_cancellation_and_the_revert(pipeline):
    harness, runner = pipeline
    send_cluster(harness, runner, partitions=2)
    harness.send("broker-membership", broker_event(4, "UNFENCED", T0))
    harness.send("broker-membership", broker_event(5, "UNFENCED", T0))
    harness.send("requests", request("Reassign", {
        "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 5, 3], "log_dirs": []}],
        "additional": False}, T0 + 100, "manual-1"))
    [step] = steps(harness, at_least=1)
    fields = step["payload"][1]
    # Kafka runs the step: adding 4 while keeping 1, 2, 3.
    harness.send("isr-changes", partition_event("orders", 0, [1, 2, 3] + fields["adding"], T0 + 200,
                                                isr=[1, 2, 3], adding=fields["adding"], epoch=1))
    harness.send("requests", request("Cancel", {"topic": None, "partition": None, "keep": False},
                                     T0 + 300, "cancel-1"))
    cancels = commands_of(harness.read("commands", lambda seen: commands_of(seen, "CancelReassignment")),
                          "CancelReassignment")
    assert len(cancels) == 1 and cancels[0]["payload"][1]["partition"] == 0
    # Kafka reverts the cancelled step: the original replicas, nothing moving.
    harness.send("isr-changes", partition_event("orders", 0, [1, 2, 3], T0 + 400, epoch=2))
    # One alert when the cancel is accepted, one when the partition is back where it started.
    alerts = harness.read("alerts", lambda seen: len(alerts_of(seen, "ReassignmentCancelled")) >= 2)
    assert "back at its original replicas" in alerts_of(alerts, "ReassignmentCancelled")[-1]["message"]
    assert dict(runner.state.reassignments) == {}


def test_an_invalid_request_is_rejected_and_nothing_else_changes(pipeline):
    harness, runner = pipeline
    send_cluster(harness, runner, partitions=2)
    harness.send("requests", request("Reassign", {
        "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 99, 3], "log_dirs": []}],
        "additional": False}, T0 + 100, "bad-1"))
    harness.send("requests", request("Cancel", {"topic": None, "partition": None, "keep": False},
                                     T0 + 200, "bad-2"))
    alerts = harness.read("alerts", lambda seen: len(alerts_of(seen, "RequestRejected")) >= 2)
    rejected = alerts_of(alerts, "RequestRejected")
    codes = sorted(a["details"]["error_code"] for a in rejected)
    assert codes == ["INVALID_REPLICA_ASSIGNMENT", "NO_REASSIGNMENT_IN_PROGRESS"]
    assert any("99" in a["message"] for a in rejected)
    settle(runner, "the two rejected requests")  # the batch that rejected them
    assert all_steps(harness) == []
    assert dict(runner.state.reassignments) == {}


def test_garbage_reaches_the_dead_letter_topic_and_the_next_event_is_still_handled(pipeline):
    harness, runner = pipeline
    send_cluster(harness, runner, partitions=2)
    harness.send("isr-changes", None, raw=b"\x00\x01 definitely not avro \xff\xfe")
    harness.send("isr-changes", partition_event("orders", 1, [1, 2, 3], T0 + 500, isr=[1, 2],
                                                epoch=3))
    dead = harness.read("dead-letter", lambda seen: len(seen) >= 1)
    assert dead[0]["value"] == b"\x00\x01 definitely not avro \xff\xfe"
    assert dead[0]["source_topic"] == harness.topic("isr-changes") and dead[0]["reason"]
    alerts = harness.read("alerts", lambda seen: alerts_of(seen, "BadEvent"))
    assert alerts_of(alerts, "BadEvent")

    def isr_applied() -> bool:
        partition = runner.state.cluster.partition(TopicPartition("orders", 1))
        return partition is not None and partition.isr == (1, 2)

    eventually(isr_applied, 20, what="the event after the garbage applied (orders-1 ISR (1, 2))")


def test_two_log_dirs_of_one_broker_in_one_batch_are_both_applied(pipeline):
    """Regression: log-dir events share their broker's key; collapsing by key alone kept only
    the last dir of a batch, and a failed dir reported next to a healthy one went unseen."""
    harness, runner = pipeline
    send_cluster(harness, runner, partitions=2)
    failed, healthy = "/data/b1/d0", "/data/b1/d1"
    harness.send_together("disk-failures", [
        log_dir_event(1, failed, False, T0 + 500, [("orders", 0)]),
        log_dir_event(1, healthy, True, T0 + 500, [("orders", 1)])])
    alerts = harness.read("alerts", lambda seen: alerts_of(seen, "DiskFailed"))
    [disk_failed] = alerts_of(alerts, "DiskFailed")
    assert failed in disk_failed["message"] or failed in str(disk_failed["details"])


def test_events_flow_from_kafka_through_spark_into_redis(pipeline, redis_client):
    """The foundation's smoke flow: Avro events produced with confluent-kafka, read by the Spark
    query with `from_avro`, written to Redis in `foreachBatch` — checked in Redis itself."""
    from state.controller_store import ControllerStore

    harness, runner = pipeline
    send_cluster(harness, runner, partitions=6)
    expected = {}
    burst = []
    for p in range(6):
        # Several states per partition in one batch: only the newest (highest epoch) may stay.
        for epoch, isr in enumerate(([1], [1, 2], [1, 2, 3][: 1 + p % 3]), start=1):
            burst.append(partition_event("orders", p, [1, 2, 3], T0 + 1000 + epoch, isr=isr,
                                         epoch=epoch, size_bytes=1000 * (p + 1)))
        expected[TopicPartition("orders", p)] = tuple([1, 2, 3][: 1 + p % 3])
    harness.send_together("isr-changes", burst)
    store = ControllerStore(redis_client, harness.cluster_name)

    def stored_as_expected():
        stored = store.load().cluster.partitions_by_tp
        return stored if {tp: p.isr for tp, p in stored.items()} == expected else None

    stored = eventually(stored_as_expected, 60, what="the newest ISR of every partition in Redis")
    assert all(p.leader_epoch == 3 for p in stored.values())
    assert stored[TopicPartition("orders", 3)].size_bytes == 4000
    assert store.last_batch() >= 0 and store.load().epoch == runner.state.epoch


def test_a_new_checkpoint_dir_applies_what_is_new_and_reads_nothing_twice(pipeline, spark, local_stack,
                                                                         tmp_path):
    """Regression: a pipeline restarted with a fresh checkpoint dir (a new host) took every Spark
    batch id up to the stored `last_batch` for a replay and skipped it silently (a request and a
    config change were lost). Now the new query starts right after the offsets stored in Redis."""
    from runtime.clients.kafka_consumer import TopicReader
    from streams.query import read_input_logs, run_pipeline
    from streams.runner import PipelineRunner

    harness, runner = pipeline
    send_cluster(harness, runner)
    harness.send("requests", request("SetConfig", {"key": "throttle.bytes.per.sec", "value": "5000"},
                                     T0 + 2000))
    settle(runner, "the first config change", lambda s: s.config.get("throttle.bytes.per.sec") == "5000")
    runner_queries = [q for q in spark.streams.active]
    for query in runner_queries:
        query.stop()
    applied_before = runner.state.last_batch

    successor = PipelineRunner(runner.settings, runner.store.client, runner.producer, runner.policy)
    with TopicReader(local_stack.bootstrap_servers, None, "test-offsets") as reader:
        query = run_pipeline(spark, runner.settings, successor, {}, tmp_path / "a-new-checkpoint",
                             tick_interval_seconds=0, read_logs=lambda topics: read_input_logs(reader, topics))
    try:
        harness.send("requests", request("SetConfig", {"key": "throttle.bytes.per.sec", "value": "7000"},
                                         T0 + 3000))
        settle(successor, "the second config change",
               lambda s: s.config.get("throttle.bytes.per.sec") == "7000")
        assert successor.state.last_batch > applied_before
        assert successor.stats.input_rows == 1 and successor.stats.replayed == 0  # history not re-read
    finally:
        query.stop()
        successor.close()


def test_a_request_of_an_older_schema_set_is_decoded_by_its_header_and_answered(pipeline):
    """Schema set 4 added `Request.action` at the end of the record: Spark's current-schema
    decoding fails on a set-3 request, and the driver decodes it with its header's version."""
    from schemas.codec import encode, version_headers

    harness, runner = pipeline
    send_cluster(harness, runner, partitions=2)
    old = request("Cancel", {"topic": None, "partition": None, "keep": False}, T0 + 100, "old-1")
    old = {k: v for k, v in old.items() if k != "action"}
    harness.producer.produce(harness.topic("requests"), key=b"old-1", value=encode("Request", old, version=3),
                             headers=version_headers(3))
    assert harness.producer.flush(30) == 0
    alerts = harness.read("alerts", lambda seen: any(a["subject"] == "old-1" for a in seen))
    [verdict] = [a for a in alerts if a["subject"] == "old-1"]
    assert verdict["kind"] == "RequestRejected" and verdict["details"]["error_code"] == "NO_REASSIGNMENT_IN_PROGRESS"
    assert not [a for a in alerts if a["kind"] == "BadEvent"]
