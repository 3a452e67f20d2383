"""The executor against a real cluster and Redis: every command kind changes the cluster as the
Admin API then reports; duplicates and stale epochs are refused; bad bytes are dead-lettered;
it keeps working while a broker is down and after it is back; with a command signing key,
unsigned, badly signed and replayed commands move nothing. Runs its own stack."""

from __future__ import annotations

import os
import secrets
import threading
import time
import uuid

import pytest
import redis
from confluent_kafka import Consumer, Producer
from kafka.admin import KafkaAdminClient, NewTopic

from runtime.clients.kafka_admin import ClusterAdmin
from reassigner.edge.executor import Executor
from reassigner.edge.ledger import CommandLedger
from state.controller_store import ControllerStore, read_signing_announcements, store_signing_announcement
from runtime.clients.kafka_producer import producer_config
from schemas.errors import InvalidConfigError
from runtime.settings import load_settings, read_command_signing_key
from schemas.codec import decode, encode, topic_name, version_headers, writer_version_from_headers
from schemas.signing import SigningKey, compute_signed_headers
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow]

PREFIX = "exectest"
SIGNED_PREFIX = "signedtest"


@pytest.fixture(scope="module")
def cluster(private_stack):
    local, state = private_stack
    admin = ClusterAdmin(state.bootstrap_servers)
    yield local, state, admin
    admin.close()


@pytest.fixture(scope="module")
def executor(cluster):
    local, state, admin = cluster
    settings = load_settings(topic_prefix=PREFIX, executor_retry_seconds=20,
                             executor_log_dir_wait_seconds=30, cluster_name=f"exec-{uuid.uuid4().hex[:6]}")
    ledger = CommandLedger(redis.Redis.from_url(state.redis_url), settings.cluster_name)
    # The planner epoch a pipeline would hold (it bumps it as it starts): the tests' commands
    # carry 100; an epoch above it is no pipeline's (UNKNOWN_EPOCH).
    redis.Redis.from_url(state.redis_url).hset(ControllerStore.meta_key(settings.cluster_name), "epoch", 100)
    executor = Executor(ClusterAdmin(state.bootstrap_servers), ledger,
                        {"bootstrap.servers": state.bootstrap_servers},
                        producer_config(state.bootstrap_servers), settings)
    stop = threading.Event()
    thread = threading.Thread(target=executor.run, args=(stop,), daemon=True)
    thread.start()
    yield executor
    stop.set()
    thread.join(30)
    executor.admin.close()
    assert not thread.is_alive(), "the executor did not stop on request"


class Commands:
    """Sends Command envelopes and reads CommandResults, both through real topics."""

    def __init__(self, bootstrap: str, prefix: str = PREFIX, signing_key: SigningKey | None = None) -> None:
        self.prefix = prefix
        self.signing_key = signing_key
        self.sent: dict[str, tuple[bytes, str, list]] = {}  # command id → (value, key, headers) last sent
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"results-{uuid.uuid4()}",
                                  "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic_name("command-results", prefix), topic_name("dead-letter", prefix)])
        self.results: list[dict] = []
        self.dead_letters: list[dict] = []

    def send(self, kind: str, fields: dict, *, epoch: int = 100, command_id: str | None = None,
             key: str = "k", reason: str = "test", event_time: int | None = None,
             signed_with: SigningKey | None | str = "own", action: dict | None = None) -> str:
        """One command; signed with this sender's key (`signed_with="own"`), another key, or
        not at all (None)."""
        command_id = command_id or f"test:{uuid.uuid4()}:{kind}"
        record = {"schema_version": 1, "event_time": event_time or int(time.time() * 1000), "id": command_id,
                  "key": key, "epoch": epoch, "reassignment_id": "r1", "step": 1,
                  "reason": reason, "payload": (kind, fields), "action": action}
        value, key = encode("Command", record), key[:200]
        signing_key = self.signing_key if signed_with == "own" else signed_with
        headers = version_headers()
        if signing_key is not None:
            headers = compute_signed_headers(signing_key, topic_name("commands", self.prefix), key.encode(),
                                             value, headers)
        self.send_raw(value, key, headers)
        self.sent[command_id] = (value, key, headers)
        return command_id

    def send_raw(self, value: bytes, key: str = "k", headers: list | None = None) -> None:
        self.producer.produce(topic_name("commands", self.prefix), key=key.encode(), value=value,
                              headers=version_headers() if headers is None else headers)
        self.producer.flush(10)

    def replay(self, command_id: str) -> None:
        """The very message sent before as `command_id`: same bytes, same headers, same signature."""
        value, key, headers = self.sent[command_id]
        self.send_raw(value, key, headers)

    def _read(self) -> None:
        message = self.consumer.poll(0.2)
        if message is None or message.error() is not None:
            return
        if message.topic().endswith("dead-letter"):
            self.dead_letters.append(decode("DeadLetter", message.value()))
        else:
            self.results.append(decode("CommandResult", message.value(),
                                       writer_version_from_headers(message.headers())))

    def results_of(self, command_id: str, count: int = 1, timeout: float = 60.0) -> list[dict]:
        def found():
            self._read()
            matching = [r for r in self.results if r["command_id"] == command_id]
            return matching if len(matching) >= count else None
        return eventually(found, timeout, 0, f"{count} result(s) of {command_id}")

    def result_of(self, command_id: str, timeout: float = 60.0) -> dict:
        return self.results_of(command_id, 1, timeout)[0]


