"""A controller that died is not the product's controller for good (regression: kafka-python's
cached controller id pointed at the dead broker; every step then failed BROKER_NOT_AVAILABLE and
the executor gave up on all 20 heal steps and an unrelated manual move)."""

from __future__ import annotations

import kafka.admin
import kafka.errors
import pytest

from runtime.clients.kafka_admin import ClusterAdmin
from schemas.errors import KafkaPermanentError


class FakeAdminClient:
    """A KafkaAdminClient whose controller id is cached at creation: the first one created still
    points at the dead broker 1, later ones found the live controller."""

    created: list["FakeAdminClient"] = []

    def __init__(self, **_options) -> None:
        self.controller = 1 if not FakeAdminClient.created else 2
        self.closed = False
        self._manager = _MetadataRefreshThatKeepsTheController()
        FakeAdminClient.created.append(self)

    def alter_partition_reassignments(self, _reassignments):
        if self.controller == 1:
            raise kafka.errors.UnknownBrokerIdError(1)
        return {}

    def close(self):
        self.closed = True


class _MetadataRefreshThatKeepsTheController:
    """kafka-python's metadata refresh works, yet the cached controller id survives it."""

    class cluster:
        @staticmethod
        def refresh_metadata():
            return None

    @staticmethod
    def run(function, *args):
        return function(*args)


@pytest.fixture
def fake_clients(monkeypatch):
    FakeAdminClient.created = []
    monkeypatch.setattr(kafka.admin, "KafkaAdminClient", FakeAdminClient)
    return FakeAdminClient.created


def test_a_request_to_a_dead_controller_is_sent_again_through_a_new_client(fake_clients):
    admin = ClusterAdmin("b:9092")
    admin._call("alter reassignments", lambda c: c.alter_partition_reassignments({}))
    assert [c.controller for c in fake_clients] == [1, 2] and fake_clients[0].closed


def test_a_broker_still_unknown_to_a_new_client_is_not_available(monkeypatch, fake_clients):
    monkeypatch.setattr(FakeAdminClient, "alter_partition_reassignments",
                        lambda self, _r: (_ for _ in ()).throw(kafka.errors.UnknownBrokerIdError(7)))
    admin = ClusterAdmin("b:9092")
    with pytest.raises(KafkaPermanentError) as refused:
        admin._call("alter reassignments", lambda c: c.alter_partition_reassignments({}))
    assert refused.value.code == "BROKER_NOT_AVAILABLE" and len(fake_clients) == 2
