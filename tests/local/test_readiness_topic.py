"""The local stack's readiness check creates its topic again while Kafka's answer is a passing
one: regression for `make test` on a throttled machine, where the controller took 2.3 s per event,
CreateTopics timed out on the client ("_TIMED_OUT ... Failed while waiting for response from
broker") and the whole shared stack (45 tests) errored. No cluster: confluent-kafka's admin
client and producer are replaced at the module's seams."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

import reassigner.dev.local.kafka_admin as kafka_admin
from schemas.errors import LocalStackError


class Admin:
    def __init__(self, answers: list[KafkaError | None]) -> None:
        self.answers = answers
        self.asked = 0

    def create_topics(self, topics, request_timeout):
        assert request_timeout >= 30  # not the client's 5 s socket timeout
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        future: Future = Future()
        if answer is None:
            future.set_result(None)
        else:
            future.set_exception(KafkaException(answer))
        return {topics[0].topic: future}


class Producer:
    def __init__(self, settings) -> None:
        self.delivered = []

    def produce(self, topic, value, on_delivery):
        on_delivery(None, None)

    def flush(self, timeout):
        return 0


@pytest.fixture
def admin(monkeypatch):
    def install(answers):
        fake = Admin(answers)
        monkeypatch.setattr(kafka_admin, "admin_client", lambda bootstrap, client: fake)
        monkeypatch.setattr(kafka_admin, "Producer", Producer)
        monkeypatch.setattr(kafka_admin.time, "sleep", lambda seconds: None)
        return fake
    return install


def test_a_create_that_timed_out_or_lacked_brokers_is_tried_again(admin):
    fake = admin([KafkaError(KafkaError._TIMED_OUT), KafkaError(KafkaError.INVALID_REPLICATION_FACTOR),
                  KafkaError(KafkaError._DESTROY_BROKER), None])  # the last: seen on a starved machine
    kafka_admin.check_writes("127.0.0.1:1", "ready", 3)
    assert fake.asked == 4


def test_a_topic_already_there_is_ready(admin):
    fake = admin([KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)])
    kafka_admin.check_writes("127.0.0.1:1", "ready", 3)
    assert fake.asked == 1


def test_any_other_error_is_raised_at_once_in_one_line(admin):
    fake = admin([KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)])
    with pytest.raises(LocalStackError, match="^cannot create the readiness topic ready: ") as error:
        kafka_admin.check_writes("127.0.0.1:1", "ready", 3)
    assert fake.asked == 1 and "\n" not in str(error.value)


def test_a_passing_error_that_never_passes_ends_at_the_timeout(admin):
    admin([KafkaError(KafkaError._TIMED_OUT)])
    with pytest.raises(LocalStackError, match="cannot create the readiness topic ready: .*_TIMED_OUT"):
        kafka_admin.check_writes("127.0.0.1:1", "ready", 3, timeout=0.0)