@pytest.fixture(scope="module")
def commands(cluster, executor):
    names = {topic_name(s, PREFIX) for s in ("commands", "command-results", "dead-letter")}
    # Subscribe once the executor has created its topics (a consumer learns of a topic created
    # after it subscribed only at its next metadata refresh, minutes later).
    eventually(lambda: names <= set(cluster[2].describe_partitions()[1]), 30, what="executor topics")
    sender = Commands(cluster[1].bootstrap_servers)
    yield sender
    sender.consumer.close()


def create_topic(state, name: str, replicas: list[int]) -> None:
    client = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers)
    try:
        client.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1,
                                       replica_assignments={0: replicas})])
    finally:
        client.close()
    with ClusterAdmin(state.bootstrap_servers) as admin:
        eventually(lambda: (name, 0) in admin.observe().partitions, 30)


def partition(admin: ClusterAdmin, topic: str):
    return admin.observe().partitions[(topic, 0)]


def test_a_reassignment_step_moves_a_real_partition(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "step", [1, 2])
    command_id = commands.send("ReassignmentStep", {"topic": "step", "partition": 0,
                                                    "target_replicas": [2, 3], "adding": [3], "removing": [1]})
    result = commands.result_of(command_id)
    assert (result["ok"], result["error_code"], result["command_kind"]) == (True, None, "ReassignmentStep")
    eventually(lambda: partition(admin, "step").replicas == (2, 3) and not partition(admin, "step").adding,
               60, what="step-0 on [2, 3]")


def test_a_step_with_a_target_dir_places_the_new_replica_there(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "placed", [1, 2])
    current = partition(admin, "placed")
    broker3_dirs = sorted(state.brokers[3].log_dirs)
    command_id = commands.send("ReassignmentStep", {
        "topic": "placed", "partition": 0, "target_replicas": [1, 2, 3], "adding": [3],
        "target_log_dirs": ["any", "any", broker3_dirs[1]]})
    assert commands.result_of(command_id)["ok"] is True
    eventually(lambda: partition(admin, "placed").log_dirs[2:] == (broker3_dirs[1],), 60,
               what="the new replica in the named dir")
    assert current.replicas == (1, 2)


