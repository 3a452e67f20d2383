"""Regression: a cluster id starting with '-' made Kafka's storage tool fail ("argument
--cluster-id/-t: expected one argument"), so 1 local-stack start in 64 failed."""

from __future__ import annotations

import uuid

from reassigner.dev.local import kafka_server


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    dashed = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 of 0xF8... starts with '-'
    draws = iter([dashed, uuid.UUID(int=1)])
    monkeypatch.setattr(kafka_server.uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka_server.new_cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22
