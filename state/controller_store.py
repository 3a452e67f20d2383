"""The controller's state in Redis: one atomic, idempotent transition per Spark micro-batch.

The keys and the stored form of each part of the state: `state.stored_forms`.

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
- only what changed between the state before and after the batch is written
  (`state.stored_forms`, CHANGES).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterable, Mapping

from planning.model import Cluster, PartitionState, Topic, TopicPartition
from schemas.errors import FencedError, StateStoreLostError
from state.model import ControllerState, ObservationTimes, OutboundMessage
from state.stored_forms import (broker_from_storage, canary_from_storage, compute_changes, compute_stored_rows,
                                cordoned_from_storage, throttles_from_storage,
                                external_move_from_storage, isr_shrinks_from_storage, kafka_facts_from_storage,
                                log_dir_task_from_storage,
                                message_from_storage, message_to_storage, meta_to_storage, meter_from_storage,
                                partition_from_storage, plan_record_from_storage, proposal_from_storage,
                                reassignment_from_storage, topic_from_storage, tp_field, tp_from_field)

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


def list_cluster_names(client) -> list[str]:
    """The clusters whose state `client`'s Redis holds (a `meta` hash each: a pipeline has
    committed or taken the store over), by name."""
    head, tail = key_prefix("\0").split("\0")
    names = {as_text(key)[len(head):-len(tail + ":meta")]
             for key in client.scan_iter(match=f"{head}*{tail}:meta", count=1000)}
    return sorted(names)


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

    def has_state(self) -> bool:
        """Whether a pipeline ever wrote this cluster's state here (its `meta` hash)."""
        return bool(self.client.exists(self.keys["meta"]))

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
            plans={p[0]: plan_record_from_storage(p) for p in meta_json("plans", [])},
            kafka=kafka_facts_from_storage(meta_json("kafka", None)),
            cordoned=cordoned_from_storage(meta_json("cordoned", {})),
            isr_shrinks=isr_shrinks_from_storage(meta_json("isr_shrinks", {})),
            canary=canary_from_storage(meta_json("canary", {}), meta_json("canary_recent", {})),
            throttles=throttles_from_storage(meta_json("throttles", {}), meta_json("throttle_copied", {}),
                                             meta_json("throttle_ramps", {})),
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
