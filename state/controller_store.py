"""The controller's state in Redis: one atomic, idempotent transition per Spark micro-batch.

Keys (every key of one Kafka cluster carries the hash tag `{<cluster>}`, so the Lua script below
may touch them all, on one Redis or on Redis Cluster alike):

    reassigner:{c}:brokers        HASH  broker id → [rack, alive, draining, [[path, online,
                                                     total_bytes, usable_bytes, replica_bytes,
                                                     replica_count, [future "topic:partition",
                                                     ...]], ...],
                                                     observed_at_ms, ["topic:partition" it
                                                     cannot host, ...] (omitted when none)]
    reassigner:{c}:topics         HASH  topic → [min.insync.replicas, observed_at_ms, topic id]
    reassigner:{c}:partitions     HASH  "topic:partition" → [replicas, isr, leader, leader_epoch,
                                        adding, removing, offline, size_bytes, dir indexes]
    reassigner:{c}:reassignments  HASH  "topic:partition" → the active Reassignment record
    reassigner:{c}:logdir_moves   HASH  "broker:topic:partition" → the active LogDirTask (JSON)
    reassigner:{c}:meta           HASH  epoch, incarnation, last_batch, command_sequence, the replication
                                        meter and the small mappings of ControllerState (JSON each:
                                        config, proposals, open alerts, waiting reasons,
                                        external moves...)
    reassigner:{c}:outbox         HASH  batch id → JSON list of messages not yet confirmed as
                                        published
    reassigner:{c}:offsets        HASH  "topic:partition" of an input topic → the greatest offset
                                        applied (`streams.offsets`)
    reassigner:{c}:command_signing HASH "pipeline" / "executor" → the fingerprint of the command
                                        signing key the process started with, or "unsigned"
                                        (`schemas.signing`, the one-side-only rule)

Rules:
- `commit` applies a batch only if its sequence number is greater than `last_batch`, in one Lua
  script that writes the changed fields, deletes the removed ones, stores the outbox, advances the
  applied input offsets and sets `last_batch`: a batch is applied entirely or not at all, with
  the offsets of exactly the records it applied, and a replayed batch changes nothing;
- a batch that writes more than `STAGE_ABOVE_ROWS` partition or reassignment rows (a first view,
  a snapshot of a busy cluster, a big rebalance planned) writes that whole new hash beforehand
  under a staging key, in chunks of `STAGE_CHUNK_FIELDS` rows, and the script swaps it in with
  RENAME (O(1)); until then the stored state is untouched, and a staged hash never swapped in
  is removed (or expires), so the batch is still all or nothing while no command blocks Redis
  for long; the load reads with HSCAN for the same reason;
- the same script refuses the commit of an instance whose epoch is older than the stored one
  (`FencedError`): once a newer pipeline instance has bumped the epoch, an older one still
  running can write nothing more — not its state, not an outbox, not its epoch over the new one;
- VERIFIED, NOT TRUSTED: a pipeline instance takes the store over (`take_over`: a higher epoch
  and a random `incarnation` token in meta) and each of its commits must find there its own
  token and `last_batch` = the batch before (`StateStoreLostError` otherwise). A store emptied
  (FLUSHALL, a restart without persistence, a failover to an empty replica) or restored from an
  older copy is so caught at the next batch, before a delta is written over it — a delta over
  the wrong base is a state nobody decided. The instance then rewrites its state whole
  (`reseed`: staged and swapped in by one script, a new incarnation, an epoch above both);
- only what changed between the state before and after the batch is written, so a batch of a
  few ISR events costs a few fields, not the cluster; finding them walks only the topics the
  batch touched (`compute_changed_partitions`) and, when the batch's change log vouches for
  them, only the reassignments it touched (`compute_changed_reassignments`);
- a partition's log dirs are stored as indexes into its broker's dir list (paths are long and
  repeat for every replica): about 60 bytes of value per partition;
- `observed_at_ms` (`ControllerState.observed_at`) is null when unknown; the forms written before
  it was kept (a broker list of four, a bare min ISR number) still load, as "unknown";
- Topic names cannot contain ':' (Kafka allows only [a-zA-Z0-9._-]), so "topic:partition" is
  an unambiguous field name.
`to_storage`/`from_storage` functions are the one place where stored forms are defined.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any, Iterable, Mapping

from state.model import ControllerState, ObservationTimes, OutboundMessage, Proposal
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.eta import ReplicationMeter
from planning.movement.external import ExternalMove
from planning.movement.log_dirs import LogDirTask
from planning.movement.reassignment import AfterCancel, Reassignment, ReassignmentState, StepInFlight
from planning.movement.partition_steps import Step
from schemas.errors import FencedError, StateStoreLostError
from schemas.codec import decode, encode

COMMIT_BATCH = """
local current = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if tonumber(ARGV[4]) < current then return {-1, current} end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_batch') or '-1')
local batch = tonumber(ARGV[1])
if ARGV[7] ~= '' then
  -- verified: the store must be the one this instance took over and advanced, batch by batch
  if (redis.call('HGET', KEYS[1], 'incarnation') or '') ~= ARGV[7] then return {-2, current, last} end
  if batch == last then return {0, current} end
  if last ~= batch - 1 then return {-3, current, last} end
