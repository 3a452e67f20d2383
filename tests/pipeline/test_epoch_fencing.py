"""Two pipelines on one cluster's state: the newer one fences the older (regression: both
committed state; the executor refused the older one's commands but its state kept them in flight,
and 4 of 6 partitions wedged for the stall timeout). Real Redis, no Kafka (a producer that
acknowledges everything at once)."""

from __future__ import annotations

import uuid

import pytest

from schemas.errors import FencedError
from runtime.settings import compute_policy, load_settings
from schemas.codec import encode
from streams.runner import PipelineRunner

pytestmark = [pytest.mark.stack]


class AcknowledgingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self._reports: list = []

    def produce(self, topic, key, value, headers, on_delivery=None):
        self.sent.append((topic, value))
        if on_delivery:
            self._reports.append(on_delivery)

    def poll(self, _timeout=0):
        return 0

    def flush(self, _timeout=0):
        for report in self._reports:
            report(None, None)
        self._reports.clear()
        return 0


def tick_row(settings, offset: int) -> tuple[str, int, int, bytes]:
    record = {"schema_version": 1, "event_time": 1_800_000_000_000 + offset, "id": f"tick-{offset}",
              "key": "tick", "requested_by": "test", "payload": ("Tick", {})}
    return settings.topic("requests"), 0, offset, encode("Request", record)


def test_the_older_of_two_pipelines_stops_and_writes_nothing(redis_client):
    settings = load_settings(cluster_name=f"fence-{uuid.uuid4().hex[:8]}")
    older = PipelineRunner(settings, redis_client, AcknowledgingProducer(), compute_policy(settings))
    older.start()
    older.process_rows([tick_row(settings, 0)])
    newer = PipelineRunner(settings, redis_client, AcknowledgingProducer(), compute_policy(settings))
    newer.start()
    with pytest.raises(FencedError):
        older.process_rows([tick_row(settings, 1)])
    assert older.fenced is not None and "replaced by epoch" in str(older.fenced)
    newer.process_rows([tick_row(settings, 1)])
    stored = newer.store.load()
    assert (stored.epoch, stored.last_batch) == (newer.state.epoch, 1) and newer.state.epoch > older.state.epoch
