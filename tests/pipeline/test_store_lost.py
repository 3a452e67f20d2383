"""The pipeline under a Redis that loses or rolls back its data while it runs (`streams.runner`,
STORE LOST): the next batch finds it out before writing, the pipeline rewrites its state whole
under a higher epoch, raises one `StateStoreLost` ERROR alert, and goes on. Real Redis, no Kafka
(a producer that acknowledges everything at once)."""

from __future__ import annotations

import uuid

import pytest

from runtime.settings import compute_policy, load_settings
from schemas.codec import decode, encode
from streams.runner import PipelineRunner
from tests.pipeline.harness import T0, broker_event, partition_event, topic_event
from tests.pipeline.test_epoch_fencing import AcknowledgingProducer, tick_row
from tests.state.test_store_verified import cluster_keys, empty, restore

pytestmark = [pytest.mark.stack]


def event_rows(settings, first_offset: int) -> list[tuple[str, int, int, bytes]]:
    """Three brokers, a topic of four partitions: a state worth losing."""
    rows = [(settings.topic("broker-membership"), 0, first_offset + b,
             encode("BrokerMembership", broker_event(b, "UNFENCED", T0))) for b in (1, 2, 3)]
    rows.append((settings.topic("topic-state"), 0, first_offset, encode("TopicState", topic_event("orders", 4, T0))))
    rows += [(settings.topic("isr-changes"), 0, first_offset + p,
              encode("PartitionState", partition_event("orders", p, [1, 2, 3], T0))) for p in range(4)]
    return rows


def alerts(producer: AcknowledgingProducer, settings, kind: str) -> list[dict]:
    found = [decode("Alert", value) for topic, value in producer.sent if topic == settings.topic("alerts")]
    return [a for a in found if a["kind"] == kind]


@pytest.fixture
def runner(redis_client):
    settings = load_settings(cluster_name=f"lost-{uuid.uuid4().hex[:8]}")
    runner = PipelineRunner(settings, redis_client, AcknowledgingProducer(), compute_policy(settings))
    runner.start()
    runner.process_rows(event_rows(settings, 0))
    runner.process_rows([tick_row(settings, 0)])
    assert len(runner.state.cluster.partitions_by_tp) == 4
    return runner


def test_redis_emptied_under_a_running_pipeline_is_rewritten_whole(runner):
    settings, epoch = runner.settings, runner.state.epoch
    empty(runner.store)
    runner.process_rows([tick_row(settings, 1)])
    stored = runner.store.load()
    assert stored == runner.state and stored.last_batch == 2 and stored.epoch == epoch + 1
    assert len(stored.cluster.brokers) == 3 and len(stored.cluster.partitions_by_tp) == 4
    assert runner.store.applied_offsets() == runner.applied
    [alert] = alerts(runner.producer, settings, "StateStoreLost")
    assert alert["severity"] == "ERROR" and "holds no state at all" in alert["message"]
    runner.process_rows([tick_row(settings, 2)])  # and it goes on, quietly
    assert runner.store.load().last_batch == 3 and len(alerts(runner.producer, settings, "StateStoreLost")) == 1


def test_redis_rolled_back_under_a_running_pipeline_is_rewritten_whole(runner):
    settings = runner.settings
    backup = cluster_keys(runner.store)  # after batch 1
    for offset in (1, 2, 3):
        runner.process_rows([tick_row(settings, offset)])
    restore(runner.store, backup)
    runner.process_rows([tick_row(settings, 4)])
    stored = runner.store.load()
    assert stored == runner.state and stored.last_batch == 5
    [alert] = alerts(runner.producer, settings, "StateStoreLost")
    assert "went back from batch 4 to batch 1" in alert["message"]


def test_a_query_started_again_after_the_loss_rewrites_the_store_before_loading_it(runner):
    """Spark's query failed and is started again in the same process (`run_until_stopped`):
    `start` must not load what a lost store holds."""
    state = runner.state
    empty(runner.store)
    runner.start()
    assert runner.state.with_changes(epoch=0) == state.with_changes(epoch=0)
    assert len(runner.store.load().cluster.partitions_by_tp) == 4
    assert len(alerts(runner.producer, runner.settings, "StateStoreLost")) == 1
