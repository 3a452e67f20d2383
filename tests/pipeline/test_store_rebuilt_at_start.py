"""A pipeline that starts on a store behind what the product published (Redis emptied or rolled
back while the pipeline was stopped; `streams.store_recovery`): with real Kafka and Redis, no
Spark. The store is not loaded but rebuilt: epoch, batches and command sequence above every one
published, old requests not applied again, one `StateStoreLost`; an intact store is loaded as
it is."""

from __future__ import annotations

import time
import uuid

import pytest

from handlers.progress import compute_throttle_marker
from runtime.clients.kafka_admin import ensure_topics
from runtime.clients.kafka_consumer import TopicReader
from runtime.clients.kafka_producer import build_producer, producer_config
from runtime.settings import compute_policy, load_settings
from streams.input_rows import INPUT_TOPICS
from streams.query import compute_topic_names, read_input_logs
from streams.runner import PipelineRunner
from streams.store_recovery import read_published_marks
from tests.pipeline.harness import Harness, request
from tests.pipeline.test_epoch_fencing import tick_row
from tests.state.test_store_verified import cluster_keys, restore
from tests.waiting import eventually
from schemas.errors import TransientError

pytestmark = [pytest.mark.stack]


class Product:
    """One cluster's topics and state, and pipeline runners started on them as processes are."""

    def __init__(self, local_stack, redis_client) -> None:
        name = f"r{uuid.uuid4().hex[:8]}"
        self.bootstrap = local_stack.bootstrap_servers
        self.settings = load_settings(topic_prefix=name, cluster_name=name, bootstrap_servers=self.bootstrap)
        ensure_topics(self.bootstrap, None, compute_topic_names(self.settings), 2)
        self.redis = redis_client
        self.kafka = Harness(self.bootstrap, name, name)
        self.producer = build_producer(producer_config(self.bootstrap, None, "tests-pipeline"))

    def start(self) -> PipelineRunner:
        """A pipeline process starting: what it published is read before its first batch."""
        runner = PipelineRunner(self.settings, self.redis, self.producer, compute_policy(self.settings))

        def read():  # a leadership moving is waited out, as `run` starts its query again
            try:
                with TopicReader(self.bootstrap, None, "tests-marks") as reader:
                    return (read_published_marks(reader, self.settings.topic("commands"), self.settings.topic("alerts")),
                            read_input_logs(reader, [self.settings.topic(s) for s in INPUT_TOPICS]))
            except TransientError:
                return None
        marks, logs = eventually(read, 60, what="what the product published and the input logs")
        runner.start(marks, logs)
        return runner

    def published_before(self, epoch: int, batch: int, sequence: int) -> None:
        """What an earlier pipeline published while the store was whole: a step, an alert."""
        now = int(time.time() * 1000)
        self.kafka.send("commands", {
            "schema_version": 5, "event_time": now, "id": f"b{batch}-rebalance-1/orders-0:1:ReassignmentStep",
            "key": "orders-0", "epoch": epoch, "reassignment_id": f"b{batch}-rebalance-1/orders-0", "step": 1,
            "reason": "rebalance", "payload": ("ReassignmentStep", {
                "topic": "orders", "partition": 0, "target_replicas": [1, 2, 3], "throttle_sequence": sequence,
                "throttle_rate_bytes_per_sec": 1000, "throttle_leader_broker_ids": [1, 2],
                "throttle_follower_broker_ids": [3], "final_target_replicas": [1, 2, 4]})})
        self.kafka.send("alerts", {
            "schema_version": 5, "event_time": now, "id": f"alert-{batch}-0", "key": "orders-0", "severity": "INFO",
            "kind": "PlanCreated", "subject": "orders-0", "message": "a plan", "details": {}})

    def store_lost_alerts(self, count: int) -> list[dict]:
        seen = self.kafka.read("alerts", lambda alerts: sum(a["kind"] == "StateStoreLost" for a in alerts) >= count, 30)
        return [a for a in seen if a["kind"] == "StateStoreLost"]

    def close(self) -> None:
        self.kafka.close()
        self.producer.flush(10)


@pytest.fixture
def product(local_stack, redis_client):
    product = Product(local_stack, redis_client)
    yield product
    product.close()



def read_ends(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]] | None:
    """The topic's watermarks, or None while a partition's leadership moves (a loaded machine)."""
    try:
        return TopicReader(bootstrap, None, "t").watermarks(topic, partitions)
    except TransientError:
        return None

def test_a_store_emptied_while_the_pipeline_was_stopped_is_rebuilt_from_kafka(product):
    settings = product.settings
    product.published_before(epoch=7, batch=40, sequence=12)
    product.kafka.send("requests", request("Rebalance", {"topics": [], "log_dirs": False, "broker_ids": []},
                                           int(time.time() * 1000)))  # old: never applied again
    runner = product.start()  # the store holds nothing: emptied
    state = runner.state
    assert state.epoch > 7 and state.last_batch == 40 and state.command_sequence == 13
    assert not state.reassignments and not state.cluster.brokers
    # the published step's throttle is cleared once Kafka moves none of its partitions
    assert state.open_alerts == {compute_throttle_marker([1, 2, 3], [("orders", 0)])}
    # the plan that was running is requested again once the replay has caught up
    assert runner.resume is not None and runner.resume.plans == (("orders", 0, (1, 2, 4)),)
    requests_end = {p: high for p, (_low, high) in
                    eventually(lambda: read_ends(product.bootstrap, settings.topic("requests"), [0, 1]), 30,
                               what=f"the end offsets of {settings.topic('requests')}").items()}
    assert runner.applied == {(settings.topic("requests"), p): end - 1 for p, end in requests_end.items() if end}
    assert runner.store.load().with_changes(epoch=0) == state.with_changes(epoch=0)
    [alert] = product.store_lost_alerts(1)
    assert alert["severity"] == "ERROR" and "commands of epoch 7" in alert["message"]
    assert "the plans that were running (1 partitions" in alert["message"]
    runner.process_rows([tick_row(settings, 10)])  # batches go on, verified, above any used
    assert runner.store.load().last_batch == 41
    assert runner.resume is None  # caught up (no event to replay); orders-0 unknown here: nothing requested


def test_a_store_rolled_back_while_the_pipeline_was_stopped_is_rebuilt_from_kafka(product):
    first = product.start()  # nothing published yet, nothing stored: a first start
    settings = product.settings
    first.process_rows([tick_row(settings, 0)])
    backup = cluster_keys(first.store)  # after batch 0
    for offset in (1, 2, 3):
        first.process_rows([tick_row(settings, offset)])
    product.published_before(epoch=first.state.epoch, batch=3, sequence=0)
    restore(first.store, backup)  # while no pipeline runs
    second = product.start()
    assert second.state.last_batch == 3 and second.state.epoch > first.state.epoch
    [alert] = product.store_lost_alerts(1)
    assert "ends at batch 0, but batch 3 raised alerts" in alert["message"]


def test_an_intact_store_is_loaded_as_it_is(product):
    first = product.start()
    settings = product.settings
    for offset in (0, 1):
        first.process_rows([tick_row(settings, offset)])
    product.published_before(epoch=first.state.epoch, batch=1, sequence=0)
    second = product.start()
    assert second.state.last_batch == 1 and second.state.epoch == first.state.epoch + 1
    assert second.applied == first.applied
    assert not [a for a in product.kafka.read("alerts", timeout=3) if a["kind"] == "StateStoreLost"]
