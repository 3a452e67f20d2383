"""The Admin API calls the local stack needs to know when it is ready and what state it is in.

confluent-kafka serves metadata and produce; kafka-python 3.x serves DescribeLogDirs, which
confluent-kafka does not expose. Cluster metadata lists only unfenced brokers, so a broker id in
it is registered and unfenced.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from runtime.clients.client_config import ClientConfig
from schemas.errors import LocalStackError, ProcessStartError

KAFKA_STORAGE_ERROR = 56
PASSING_CREATE_ERRORS = (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError.INVALID_REPLICATION_FACTOR,
                         KafkaError.NOT_CONTROLLER, KafkaError._TRANSPORT, KafkaError._DESTROY_BROKER)
"""CreateTopics answers that pass on a starting cluster (`check_writes`). _DESTROY_BROKER: the
client dropped the connection the request was on while it learned the cluster's brokers (seen
on a starved machine, 2026-11-27)."""
PLAINTEXT = ClientConfig()


def client_settings(bootstrap_servers: str, client: ClientConfig = PLAINTEXT, **extra) -> dict:
    """librdkafka settings for the stack's own tooling (`client`: the super user's on a secured
    stack)."""
    return {"bootstrap.servers": bootstrap_servers, "log_level": 0, **client.librdkafka, **extra}


def admin_client(bootstrap_servers: str, client: ClientConfig = PLAINTEXT) -> AdminClient:
    return AdminClient(client_settings(bootstrap_servers, client, **{"socket.timeout.ms": 5000}))


def unfenced_brokers(bootstrap_servers: str, timeout: float = 5.0,
                     client: ClientConfig = PLAINTEXT) -> set[int]:
    try:
        metadata = admin_client(bootstrap_servers, client).list_topics(timeout=timeout)
    except KafkaException:
        return set()
    return set(metadata.brokers)


def wait_for_brokers(bootstrap_servers: str, broker_ids: set[int], timeout: float,
                     client: ClientConfig = PLAINTEXT) -> None:
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while time.monotonic() < deadline:
        seen = unfenced_brokers(bootstrap_servers, client=client)
        if broker_ids <= seen:
            return
        time.sleep(0.5)
    missing = sorted(broker_ids - seen)
    raise ProcessStartError(
        f"brokers {missing} did not register unfenced within {timeout:.0f} s; "
        "see their logs/server.log under the stack dir"
    )


def wait_for_fenced(bootstrap_servers: str, broker_id: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker_id not in unfenced_brokers(bootstrap_servers):
            return
        time.sleep(0.5)
    raise LocalStackError(f"broker {broker_id} still unfenced after {timeout:.0f} s")


def check_writes(bootstrap_servers: str, topic: str, replication_factor: int,
                 client: ClientConfig = PLAINTEXT, timeout: float = 180.0) -> None:
    """Create `topic` if needed and write one record with acks=all; raise if it cannot.
    `timeout` for each: a 4.4 stack on a starved machine (a Python loop 5x slower than at full
    speed) did not take the write within 60 s, twice in a row (2026-11-27).

    Creating is tried again until `timeout` while Kafka's answer is a passing one: on a loaded
    machine the controller takes seconds per event ("exceptionally slow controller event ...
    took 2325 ms"), so the request times out on the client, or a broker unfenced a moment ago is
    not yet counted for the replication factor. Any other error is raised at once."""
    admin = admin_client(bootstrap_servers, client)
    deadline = time.monotonic() + timeout
    while True:
        futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication_factor)],
                                      request_timeout=30)
        try:
            futures[topic].result(timeout=35)
            break
        except KafkaException as error:
            code = error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if code not in PASSING_CREATE_ERRORS or time.monotonic() > deadline:
                raise LocalStackError(f"cannot create the readiness topic {topic}: {error}") from None
        except TimeoutError:
            if time.monotonic() > deadline:
                raise LocalStackError(f"creating the readiness topic {topic}: no answer within {timeout:.0f} s; "
                                      "see the brokers' logs/server.log under the stack dir") from None
        time.sleep(1.0)
    producer = Producer(client_settings(bootstrap_servers, client, acks="all", log_level=3,
                                        **{"enable.idempotence": True,
                                           "message.timeout.ms": int(timeout * 1000)}))
    failures: list[str] = []
    producer.produce(topic, value=f"ready {uuid.uuid4()}".encode(),
                     on_delivery=lambda err, msg: err and failures.append(str(err)))
    remaining = producer.flush(timeout)
    if remaining or failures:
        raise LocalStackError(
            f"the test topic {topic} did not accept a write: {failures or 'timed out'}"
        )


def describe_log_dirs(bootstrap_servers: str, broker_id: int,
                      client: ClientConfig = PLAINTEXT) -> dict[str, dict]:
    """Per log dir of one broker: {"error_code": int, "partitions": [(topic, partition, size)]}."""
    from runtime.clients.kafka_fast_reads import open_admin_client

    admin = open_admin_client(bootstrap_servers=bootstrap_servers, request_timeout_ms=10000,
                              **client.kafka_python)
    try:
        response = admin.describe_log_dirs(brokers=[broker_id])
    finally:
        admin.close()
    return normalise_log_dirs(response)


def normalise_log_dirs(response: list[dict]) -> dict[str, dict]:
    """kafka-python's answer, `[{"broker", "log_dirs": [{"log_dir", "error_code", "topics"}]}]`,
    as {path: {"error_code", "total_bytes", "usable_bytes", "partitions": [(topic, p, size)]}}."""
    dirs: dict[str, dict] = {}
    for broker in response:
        for entry in broker.get("log_dirs", []):
            dirs[entry["log_dir"]] = {
                "error_code": entry.get("error_code", 0),
                "total_bytes": entry.get("total_bytes"),
                "usable_bytes": entry.get("usable_bytes"),
                "partitions": [
                    (topic["name"], part["partition_index"], part["partition_size"])
                    for topic in entry.get("topics", [])
                    for part in topic.get("partitions", [])
                ],
            }
    return dirs


def wait_for_log_dir_offline(bootstrap_servers: str, broker_id: int, log_dir: str,
                             timeout: float, client: ClientConfig = PLAINTEXT) -> None:
    deadline = time.monotonic() + timeout
    last: dict[str, dict] = {}
    while time.monotonic() < deadline:
        try:
            last = describe_log_dirs(bootstrap_servers, broker_id, client)
        except Exception:  # the broker may be briefly busy handling the failure
            last = {}
        entry = last.get(log_dir)
        if entry is not None and entry["error_code"] == KAFKA_STORAGE_ERROR:
            return
        time.sleep(0.5)
    raise LocalStackError(
        f"broker {broker_id} did not report log dir {log_dir} offline within {timeout:.0f} s "
        f"(last answer: { {k: v['error_code'] for k, v in last.items()} })"
    )
