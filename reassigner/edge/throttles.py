"""Replication throttles the executor sets and removes, computed without I/O.

WHEN (the decision, and why): the throttle a step needs travels **in its ReassignmentStep
command** (`throttle_rate_bytes_per_sec`, schema set version 5), and the executor sets it before
it submits the step to Kafka (AlterPartitionReassignments). So no step ever starts unthrottled,
by construction: a separate SetThrottle command was keyed `throttle` while steps are keyed by
their partition, so the two landed on different partitions of the commands topic and the executor
could apply the step first (an operator saw a ~10 MB move at 100,000 B/s take ≤ 5 s instead of
Kafka's 67 s). The other design — issue the step only once the SetThrottle's CommandResult says
ok — costs a round trip and a pipeline state per step for the same guarantee. The step names
the brokers, as Kafka's reassignment tool chooses them: leader throttle on the partition's
current replicas, follower throttle on the replicas it adds; the rates on all of those. The
pipeline leaves out dead brokers (a heal moves replicas off them): their configs cannot be read
or written, and they copy nothing. A broker that dies after the step was decided fails it (the
describe configs cannot reach it: KAFKA_CONNECTION, NODE_NOT_READY and the like, transient), and
the pipeline retries the step without an alert (`handlers.results`).
A replayed or re-applied command computes the same configs from what Kafka and the ownership
record hold, so applying it again changes nothing (idempotent).

WHOSE (like Kafka's `--preserve-throttles`): the executor records in Redis what it set
(`reassigner.edge.ledger`, `OWNED` records), **before** it writes to Kafka (a crash in between
leaves a record of a value that may not be there; the clear then finds another value or none
and leaves it), and removes only that:
- a broker rate (leader/follower.replication.throttled.rate, and the log-dir rate a step
  carries) that no one set (no per-broker dynamic value) → ours is set and owned;
- one someone else set before ours → the stricter rate is in force while we move: theirs when
  it is lower or equal (left as it is, never owned), ours when theirs is higher; then theirs is
  remembered and **restored** by the clear (never deleted). A cluster-wide default
  (`--entity-default`) is someone else's too but lives elsewhere: a per-broker value of ours is
  set over it and deleted after, which leaves their default in force;
- a value of ours that someone changed since is theirs: the clear leaves it;
- topic-level `*.replication.throttled.replicas` lists are **merged**: our `partition:broker`
  entries are appended to what is there (others' entries kept, in their order; a `*` already
  throttles every replica, nothing is added); the clear removes only entries we added.

ORDER OF A CLEAR AND LATER STEPS: a ClearThrottle carries the pipeline's command sequence
(`throttle_sequence`); each step carries the sequence at which it was issued. The clear removes
only what was set for steps issued before it (their sequence is lower), so a step issued after
the clear, whose command the executor happens to apply first (another partition of the
commands topic), keeps its throttle. A ClearThrottle of an older pipeline (no sequence) removes
everything the product set on its brokers and topics.

NEWEST WINS (the adaptive throttle, schema set 12): a step may carry its own rate per broker
(`throttle_broker_rates`), and a SetThrottle changes the rates of brokers whose steps are in
flight, numbered by the pipeline's command sequence like a clear. Commands of different keys
land on different partitions of the commands topic, so the executor may apply an older step
after a newer SetThrottle: a rate of ours in force that a command of a higher sequence set is
kept, whatever an older command asks (its replica entries are still added). Commands of the
same sequence (steps of one batch, or of batches with no throttle command between) carry the
same rates but after a `throttle.bytes.per.sec` change: the last one applied wins, as before.

ADOPTION (the records lost with the store): an executor whose first read of its records finds
nothing at all in Redis (no record, no mark of a write: the store was emptied or replaced while
no executor ran, or no executor ever throttled on it) takes as its own, before its first throttle
command, what the product's recent throttled steps put in force (`compute_adopted`): the steps
are read back from the commands topic (`schemas.published`: decoded, signed where commands are
signed); a broker rate whose value is the rate such a step carried for that broker, and a
`partition:broker` entry such a step named, are recorded as set by it (its `throttle_sequence`;
no previous value: the clear deletes them). Anything else is left as someone else's. The one
risk, said in the WARNING that names each adopted throttle: a rate someone else set to exactly
our value on one of those brokers is removed by our clear.

Rates are compared as integers; a value that is not one is someone else's and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from runtime.clients.cluster_observation import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    LOG_DIR_THROTTLED_RATE,
)

REPLICA_LISTS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
ALL_REPLICAS = "*"


@dataclass(frozen=True)
class ThrottleWanted:
    """What one command needs in force: broker rates and topic replica entries."""

    rates: Mapping[tuple[int, str], int]
    """(broker id, config name) → bytes per second."""
    replicas: Mapping[tuple[str, str], tuple[str, ...]]
    """(topic, leader/follower list name) → `partition:broker` entries."""
    sequence: int = 0

    @property
    def brokers(self) -> list[int]:
        return sorted({broker for broker, _ in self.rates})

    @property
    def topics(self) -> list[str]:
        return sorted({topic for topic, _ in self.replicas})


@dataclass(frozen=True)
class ThrottleChanges:
    """Config writes and ownership records; `record` is written before the configs, `forget`
    after them."""

    broker_configs: dict[int, dict[str, str | None]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)
    record: dict[str, dict] = field(default_factory=dict)
    forget: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    """Someone else's throttles left in force, for the log."""


