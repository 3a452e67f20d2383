"""The executor refuses, before claiming or applying anything, a command it cannot trust (issue
18): unsigned or badly signed when a command signing key is configured (BAD_SIGNATURE), or older
than its memory of command ids (COMMAND_EXPIRED); the refusal names where the command was read.
With fakes for Kafka and Redis (the same behaviour on real servers:
`tests/edge/test_executor_applies_commands.py`, the signed-command tests)."""

from __future__ import annotations

import logging
import os

import pytest
from hypothesis import example, given, strategies as st

import reassigner.edge.executor as executor_module
from reassigner.edge.executor import (
    BAD_SIGNATURE,
    COMMAND_EXPIRED,
    Executor,
    compute_command_expired,
    compute_message_source,
    compute_trust_problem,
)
from reassigner.edge.ledger import REPLAY_WINDOW_SECONDS, RESULT_TTL_SECONDS, Outcome
from schemas.errors import InvalidConfigError
from schemas.codec import decode, encode, version_headers
from schemas.signing import UNSIGNED, SigningKey, compute_signed_headers
from tests.settings_defaults import default_settings

SECRET = b"9f2c" * 16
NOW_MS = 1_800_000_000_000
TOPIC = "trust.commands"
DAY_MS = 86_400_000


class FakeMessage:
    def __init__(self, value: bytes, headers, key: bytes = b"t-0", partition: int = 2, offset: int = 41):
        self._value, self._headers, self._key = value, headers, key
        self._partition, self._offset = partition, offset

    def topic(self): return TOPIC
    def partition(self): return self._partition
    def offset(self): return self._offset
    def key(self): return self._key
    def value(self): return self._value
    def headers(self): return self._headers


class FakeLedger:
    """Claims like the Lua script for fresh ids (APPLY), then DUPLICATE with the stored outcome."""

    def __init__(self, pipeline_announces: str | None = None) -> None:
        self.claims: list[str] = []
        self.stored: dict[str, str] = {}
        self.announced: dict[str, str] = {} if pipeline_announces is None else {"pipeline": pipeline_announces}

    def claim(self, command_id, epoch, token):
        self.claims.append(command_id)
        if command_id in self.stored:
            return "DUPLICATE", self.stored[command_id]
        self.stored[command_id] = f"APPLYING:{token}"
        return "APPLY", "-1"

    def store_outcome(self, command_id, outcome: Outcome) -> None:
        self.stored[command_id] = outcome.to_storage()

    def read_signing(self) -> dict[str, str]:
        return dict(self.announced)

    def store_signing(self, announced: str) -> None:
        self.announced["executor"] = announced


class FakeAdmin:
    def __init__(self) -> None:
        self.moves: list[tuple] = []

    def alter_partition_reassignment(self, topic, partition, target):
        self.moves.append((topic, partition, target))


@pytest.fixture()
def key_file(tmp_path):
    path = tmp_path / "command-signing.key"
    path.write_bytes(SECRET + b"\n")
    os.chmod(path, 0o600)
    return path


def build_executor(monkeypatch, key_file=None, ledger=None):
    monkeypatch.setattr(executor_module, "build_producer", lambda config: None)
    settings = default_settings(topic_prefix="trust", command_signing_key_file=key_file)
    executor = Executor(FakeAdmin(), ledger or FakeLedger(), {}, {}, settings, clock=lambda: NOW_MS / 1000)
    published: list[dict] = []
    executor._produce = lambda suffix, key, value: published.append(decode("CommandResult", value))
    return executor, published


def command(command_id: str = "r1/t-0:1:ReassignmentStep", event_time: int = NOW_MS - 1000,
            target=(2, 3)) -> bytes:
    return encode("Command", {
        "schema_version": 3, "event_time": event_time, "id": command_id, "key": "t-0", "epoch": 4,
        "reassignment_id": "r1/t-0", "step": 1, "reason": "test",
        "payload": ("ReassignmentStep", {"topic": "t", "partition": 0, "target_replicas": list(target)})})


