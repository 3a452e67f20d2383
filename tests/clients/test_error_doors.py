"""One translation per client library: Redis's and Kafka's errors into the product's hierarchy."""

from __future__ import annotations

import pytest
import redis
from confluent_kafka import KafkaError

from runtime.clients.kafka_errors import translate_kafka_error
from runtime.clients.redis_io import call_redis, translate_redis_error
from schemas.errors import KafkaPermanentError, KafkaTransientError, PermanentError, TransientError


def test_a_lost_redis_is_transient_and_says_what_to_check():
    error = translate_redis_error(redis.ConnectionError("Connection refused"), "claiming command c1")
    assert isinstance(error, TransientError) and error.code == "REDIS_UNAVAILABLE"
    assert "claiming command c1" in str(error) and "--redis-url" in str(error)
    assert isinstance(translate_redis_error(redis.BusyLoadingError("loading"), "x"), TransientError)
    assert isinstance(translate_redis_error(redis.TimeoutError("slow"), "x"), TransientError)


def test_any_other_redis_error_is_permanent():
    error = translate_redis_error(redis.ResponseError("ERR wrong number of arguments"), "committing")
    assert isinstance(error, PermanentError) and error.code == "REDIS_ERROR"


def test_call_redis_translates_what_its_action_raises():
    def refuse():
        raise redis.ConnectionError("refused")
    try:
        call_redis(refuse, "loading the state")
    except TransientError as error:
        assert "loading the state" in str(error)
    else:
        raise AssertionError("not translated")


def test_a_delivery_report_error_translates_like_an_exception():
    transient = translate_kafka_error(KafkaError(KafkaError._MSG_TIMED_OUT), "publishing to t")
    assert isinstance(transient, KafkaTransientError) and transient.code == "MSG_TIMED_OUT"
    permanent = translate_kafka_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "publishing to t")
    assert isinstance(permanent, KafkaPermanentError) and permanent.code == "TOPIC_AUTHORIZATION_FAILED"


def test_a_redis_cluster_url_that_answers_nothing_fails_in_one_transient_line():
    from runtime.clients.redis_io import connect_redis
    from reassigner.dev.local.processes import free_port
    from schemas.errors import TransientError

    with pytest.raises(TransientError, match="connecting to the Redis Cluster at redis\\+cluster://u:\\*\\*\\*@") as down:
        connect_redis(f"redis+cluster://u:secret@127.0.0.1:{free_port()}", 1.0, 1.0)
    assert "secret" not in str(down.value) and down.value.code == "REDIS_UNAVAILABLE"