end
if batch <= last then return {0, current} end
local changes = cjson.decode(ARGV[2])
for i, key in ipairs(KEYS) do
  local change = changes[key]
  if change then
    if change['set'] and #change['set'] > 0 then
      for j = 1, #change['set'], 4000 do
        redis.call('HSET', key, unpack(change['set'], j, math.min(j + 3999, #change['set'])))
      end
    end
    if change['del'] and #change['del'] > 0 then
      for j = 1, #change['del'], 4000 do
        redis.call('HDEL', key, unpack(change['del'], j, math.min(j + 3999, #change['del'])))
      end
    end
  end
end
-- staged hashes (each written in chunks before this script) replace the old ones: ARGV[6]
-- lists the KEYS index of each, its staged copy is the KEYS after the hashes, in that order.
-- RENAME is O(1), the old hash is freed in the background, and the staging TTL is dropped.
local staged = cjson.decode(ARGV[6])
for n, index in ipairs(staged) do
  redis.call('UNLINK', KEYS[index])
  redis.call('RENAME', KEYS[#KEYS - #staged + n], KEYS[index])
  redis.call('PERSIST', KEYS[index])
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[6], ARGV[1], ARGV[3]) end
local offsets = cjson.decode(ARGV[5])
if #offsets > 0 then redis.call('HSET', KEYS[7], unpack(offsets)) end
redis.call('HSET', KEYS[1], 'last_batch', ARGV[1])
return {1, current}
"""

# Rewrite a lost or rolled-back store whole (`ControllerStore.reseed`): KEYS are the HASHES, then
# a staged copy of each, in the same order (a copy that does not exist leaves its hash empty).
# ARGV: the writer's epoch, the meta fields (flat JSON list), the new incarnation, last_batch.
RESEED = """
local current = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if tonumber(ARGV[1]) < current then return {-1, current} end
local n = #KEYS / 2
for i = 1, n do
  redis.call('UNLINK', KEYS[i])
  if redis.call('EXISTS', KEYS[n + i]) == 1 then
    redis.call('RENAME', KEYS[n + i], KEYS[i])
    redis.call('PERSIST', KEYS[i])
  end
end
local epoch = math.max(current, tonumber(ARGV[1])) + 1
local meta = cjson.decode(ARGV[2])
if #meta > 0 then redis.call('HSET', KEYS[1], unpack(meta)) end
redis.call('HSET', KEYS[1], 'epoch', epoch, 'incarnation', ARGV[3], 'last_batch', ARGV[4])
return {1, epoch}
"""

# A new instance takes over: the epoch goes up (at least to ARGV[1]) and the store is marked
# with the instance's incarnation, which every verified commit must find there.
TAKE_OVER = """
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
if epoch < tonumber(ARGV[1]) then
  epoch = tonumber(ARGV[1])
  redis.call('HSET', KEYS[1], 'epoch', epoch)
end
redis.call('HSET', KEYS[1], 'incarnation', ARGV[2])
return {epoch, tonumber(redis.call('HGET', KEYS[1], 'last_batch') or '-1')}
"""

# The script reads meta, outbox and offsets as KEYS[1], KEYS[6] and KEYS[7], and the staged
# hashes after these: new hashes go at the end of this list.
HASHES = ("meta", "brokers", "topics", "partitions", "reassignments", "outbox", "offsets", "logdir_moves")
# A batch writing more rows than this to the partitions or the reassignments (a first view, the
# start of a rebalance of 80,000 partitions) stages that whole hash in chunks of
# STAGE_CHUNK_FIELDS rows (a few ms of Redis each) and swaps it in: no Redis command of the
# product then lasts more than a few tens of ms, whatever the cluster's size.
STAGED_HASHES = ("partitions", "reassignments")
STAGE_ABOVE_ROWS = 20_000
STAGE_CHUNK_FIELDS = 5_000
STAGE_TTL_SECONDS = 3_600  # a staged hash its commit never swapped in (a crash, a fence) expires
LOAD_SCAN_COUNT = 5_000  # the load reads big hashes with HSCAN, this many fields a call


# --- stored forms -----------------------------------------------------------------------------
def tp_field(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


def tp_from_field(field: str) -> TopicPartition:
    topic, partition = field.rsplit(":", 1)
    return TopicPartition(topic, int(partition))


def broker_to_storage(broker: Broker, observed_at_ms: int | None = None) -> str:
    dirs = [[d.path, d.online, d.total_bytes, d.usable_bytes, d.replica_bytes, d.replica_count,
             sorted(tp_field(tp) for tp in d.future_replicas)] for d in broker.log_dirs]
    stored = [broker.rack, broker.alive, broker.draining, dirs, observed_at_ms]
    if broker.cannot_host:
        stored.append(sorted(tp_field(tp) for tp in broker.cannot_host))
    return json.dumps(stored, separators=(",", ":"))


def broker_from_storage(broker_id: int, stored: str) -> tuple[Broker, int | None]:
    """The broker and its observation time (None when unknown)."""
    rack, alive, draining, dirs, *rest = json.loads(stored)
    observed = rest[0] if rest else None
    cannot_host = frozenset(tp_from_field(f) for f in rest[1]) if len(rest) > 1 else frozenset()
    broker = Broker(broker_id, rack, alive, draining, tuple(_log_dir_from_storage(d) for d in dirs),
                    cannot_host)
    return broker, observed


def _log_dir_from_storage(stored: list) -> LogDir:
    path, online, total, usable, *rest = stored  # rows written before the sums were kept have four
    if not rest:
        return LogDir(path, online, total, usable)
    replica_bytes, replica_count, futures = rest
    return LogDir(path, online, total, usable, replica_bytes, replica_count,
                  frozenset(tp_from_field(f) for f in futures))


def topic_to_storage(topic: Topic, observed_at_ms: int | None = None) -> str:
    return json.dumps([topic.min_insync_replicas, observed_at_ms, topic.topic_id], separators=(",", ":"))


def topic_from_storage(stored: str) -> tuple[int, int | None, str | None]:
    """(min.insync.replicas, observation time or None, topic id or None)."""
    value = json.loads(stored)
    if isinstance(value, int):  # the form written before observation times were kept
        return value, None, None
    min_isr, observed_at_ms, *rest = value  # rows written before topic ids were kept have two
    return int(min_isr), observed_at_ms, (rest[0] if rest else None)


def partition_to_storage(partition: PartitionState, brokers: Mapping[int, Broker]) -> str:
    dir_indexes: list[int] = []
    for replica, path in zip(partition.replicas, partition.log_dirs):
        paths = [d.path for d in brokers[replica].log_dirs] if replica in brokers else []
        dir_indexes.append(paths.index(path) if path in paths else -1)
    return json.dumps(
        [list(partition.replicas), list(partition.isr), partition.leader, partition.leader_epoch,
         list(partition.adding), list(partition.removing), list(partition.offline_replicas),
         partition.size_bytes, dir_indexes if partition.log_dirs else []],
        separators=(",", ":"),
    )


def partition_from_storage(tp: TopicPartition, stored: str,
                           brokers: Mapping[int, Broker]) -> PartitionState:
    replicas, isr, leader, epoch, adding, removing, offline, size, dir_indexes = json.loads(stored)
    log_dirs: tuple[str | None, ...] = ()
    if dir_indexes:
        resolved = []
        for replica, index in zip(replicas, dir_indexes):
            dirs = brokers[replica].log_dirs if replica in brokers else ()
            resolved.append(dirs[index].path if 0 <= index < len(dirs) else None)
        log_dirs = tuple(resolved)
    return PartitionState(tp.topic, tp.partition, tuple(replicas), tuple(isr), leader, size,
                          log_dirs, tuple(adding), tuple(removing), tuple(offline), epoch)


def step_to_storage(step: Step) -> list:
    return [list(step.target), list(step.adding), list(step.removing), step.elect_leader,
            step.leader_movement]


def step_from_storage(stored: list) -> Step:
    target, adding, removing, elect_leader, leader_movement = stored
    return Step(tuple(target), tuple(adding), tuple(removing), elect_leader, leader_movement)


def reassignment_to_storage(reassignment: Reassignment) -> str:
    in_flight = reassignment.in_flight
    return json.dumps({
        "id": reassignment.reassignment_id,
        "original": list(reassignment.original_replicas),
        "final": list(reassignment.final_target),
        "dirs": list(reassignment.target_log_dirs),
        "in_flight": None if in_flight is None else
        [step_to_storage(in_flight.step), in_flight.number, in_flight.started_at,
         in_flight.seen_in_kafka, in_flight.cancel_confirmed, in_flight.applied_at_ms, in_flight.viewed_at_ms],
        "done": reassignment.steps_done,
        "state": reassignment.state.value,
        "reason": reassignment.reason,
        "after_cancel": reassignment.after_cancel.value,
        **({"retries": [reassignment.failed_attempts, reassignment.retry_at, reassignment.last_error]}
           if reassignment.failed_attempts else {}),
    }, separators=(",", ":"))


def reassignment_from_storage(tp: TopicPartition, stored: str) -> Reassignment:
    data = json.loads(stored)
    in_flight = None
    if data["in_flight"] is not None:
        step, number, started_at, *flags = data["in_flight"]  # flags, times: absent in older state
        in_flight = StepInFlight(step_from_storage(step), number, started_at, *map(bool, flags[:2]), *flags[2:4])
    return Reassignment(
        reassignment_id=data["id"], tp=tp, original_replicas=tuple(data["original"]),
        final_target=tuple(data["final"]), target_log_dirs=tuple(data["dirs"]),
        in_flight=in_flight, steps_done=data["done"], state=ReassignmentState(data["state"]),
        reason=data["reason"], after_cancel=AfterCancel(data["after_cancel"]),
        **_retries_from_storage(data.get("retries")),  # absent: none (and in older state)
    )


def _retries_from_storage(stored: list | None) -> dict:
    if not stored:
        return {}
    attempts, retry_at, last_error = stored
    return {"failed_attempts": int(attempts), "retry_at": retry_at, "last_error": str(last_error)}


def log_dir_task_field(task: LogDirTask) -> str:
    return f"{task.broker_id}:{tp_field(task.tp)}"


def log_dir_task_to_storage(task: LogDirTask) -> str:
    return json.dumps({"id": task.task_id, "target": task.target_dir, "origin": task.origin_dir,
                       "size": task.size_bytes, "reason": task.reason, "number": task.number,
                       "started_at": task.started_at, "cancelling": task.cancelling},
                      separators=(",", ":"))


def log_dir_task_from_storage(field: str, stored: str) -> LogDirTask:
    broker, tp = field.split(":", 1)
    data = json.loads(stored)
    return LogDirTask(tp_from_field(tp), int(broker), data["target"], data["origin"], int(data["size"]),
                      data["reason"], data["id"], int(data["number"]), data["started_at"],
                      bool(data["cancelling"]))


def proposal_to_storage(proposal: Proposal) -> list:
    return [proposal.proposal_id, [[tp.topic, tp.partition, list(r)] for tp, r in
                                   proposal.targets.items()], proposal.reason, proposal.created_at_ms]


def proposal_from_storage(stored: list) -> Proposal:
    proposal_id, targets, reason, created = stored
    return Proposal(proposal_id, {TopicPartition(t, p): tuple(r) for t, p, r in targets}, reason,
                    created)


def meta_to_storage(state: ControllerState) -> dict[str, str]:
    return {
        "epoch": str(state.epoch),
        "command_sequence": str(state.command_sequence),
        "broker_added_at_ms": json.dumps({str(k): v for k, v in state.broker_added_at_ms.items()}),
        "broker_down_since_ms": json.dumps({str(k): v for k, v in state.broker_down_since_ms.items()}),
        "healed_brokers": json.dumps(sorted(state.healed_brokers)),
        "config": json.dumps(dict(state.config), sort_keys=True),
        "proposals": json.dumps([proposal_to_storage(p) for p in state.proposals.values()]),
        "open_alerts": json.dumps(sorted(state.open_alerts)),
        "replication_meter": json.dumps(meter_to_storage(state.replication_meter)),
        "waiting": json.dumps([[tp.topic, tp.partition, why] for tp, why in sorted(state.waiting.items())]),
        "external_moves": json.dumps([external_move_to_storage(tp, move)
                                      for tp, move in sorted(state.external_moves.items())]),
    }


def meter_to_storage(meter: ReplicationMeter) -> list:
    """[since_ms, bytes_copied, finished, finished_steps, finished_bytes]."""
    return [meter.since_ms, meter.bytes_copied, meter.finished, meter.finished_steps, meter.finished_bytes]


def meter_from_storage(stored: list) -> ReplicationMeter:
    """A meter written before the finished fields (`[since_ms, bytes_copied]`), or none at all,
    loads with zeros for what it lacks."""
    return ReplicationMeter(*stored[:5])


def external_move_to_storage(tp: TopicPartition, move: ExternalMove) -> list:
    return [tp.topic, tp.partition, list(move.replicas), list(move.adding), list(move.removing),
            move.since_ms, move.held]


def external_move_from_storage(stored: list) -> tuple[TopicPartition, ExternalMove]:
    topic, partition, replicas, adding, removing, since_ms, held = stored
    return TopicPartition(topic, partition), ExternalMove(tuple(replicas), tuple(adding), tuple(removing),
                                                          since_ms, held)


def message_to_storage(message: OutboundMessage) -> list:
    """[topic suffix, key, schema, base64 of the Avro-encoded record]: a re-published message is
    the very bytes decided the first time, and bytes fields (dead letters) need no special case."""
    value = base64.b64encode(encode(message.schema, message.record)).decode("ascii")
    return [message.topic_suffix, message.key, message.schema, value]


def message_from_storage(stored: list) -> OutboundMessage:
    topic_suffix, key, schema, value = stored
    return OutboundMessage(topic_suffix, key, schema, decode(schema, base64.b64decode(value)))


def compute_store_lost_reason(last_batch: int, stored_epoch: int, stored_last_batch: int,
                              same_incarnation: bool) -> str:
    """What a verified commit found instead of the store it advanced (one line)."""
    if stored_epoch == 0 and stored_last_batch < 0:
        found = "holds no state at all (emptied: a FLUSHALL, a restart without persistence or a failover " \
                "to an empty replica)"
    elif same_incarnation:
        found = (f"went back from batch {last_batch} to batch {stored_last_batch} (restored from an older "
                 "copy)" if stored_last_batch < last_batch else
                 f"holds batch {stored_last_batch}, which this instance never wrote")
    else:
        found = (f"holds batch {stored_last_batch} of epoch {stored_epoch}, not written by this instance "
                 f"(restored from an older copy, or replaced); this instance is at batch {last_batch}")
    return f"the state store {found}"


# --- the store ----------------------------------------------------------------------------------
def key_prefix(cluster_name: str) -> str:
    """`reassigner:{<cluster>}`: every key of one Kafka cluster carries this hash tag."""
    return f"reassigner:{{{cluster_name}}}"



def as_text(value: bytes | str) -> str:
    """A Redis reply as text (replies are bytes unless the client decodes them)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def signing_announcements_key(cluster_name: str) -> str:
    """The hash where the pipeline and the executor record their command signing."""
    return f"{key_prefix(cluster_name)}:command_signing"


def read_signing_announcements(client, cluster_name: str) -> dict[str, str]:
    """What each process recorded as it started ("pipeline"/"executor" → a key fingerprint or
    "unsigned"; `schemas.signing`); a process that never started with this product is absent."""
    return {as_text(k): as_text(v) for k, v in client.hgetall(signing_announcements_key(cluster_name)).items()}


def store_signing_announcement(client, cluster_name: str, role: str, announced: str) -> None:
    """Record what command signing this process (`role`: "pipeline" or "executor") starts with:
    its key's fingerprint, or "unsigned"."""
    client.hset(signing_announcements_key(cluster_name), role, announced)


class ControllerStore:
    """Load and commit the ControllerState of one cluster; `client` is a `redis.Redis`."""

    def __init__(self, client, cluster_name: str) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self.keys = {name: f"{key_prefix(cluster_name)}:{name}" for name in HASHES}
        self._commit = client.register_script(COMMIT_BATCH)
        self._take_over = client.register_script(TAKE_OVER)
        self._reseed = client.register_script(RESEED)
        # The token of this instance's take-over (`take_over`, `reseed`); None for a store object
        # that never took over (a tool or a test seeding a state): its commits are not verified.
        self.incarnation: str | None = None

    def load(self) -> ControllerState:
        raw = {name: {as_text(k): as_text(v) for k, v in self.client.hscan_iter(key, count=LOAD_SCAN_COUNT)}
               for name, key in self.keys.items() if name not in ("outbox", "offsets")}
        stored_brokers = {int(k): broker_from_storage(int(k), v) for k, v in raw["brokers"].items()}
        brokers = {broker_id: broker for broker_id, (broker, _) in stored_brokers.items()}
        stored_topics = {name: topic_from_storage(v) for name, v in raw["topics"].items()}
        by_topic: dict[str, list[PartitionState]] = {}
        for field, stored in raw["partitions"].items():
            partition = partition_from_storage(tp_from_field(field), stored, brokers)
            by_topic.setdefault(partition.topic, []).append(partition)
        topic_names = sorted(set(by_topic) | set(stored_topics))
        unknown = (1, None, None)  # a topic known only from its partitions
        topics = tuple(
            Topic(name, tuple(sorted(by_topic.get(name, []), key=lambda p: p.partition)),
                  stored_topics.get(name, unknown)[0], stored_topics.get(name, unknown)[2])
            for name in topic_names
        )
        observed_at = ObservationTimes(
            topics={name: at for name, (_, at, _) in stored_topics.items() if at is not None},
            brokers={broker_id: at for broker_id, (_, at) in stored_brokers.items() if at is not None})
        cluster = Cluster(tuple(brokers[i] for i in sorted(brokers)), topics)
        meta = raw["meta"]

        def meta_json(name: str, default: Any) -> Any:
            return json.loads(meta[name]) if name in meta else default

        return ControllerState(
            cluster=cluster,
            reassignments={tp_from_field(f): reassignment_from_storage(tp_from_field(f), v)
                           for f, v in raw["reassignments"].items()},
            broker_added_at_ms={int(k): v for k, v in meta_json("broker_added_at_ms", {}).items()},
            broker_down_since_ms={int(k): v for k, v in
                                  meta_json("broker_down_since_ms", {}).items()},
            healed_brokers=frozenset(meta_json("healed_brokers", [])),
            config=meta_json("config", {}),
            proposals={p[0]: proposal_from_storage(p) for p in meta_json("proposals", [])},
            epoch=int(meta.get("epoch", 0)),
            last_batch=int(meta.get("last_batch", -1)),
            open_alerts=frozenset(meta_json("open_alerts", [])),
            command_sequence=int(meta.get("command_sequence", 0)),
            observed_at=observed_at,
            replication_meter=meter_from_storage(meta_json("replication_meter", [])),
            waiting={TopicPartition(t, p): why for t, p, why in meta_json("waiting", [])},
            external_moves=dict(external_move_from_storage(m) for m in meta_json("external_moves", [])),
            log_dir_moves={task.key: task for task in (log_dir_task_from_storage(f, v)
                                                       for f, v in raw["logdir_moves"].items())},
        )

    def last_batch(self) -> int:
        value = self.client.hget(self.keys["meta"], "last_batch")
        return int(value) if value is not None else -1

    @staticmethod
    def meta_key(cluster_name: str) -> str:
        """The hash holding the planner epoch (field `epoch`): the executor's ledger reads it."""
        return f"{key_prefix(cluster_name)}:meta"

    def take_over(self, epoch_floor: int = 0) -> int:
        """A new pipeline instance takes over: the epoch goes up (its commands carry a higher one
        than any before; at least `epoch_floor`) and the store is marked with this instance's
        incarnation, which each of its commits then checks (VERIFIED). Returns the epoch."""
        token = uuid.uuid4().hex
        epoch, _last = self._take_over(keys=[self.keys["meta"]], args=[epoch_floor, token])
        self.incarnation = token
        return int(epoch)

    def find_loss(self, last_batch: int) -> str | None:
        """Why the store is not the one this instance took over and advanced to `last_batch`
        (`compute_store_lost_reason`), or None when it is."""
        epoch, stored_last, incarnation = self.client.hmget(self.keys["meta"], "epoch", "last_batch", "incarnation")
        stored_last = int(stored_last) if stored_last is not None else -1
        same = incarnation is not None and as_text(incarnation) == self.incarnation
        if same and stored_last == last_batch:
            return None
        return compute_store_lost_reason(last_batch, int(epoch or 0), stored_last, same)

    def reseed(self, state: ControllerState, applied: Mapping[tuple[str, int], int]) -> int:
        """Write `state` and the `applied` input offsets whole, replacing whatever the store holds
        (a lost or rolled-back store: VERIFIED), under a new incarnation and an epoch above both
        the stored one and `state.epoch`; returns that epoch. The rows are staged in chunks first
        and swapped in by one script, so the store goes from what it held to `state` at once.
        Raises `FencedError` if a newer instance holds the store."""
        token = uuid.uuid4().hex
        rows = [name for name in HASHES if name not in ("meta", "outbox")]
        staged = {name: f"{self.keys[name]}:reseed:{token}" for name in HASHES}
        try:
            for name in rows:
                if name == "offsets":
                    self._stage(staged[name], ((tp_field(TopicPartition(topic, partition)), str(offset))
                                               for (topic, partition), offset in sorted(applied.items())))
                else:
                    self._stage(staged[name], compute_stored_rows(name, state))
            meta = [item for field, value in meta_to_storage(state).items() for item in (field, value)]
            verdict, epoch = self._reseed(keys=[self.keys[n] for n in HASHES] + [staged[n] for n in HASHES],
                                          args=[state.epoch, json.dumps(meta), token, state.last_batch])
        finally:
            self.client.unlink(*staged.values())
        if int(verdict) < 0:
            raise FencedError(f"pipeline epoch {state.epoch} was replaced by epoch {int(epoch)}: a newer "
                              "instance runs on this cluster's state; this one stops without writing")
        self.incarnation = token
        return int(epoch)

    def applied_offsets(self) -> dict[tuple[str, int], int]:
        """(input topic, partition) → the greatest offset applied (`streams.offsets`)."""
        stored = self.client.hgetall(self.keys["offsets"])
        return {(tp.topic, tp.partition): int(offset)
                for tp, offset in ((tp_from_field(as_text(f)), v) for f, v in stored.items())}

    def forget_offsets(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop the applied offsets of input partitions whose log was re-created or truncated."""
        fields = [tp_field(TopicPartition(topic, partition)) for topic, partition in partitions]
        if fields:
            self.client.hdel(self.keys["offsets"], *fields)

    def commit(self, batch_id: int, before: ControllerState, after: ControllerState,
               outbox: Iterable[OutboundMessage],
               offsets: Mapping[tuple[str, int], int] | None = None) -> bool:
        """Apply one micro-batch's transition and advance the applied input `offsets`; False if
        this sequence number was applied before. Raises `FencedError` if a newer instance took
        over (the stored epoch is above `after.epoch`)."""
        changes = compute_changes(before, after)
        messages = [message_to_storage(m) for m in outbox]
        outbox_json = json.dumps(messages, separators=(",", ":")) if messages else ""
        staged = {}  # hash name → its staged copy's key
        for name in STAGED_HASHES:
            rows = changes.get(name, {"set": [], "del": []})
            if len(rows["set"]) // 2 + len(rows["del"]) > STAGE_ABOVE_ROWS:
                staged[name] = f"{self.keys[name]}:staged:{after.epoch}:{batch_id}"
                self._stage(staged[name], compute_stored_rows(name, after))
                del changes[name]
        keys = [self.keys[name] for name in HASHES] + list(staged.values())
        payload = {self.keys[name]: change for name, change in changes.items()}
        flat_offsets = [item for (topic, partition), offset in sorted((offsets or {}).items())
                        for item in (tp_field(TopicPartition(topic, partition)), offset)]
        try:
            verdict, current, *found = self._commit(
                keys=keys, args=[batch_id, json.dumps(payload), outbox_json, after.epoch, json.dumps(flat_offsets),
                                 json.dumps([HASHES.index(n) + 1 for n in staged]), self.incarnation or ""])
        finally:
            if staged:  # swapped in (then gone already), or refused: never left behind
                self.client.unlink(*staged.values())
        if int(verdict) == -1:
            raise FencedError(f"pipeline epoch {after.epoch} was replaced by epoch {int(current)}: a newer "
                              "instance runs on this cluster's state; this one stops without writing")
        if int(verdict) < -1:  # -2: another incarnation's store (or none), -3: ours, at another batch
            raise StateStoreLostError(compute_store_lost_reason(before.last_batch, int(current), int(found[0]),
                                                                same_incarnation=int(verdict) == -3))
        return bool(verdict)

    def _stage(self, key: str, rows: Iterable[tuple[str, str]]) -> None:
        """Write `rows` (field, value) under `key`, STAGE_CHUNK_FIELDS rows a command."""
        self.client.unlink(key)
        chunk: dict[str, str] = {}
        for field_name, value in rows:
            chunk[field_name] = value
            if len(chunk) >= STAGE_CHUNK_FIELDS:
                self.client.hset(key, mapping=chunk)
                self.client.expire(key, STAGE_TTL_SECONDS)
                chunk = {}
        if chunk:
            self.client.hset(key, mapping=chunk)
        self.client.expire(key, STAGE_TTL_SECONDS)

    def pending_outbox(self) -> list[tuple[int, list[OutboundMessage]]]:
        """Outboxes committed but not yet marked published, oldest batch first."""
        stored = self.client.hgetall(self.keys["outbox"])
        return sorted(
            (int(as_text(batch)), [message_from_storage(m) for m in json.loads(as_text(messages))])
            for batch, messages in stored.items()
        )

    def mark_published(self, batch_id: int) -> None:
        self.client.hdel(self.keys["outbox"], str(batch_id))


def compute_changed_partitions(before: Cluster, after: Cluster,
                               ) -> tuple[dict[TopicPartition, PartitionState], list[TopicPartition]]:
    """The partitions set and removed between two clusters. A topic the batch did not touch is
    the very same object in both (`handlers.events` and `Cluster.with_partitions` keep it), so it
    is skipped whole; in a touched topic a partition is compared by identity first."""
    before_topics = before.topics_by_name
    changed: dict[TopicPartition, PartitionState] = {}
    gone: list[TopicPartition] = []
    for topic in after.topics:
        old = before_topics.get(topic.name)
        if old is topic:
            continue
        known = {p.partition: p for p in old.partitions} if old is not None else {}
        for p in topic.partitions:
            previous = known.pop(p.partition, None)
            if previous is not p and previous != p:
                changed[p.tp] = p
        gone.extend(TopicPartition(topic.name, number) for number in known)
    after_topics = after.topics_by_name
    for name, old in before_topics.items():
        if name not in after_topics:
            gone.extend(p.tp for p in old.partitions)
    return changed, gone


def compute_changed_reassignments(before: ControllerState, after: ControllerState,
                                  ) -> tuple[dict[str, str], list[str]]:
    """The reassignment rows to set (field → stored record) and the fields to delete. Only the
    partitions the batch's change log names are compared when it vouches for them
    (`ControllerState.compute_batch_changes`: the log of this very transition); otherwise every
    record, by identity first. Either way the rows come in partition order: the records are an
    `immutables.Map`, whose iteration order follows hashes that vary from process to process."""
    old_moves, new_moves = before.reassignments, after.reassignments
    logged = after.compute_batch_changes(before)
    candidates = new_moves.items() if logged is None else \
        ((tp, r) for tp in logged if (r := new_moves.get(tp)) is not None)
    changed = sorted(((tp, r) for tp, r in candidates if (old := old_moves.get(tp)) is not r and old != r),
                     key=lambda item: item[0])
    moves = {tp_field(tp): reassignment_to_storage(r) for tp, r in changed}
    gone = (tp for tp in old_moves if tp not in new_moves) if logged is None else \
        (tp for tp in logged if tp in old_moves and tp not in new_moves)
    finished = [tp_field(tp) for tp in sorted(gone)]
    return moves, finished


def compute_stored_rows(name: str, state: ControllerState) -> Iterable[tuple[str, str]]:
    """Every (field, value) of one of the state's hashes (all HASHES but meta, outbox and
    offsets) as `state` stores it."""
    if name == "brokers":
        times = state.observed_at.brokers
        return ((str(b.id), broker_to_storage(b, times.get(b.id))) for b in state.cluster.brokers)
    if name == "topics":
        times = state.observed_at.topics
        return ((t.name, topic_to_storage(t, times.get(t.name))) for t in state.cluster.topics)
    if name == "logdir_moves":
        return ((log_dir_task_field(t), log_dir_task_to_storage(t)) for t in state.log_dir_moves.values())
    if name == "partitions":
        brokers = state.cluster.brokers_by_id
        return ((tp_field(p.tp), partition_to_storage(p, brokers)) for p in state.cluster.partitions())
    if name == "reassignments":
        return ((tp_field(tp), reassignment_to_storage(r)) for tp, r in state.reassignments.items())
    raise ValueError(f"{name} is not a hash of rows")


def compute_changes(before: ControllerState, after: ControllerState) -> dict[str, dict[str, list]]:
    """Per hash: the fields to set (flattened field, value pairs) and the fields to delete."""
    changes: dict[str, dict[str, list]] = {}

    def diff(name: str, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        to_set = [item for field, value in new.items() if old.get(field) != value
                  for item in (field, value)]
        to_delete = [field for field in old if field not in new]
        if to_set or to_delete:
            changes[name] = {"set": to_set, "del": to_delete}

    # Brokers and topics: only those whose object or observation time changed are serialised.
    def entity_changes(name: str, old: Mapping, new: Mapping, old_times: Mapping, new_times: Mapping,
                       to_storage) -> None:
        to_set: list[str] = []
        for key, value in new.items():
            if old.get(key) is value and old_times.get(key) == new_times.get(key):
                continue
            stored = to_storage(value, new_times.get(key))
            if key in old and to_storage(old[key], old_times.get(key)) == stored:
                continue
            to_set += [str(key), stored]
        to_delete = [str(key) for key in old if key not in new]
        if to_set or to_delete:
            changes[name] = {"set": to_set, "del": to_delete}

    entity_changes("brokers", before.cluster.brokers_by_id, after.cluster.brokers_by_id,
                   before.observed_at.brokers, after.observed_at.brokers, broker_to_storage)
    entity_changes("topics", before.cluster.topics_by_name, after.cluster.topics_by_name,
                   before.observed_at.topics, after.observed_at.topics, topic_to_storage)

    # Partitions: only the topics the batch touched are walked, partition by partition (see
    # `compute_changed_partitions`); a broker whose dir list changed renumbers the dir indexes of
    # its partitions, which are rewritten too (rare: a broker restarted with other dirs).
    changed, gone = compute_changed_partitions(before.cluster, after.cluster)
    brokers = after.cluster.brokers_by_id
    old_brokers = before.cluster.brokers_by_id
    renumbered = set() if after.cluster.brokers is before.cluster.brokers else {
        b.id for b in after.cluster.brokers
        if (old := old_brokers.get(b.id)) is not None and old is not b
        and [d.path for d in old.log_dirs] != [d.path for d in b.log_dirs]}
    if renumbered:
        changed = {**{p.tp: p for p in after.cluster.partitions()
                      if p.log_dirs and renumbered.intersection(p.replicas)}, **changed}
    partitions = {tp_field(tp): partition_to_storage(p, brokers) for tp, p in changed.items()}
    removed = [tp_field(tp) for tp in gone]
    if partitions or removed:
        changes["partitions"] = {"set": [x for f, v in partitions.items() for x in (f, v)],
                                 "del": removed}

    moves, finished = compute_changed_reassignments(before, after)
    if moves or finished:
        changes["reassignments"] = {"set": [x for f, v in moves.items() for x in (f, v)],
                                    "del": finished}

    if before.log_dir_moves != after.log_dir_moves:
        diff("logdir_moves", {log_dir_task_field(t): log_dir_task_to_storage(t) for t in before.log_dir_moves.values()},
             {log_dir_task_field(t): log_dir_task_to_storage(t) for t in after.log_dir_moves.values()})
    diff("meta", meta_to_storage(before), meta_to_storage(after))
    return changes
