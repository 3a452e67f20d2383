"""The typed answer of one poll of the Admin API (pure): what `ClusterAdmin.observe` returns.

A `ClusterObservation` holds brokers (rack, host, port, fenced), topics (id,
min.insync.replicas), partitions (replicas, ISR, leader, leader epoch, adding/removing of an
ongoing reassignment, offline replicas, log dir per replica, size) and the log dirs of every
broker (online, cordoned, sizes, the replicas and future replicas in them).

It is the vocabulary shared by the adapter that reads Kafka (`runtime.clients.kafka_admin`), the
merge that builds one from the answers (`runtime.clients.cluster_merge`) and the watcher that
turns two polls into events (`reassigner.edge.observation`), so it sits below them all and
imports nothing of the product.

INVARIANTS
- Pure: no I/O, no clock, no client library.
- Volatile numbers (partition and replica sizes, offset lags, a dir's free bytes) are carried
  but never compared (`field(compare=False)`): they change on every poll of a busy cluster.
- What holds one entry per partition or per replica arrives as plain rows, built where the
  answer is decoded: a poll's partitions as a `PartitionList` (one state tuple each), a dir's
  replicas as a `ReplicaList` (columns). Both read as dataclasses made when asked for; the merge
  and the diff compare the rows in C, since a frozen dataclass costs 1-2 µs to make and compare
  (seconds a poll at 300,000 partitions).
- Nothing is changed once made. A `MergeIndex` is what the merge derived from one observation,
  trusted only while that observation's partitions and dirs are the very mappings it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping, Sequence

KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
MIN_INSYNC_REPLICAS = "min.insync.replicas"  # the topic config a poll reads
# Kafka's replication throttle configs (broker rates, topic replica lists), named once here.
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
CORDONED_LOG_DIRS = "cordoned.log.dirs"  # Kafka 4.3+ (KIP-1066): dirs that take no new replica

PartitionKey = tuple[str, int]
LogDirKey = tuple[int, str]


@dataclass(frozen=True)
class BrokerObservation:
    broker_id: int
    rack: str | None
    host: str | None
    port: int | None
    fenced: bool
    log_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class ReplicaInDir:
    topic: str
    partition: int
    is_future: bool = False
    size_bytes: int = field(default=0, compare=False)
    offset_lag: int = field(default=0, compare=False)


ReplicaKey = tuple[str, int, bool]  # (topic, partition, is_future): what a dir's replicas compare by


class ReplicaList(Sequence[ReplicaInDir]):
    """A dir's replicas as the answer listed them (sorted by key), as plain columns: `topics`,
    `partitions`, `futures` (their keys, `ReplicaKey`, column by column) and the volatile
    `sizes` and `lags`; read as `ReplicaInDir`s made when asked for (an item, or the iteration).
    What it saves: a dir read again compares with the last poll's column by column in C, and
    what reads every replica (the hosting index, sizes, events) zips the columns; a frozen
    dataclass costs about 1 µs to make and its `__eq__` 0.3 µs a replica, 0.3-1 s a dirs read at
    900k replicas (COST in `cluster_merge`). Columns rather than one key tuple per replica: the
    decoding makes no tuple per replica, and the compare reads no old tuple per replica (900k
    scattered tuples are most of a dirs read: cache misses); each column compares in C.
    Equal to a tuple of the same `ReplicaInDir`s, with the same hash. Built where the answer is
    decoded (`of_rows`) or from replicas (`of`); not changed once made."""

    __slots__ = ("topics", "partitions", "futures", "sizes", "lags", "_keys")

    def __init__(self, topics: tuple[str, ...] = (), partitions: tuple[int, ...] = (),
                 futures: tuple[bool, ...] = (), sizes: tuple[int, ...] | None = None,
                 lags: tuple[int, ...] | None = None) -> None:
        self.topics, self.partitions, self.futures = topics, partitions, futures
        self.sizes = (0,) * len(topics) if sizes is None else sizes
        self.lags = (0,) * len(topics) if lags is None else lags
        self._keys: tuple[ReplicaKey, ...] | None = None
        if not len(partitions) == len(futures) == len(self.sizes) == len(self.lags) == len(topics):
            raise ValueError(f"{len(topics)} topics but {len(partitions)} partitions, {len(futures)} future flags, "
                             f"{len(self.sizes)} sizes and {len(self.lags)} lags")

    @classmethod
    def of_rows(cls, rows: Sequence[tuple[str, int, bool, int, int]]) -> "ReplicaList":
        """From (topic, partition, is_future, size, lag) rows, in their order."""
        return cls(*zip(*rows)) if rows else cls()

    @classmethod
    def of(cls, replicas: Iterable[ReplicaInDir]) -> "ReplicaList":
        return cls.of_rows([(r.topic, r.partition, r.is_future, r.size_bytes, r.offset_lag) for r in replicas])

    @property
    def keys(self) -> tuple[ReplicaKey, ...]:
        """(topic, partition, is_future) of each replica, made once when asked for (a dir's
        list that changed, a hash); what reads every replica zips the columns instead."""
        if self._keys is None:
            self._keys = tuple(zip(self.topics, self.partitions, self.futures))
        return self._keys

    def __len__(self) -> int:
        return len(self.topics)

    def __getitem__(self, index):  # type: ignore[override]
        columns = (self.topics, self.partitions, self.futures, self.sizes, self.lags)
        if isinstance(index, slice):
            return tuple(map(ReplicaInDir, *(column[index] for column in columns)))
        return ReplicaInDir(*(column[index] for column in columns))

    def __iter__(self):
        return map(ReplicaInDir, self.topics, self.partitions, self.futures, self.sizes, self.lags)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReplicaList):
            # Partitions first: the column most likely to differ, and the cheapest to tell.
            return (self is other or self.partitions == other.partitions and self.futures == other.futures
                    and self.topics == other.topics)
        if isinstance(other, tuple) and all(isinstance(r, ReplicaInDir) for r in other):
            return self.keys == tuple([(r.topic, r.partition, r.is_future) for r in other])
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.keys)  # a ReplicaInDir hashes as its key: the hash of the equal tuple

    def __repr__(self) -> str:
        return f"ReplicaList({len(self.topics)} replicas)"


@dataclass(frozen=True)
class LogDirObservation:
    """A broker's log dir. `replicas` is a `ReplicaList` as the adapter decodes it, or any tuple
    of `ReplicaInDir`, sorted by key either way (the diff finds a copy in flight in it by
    bisection: `cluster_merge._copy_changed`); it compares by the replicas' keys (sizes aside).
    `cordoned`: Kafka takes no new replica into it (KIP-1066, DescribeLogDirs v5 `IsCordoned`:
    its broker's `cordoned.log.dirs` names it, or is `*`); False where Kafka does not tell
    (before 4.3)."""

    broker_id: int
    path: str
    online: bool
    error: str | None = None
    replicas: Sequence[ReplicaInDir] = ()
    total_bytes: int | None = field(default=None, compare=False)
    usable_bytes: int | None = field(default=None, compare=False)
    cordoned: bool = False

    @cached_property
    def replica_list(self) -> ReplicaList:
        """The replicas as a `ReplicaList` (their own when they are one): what reads every
        replica zips its `keys` and `sizes` (once per dir object: a poll that does not read the
        dirs carries the objects over)."""
        replicas = self.replicas
        return replicas if isinstance(replicas, ReplicaList) else ReplicaList.of(replicas)

    @property
    def replica_keys(self) -> tuple[ReplicaKey, ...]:
        """(topic, partition, is_future) of each replica: what `replicas` compares, as plain
        tuples, which compare in C (the dataclass' `__eq__` a replica at a time is 4x slower)."""
        return self.replica_list.keys

    @cached_property
    def holds_future_replica(self) -> bool:
        """A replica is moving into this dir."""
        return any(self.replica_list.futures)


@dataclass(frozen=True)
class PartitionObservation:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int = -1
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    log_dirs: tuple[str | None, ...] = ()
    size_bytes: int | None = field(default=None, compare=False)
    eligible_leaders: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


PartitionState = tuple  # (topic, partition, replicas, isr, leader, leader_epoch, offline_replicas)


class PartitionList(Sequence[PartitionObservation]):
    """A poll's partitions as the answer listed them: one plain tuple per partition (`states`,
    `PartitionState`), read as `PartitionObservation`s made when asked for (an item, or the
    iteration). What it saves: the merge compares the states with the previous poll's in C and
    makes observations only of the partitions that changed (COST in `cluster_merge`); a frozen
    dataclass costs about 2 µs to make, 0.6 s a poll at 300k partitions. The decoding of an
    answer appends to `states`; `of` builds one from observations. Not changed once handed to
    the merge."""

    __slots__ = ("states",)

    def __init__(self, states: list[PartitionState] | None = None) -> None:
        self.states: list[PartitionState] = [] if states is None else states

    @classmethod
    def of(cls, partitions: Iterable[PartitionObservation]) -> "PartitionList":
        return cls([(p.topic, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.offline_replicas)
                    for p in partitions])

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [_observation_of(state) for state in self.states[index]]
        return _observation_of(self.states[index])

    def __iter__(self):
        return map(_observation_of, self.states)

    def __repr__(self) -> str:
        return f"PartitionList({len(self.states)} partitions)"


def _observation_of(state: PartitionState) -> PartitionObservation:
    topic, partition, replicas, isr, leader, leader_epoch, offline = state
    return PartitionObservation(topic, partition, replicas, isr, leader, leader_epoch, offline_replicas=offline)


@dataclass(frozen=True)
class TopicObservation:
    name: str
    topic_id: str | None
    partition_count: int
    replication_factor: int
    min_insync_replicas: int | None = None


@dataclass(frozen=True)
class ClusterObservation:
    """One poll of the cluster. The mappings are never mutated after construction."""

    brokers: Mapping[int, BrokerObservation] = field(default_factory=dict)
    topics: Mapping[str, TopicObservation] = field(default_factory=dict)
    partitions: Mapping[PartitionKey, PartitionObservation] = field(default_factory=dict)
    log_dirs: Mapping[LogDirKey, LogDirObservation] = field(default_factory=dict)
    # What the merge derived from `partitions` and `log_dirs`, kept for the next poll's merge
    # (COST in `cluster_merge`); trusted only while those are the very mappings it was derived
    # from, so an observation made with `replace` falls back to counting.
    derived: "MergeIndex | None" = field(default=None, compare=False, repr=False)
    # The partitions below min ISR or leaderless at this poll (those whose eligible leaders were
    # read, `cluster_poll` ELIGIBLE LEADERS), so that the next poll reads them again.
    under_min_isr: frozenset = field(default=frozenset(), compare=False, repr=False)

    def merge_index(self) -> "MergeIndex | None":
        index = self.derived
        if index is not None and index.partitions is self.partitions and index.log_dirs is self.log_dirs:
            return index
        return None


@dataclass(frozen=True)
class MergeIndex:
    """Derived from one observation's partitions and dirs: (topic, partition) → broker → (dir
    path, replica size), the partitions with a reassignment under way, and which partitions are
    not the very objects of the observation merged from (`base`, that one's `token`; the
    tokens, not the observations, so that no poll keeps the one before it alive)."""

    partitions: Mapping[PartitionKey, PartitionObservation]
    log_dirs: Mapping[LogDirKey, LogDirObservation]
    hosted: Mapping[PartitionKey, Mapping[int, tuple[str, int]]]
    reassigning: frozenset
    changed: frozenset = frozenset()
    base: object | None = None
    token: object = field(default_factory=object)
    # The poll's partitions as the answer listed them (a `PartitionList`'s states, and where
    # each key sits), when it came as one; None otherwise.
    states: Sequence[PartitionState] | None = None
    positions: Mapping[PartitionKey, int] | None = None
    # The dirs whose replicas (their keys) are those of the same dir in `base`: compared once,
    # by the merge, not again by the diff (`compute_changed_log_dirs`).
    same_dirs: frozenset = frozenset()


EMPTY = ClusterObservation()
