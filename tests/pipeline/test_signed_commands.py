"""The pipeline signs every command it publishes when a command signing key is configured, and
only commands (issue 18); the executor's check accepts them as they are, re-published outboxes
included. With a fake producer and Redis (no server)."""

from __future__ import annotations

import logging
import os
from unittest import mock

import pytest

from handlers.outbox import Outbox
from reassigner.edge.executor import compute_trust_problem
from schemas.signing import SIGNATURE_HEADER, UNSIGNED, SigningKey, compute_signature_problem
from streams.runner import PipelineRunner
from tests.settings_defaults import default_policy, default_settings

SECRET = b"a1" * 32
NOW_MS = 1_800_000_000_000


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, list]] = []

    def produce(self, topic, key, value, headers, on_delivery=None):
        self.sent.append((topic, key, value, list(headers)))

    def poll(self, _timeout=0):
        return 0

    def flush(self, _timeout=0):
        return 0


class FakeRedis:
    """The two hash calls of the signing announcement; a script registry for the store."""

    def __init__(self, executor_announces: str | None = None) -> None:
        self.hashes: dict[str, dict[str, str]] = {}
        if executor_announces is not None:
            self.hashes["reassigner:{signed}:command_signing"] = {"executor": executor_announces}

    def register_script(self, _script):
        return mock.Mock()

    def hset(self, key, field, value):
        self.hashes.setdefault(key, {})[field] = value

    def hgetall(self, key):
        return dict(self.hashes.get(key, {}))


@pytest.fixture()
def key_file(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(SECRET + b"\n")
    os.chmod(path, 0o600)
    return path


def runner_with(key_file, redis=None) -> tuple[PipelineRunner, RecordingProducer]:
    settings = default_settings(command_signing_key_file=key_file, cluster_name="signed")
    producer = RecordingProducer()
    return PipelineRunner(settings, redis or FakeRedis(), producer, default_policy()), producer


def outbox_messages(epoch: int = 5):
    outbox = Outbox(batch_id=3, now_ms=NOW_MS, epoch=epoch)
    outbox.command("r1/t-0:1:ReassignmentStep", "t-0", "r1/t-0", 1, "heal", "ReassignmentStep",
                   {"topic": "t", "partition": 0, "target_replicas": [1, 2], "adding": [2], "removing": [3],
                    "elect_leader": False, "target_log_dirs": []})
    outbox.command("throttle-1:0:SetThrottle", "1", None, 0, "throttle", "SetThrottle",
                   {"broker_ids": [1], "rate_bytes_per_sec": 1000, "partitions": []})
    outbox.alert("PlanCreated", "INFO", "cluster", "planned")
    return outbox.messages


def test_every_command_published_is_signed_and_nothing_else_is(key_file):
    runner, producer = runner_with(key_file)
    runner.publish(outbox_messages())
    key = SigningKey(SECRET)
    commands = [m for m in producer.sent if m[0] == "reassigner.commands"]
    others = [m for m in producer.sent if m[0] != "reassigner.commands"]
    assert len(commands) == 2 and len(others) == 1
    for topic, message_key, value, headers in commands:
        assert compute_signature_problem(key, topic, message_key, value, headers) is None
        assert compute_trust_problem(key, topic, message_key, value, headers, NOW_MS, NOW_MS) is None
    assert not [h for h in others[0][3] if h[0] == SIGNATURE_HEADER]


def test_an_outbox_re_published_with_a_new_epoch_is_signed_anew(key_file):
    """`compute_restamped` changes the epoch inside the value: a signature made before would no
    longer match, so signing happens at publish time, over the bytes that go out."""
    from handlers.outbox import compute_restamped

    runner, producer = runner_with(key_file)
    runner.publish(compute_restamped(outbox_messages(epoch=5), 6))
    key = SigningKey(SECRET)
    for topic, message_key, value, headers in (m for m in producer.sent if m[0] == "reassigner.commands"):
        assert compute_signature_problem(key, topic, message_key, value, headers) is None


def test_without_a_key_nothing_is_signed():
    runner, producer = runner_with(None)
    runner.publish(outbox_messages())
    assert all(h[0] != SIGNATURE_HEADER for m in producer.sent for h in m[3])


@pytest.mark.parametrize(("own_key", "executor_announces", "words"), [
    (True, UNSIGNED, "the executor verifies no signatures"),
    (False, "0123456789abcdef", "the executor will refuse every command"),
    (True, "0123456789abcdef", "another command signing key"),
])
def test_the_pipeline_records_its_signing_and_warns_on_a_mismatch(key_file, caplog, own_key, executor_announces,
                                                                  words):
    redis = FakeRedis(executor_announces)
    runner, _ = runner_with(key_file if own_key else None, redis)
    caplog.set_level(logging.INFO)
    runner.check_command_signing()
    assert words in caplog.text and SECRET.decode() not in caplog.text
    announced = redis.hashes["reassigner:{signed}:command_signing"]["pipeline"]
    assert announced == (SigningKey(SECRET).fingerprint if own_key else UNSIGNED)
