"""The stored forms of the controller state: how each part of `ControllerState` is written in
Redis, and which rows a batch changed. Pure: no Redis, no I/O (`state.controller_store` writes
and reads them).

Keys (every key of one Kafka cluster carries the hash tag `{<cluster>}`, so the Lua script below
may touch them all, on one Redis or on Redis Cluster alike):

    reassigner:{c}:brokers        HASH  broker id → [rack, alive, draining, [[path, online,
                                                     total_bytes, usable_bytes, replica_bytes,
                                                     replica_count, [future "topic:partition",
                                                     ...]], ...],
                                                     observed_at_ms, ["topic:partition" it
                                                     cannot host, ...], {dir: [["topic:partition",
                                                     bytes copied], ...]}, [cordoned dir path,
                                                     ...]] (the last three omitted from the
                                                     end while empty)
    reassigner:{c}:topics         HASH  topic → [min.insync.replicas, observed_at_ms, topic id]
    reassigner:{c}:partitions     HASH  "topic:partition" → [replicas, isr, leader, leader_epoch,
                                        adding, removing, offline, size_bytes, dir indexes,
                                        bytes in/s, bytes out/s]
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

FORMS:
- a partition's log dirs are stored as indexes into its broker's dir list (paths are long and
  repeat for every replica): about 60 bytes of value per partition;
- `observed_at_ms` (`ControllerState.observed_at`) is null when unknown; the forms written before
  it was kept (a broker list of four, a bare min ISR number) still load, as "unknown";
- topic names cannot contain ':' (Kafka allows only [a-zA-Z0-9._-]), so "topic:partition" is an
  unambiguous field name;
- `to_storage`/`from_storage` functions are the one place where stored forms are defined.

CHANGES: only what changed between the state before and after a batch is written, so a batch of
a few ISR events costs a few fields, not the cluster; finding them walks only the topics the
batch touched (`compute_changed_partitions`) and, when the batch's change log vouches for them,
only the reassignments it touched (`compute_changed_reassignments`); `compute_changes` gives
every hash's changed and removed fields, `compute_stored_rows` a whole hash.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Iterable, Mapping

from planning.model import Broker, Cluster, KafkaFacts, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.canary import CanaryReading
from planning.movement.eta import ReplicationMeter
from planning.movement.external import ExternalMove
from planning.movement.log_dirs import LogDirTask
from planning.movement.partition_steps import Step
from planning.movement.reassignment import AfterCancel, Reassignment, ReassignmentState, StepInFlight
from planning.movement.throttle_control import BrokerThrottle
from schemas.codec import decode, encode
from state.model import ControllerState, OutboundMessage, PlanRecord, Proposal


def tp_field(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


def tp_from_field(field: str) -> TopicPartition:
    topic, partition = field.rsplit(":", 1)
    return TopicPartition(topic, int(partition))


def broker_to_storage(broker: Broker, observed_at_ms: int | None = None) -> str:
    dirs = [[d.path, d.online, d.total_bytes, d.usable_bytes, d.replica_bytes, d.replica_count,
             sorted(tp_field(tp) for tp in d.future_replicas)] for d in broker.log_dirs]
    stored = [broker.rack, broker.alive, broker.draining, dirs, observed_at_ms]
    # The sizes of the copies in flight (`LogDir.copying_bytes`) are a seventh entry of the
    # broker, {dir: [[partition, bytes]...]}, written only while there are some: readers of an
    # older version read the first six and ignore the rest (an entry inside a dir's row would
    # have broken their unpacking during a rolling upgrade).
    copying = {d.path: [[tp_field(tp), size] for tp, size in d.copying_bytes]
               for d in broker.log_dirs if d.copying_bytes}
    # The cordoned dirs (`LogDir.cordoned`) are an eighth entry, the same way (Kafka 4.3+ only).
    cordoned = [d.path for d in broker.log_dirs if d.cordoned]
    if broker.cannot_host or copying or cordoned:
        stored.append(sorted(tp_field(tp) for tp in broker.cannot_host))
    if copying or cordoned:
        stored.append(copying)
    if cordoned:
        stored.append(cordoned)
    return json.dumps(stored, separators=(",", ":"))


def broker_from_storage(broker_id: int, stored: str) -> tuple[Broker, int | None]:
    """The broker and its observation time (None when unknown)."""
    rack, alive, draining, dirs, *rest = json.loads(stored)
    observed = rest[0] if rest else None
    cannot_host = frozenset(tp_from_field(f) for f in rest[1]) if len(rest) > 1 else frozenset()
    copying = rest[2] if len(rest) > 2 else {}
    cordoned = frozenset(rest[3]) if len(rest) > 3 else frozenset()  # a broker stored before cordons: none
    log_dirs = tuple(_log_dir_from_storage(d) for d in dirs)
    if copying:
        log_dirs = tuple(replace(d, copying_bytes=tuple((tp_from_field(f), int(size)) for f, size in copying[d.path]))
                         if d.path in copying else d for d in log_dirs)
    if cordoned:
        log_dirs = tuple(replace(d, cordoned=True) if d.path in cordoned else d for d in log_dirs)
    broker = Broker(broker_id, rack, alive, draining, log_dirs, cannot_host)
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
         partition.size_bytes, dir_indexes if partition.log_dirs else [],
         partition.bytes_in_per_sec, partition.bytes_out_per_sec,
         *([list(partition.eligible_leaders), list(partition.last_known_elr)]
           if partition.eligible_leaders or partition.last_known_elr else [])],
        separators=(",", ":"),
    )


def partition_from_storage(tp: TopicPartition, stored: str,
                           brokers: Mapping[int, Broker]) -> PartitionState:
    # Rows written before traffic was kept have nine fields; the eligible leader replicas follow
    # the traffic only when there are some (most partitions have none).
    replicas, isr, leader, epoch, adding, removing, offline, size, dir_indexes, *rest = json.loads(stored)
    bytes_in, bytes_out = rest[:2] if rest else (None, None)
    eligible, last_known = rest[2:4] if len(rest) >= 4 else ((), ())
    log_dirs: tuple[str | None, ...] = ()
    if dir_indexes:
        resolved = []
        for replica, index in zip(replicas, dir_indexes):
            dirs = brokers[replica].log_dirs if replica in brokers else ()
            resolved.append(dirs[index].path if 0 <= index < len(dirs) else None)
        log_dirs = tuple(resolved)
    return PartitionState(tp.topic, tp.partition, tuple(replicas), tuple(isr), leader, size,
                          log_dirs, tuple(adding), tuple(removing), tuple(offline), epoch, bytes_in, bytes_out,
                          tuple(eligible), tuple(last_known))


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
        **({"plan": reassignment.plan_id} if reassignment.plan_id else {}),
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
        plan_id=data.get("plan", ""),  # absent: the request its id names (and in older state)
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
        "plans": json.dumps([plan_record_to_storage(p) for _, p in sorted(state.plans.items())]),
        "kafka": json.dumps(None if state.kafka is None else
                            [state.kafka.release, state.kafka.metadata_level, list(state.kafka.capabilities)]),
        "cordoned": json.dumps({str(b): list(dirs) for b, dirs in sorted(state.cordoned.items())}),
        "isr_shrinks": json.dumps({str(b): [list(bucket) for bucket in buckets]
                                   for b, buckets in sorted(state.isr_shrinks.items())}),
        "canary": json.dumps({str(b): canary_reading_to_storage(r) for b, r in sorted(state.canary.items())}),
        "canary_recent": json.dumps({str(b): list(r.earlier_p99s) for b, r in sorted(state.canary.items())
                                     if r.earlier_p99s}),
        "throttles": json.dumps({str(b): [t.rate, t.moves, t.changed_ms, t.reason]
                                 for b, t in sorted(state.throttles.items())}),
        "throttle_copied": json.dumps({str(b): [[tp.topic, tp.partition, n] for tp, n in sorted(t.copied.items())]
                                       for b, t in sorted(state.throttles.items()) if t.copied}),
        "throttle_ramps": json.dumps({str(b): [t.target, t.ramp_from]
                                      for b, t in sorted(state.throttles.items()) if t.target}),
    }


def canary_reading_to_storage(reading: CanaryReading) -> list:
    return [reading.at_ms, reading.window_ms, reading.partition, reading.samples, reading.errors, reading.p50_ms,
            reading.p99_ms, reading.end_to_end_p99_ms, list(reading.idle_p99s), reading.baseline_ms]


def canary_from_storage(stored: dict, recent: dict) -> dict[int, CanaryReading]:
    """The stored `ControllerState.canary` ({} for a state written before it was kept) and the
    readings' earlier p99s (`recent`, a key of their own that a reader of the previous version
    ignores: it unpacked each reading into exactly ten entries; none for a state written before)."""
    readings = {}
    for broker, (at_ms, window_ms, partition, samples, errors, p50, p99, end_to_end, idle, baseline) in stored.items():
        earlier = tuple(None if v is None else float(v) for v in recent.get(broker, ()))
        readings[int(broker)] = CanaryReading(int(at_ms), int(window_ms), int(partition), int(samples), int(errors),
                                              p50, p99, end_to_end, tuple(float(v) for v in idle), baseline, earlier)
    return readings


def throttles_from_storage(stored: dict, copied: dict, ramps: dict | None = None) -> dict[int, BrokerThrottle]:
    """The stored `ControllerState.throttles` ({} for a state written before they were kept), what
    their steps had copied at their change (`copied`) and their ramps (`ramps`: target and the
    rate it began from), each under a key of its own that a reader of a previous version ignores: it unpacked
    each throttle into exactly four entries. None for a state written before."""
    ramps = ramps or {}
    return {int(b): BrokerThrottle(int(rate), int(moves), int(changed_ms), str(reason),
                                   {TopicPartition(t, int(p)): int(n) for t, p, n in copied.get(b, ())},
                                   *(int(v) for v in ramps.get(b, (0, 0))))
            for b, (rate, moves, changed_ms, reason) in stored.items()}


def isr_shrinks_from_storage(stored: dict) -> dict[int, tuple[tuple[int, int, int], ...]]:
    """The stored `ControllerState.isr_shrinks` ({} for a state written before it was kept; a
    bucket written before its latest shrink was kept has it at the bucket's start)."""
    return {int(b): tuple((int(bucket[0]), int(bucket[1]), int(bucket[2] if len(bucket) > 2 else bucket[0]))
                          for bucket in buckets) for b, buckets in stored.items()}


def cordoned_from_storage(stored: dict | list) -> dict[int, tuple[str, ...]]:
    """The stored `ControllerState.cordoned`: {broker: dirs}; a list of brokers (a state written
    before dir cordons, when only whole brokers were cordoned) is each broker whole."""
    if isinstance(stored, list):
        return {int(b): () for b in stored}
    return {int(b): tuple(dirs) for b, dirs in stored.items()}


def kafka_facts_from_storage(stored: list | None) -> KafkaFacts | None:
    """The stored `ControllerState.kafka`; None (never read, or a state from before it was kept)."""
    if not stored:
        return None
    release, level, capabilities = stored
    return KafkaFacts(str(release), None if level is None else int(level), tuple(str(c) for c in capabilities))


def plan_record_to_storage(record: PlanRecord) -> list:
    return [record.plan_id, record.subject, record.reason, record.started_at_ms, record.partitions,
            record.remaining, record.bytes_planned, record.completed, record.cancelled, record.superseded]


def plan_record_from_storage(stored: list) -> PlanRecord:
    return PlanRecord(*stored)


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