def signed(value: bytes, secret: bytes = SECRET, key: bytes = b"t-0"):
    return compute_signed_headers(SigningKey(secret), TOPIC, key, value, version_headers())


def test_a_signed_command_is_claimed_and_applied(monkeypatch, key_file):
    executor, published = build_executor(monkeypatch, key_file)
    value = command()
    executor.handle_message(FakeMessage(value, signed(value)))
    assert executor.admin.moves == [("t", 0, [2, 3])]
    assert executor.ledger.claims == ["r1/t-0:1:ReassignmentStep"]
    assert [(r["ok"], r["error_code"]) for r in published] == [(True, None)]


@pytest.mark.parametrize(("headers_of", "words"), [
    (lambda value: version_headers(), "no reassigner-signature header"),
    (lambda value: signed(value, b"another key, 32 bytes or longer.."), "does not match"),
    (lambda value: signed(command(target=(1, 2))), "does not match"),  # a signature of another command
    (lambda value: signed(value, key=b"t-1"), "does not match"),        # moved under another key
])
def test_an_unsigned_or_badly_signed_command_is_refused_before_it_is_claimed(monkeypatch, key_file, caplog,
                                                                             headers_of, words):
    executor, published = build_executor(monkeypatch, key_file)
    value = command()
    headers = [*headers_of(value), ("client.id", b"mallory\x07-tool")]
    caplog.set_level(logging.DEBUG)
    executor.handle_message(FakeMessage(value, headers))
    assert executor.admin.moves == [] and executor.ledger.claims == [], "nothing claimed, nothing moved"
    (result,) = published
    assert (result["ok"], result["error_code"], result["command_id"]) == (False, BAD_SIGNATURE,
                                                                        "r1/t-0:1:ReassignmentStep")
    assert words in result["message"]
    assert "read from trust.commands[2]@41, producer's client.id header 'mallory?-tool'" in result["message"]
    assert SECRET.decode() not in caplog.text


def test_a_forged_command_with_the_id_of_a_genuine_one_to_come_does_not_block_it(monkeypatch, key_file):
    """Command ids are predictable (`<reassignment>:<step>:<kind>`): were a forged command claimed
    before its signature is checked, the genuine command would then be a DUPLICATE, never applied."""
    executor, published = build_executor(monkeypatch, key_file)
    forged = command(target=(9, 9))
    executor.handle_message(FakeMessage(forged, version_headers()))
    genuine = command()
    executor.handle_message(FakeMessage(genuine, signed(genuine)))
    assert executor.admin.moves == [("t", 0, [2, 3])]
    assert [(r["ok"], r["error_code"]) for r in published] == [(False, BAD_SIGNATURE), (True, None)]


def test_a_replayed_genuine_command_is_a_duplicate_and_moves_nothing_again(monkeypatch, key_file):
    executor, published = build_executor(monkeypatch, key_file)
    value = command()
    for _ in range(2):
        executor.handle_message(FakeMessage(value, signed(value)))
    assert executor.admin.moves == [("t", 0, [2, 3])]
    assert published[1]["ok"] is True and "duplicate" in published[1]["message"]


def test_a_genuine_command_older_than_the_executors_memory_is_refused(monkeypatch, key_file):
    executor, published = build_executor(monkeypatch, key_file)
    value = command(event_time=NOW_MS - 7 * DAY_MS)
    executor.handle_message(FakeMessage(value, signed(value)))
    assert executor.admin.moves == [] and executor.ledger.claims == []
    assert published[0]["error_code"] == COMMAND_EXPIRED and "7.0 days ago" in published[0]["message"]


def test_without_a_key_an_unsigned_command_applies_but_an_expired_one_does_not(monkeypatch):
    executor, published = build_executor(monkeypatch)
    executor.handle_message(FakeMessage(command(), version_headers()))
    executor.handle_message(FakeMessage(command("old", event_time=NOW_MS - 8 * DAY_MS), version_headers()))
    assert executor.admin.moves == [("t", 0, [2, 3])]
    assert [r["error_code"] for r in published] == [None, COMMAND_EXPIRED]


