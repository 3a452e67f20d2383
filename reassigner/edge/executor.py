"""The executor: applies the pipeline's commands to the cluster and reports each outcome.

ONE COMMAND MESSAGE, in this order:
1. decode the Command envelope; bytes that are not one, or an envelope out of bounds (an id, key
   or reassignment id over `MAX_ENVELOPE_CHARS`, a reason over `MAX_REASON_CHARS`, a negative
   epoch: `compute_envelope_problem`) → a DeadLetter record, commit, go on;
2. refuse, before anything is claimed or applied, a command that cannot be trusted
   (`compute_trust_problem`): with a command signing key configured, one that is unsigned or
   badly signed (BAD_SIGNATURE, `schemas.signing`); one decided more than
   `ledger.REPLAY_WINDOW_SECONDS` ago, whose id the ledger may have forgotten (COMMAND_EXPIRED:
   a replay of an old command, or a backlog an executor down for a week re-reads). Nothing is
   written to the ledger for it, so a forged command carrying the id of a genuine command yet to
   come cannot make that one a DUPLICATE. Its result (ok false) names where it was read
   (`compute_message_source`: topic, partition, offset and a client id header if any) and the
   pipeline raises an alert from it;
3. claim the command id in Redis (one Lua script, atomic): a command id seen before is not
   applied again — its stored result is published again instead; an epoch above the planner
   epoch the state store holds is refused (UNKNOWN_EPOCH, after `UNKNOWN_EPOCH_GRACE_SECONDS`
   of asking again: a store restored from an older copy holds an older epoch until the
   pipeline rewrites it), one older than the highest seen too (STALE_EPOCH); while the store
   holds no planner epoch at all (emptied) the command waits; otherwise the highest epoch is
   raised and the id is marked APPLYING;
4. apply it through the Admin API, retrying transient errors under the one retry policy
   (`runtime.backoff`: 0.5 s doubling to 10 s) for at most `executor_retry_seconds`;
5. store the outcome under the command id, publish a CommandResult (ok, or the Kafka error
   name and message), and only then commit the consumer offset (a coordinator loading or
   moving is waited out: `runtime.clients.kafka_consumer.commit_consumed`).
A crash between 3 and 5 re-delivers the message; the claimed id keeps it from being applied
twice, and its result is published when known. A claim left APPLYING by a crashed attempt is
settled by asking Kafka (`resume_interrupted`): a ReassignmentStep whose target Kafka already
shows (moving or reached), or a CancelReassignment whose partition moves no more, was applied:
ok; otherwise the command is applied now — every command kind is idempotent in Kafka (the same
target, the same election, the same configs), so applying an interrupted one again is safe, also
when a broker's metadata lagged and hid that it had been applied.
Only when Kafka cannot be asked is the result COMMAND_INTERRUPTED (reporting every interrupted
step so would abandon partitions whose state Kafka can tell).
Any other failure while handling one message (a defect, a result Kafka refuses) dead-letters that
message with the error as the reason, and the executor goes on: one message never stops it, on
this run or on the next (a ~1 MB command must not stop the executor on every restart).
A result's message is cut to `MAX_REASON_CHARS`, so a result always fits a Kafka message.
METRICS (`runtime.metrics`), counted once the result (or dead letter) is published: commands
applied by kind and outcome (ok or the error code) with the time applying took, refusals by
reason (STALE_EPOCH, UNKNOWN_EPOCH, BAD_SIGNATURE, COMMAND_EXPIRED), duplicates, dead letters.

OUTAGES: Redis (steps 3 and 5) and the publish of step 5 are retried under the same policy until
they succeed or the executor is stopped; a stop during an outage leaves the offset uncommitted,
so the message is delivered again on restart. A claim is made with a token of this attempt, so
a claim whose reply was lost in an outage is recognised as ours when retried (APPLY, not
"interrupted"), and a command is still never applied twice.

REDIS: the command ledger (`reassigner.edge.ledger`): highest epoch, outcome per command id.
At start the executor records its command signing (its key's fingerprint, or "unsigned") in the
state store and checks the pipeline's: without a key while the pipeline signs, it refuses to
start (`schemas.signing.compute_signing_mismatch`, the one-side-only rule).

COMMANDS (payload kinds): ReassignmentStep (AlterPartitionReassignments with the target list;
with target_log_dirs, AlterReplicaLogDirs on each named dir first — Kafka remembers the dir for
a replica it does not host yet — and again after, until the replica is there),
CancelReassignment (the same call with None), ElectLeader (preferred election), LogDirMove
(its log-dir throttle on the broker when it carries one, then AlterReplicaLogDirs until the
broker hosts the replica), SetThrottle / ClearThrottle (`log_dir_only`: that one rate)
(IncrementalAlterConfigs on brokers and topics). A ReassignmentStep that carries a throttle has
it set before the reassignment is submitted; throttles are merged with others' and only the
executor's own are cleared (`reassigner.edge.throttle_keeper`, under the rules of
`reassigner.edge.throttles`, records in the ledger). Cordon and Uncordon (`Command.action`,
schema version 10; `cordoned.log.dirs`, Kafka 4.3+) are applied per broker under the rules of
`reassigner.edge.cordons`, recorded beside the throttles: only the product's own cordons are
removed. A command for a deleted topic or a dead broker ends as an error result, never as a crash.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from functools import partial
from typing import Callable, Iterable, Mapping, TypeVar

from runtime.clients.cluster_observation import CORDONED_LOG_DIRS, LOG_DIR_THROTTLED_RATE
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.backoff import COMMAND_APPLY, REPLICA_PLACEMENT, UNTIL_STOPPED, retry_transient
from runtime.clients.kafka_consumer import build_consumer, commit_consumed, is_end_of_partition
from runtime.clients.kafka_producer import build_producer, publish_and_wait
from runtime.clients.redis_io import retry_redis
from schemas.errors import DecodeError, InvalidConfigError, ReassignerError, TransientError
from runtime.metrics import (count_command_outcome, count_dead_letter, count_duplicate_command,
                                count_refused_command)
from runtime.settings import Settings, read_command_signing_key
from schemas.dead_letter import build_dead_letter
from schemas.codec import decode, encode, topic_name, version_headers, writer_version_from_headers
from schemas.loader import CURRENT_SCHEMA_VERSION
from schemas.signing import UNSIGNED, SigningKey, compute_signature_problem, compute_signing_mismatch
from reassigner.edge.cordons import CordonChange, compute_cordon, compute_uncordon, cordon_field
from reassigner.edge.ledger import REPLAY_WINDOW_SECONDS, CommandLedger, Outcome
from reassigner.edge.throttle_keeper import ThrottleKeeper
from reassigner.edge.throttles import compute_set_throttle, compute_step_throttle

log = logging.getLogger(__name__)
T = TypeVar("T")

EXECUTOR_TOPICS = ("commands", "command-results", "dead-letter")
STALE_EPOCH = "STALE_EPOCH"
UNKNOWN_EPOCH = "UNKNOWN_EPOCH"
# How long a command whose epoch is above the store's planner epoch is asked about again before
# it is refused, and the pause between two asks (`Executor.claim`).
UNKNOWN_EPOCH_GRACE_SECONDS = 10.0
PLANNER_WAIT_SECONDS = 0.5
BAD_SIGNATURE = "BAD_SIGNATURE"
COMMAND_EXPIRED = "COMMAND_EXPIRED"
# Headers a producer may name itself by (self-declared: a hint for the operator, not a proof).
CLIENT_ID_HEADERS = ("client.id", "client-id", "client_id")
MAX_CLIENT_ID_CHARS = 100
INTERRUPTED = "COMMAND_INTERRUPTED"
# AlterReplicaLogDirs answers these while the broker does not host the replica yet.
REPLICA_NOT_THERE_YET = frozenset({"REPLICA_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER"})

# Bounds of a command envelope; the pipeline's own ids and reasons stay far below them.
MAX_ENVELOPE_CHARS = 256
MAX_REASON_CHARS = 2000


def compute_envelope_problem(command: Mapping) -> str | None:
    """Why a decoded command cannot be handled (ids too long to key a ledger entry or travel in
    a result, a negative epoch), or None."""
    for name in ("id", "key", "reassignment_id"):
        value = command.get(name)
        if isinstance(value, str) and len(value) > MAX_ENVELOPE_CHARS:
            return f"the command's {name} has {len(value):,} characters; at most {MAX_ENVELOPE_CHARS} are allowed"
    if len(command.get("reason") or "") > MAX_REASON_CHARS:
        return f"the command's reason has {len(command['reason']):,} characters; at most {MAX_REASON_CHARS}"
    if not isinstance(command.get("epoch"), int) or command["epoch"] < 0:
        return f"the command's epoch {command.get('epoch')!r} is not a planner epoch (0 or more)"
    return None


def compute_message_source(topic: str, partition: int, offset: int, headers) -> str:
    """Where a command was read, for a refusal's message: `<topic>[<partition>]@<offset>`, and
    the client id header its producer declared, if any (cut, non-printable characters replaced)."""
    source = f"{topic}[{partition}]@{offset}"
    for name, value in headers or ():
        if name in CLIENT_ID_HEADERS and value is not None:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            text = "".join(c if c.isprintable() else "?" for c in text[:MAX_CLIENT_ID_CHARS])
            return f"{source}, producer's {name} header {text!r} (self-declared)"
    return source


def compute_command_expired(event_time_ms: int, now_ms: int) -> str | None:
    """Why a command is too old to apply (see `reassigner.edge.ledger`, REPLAYS), or None."""
    age_seconds = (now_ms - event_time_ms) / 1000
    if age_seconds < REPLAY_WINDOW_SECONDS:
        return None
    return (f"the command was decided {age_seconds / 86400:.1f} days ago, more than the "
            f"{REPLAY_WINDOW_SECONDS // 86400} days within which the executor remembers the commands it "
            "applied: a replay of an old command, or a backlog read after a long stop")


def compute_trust_problem(signing_key: SigningKey | None, topic: str, key: bytes | None, value: bytes,
                          headers, event_time_ms: int, now_ms: int) -> tuple[str, str] | None:
    """(error code, why) for a command that must not be claimed nor applied (step 2 of the
    module doc), or None: a bad or missing signature when a key is configured, then its age."""
    if signing_key is not None:
        problem = compute_signature_problem(signing_key, topic, key, value, headers)
        if problem is not None:
            return BAD_SIGNATURE, (f"{problem}: only the pipeline holds the command signing key, so "
                                   "someone else wrote it to the commands topic (or the pipeline runs "
                                   "without the executor's key)")
    expired = compute_command_expired(event_time_ms, now_ms)
    if expired is not None:
        return COMMAND_EXPIRED, expired
    return None


def compute_interrupted_command_applied(kind: str, fields: Mapping, replicas: tuple[int, ...],
                                        adding: tuple[int, ...], removing: tuple[int, ...]) -> bool:
    """Whether Kafka's view of the partition shows the command applied: a step's target is the
    replica list, or the target of the reassignment in progress (Kafka lists the target's replicas
    first, then those being removed); a cancel left no reassignment in progress."""
    if kind == "CancelReassignment":
        return not adding and not removing
    target = tuple(fields["target_replicas"])
    return tuple(r for r in replicas if r not in removing) == target


class Executor:
    def __init__(self, admin: ClusterAdmin, ledger: CommandLedger, consumer_config: Mapping,
                 producer_config: Mapping, settings: Settings,
                 clock: Callable[[], float] = time.time,
                 recent_commands: Callable[[], Iterable[Mapping]] | None = None) -> None:
        self.admin = admin
        self.ledger = ledger
        self.settings = settings
        self.clock = clock
        self.consumer_config = dict(consumer_config)
        self.signing_key = read_command_signing_key(settings)
        self._producer = build_producer(producer_config)
        self._consumer = None
        self._stop = threading.Event()
        self.throttles = ThrottleKeeper(admin, ledger, self._stop, recent_commands)

    # --- loop -----------------------------------------------------------------------------------
    def prepare_topics(self) -> None:
        names = [topic_name(s, self.settings.topic_prefix) for s in EXECUTOR_TOPICS]
        created = self.admin.ensure_topics(names, partitions=self.settings.event_topic_partitions)
        if created:
            log.info("created topics %s", ", ".join(created))

    def check_command_signing(self) -> None:
        """Record this executor's command signing in the state store and hold it to the
        pipeline's (`schemas.signing`, ONE SIDE ONLY): raises InvalidConfigError when this
        executor has no key and the pipeline signs; logs a warning for any other mismatch."""
        own = self.signing_key.fingerprint if self.signing_key is not None else UNSIGNED
        stored = retry_redis(self.ledger.read_signing, "reading the command signing", UNTIL_STOPPED, self._stop)
        mismatch = compute_signing_mismatch("executor", own, stored.get("pipeline"))
        if mismatch is not None and mismatch[0] == "error":  # not recorded: this executor does not run
            raise InvalidConfigError(mismatch[1])
        retry_redis(lambda: self.ledger.store_signing(own), "recording the command signing", UNTIL_STOPPED, self._stop)
        if mismatch is not None:
            log.warning("%s", mismatch[1])
        elif self.signing_key is not None:
            log.info("verifying command signatures (key fingerprint %s)", own)

    def run(self, stop: threading.Event) -> None:
        """Consume and apply commands until `stop` is set."""
        self._stop = self.throttles.stop = stop
        try:
            self.check_command_signing()
            retry_transient(self.prepare_topics, "preparing the executor's topics", UNTIL_STOPPED, stop, log)
        except TransientError:
            return  # stopped before the cluster (or Redis) answered
        config = {"group.id": f"{self.settings.topic_prefix}.executor",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "log_level": 0} | self.consumer_config
        self._consumer = build_consumer(config)
        self._consumer.subscribe([topic_name("commands", self.settings.topic_prefix)])
        try:
            while not stop.is_set():
                message = self._consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    if not is_end_of_partition(message.error()):
                        log.debug("consumer: %s", message.error())
                    continue
                try:
                    self.handle_message(message)
                except TransientError:
                    if stop.is_set():  # stopped in an outage: not committed, delivered again
                        break
                    raise
                except Exception as error:  # one message never stops the executor
                    if not self._dead_letter_failed(message, error) and stop.is_set():
                        break
                if not commit_consumed(self._consumer, message, stop, "committing the commands consumed"):
                    break
        finally:
            self._consumer.close()
            self._producer.flush(5)

    def handle_message(self, message) -> None:
        """Steps 1–5 of the module doc for one consumed message (except the commit)."""
        try:
            headers = message.headers() or []
            command = decode("Command", message.value(), writer_version_from_headers(headers))
        except DecodeError as error:
            self._dead_letter(message, str(error))
            return
        problem = compute_envelope_problem(command)
        if problem is not None:
            self._dead_letter(message, problem)
            return
        action = command.get("action")  # a kind added after the payload union was frozen
        kind, fields = (str(action["kind"]), action) if action else command["payload"]
        source = compute_message_source(message.topic(), message.partition(), message.offset(), headers)
        refused = compute_trust_problem(self.signing_key, message.topic(), message.key(), message.value(),
                                        headers, command["event_time"], int(self.clock() * 1000))
        if refused is not None:
            outcome = Outcome(False, refused[0], f"{refused[1]}; not applied (read from {source})")
            log.warning("refused %s %s: %s", kind, command["id"], outcome.message)
            self._publish_result(command, kind, outcome)
            count_refused_command(refused[0])
            return
        verdict, detail = self.claim(command, uuid.uuid4().hex)
        if verdict == "UNKNOWN":
            outcome = Outcome(False, UNKNOWN_EPOCH, f"command epoch {command['epoch']} is above the planner epoch "
                              f"{detail} that the state store holds: no pipeline issued it (forged, or written "
                              f"for another cluster's state); not applied (read from {source}). Check who can "
                              "write the commands topic")
            log.warning("refused %s %s: %s", kind, command["id"], outcome.message)
            count = partial(count_refused_command, UNKNOWN_EPOCH)
        elif verdict == "STALE":
            outcome = Outcome(False, STALE_EPOCH, f"command epoch {command['epoch']} is older "
                              f"than the newest planner epoch seen, {detail}; not applied (read from {source})")
            log.warning("refused %s %s: %s", kind, command["id"], outcome.message)
            count = partial(count_refused_command, STALE_EPOCH)
        elif verdict == "DUPLICATE" and not detail.startswith("APPLYING"):
            previous = Outcome.from_storage(detail)
            outcome = Outcome(previous.ok, previous.error_code,
                              f"duplicate command id, already applied: {previous.message}".rstrip(": "))
            log.debug("duplicate command %s", command["id"])
            count = count_duplicate_command
        else:  # claimed now, or claimed by an attempt that crashed before storing its outcome
            interrupted = verdict == "DUPLICATE"
            applying = time.monotonic()
            outcome = self.resume_interrupted(kind, fields) if interrupted else self.apply_command(kind, fields)
            seconds = time.monotonic() - applying
            count = partial(count_command_outcome, kind, outcome.ok, outcome.error_code, seconds)
            retry_redis(lambda: self.ledger.store_outcome(command["id"], outcome),
                        f"storing the outcome of command {command['id']}", UNTIL_STOPPED, self._stop)
            level = logging.INFO if outcome.ok and not interrupted else logging.WARNING
            log.log(level, "%s %s (%s)%s: %s%s", kind, command["id"], command["reason"],
                    "; interrupted by a crash, settled by asking Kafka" if interrupted else "",
                    "ok" if outcome.ok else outcome.error_code,
                    "" if outcome.ok else f" — {outcome.message}")
        self._publish_result(command, kind, outcome)
        count()  # once its result is published (`runtime.metrics`)

    def claim(self, command: Mapping, token: str) -> tuple[str, str]:
        """Step 3, the ledger's claim, with a store that lost its data in mind: while it holds no
        planner epoch at all (emptied; the pipeline's next batch writes it back) the command
        waits; an epoch above the planner's is asked again for `UNKNOWN_EPOCH_GRACE_SECONDS`
        before it is refused (a store restored from an older copy holds an older epoch until the
        pipeline's next batch rewrites it). A stop while waiting leaves the command unconsumed."""
        refuse_after = None
        told = False
        while True:
            verdict, detail = retry_redis(lambda: self.ledger.claim(command["id"], command["epoch"], token),
                                          f"claiming command {command['id']}", UNTIL_STOPPED, self._stop)
            if verdict == "UNKNOWN":
                refuse_after = refuse_after or time.monotonic() + UNKNOWN_EPOCH_GRACE_SECONDS
                if time.monotonic() >= refuse_after:
                    return verdict, detail
            elif verdict != "NO_PLANNER":
                return verdict, detail
            elif not told:
                log.warning("the state store holds no planner epoch (emptied, or no pipeline has run on it yet): "
                            "command %s waits until the pipeline writes it", command["id"])
                told = True
            if self._stop.wait(PLANNER_WAIT_SECONDS):
                raise TransientError(f"stopped while command {command['id']} waited for the planner epoch")

    # --- applying -------------------------------------------------------------------------------
    def apply_command(self, kind: str, fields: Mapping) -> Outcome:
        """Apply one payload; every failure becomes an error outcome, never an exception."""
        appliers = {
            "ReassignmentStep": self.apply_reassignment_step,
            "CancelReassignment": lambda f: self.admin.alter_partition_reassignment(
                f["topic"], f["partition"], None),
            "ElectLeader": lambda f: self.admin.elect_preferred_leader(f["topic"], f["partition"]),
            "LogDirMove": self.apply_log_dir_move,
            "SetThrottle": self.apply_set_throttle,
            "ClearThrottle": self.apply_clear_throttle,
            "Cordon": self.apply_cordon,
            "Uncordon": self.apply_uncordon,
        }
        applier = appliers.get(kind)
        if applier is None:
            return Outcome(False, "INVALID_REQUEST", f"unknown command kind {kind!r}")
        try:
            self._with_retries(kind, lambda: applier(fields))
        except ReassignerError as error:
            return Outcome(False, error.code, str(error))
        except Exception as error:  # a bug must not stop the executor; it is reported instead
            log.exception("applying %s failed unexpectedly", kind)
            return Outcome(False, "UNKNOWN_SERVER_ERROR", f"{type(error).__name__}: {error}")
        return Outcome(True, None, "")

    def resume_interrupted(self, kind: str, fields: Mapping) -> Outcome:
        """The outcome of a command whose earlier attempt crashed before its outcome was stored
        (see the module doc): what Kafka shows, else the command applied now."""
        if kind in ("ReassignmentStep", "CancelReassignment"):
            try:
                now = self._with_retries(f"reading {fields['topic']}-{fields['partition']}",
                                         lambda: self.admin.read_assignment(fields["topic"], fields["partition"]))
            except ReassignerError as error:
                return Outcome(False, INTERRUPTED, "a previous attempt was interrupted, and Kafka could "
                               f"not be asked whether it was applied: {error}")
            if now is not None and compute_interrupted_command_applied(kind, fields, *now):
                return Outcome(True, None, "applied by an attempt that was interrupted (Kafka shows it)")
        return self.apply_command(kind, fields)

    def _with_retries(self, doing: str, action: Callable[[], T]) -> T:
        return retry_transient(action, doing, COMMAND_APPLY.giving_up_after(self.settings.executor_retry_seconds),
                               self._stop, log)

    def apply_reassignment_step(self, fields: Mapping) -> None:
        """The step's throttle first (when it carries one: `reassigner.edge.throttles`), its log
        dirs, then the reassignment itself."""
        wanted = compute_step_throttle(fields)
        if wanted is not None:
            self.throttles.apply(wanted)
        target = list(fields["target_replicas"])
        dirs = list(fields.get("target_log_dirs") or [])
        named_dirs = [(broker, path) for broker, path in zip(target, dirs)
                      if path and path != "any"]
        # The dirs are a preference (the tool's JSON allows "any"): a broker that will not take
        # one (e.g. KAFKA_STORAGE_ERROR on a broker with a failed dir) must not fail the step,
        # which then lands in a dir of the broker's choosing.
        for broker_id, path in named_dirs:
            # Before the reassignment: Kafka remembers the dir for a replica not hosted yet.
            try:
                self.admin.alter_replica_log_dir(broker_id, fields["topic"], fields["partition"], path)
            except ReassignerError as error:
                if error.code not in REPLICA_NOT_THERE_YET:
                    log.warning("%s-%s: broker %d did not take log dir %s (%s); the broker chooses",
                                fields["topic"], fields["partition"], broker_id, path, error)
        self.admin.alter_partition_reassignment(fields["topic"], fields["partition"], target)
        for broker_id, path in named_dirs:
            # After: the remembered dir is lost if the broker restarts; ask until it is placed.
            try:
                self.apply_log_dir(broker_id, fields["topic"], fields["partition"], path)
            except ReassignerError as error:
                log.warning("%s-%s: replica on broker %d not placed in %s (%s); the broker chooses",
                            fields["topic"], fields["partition"], broker_id, path, error)

    def apply_log_dir_move(self, fields: Mapping) -> None:
        """A LogDirMove: its throttle on the broker first (when it carries one), then the move."""
        if fields.get("throttle_bytes_per_sec") is not None:
            self.admin.alter_broker_configs([fields["broker_id"]],
                                            {LOG_DIR_THROTTLED_RATE: str(fields["throttle_bytes_per_sec"])})
        self.apply_log_dir(fields["broker_id"], fields["topic"], fields["partition"], fields["target_dir"])

    def apply_log_dir(self, broker_id: int, topic: str, partition: int, path: str) -> None:
        """AlterReplicaLogDirs, asked again every 0.5 s while the broker does not host the
        replica yet (it is still being created), for at most `executor_log_dir_wait_seconds`."""
        retry_transient(lambda: self.admin.alter_replica_log_dir(broker_id, topic, partition, path),
                        f"placing {topic}-{partition} in {path} on broker {broker_id}",
                        REPLICA_PLACEMENT.giving_up_after(self.settings.executor_log_dir_wait_seconds), self._stop,
                        log, retry_if=lambda error: error.code in REPLICA_NOT_THERE_YET)

    def apply_set_throttle(self, fields: Mapping) -> None:
        """A SetThrottle: the adaptive throttle's rate changes (schema set 12; pipelines of sets
        1-4 sent one before their steps): under the same ownership rules as a step's throttle."""
        self.throttles.apply(compute_set_throttle(fields))

    def apply_clear_throttle(self, fields: Mapping) -> None:
        """Remove the throttles the executor set (`reassigner.edge.throttles`), nothing else."""
        if fields.get("log_dir_only"):  # log-dir moves are over; inter-broker throttles stay
            self.admin.alter_broker_configs(fields["broker_ids"], {LOG_DIR_THROTTLED_RATE: None})
            return
        self.throttles.clear(list(fields["broker_ids"]), sorted({p["topic"] for p in fields.get("partitions") or []}),
                             fields.get("throttle_sequence"))

    def apply_cordon(self, fields: Mapping) -> None:
        """Cordon each broker (`reassigner.edge.cordons`: others' cordons kept, ours recorded first)."""
        dirs = tuple(fields.get("log_dirs") or ())
        self._apply_cordons(fields["broker_ids"], lambda now, mine: compute_cordon(dirs, now, mine))

    def apply_uncordon(self, fields: Mapping) -> None:
        """Remove the product's cordon from each broker, nothing else (`reassigner.edge.cordons`)."""
        self._apply_cordons(fields["broker_ids"], compute_uncordon)

    def _apply_cordons(self, broker_ids, decide: Callable[[str | None, Mapping | None], CordonChange]) -> None:
        brokers = sorted({int(b) for b in broker_ids})
        current = self.admin.describe_dynamic_configs(brokers, [], [CORDONED_LOG_DIRS])
        owned = retry_redis(self.ledger.read_throttles, "reading the executor's records", UNTIL_STOPPED, self._stop)
        for broker_id in brokers:
            field = cordon_field(broker_id)
            change = decide(current.get((broker_id, CORDONED_LOG_DIRS)), owned.get(field))
            if change.kept:
                log.info("broker %d: %s", broker_id, change.kept)
            if change.record is not None:
                retry_redis(lambda: self.ledger.store_throttles({field: change.record}),
                            "recording the executor's cordon", UNTIL_STOPPED, self._stop)
            if change.write:
                self.admin.alter_broker_configs([broker_id], {CORDONED_LOG_DIRS: change.value})
            if change.forget:
                retry_redis(lambda: self.ledger.forget_throttles([field]), "forgetting a removed cordon",
                            UNTIL_STOPPED, self._stop)

    # --- publishing -----------------------------------------------------------------------------
    def _publish_result(self, command: Mapping, kind: str, outcome: Outcome) -> None:
        record = {
            "schema_version": CURRENT_SCHEMA_VERSION,
            "event_time": int(self.clock() * 1000),
            "id": str(uuid.uuid4()),
            "key": command["key"],
            "command_id": command["id"],
            "command_kind": kind,
            "epoch": command["epoch"],
            "reassignment_id": command["reassignment_id"],
            "step": command["step"],
            "ok": outcome.ok,
            "error_code": outcome.error_code,
            "message": outcome.message if len(outcome.message) <= MAX_REASON_CHARS
            else outcome.message[:MAX_REASON_CHARS] + "…",
        }
        self._produce("command-results", command["key"], encode("CommandResult", record))

    def _dead_letter_failed(self, message, error: Exception) -> bool:
        """Dead-letter a message whose handling failed; False when stopped before it was written
        (then it is not committed and comes again)."""
        where = f"{message.topic()}[{message.partition()}]@{message.offset()}"
        log.exception("handling the command at %s failed", where)
        try:
            self._dead_letter(message, f"the executor could not handle it: {type(error).__name__}: {error}")
        except TransientError:
            return False
        except Exception:  # not even a dead letter can be written: say so, never stop on it
            log.exception("the command at %s could not be dead-lettered either; skipped", where)
        return True

    def _dead_letter(self, message, reason: str) -> None:
        record = build_dead_letter(source_topic=message.topic(), partition=message.partition(),
                                   offset=message.offset(), key=message.key(), value=message.value(),
                                   headers=dict(message.headers() or []), reason=reason,
                                   now_ms=int(self.clock() * 1000), expected_schema="Command")
        log.warning("dead-lettered %s: %s", record["key"], record["reason"][:200])
        self._produce("dead-letter", record["key"], encode("DeadLetter", record))
        count_dead_letter()

    def _produce(self, suffix: str, key: str, value: bytes) -> None:
        """Send and wait for the acknowledgement; retried (the one policy) until it is written or
        the executor stops (then the message is not committed and comes again)."""
        topic = topic_name(suffix, self.settings.topic_prefix)
        retry_transient(lambda: publish_and_wait(self._producer, topic, key.encode(), value, version_headers()),
                        f"publishing to {topic}", UNTIL_STOPPED, self._stop, log)