def rate_field(broker_id: int, name: str) -> str:
    return f"broker:{broker_id}:{name}"


def entry_field(topic: str, name: str, entry: str) -> str:
    return f"topic:{topic}:{name}:{entry}"


def compute_step_throttle(fields: Mapping) -> ThrottleWanted | None:
    """The throttle a ReassignmentStep needs (None when it carries none)."""
    rate = fields.get("throttle_rate_bytes_per_sec")
    if rate is None:
        return None
    leaders = list(fields.get("throttle_leader_broker_ids") or [])
    followers = list(fields.get("throttle_follower_broker_ids") or [])
    partition = {"topic": fields["topic"], "partition": fields["partition"],
                 "leader_broker_ids": leaders, "follower_broker_ids": followers}
    return compute_wanted(sorted(set(leaders) | set(followers)), rate,
                          fields.get("throttle_log_dir_rate_bytes_per_sec"), [partition],
                          int(fields.get("throttle_sequence") or 0), fields.get("throttle_broker_rates") or ())


def compute_set_throttle(fields: Mapping) -> ThrottleWanted:
    """The throttle a SetThrottle asks for: per-broker rates and a sequence since schema set 12."""
    return compute_wanted(fields["broker_ids"], fields["rate_bytes_per_sec"], fields.get("logdir_rate_bytes_per_sec"),
                          fields.get("partitions") or [], int(fields.get("throttle_sequence") or 0),
                          fields.get("broker_rates") or ())


def compute_wanted(broker_ids: Iterable[int], rate: int, log_dir_rate: int | None,
                   partitions: Iterable[Mapping], sequence: int,
                   broker_rates: Iterable[Mapping] = ()) -> ThrottleWanted:
    """Rates on `broker_ids` (a broker of `broker_rates`, the adaptive throttle's `BrokerRate`
    records, at its own rate; the others at `rate`) and the ThrottledPartition records' replica
    entries."""
    names = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
    own = {int(r["broker_id"]): int(r["rate_bytes_per_sec"]) for r in broker_rates}
    rates = {(b, name): own.get(b, int(rate)) for b in broker_ids for name in names}
    if log_dir_rate is not None:
        rates |= {(b, LOG_DIR_THROTTLED_RATE): int(log_dir_rate) for b in broker_ids}
    replicas: dict[tuple[str, str], list[str]] = {}
    for p in partitions:
        for name, key in ((LEADER_THROTTLED_REPLICAS, "leader_broker_ids"),
                          (FOLLOWER_THROTTLED_REPLICAS, "follower_broker_ids")):
            entries = replicas.setdefault((p["topic"], name), [])
            entries += [e for e in (f"{p['partition']}:{b}" for b in p.get(key) or []) if e not in entries]
    return ThrottleWanted(rates, {k: tuple(v) for k, v in replicas.items() if v}, sequence)


def parse_entries(value: str | None) -> list[str]:
    """A `*.replication.throttled.replicas` value as its entries ("" and None: none)."""
    return [e.strip() for e in (value or "").split(",") if e.strip()]