def test_an_executor_without_a_key_refuses_to_start_while_the_pipeline_signs(monkeypatch, key_file):
    pipeline_fingerprint = SigningKey(SECRET).fingerprint
    executor, _ = build_executor(monkeypatch, None, FakeLedger(pipeline_announces=pipeline_fingerprint))
    with pytest.raises(InvalidConfigError, match="pipeline signs its commands") as refused:
        executor.check_command_signing()
    assert pipeline_fingerprint in str(refused.value)
    assert "executor" not in executor.ledger.announced, "an executor that does not run records nothing"


def test_an_executor_with_a_key_warns_when_the_pipeline_signs_nothing(monkeypatch, key_file, caplog):
    executor, _ = build_executor(monkeypatch, key_file, FakeLedger(pipeline_announces=UNSIGNED))
    caplog.set_level(logging.INFO)
    executor.check_command_signing()
    assert "signs nothing" in caplog.text and SECRET.decode() not in caplog.text
    assert executor.ledger.announced["executor"] == SigningKey(SECRET).fingerprint


def test_a_key_file_others_can_read_is_used_with_a_warning_and_a_missing_one_is_an_error(monkeypatch, key_file,
                                                                                           caplog):
    os.chmod(key_file, 0o644)
    caplog.set_level(logging.WARNING)
    executor, _ = build_executor(monkeypatch, key_file)
    assert executor.signing_key.fingerprint == SigningKey(SECRET).fingerprint
    assert "can be read by other users (mode 644): chmod 600" in caplog.text
    with pytest.raises(InvalidConfigError, match="cannot be read .*openssl rand -hex 32"):
        build_executor(monkeypatch, key_file.parent / "missing.key")


def test_the_source_of_a_command_names_its_offset_and_a_declared_client_id():
    assert compute_message_source("c", 0, 7, None) == "c[0]@7"
    assert compute_message_source("c", 1, 8, [("schema_version", b"3")]) == "c[1]@8"
    named = compute_message_source("c", 1, 8, [("client-id", "x" * 500)])
    assert named.startswith("c[1]@8, producer's client-id header 'xxx") and len(named) < 200


def test_trust_without_a_key_is_only_the_age():
    assert compute_trust_problem(None, TOPIC, b"k", b"v", [], NOW_MS, NOW_MS) is None
    assert compute_command_expired(NOW_MS - REPLAY_WINDOW_SECONDS * 1000 + 1, NOW_MS) is None
    assert compute_command_expired(NOW_MS - REPLAY_WINDOW_SECONDS * 1000, NOW_MS) is not None
    assert compute_command_expired(NOW_MS + DAY_MS, NOW_MS) is None  # a clock ahead: not a replay


@given(event_time=st.integers(0, 10**13), skew_ms=st.integers(-DAY_MS, DAY_MS),
       delay_ms=st.integers(0, 30 * DAY_MS), replay_after_ms=st.integers(0, 60 * DAY_MS))
@example(event_time=NOW_MS, skew_ms=-DAY_MS, delay_ms=0, replay_after_ms=RESULT_TTL_SECONDS * 1000)
def test_a_replay_is_always_a_duplicate_or_expired(event_time, skew_ms, delay_ms, replay_after_ms):
    """The fix of the replay hole: a command first applied at `applied` (its outcome remembered
    `RESULT_TTL_SECONDS` from then) and replayed at `replay` is refused one way or the other,
    whenever the executor's clock is within a day of the pipeline's."""
    applied = event_time + skew_ms + delay_ms  # the executor's clock when it applied it
    replay = applied + replay_after_ms
    remembered = replay < applied + RESULT_TTL_SECONDS * 1000
    if compute_command_expired(event_time, applied) is None:  # it was applied at all
        assert remembered or compute_command_expired(event_time, replay) is not None