def test_a_log_dir_move_moves_a_real_replica_between_dirs(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "intra", [1])
    source = partition(admin, "intra").log_dirs[0]
    target = next(d for d in state.brokers[1].log_dirs if d != source)
    command_id = commands.send("LogDirMove", {"broker_id": 1, "topic": "intra", "partition": 0,
                                              "target_dir": target, "throttle_bytes_per_sec": 50_000_000})
    assert commands.result_of(command_id)["ok"] is True
    eventually(lambda: partition(admin, "intra").log_dirs == (target,) and not any(
        r.is_future for d in admin.observe().log_dirs.values() for r in d.replicas if r.topic == "intra"),
        60, what="intra-0 in the other dir with no future replica")
    rate = "replica.alter.log.dirs.io.max.bytes.per.second"
    assert admin.describe_broker_configs(1, [rate]).get(rate) == "50000000"
    # Clearing the log-dir throttle leaves an inter-broker throttle (someone else's) alone.
    admin.alter_broker_configs([1], {"leader.replication.throttled.rate": "7000000"})
    try:
        clear_id = commands.send("ClearThrottle", {"broker_ids": [1], "partitions": [], "log_dir_only": True})
        assert commands.result_of(clear_id)["ok"] is True
        eventually(lambda: admin.describe_broker_configs(1, [rate]).get(rate) is None, 30,
                   what="the log-dir throttle removed")
        assert admin.describe_broker_configs(1, ["leader.replication.throttled.rate"]) \
            .get("leader.replication.throttled.rate") == "7000000"
    finally:
        admin.alter_broker_configs([1], {"leader.replication.throttled.rate": None})


def test_cancel_reverts_a_real_reassignment_and_says_when_there_is_none(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "cancelled", [1])
    producer = Producer({"bootstrap.servers": state.bootstrap_servers, "linger.ms": 50})
    for _ in range(300):
        producer.produce("cancelled", value=b"y" * 10_000)
    producer.flush(30)
    admin.alter_broker_configs([1, 2], {"leader.replication.throttled.rate": "20000",
                                        "follower.replication.throttled.rate": "20000"})
    admin.alter_topic_configs({"cancelled": {"leader.replication.throttled.replicas": "0:1",
                                             "follower.replication.throttled.replicas": "0:2"}})
    # The throttle must be in force on both brokers before the move starts, or 3 MB copy
    # unthrottled in a blink and the move is over before it can be seen (seen in full runs).
    eventually(lambda: all(admin.describe_broker_configs(b, ["follower.replication.throttled.rate"])
                           .get("follower.replication.throttled.rate") == "20000" for b in (1, 2)),
               30, what="the throttle rate on brokers 1 and 2")
    eventually(lambda: admin.describe_topic_configs("cancelled", ["follower.replication.throttled.replicas"])
               .get("follower.replication.throttled.replicas") == "0:2", 30, what="the throttled replicas")
    try:
        admin.alter_partition_reassignment("cancelled", 0, [1, 2])
        # A broker's metadata may show the move a moment after the controller took it (seen in a
        # fresh-clone CI run: adding was still () on the first read).
        eventually(lambda: partition(admin, "cancelled").adding == (2,), 30, what="the move shown as adding 2")
        command_id = commands.send("CancelReassignment", {"topic": "cancelled", "partition": 0})
        assert commands.result_of(command_id)["ok"] is True
        eventually(lambda: partition(admin, "cancelled").replicas == (1,)
                   and not partition(admin, "cancelled").adding, 30, what="reassignment reverted")
        again = commands.send("CancelReassignment", {"topic": "cancelled", "partition": 0})
        result = commands.result_of(again)
        assert (result["ok"], result["error_code"]) == (False, "NO_REASSIGNMENT_IN_PROGRESS")
    finally:
        admin.alter_broker_configs([1, 2], {"leader.replication.throttled.rate": None,
                                            "follower.replication.throttled.rate": None})


def test_elect_leader_makes_the_preferred_replica_lead(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "lead", [1, 2, 3])
    # Reorder the replicas without an election: broker 2 becomes preferred, 1 still leads.
    admin.alter_partition_reassignment("lead", 0, [2, 1, 3])
    eventually(lambda: partition(admin, "lead").replicas == (2, 1, 3), 30)
    assert partition(admin, "lead").leader == 1
    command_id = commands.send("ElectLeader", {"topic": "lead", "partition": 0, "preferred_leader": 2})
    assert commands.result_of(command_id)["ok"] is True
    eventually(lambda: partition(admin, "lead").leader == 2, 30, what="broker 2 leads")