def _as_rate(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def compute_throttle_set(wanted: ThrottleWanted,
                         current_rates: Mapping[tuple[int, str], str | None],
                         current_replicas: Mapping[tuple[str, str], str | None],
                         owned: Mapping[str, dict]) -> ThrottleChanges:
    """What to write so that `wanted` is in force, under the module's ownership rules.

    `current_rates`: the per-broker dynamic values (None = not set on that broker);
    `current_replicas`: the topic lists; `owned`: the ownership records (field → record)."""
    brokers: dict[int, dict[str, str | None]] = {}
    topics: dict[str, dict[str, str | None]] = {}
    record: dict[str, dict] = {}
    forget: list[str] = []
    kept: list[str] = []
    for (broker, name), want in sorted(wanted.rates.items()):
        key = rate_field(broker, name)
        now = current_rates.get((broker, name))
        mine = owned.get(key)
        if mine is not None and now == mine["value"] and wanted.sequence < int(mine["sequence"]):
            continue  # a newer decision's rate is in force (NEWEST WINS)
        sequence = max(wanted.sequence, int(mine["sequence"])) if mine else wanted.sequence
        if mine is not None and now == mine["value"]:  # ours, in force
            previous = _as_rate(mine.get("previous"))
            if previous is not None and previous <= want:  # theirs is the stricter again
                brokers.setdefault(broker, {})[name] = mine["previous"]
                forget.append(key)
                continue
            value, previous_text = str(want), mine.get("previous")
        elif now is None:
            value, previous_text = str(want), None
        else:  # someone else's value
            theirs = _as_rate(now)
            if theirs is None or theirs <= want:
                kept.append(f"broker {broker} {name}={now}")
                continue
            value, previous_text = str(want), now
        if value != now:
            brokers.setdefault(broker, {})[name] = value
        new_record = {"value": value, "previous": previous_text, "sequence": sequence}
        if new_record != mine:
            record[key] = new_record
    for (topic, name), entries in sorted(wanted.replicas.items()):
        present = parse_entries(current_replicas.get((topic, name)))
        if ALL_REPLICAS in present:
            kept.append(f"topic {topic} {name}=*")
            continue
        added = []
        for entry in entries:
            key = entry_field(topic, name, entry)
            mine = owned.get(key)
            if entry in present and mine is None:
                continue  # someone else's entry: it stays theirs
            if entry not in present:
                added.append(entry)
            sequence = max(wanted.sequence, int(mine["sequence"])) if mine else wanted.sequence
            if mine != {"sequence": sequence}:
                record[key] = {"sequence": sequence}
        if added:
            topics.setdefault(topic, {})[name] = ",".join(present + added)
    return ThrottleChanges(brokers, topics, record, tuple(forget), tuple(kept))


def compute_throttle_clear(broker_ids: Iterable[int], topics: Iterable[str], sequence: int | None,
                           current_rates: Mapping[tuple[int, str], str | None],
                           current_replicas: Mapping[tuple[str, str], str | None],
                           owned: Mapping[str, dict]) -> ThrottleChanges:
    """What to write to remove the throttles the product set on `broker_ids` and `topics` for
    steps issued before `sequence` (None: all of them), and nothing else."""
    broker_set, topic_set = set(broker_ids), set(topics)
    brokers: dict[int, dict[str, str | None]] = {}
    removed: dict[tuple[str, str], set[str]] = {}
    forget: list[str] = []
    for key, mine in sorted(owned.items()):
        if sequence is not None and int(mine.get("sequence", 0)) >= sequence:
            continue  # set for a step issued after this clear
        kind, rest = key.split(":", 1)
        if kind == "broker":
            broker_text, name = rest.split(":", 1)
            broker = int(broker_text)
            if broker not in broker_set:
                continue
            forget.append(key)
            if current_rates.get((broker, name)) == mine["value"]:  # else: changed since, theirs now
                brokers.setdefault(broker, {})[name] = mine.get("previous")  # None: deleted
        elif kind == "topic":
            topic, name, entry = rest.split(":", 2)
            if topic not in topic_set:
                continue
            forget.append(key)
            removed.setdefault((topic, name), set()).add(entry)
    topic_configs: dict[str, dict[str, str | None]] = {}
    for (topic, name), entries in sorted(removed.items()):
        present = parse_entries(current_replicas.get((topic, name)))
        left = [e for e in present if e not in entries]
        if left != present:
            topic_configs.setdefault(topic, {})[name] = ",".join(left) if left else None
    return ThrottleChanges(brokers, topic_configs, {}, tuple(forget), ())



def compute_adopted(steps: Iterable[ThrottleWanted],
                    current_rates: Mapping[tuple[int, str], str | None],
                    current_replicas: Mapping[tuple[str, str], str | None]) -> dict[str, dict]:
    """ADOPTION: the ownership records of what `steps` (the throttles of the product's recent
    steps) put in force and Kafka still shows (field → record, as `compute_throttle_set` writes)."""
    adopted: dict[str, dict] = {}
    for wanted in steps:
        for (broker, name), rate in wanted.rates.items():
            now = current_rates.get((broker, name))
            if now is not None and _as_rate(now) == rate:
                _adopt(adopted, rate_field(broker, name), {"value": now, "previous": None}, wanted.sequence)
        for (topic, name), entries in wanted.replicas.items():
            present = set(parse_entries(current_replicas.get((topic, name))))
            for entry in entries:
                if entry in present:
                    _adopt(adopted, entry_field(topic, name, entry), {}, wanted.sequence)
    return adopted


def _adopt(adopted: dict[str, dict], key: str, record: dict, sequence: int) -> None:
    """The latest step that wanted it owns it (a clear issued before that step must not remove it)."""
    known = adopted.get(key)
    adopted[key] = {**record, "sequence": max(sequence, known["sequence"]) if known else sequence}
