"""Exactly-once by input offsets on real Redis (regression: a pipeline restarted with a fresh
checkpoint dir took every Spark batch id up to the stored `last_batch` for a replay and skipped
it silently: a `rebalance` request and a config change were lost). No Kafka: rows are handed to
the runner as Spark would after a restart (re-read from the start of the topics)."""

from __future__ import annotations

import json
import uuid

import pytest

from runtime.settings import compute_policy, load_settings
from schemas.codec import encode
from streams.query import prepare_query_start
from streams.runner import PipelineRunner
from tests.pipeline.test_epoch_fencing import AcknowledgingProducer

pytestmark = [pytest.mark.stack]


def set_config_row(settings, offset: int, key: str, value: str) -> tuple[str, int, int, bytes]:
    record = {"schema_version": 1, "event_time": 1_800_000_000_000 + offset, "id": f"set-{offset}",
              "key": key, "requested_by": "test", "payload": ("SetConfig", {"key": key, "value": value})}
    return settings.topic("requests"), 0, offset, encode("Request", record)


def new_runner(settings, redis_client) -> PipelineRunner:
    runner = PipelineRunner(settings, redis_client, AcknowledgingProducer(), compute_policy(settings))
    runner.start()
    return runner


def test_a_restart_reading_from_the_start_applies_only_new_records(redis_client):
    settings = load_settings(cluster_name=f"once-{uuid.uuid4().hex[:8]}")
    first = new_runner(settings, redis_client)
    history = [set_config_row(settings, 0, "reassignment.max.concurrent.partition.movements", "7"),
               set_config_row(settings, 1, "reassignment.max.concurrent.leader.movements", "3")]
    first.process_rows(history[:1])
    first.process_rows(history[1:])
    assert first.state.last_batch == 1

    # A new host, a fresh checkpoint: Spark numbers batches from 0 again and re-reads history.
    second = new_runner(settings, redis_client)
    assert second.applied == {(settings.topic("requests"), 0): 1}
    change = set_config_row(settings, 2, "reassignment.max.concurrent.partition.movements", "9")
    second.process_rows(history + [change])
    stored = second.store.load()
    assert stored.config["reassignment.max.concurrent.partition.movements"] == "9"
    assert stored.config["reassignment.max.concurrent.leader.movements"] == "3"
    assert stored.last_batch == 2  # numbered after the last applied batch, not by Spark
    assert second.store.applied_offsets() == {(settings.topic("requests"), 0): 2}

    # Spark re-running that batch after a crash: nothing applied twice, nothing committed.
    second.process_rows(history + [change])
    assert second.stats.replayed == 1 and second.store.load().last_batch == 2


def test_undecodable_records_count_as_applied(redis_client):
    settings = load_settings(cluster_name=f"once-{uuid.uuid4().hex[:8]}")
    runner = new_runner(settings, redis_client)
    garbage = (settings.topic("isr-changes"), 1, 40, b"\x00garbage")
    runner.process_rows([garbage])
    dead_letters = [m for m in runner.producer.sent if m[0] == settings.topic("dead-letter")]
    assert len(dead_letters) == 1
    runner.process_rows([garbage])
    assert runner.stats.replayed == 1 and len([m for m in runner.producer.sent
                                               if m[0] == settings.topic("dead-letter")]) == 1


def write_checkpoint(directory, ends: dict) -> None:
    (directory / "offsets").mkdir(parents=True)
    (directory / "commits").mkdir()
    (directory / "offsets" / "0").write_text("v1\n{}\n" + json.dumps(ends) + "\n")
    (directory / "commits" / "0").write_text("v1\n{}\n")


def test_the_query_starts_after_the_applied_offsets_and_never_skips_one(redis_client, tmp_path):
    settings = load_settings(cluster_name=f"once-{uuid.uuid4().hex[:8]}")
    requests = settings.topic("requests")
    runner = new_runner(settings, redis_client)
    runner.process_rows([set_config_row(settings, 5, "throttle.bytes.per.sec", "1000")])
    logs = {(requests, 0): (0, 6), (requests, 1): (0, 0)}
    # A new checkpoint starts right after what was applied.
    assert json.loads(prepare_query_start(runner, tmp_path / "new", logs)) == {requests: {"0": 6, "1": -2}}
    # A checkpoint that would resume past records never applied (Redis restored from an older
    # backup) is discarded; one that agrees is kept.
    ahead, agreeing = tmp_path / "ahead", tmp_path / "agreeing"
    write_checkpoint(ahead, {requests: {"0": 9, "1": 0}})
    write_checkpoint(agreeing, {requests: {"0": 6, "1": 0}})
    prepare_query_start(runner, ahead, logs)
    prepare_query_start(runner, agreeing, logs)
    assert not ahead.exists() and agreeing.exists()
    # The topic was deleted and made again: its new records (offsets from 0) are not replays.
    starts = prepare_query_start(runner, tmp_path / "new", {(requests, 0): (0, 2), (requests, 1): (0, 0)})
    assert json.loads(starts) == {requests: {"0": -2, "1": -2}}
    assert runner.store.applied_offsets() == {} and runner.applied == {}