def test_set_and_clear_throttle_change_broker_and_topic_configs(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "throttled", [1, 2])
    throttled = [{"topic": "throttled", "partition": 0, "leader_broker_ids": [1, 2],
                  "follower_broker_ids": [3]}]
    set_id = commands.send("SetThrottle", {"broker_ids": [1, 2, 3], "rate_bytes_per_sec": 1_000_000,
                                           "logdir_rate_bytes_per_sec": 500_000, "partitions": throttled})
    assert commands.result_of(set_id)["ok"] is True
    assert admin.describe_broker_configs(2, ["leader.replication.throttled.rate",
                                             "follower.replication.throttled.rate",
                                             "replica.alter.log.dirs.io.max.bytes.per.second"]) == {
        "leader.replication.throttled.rate": "1000000", "follower.replication.throttled.rate": "1000000",
        "replica.alter.log.dirs.io.max.bytes.per.second": "500000"}
    assert admin.describe_topic_configs("throttled", ["leader.replication.throttled.replicas",
                                                      "follower.replication.throttled.replicas"]) == {
        "leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "0:3"}
    clear_id = commands.send("ClearThrottle", {"broker_ids": [1, 2, 3], "partitions": throttled})
    assert commands.result_of(clear_id)["ok"] is True
    assert admin.describe_broker_configs(2, ["leader.replication.throttled.rate"]) == {
        "leader.replication.throttled.rate": None}
    assert admin.describe_topic_configs("throttled", ["leader.replication.throttled.replicas"]) == {
        "leader.replication.throttled.replicas": ""}


def test_a_duplicate_command_id_is_not_applied_again_and_a_stale_epoch_is_refused(cluster, commands, executor):
    local, state, admin = cluster
    create_topic(state, "dup", [1, 2])
    fields = {"topic": "dup", "partition": 0, "target_replicas": [2, 1]}
    command_id = commands.send("ReassignmentStep", fields, epoch=100)
    assert commands.result_of(command_id)["ok"] is True
    eventually(lambda: partition(admin, "dup").replicas == (2, 1), 30)
    # Someone else changes it back; a re-published duplicate must not undo that.
    admin.alter_partition_reassignment("dup", 0, [1, 2])
    eventually(lambda: partition(admin, "dup").replicas == (1, 2), 30)
    commands.send("ReassignmentStep", fields, epoch=100, command_id=command_id)
    first, second = commands.results_of(command_id, 2)
    assert second["ok"] is True and "duplicate" in second["message"]
    time.sleep(1)  # waits for nothing: gives a wrongly applied duplicate time to show in Kafka
    assert partition(admin, "dup").replicas == (1, 2)
    stale = commands.send("ReassignmentStep", fields, epoch=99)
    result = commands.result_of(stale)
    assert (result["ok"], result["error_code"], result["epoch"]) == (False, "STALE_EPOCH", 99)
    assert partition(admin, "dup").replicas == (1, 2)
    assert executor.ledger.highest_epoch() == 100


def test_a_forged_command_with_an_epoch_no_pipeline_holds_moves_nothing_and_stops_nothing(
        cluster, commands, executor):
    """Issue 18: a principal that can write the commands topic sent a step with epoch 1,000,000;
    it moved a partition and made every real command STALE for good. Now it is refused as
    UNKNOWN_EPOCH, the highest epoch seen stays, and the pipeline's next command is applied."""
    local, state, admin = cluster
    create_topic(state, "forged", [1, 2])
    forged = commands.send("ReassignmentStep", {"topic": "forged", "partition": 0, "target_replicas": [3, 2]},
                           epoch=1_000_000)
    result = commands.result_of(forged)
    assert (result["ok"], result["error_code"]) == (False, "UNKNOWN_EPOCH")
    assert "no pipeline issued it" in result["message"]
    assert executor.ledger.highest_epoch() <= 100
    real = commands.send("ReassignmentStep", {"topic": "forged", "partition": 0, "target_replicas": [2, 1]},
                         epoch=100)
    assert commands.result_of(real)["ok"] is True
    eventually(lambda: partition(admin, "forged").replicas == (2, 1), 30)


def test_bad_commands_become_results_or_dead_letters_and_the_executor_goes_on(cluster, commands):
    local, state, admin = cluster
    commands.send_raw(b"\x00\x01 not a command", key="garbage")
    eventually(lambda: (commands._read(), commands.dead_letters)[1], 30, 0, what="a dead letter")
    (letter,) = commands.dead_letters
    assert letter["value"] == b"\x00\x01 not a command" and letter["expected_schema"] == "Command"
    gone = commands.send("ReassignmentStep", {"topic": "no-such-topic", "partition": 0,
                                              "target_replicas": [1, 2]})
    result = commands.result_of(gone)
    assert (result["ok"], result["error_code"]) == (False, "UNKNOWN_TOPIC_OR_PARTITION")
    dead = commands.send("SetThrottle", {"broker_ids": [42], "rate_bytes_per_sec": 1000})
    result = commands.result_of(dead, timeout=60)
    assert result["ok"] is False and result["error_code"] == "BROKER_NOT_AVAILABLE"


def test_a_cordon_on_a_kafka_without_cordons_is_taken_and_ignored_and_an_unknown_action_is_refused(
        cluster, commands):
    """Why the product asks for cordons only on Kafka 4.3+ (`handlers.cordons`): an older Kafka
    takes `cordoned.log.dirs` without an error and ignores it — DescribeConfigs does not even list
    it (this stack's 4.1.1) — so a Cordon there would say ok and cordon nothing. (On 4.3+ the round
    trip is tests/edge/test_cordons_on_a_real_cluster.py.) An action kind this executor does not
    know is refused by name, and the executor goes on."""
    local, state, admin = cluster
    empty = {"broker_ids": [], "partitions": [], "log_dir_only": False, "throttle_sequence": None}
    if admin.describe_kafka().finalized.get("metadata.version", 0) < 30:  # before 4.3-IV0
        cordon = commands.send("ClearThrottle", empty, key="cordon",
                               action={"kind": "Cordon", "broker_ids": [2], "log_dirs": []})
        result = commands.result_of(cordon)
        assert (result["ok"], result["command_kind"]) == (True, "Cordon"), result
        assert admin.describe_dynamic_configs([2], [], ["cordoned.log.dirs"]) == {(2, "cordoned.log.dirs"): None}
    unknown = commands.send("ClearThrottle", empty, action={"kind": "Drain", "broker_ids": [2], "log_dirs": []})
    result = commands.result_of(unknown)
    assert (result["ok"], result["error_code"]) == (False, "INVALID_REQUEST") and "'Drain'" in result["message"]


def test_a_step_interrupted_by_a_crash_is_settled_by_asking_kafka(cluster, commands, executor):
    """Regression: after a kill -9 mid-step, the step was reported "interrupted" and its partition
    abandoned, though Kafka could tell whether it was applied. Two crashes are staged: the claim
    stored, then the process gone before (a) or after (b) Kafka took the step."""
    local, state, admin = cluster
    create_topic(state, "crash-before", [1, 2])
    create_topic(state, "crash-after", [1, 2])
    before_id, after_id = f"test:{uuid.uuid4()}", f"test:{uuid.uuid4()}"
    for command_id in (before_id, after_id):
        assert executor.ledger.claim(command_id, 100, "the crashed attempt")[0] == "APPLY"
    admin.alter_partition_reassignment("crash-after", 0, [2, 3])  # (b): Kafka took it
    # Done, so that every broker's metadata shows it (a broker's view lags the controller's by a
    # moment; the executor would then apply the same target again, which Kafka takes as a no-op).
    eventually(lambda: admin.read_assignment("crash-after", 0) == ((2, 3), (), ()), 60, what="the step done")
    commands.send("ReassignmentStep", {"topic": "crash-before", "partition": 0, "target_replicas": [3, 1]},
                  command_id=before_id)
    commands.send("ReassignmentStep", {"topic": "crash-after", "partition": 0, "target_replicas": [2, 3]},
                  command_id=after_id)
    applied_now, applied_before = commands.result_of(before_id), commands.result_of(after_id)
    assert applied_now["ok"] and applied_now["message"] == ""
    assert applied_before["ok"] and "interrupted" in applied_before["message"]
    eventually(lambda: partition(admin, "crash-before").replicas == (3, 1), 60, what="the step applied now")
    eventually(lambda: partition(admin, "crash-after").replicas == (2, 3), 60, what="the step applied before")


def test_a_command_of_almost_a_megabyte_is_dead_lettered_and_the_executor_goes_on(cluster, commands):
    """Regression: a ~1 MB record on the commands topic killed the executor, and again on every
    restart (its result, carrying the huge key, was larger than Kafka takes)."""
    local, state, admin = cluster
    letters_before = len(commands.dead_letters)
    huge = commands.send("CancelReassignment", {"topic": "t", "partition": 0}, key="k" * 450_000,
                         reason="r" * 450_000)
    eventually(lambda: (commands._read(), len(commands.dead_letters) > letters_before)[1], 60, 0,
               what="the huge command dead-lettered")
    letter = commands.dead_letters[-1]
    assert "key has 450,000 characters" in letter["reason"] and "value cut" in letter["reason"]
    assert not [r for r in commands.results if r["command_id"] == huge]
    after = commands.send("ReassignmentStep", {"topic": "no-such-topic", "partition": 0,
                                               "target_replicas": [1, 2]})
    assert commands.result_of(after)["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_the_executor_keeps_working_while_a_broker_is_stopped_and_restarted(cluster, commands):
    local, state, admin = cluster
    create_topic(state, "survive", [1, 2])
    local.stop_broker(3, kill=True)
    try:
        during = commands.send("ReassignmentStep", {"topic": "survive", "partition": 0,
                                                    "target_replicas": [2, 1]})
        result = commands.result_of(during, timeout=90)
        assert result["ok"] is True, result
    finally:
        local.start_broker(3)
    after = commands.send("ReassignmentStep", {"topic": "survive", "partition": 0,
                                               "target_replicas": [2, 1, 3]})
    assert commands.result_of(after, timeout=90)["ok"] is True
    eventually(lambda: sorted(partition(admin, "survive").isr) == [1, 2, 3], 60, what="3 joined")


def test_a_step_kafka_cannot_take_while_the_controller_is_stopped_fails_as_transient_then_applies(cluster, commands):
    """Issue 16 item 2 on real servers: the KRaft controller stopped (SIGSTOP) while a step is
    applied. The executor retries for its `executor_retry_seconds` (20 s here), then reports an
    error the pipeline retries (`handlers.results.RETRIED_STEP_ERRORS`, tested there with the
    backoff and the give-up); the pipeline's retry, a new command, applies once it answers."""
    import os
    import signal

    from handlers.results import RETRIED_STEP_ERRORS

    local, state, admin = cluster
    create_topic(state, "unreachable", [1])
    os.kill(state.controller_pid, signal.SIGSTOP)
    try:
        during = commands.send("ReassignmentStep", {"topic": "unreachable", "partition": 0,
                                                    "target_replicas": [1, 2], "adding": [2]})
        result = commands.result_of(during, timeout=120)
    finally:
        os.kill(state.controller_pid, signal.SIGCONT)
    assert result["ok"] is False and result["error_code"] in RETRIED_STEP_ERRORS, result
    # Brokers whose heartbeats the paused controller missed may be fenced for a moment.
    eventually(lambda: {b.broker_id for b in admin.describe_brokers() if not b.fenced} >= {1, 2, 3},
               60, what="every broker unfenced again")
    retried = commands.send("ReassignmentStep", {"topic": "unreachable", "partition": 0,
                                                 "target_replicas": [1, 2], "adding": [2]})
    assert commands.result_of(retried, timeout=120)["ok"] is True
    eventually(lambda: sorted(partition(admin, "unreachable").isr) == [1, 2], 60, what="unreachable-0 on [1, 2]")


# --- signed commands (issue 18) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def signing_key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("signing") / "command-signing.key"
    path.write_text(secrets.token_hex(32) + "\n")
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def signed_executor(cluster, signing_key_file):
    """A second executor, on its own topics and ledger, that verifies command signatures; the
    state store says the pipeline signs with the same key (as a signing pipeline records it)."""
    local, state, admin = cluster
    settings = load_settings(topic_prefix=SIGNED_PREFIX, executor_retry_seconds=20,
                             cluster_name=f"signed-{uuid.uuid4().hex[:6]}",
                             command_signing_key_file=signing_key_file)
    client = redis.Redis.from_url(state.redis_url)
    client.hset(ControllerStore.meta_key(settings.cluster_name), "epoch", 100)
    key = read_command_signing_key(settings)
    store_signing_announcement(client, settings.cluster_name, "pipeline", key.fingerprint)
    executor = Executor(ClusterAdmin(state.bootstrap_servers), CommandLedger(client, settings.cluster_name),
                        {"bootstrap.servers": state.bootstrap_servers},
                        producer_config(state.bootstrap_servers), settings)
    stop = threading.Event()
    thread = threading.Thread(target=executor.run, args=(stop,), daemon=True)
    thread.start()
    yield executor
    stop.set()
    thread.join(30)
    executor.admin.close()
    assert not thread.is_alive(), "the signed executor did not stop on request"


@pytest.fixture(scope="module")
def signed_commands(cluster, signed_executor):
    names = {topic_name(s, SIGNED_PREFIX) for s in ("commands", "command-results", "dead-letter")}
    eventually(lambda: names <= set(cluster[2].describe_partitions()[1]), 30, what="signed executor topics")
    sender = Commands(cluster[1].bootstrap_servers, SIGNED_PREFIX, signed_executor.signing_key)
    yield sender
    sender.consumer.close()


def test_unsigned_and_badly_signed_commands_move_nothing_and_the_next_signed_one_applies(
        cluster, signed_commands, signed_executor):
    """Issue 18: with a command signing key, a principal that can write the commands topic but
    holds no key moves nothing — not with an unsigned command, not with one signed by another
    key, not with a forged epoch — and cannot block the genuine command whose id it used."""
    local, state, admin = cluster
    create_topic(state, "signed", [1, 2])
    genuine_id = "r1/signed-0:1:ReassignmentStep"  # predictable, as the pipeline's ids are
    forged = {"topic": "signed", "partition": 0, "target_replicas": [3, 2], "adding": [3], "removing": [1]}
    unsigned = signed_commands.send("ReassignmentStep", forged, command_id=genuine_id, signed_with=None)
    result = signed_commands.result_of(unsigned)
    assert (result["ok"], result["error_code"]) == (False, "BAD_SIGNATURE")
    assert "unsigned" in result["message"] and f"read from {SIGNED_PREFIX}.commands[" in result["message"]
    other_key = signed_commands.send("ReassignmentStep", forged, signed_with=SigningKey(b"not the key" * 4))
    result = signed_commands.result_of(other_key)
    assert (result["ok"], result["error_code"]) == (False, "BAD_SIGNATURE")
    assert "does not match" in result["message"]
    high_epoch = signed_commands.send("ReassignmentStep", forged, epoch=1_000_000, signed_with=None)
    assert signed_commands.result_of(high_epoch)["error_code"] == "BAD_SIGNATURE"
    assert signed_executor.ledger.highest_epoch() <= 100
    time.sleep(1)  # waits for nothing: gives a wrongly applied forgery time to show in Kafka
    now = partition(admin, "signed")
    assert (now.replicas, now.adding) == ((1, 2), ())
    real = signed_commands.send("ReassignmentStep", {"topic": "signed", "partition": 0, "target_replicas": [2, 1]},
                                command_id=genuine_id)
    results = signed_commands.results_of(real, 2)
    assert (results[-1]["ok"], results[-1]["error_code"], results[-1]["message"]) == (True, None, "")
    eventually(lambda: partition(admin, "signed").replicas == (2, 1), 30, what="signed-0 on [2, 1]")


def test_a_replayed_signed_command_moves_nothing_again_and_an_old_one_is_refused(
        cluster, signed_commands, signed_executor):
    """A genuine command sent again, byte for byte with its valid signature, is a duplicate
    while the ledger remembers its id; one decided longer ago than that memory (7 days; the
    executor accepts 6) is COMMAND_EXPIRED. Nothing moves, and the next command applies."""
    local, state, admin = cluster
    create_topic(state, "replayed", [1, 2])
    move = {"topic": "replayed", "partition": 0, "target_replicas": [2, 1]}
    first = signed_commands.send("ReassignmentStep", move)
    assert signed_commands.result_of(first)["ok"] is True
    eventually(lambda: partition(admin, "replayed").replicas == (2, 1), 30, what="replayed-0 on [2, 1]")
    admin.alter_partition_reassignment("replayed", 0, [1, 2])  # the operator moves it back
    eventually(lambda: partition(admin, "replayed").replicas == (1, 2), 30, what="replayed-0 back on [1, 2]")
    signed_commands.replay(first)
    again = signed_commands.results_of(first, 2)[-1]
    assert again["ok"] is True and "duplicate" in again["message"]
    week_old = signed_commands.send("ReassignmentStep", move, event_time=int((time.time() - 7 * 86400) * 1000))
    result = signed_commands.result_of(week_old)
    assert (result["ok"], result["error_code"]) == (False, "COMMAND_EXPIRED")
    time.sleep(1)  # waits for nothing: gives a wrongly applied replay time to show in Kafka
    assert partition(admin, "replayed").replicas == (1, 2)
    after = signed_commands.send("ReassignmentStep", {"topic": "replayed", "partition": 0,
                                                      "target_replicas": [2, 3]})
    assert signed_commands.result_of(after)["ok"] is True
    eventually(lambda: partition(admin, "replayed").replicas == (2, 3), 30, what="replayed-0 on [2, 3]")


def test_an_executor_without_the_key_refuses_to_start_while_the_pipeline_signs(cluster, signed_executor):
    """The one-side-only rule on a real Redis: the store says the pipeline signs (the signed
    executor's cluster name), so an executor given no key stops at start with one line."""
    local, state, admin = cluster
    settings = load_settings(topic_prefix=SIGNED_PREFIX, cluster_name=signed_executor.settings.cluster_name)
    keyless = Executor(ClusterAdmin(state.bootstrap_servers),
                       CommandLedger(redis.Redis.from_url(state.redis_url), settings.cluster_name),
                       {"bootstrap.servers": state.bootstrap_servers}, producer_config(state.bootstrap_servers),
                       settings)
    client = redis.Redis.from_url(state.redis_url)
    # The signed executor's record stays (it writes it as its thread starts: waited for, in case
    # this test runs alone); the refused one wrote nothing over it.
    eventually(lambda: read_signing_announcements(client, settings.cluster_name).get("executor")
               == signed_executor.signing_key.fingerprint, 30, what="the signed executor's record")
    with keyless.admin, pytest.raises(InvalidConfigError,
                                      match="the pipeline signs its commands .* has no command_signing_key_file"):
        keyless.run(threading.Event())
    assert read_signing_announcements(client, settings.cluster_name)["executor"] \
        == signed_executor.signing_key.fingerprint, "the refused executor recorded nothing"


def test_the_executor_counts_what_it_applied_and_refused_on_its_metrics_endpoint(cluster, commands):
    """Issue 19 item 6: counted once each result is published, served by `runtime.metrics`
    (the endpoint `execute --metrics-port` starts): a step applied, its duplicate, a stale one."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from runtime.metrics import serve_metrics

    local, state, admin = cluster
    server, port = serve_metrics("127.0.0.1", 0, "executor", "local")

    def value(name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
                   if s.name == name and labels.items() <= s.labels.items())

    try:
        applied = ("reassigner_executor_commands_total", {"kind": "ReassignmentStep", "outcome": "ok"})
        stale = ("reassigner_executor_refused_commands_total", {"reason": "STALE_EPOCH"})
        duplicate = ("reassigner_executor_duplicate_commands_total", {})
        before = {name: value(name, **labels) for name, labels in (applied, stale, duplicate)}
        create_topic(state, "counted", [1, 2])
        fields = {"topic": "counted", "partition": 0, "target_replicas": [2, 3], "adding": [3], "removing": [1]}
        command_id = commands.send("ReassignmentStep", fields)
        assert commands.result_of(command_id)["ok"] is True
        eventually(lambda: value(applied[0], **applied[1]) == before[applied[0]] + 1, 30, what="the step counted")
        commands.send("ReassignmentStep", fields, command_id=command_id)
        commands.results_of(command_id, 2)
        eventually(lambda: value(duplicate[0]) == before[duplicate[0]] + 1, 30, what="the duplicate counted")
        assert commands.result_of(commands.send("ReassignmentStep", fields, epoch=99))["error_code"] == "STALE_EPOCH"
        eventually(lambda: value(stale[0], **stale[1]) == before[stale[0]] + 1, 30, what="the refusal counted")
        assert value(applied[0], **applied[1]) == before[applied[0]] + 1  # neither was applied
        assert value("reassigner_executor_apply_duration_seconds_count", kind="ReassignmentStep") >= 1
    finally:
        server.shutdown()
        server.server_close()
