"""An in-process simulated Kafka cluster: a design fake of what the Admin API shows.

It lets the movement rules (steps, batches, completion, cancel) be exercised and benchmarked at
sizes no laptop hosts, with faults, and with no clock; `planning.simulation.driver` runs a plan
through it. One mutable class, a deterministic state machine whose only inputs are its method
calls; time is a number advanced by `tick(seconds)`.

RULES (what `SimulatedCluster` mimics):
- `submit_step(tp, target)` is AlterPartitionReassignments: adding = target - replicas, removing
  = replicas - target, replicas = removing + target (as Kafka shows it: `[1,2,3] -> [4,3,2]`
  shows `[1,4,3,2]`). A pure reorder applies at once. Submitting while a reassignment runs first
  cancels it (a simplification of Kafka's in-place replacement).
- `tick(seconds)`: each live broker fetches its adding replicas at `bytes_per_sec`, shared
  fairly among the replicas it is fetching (processor sharing, exact within a tick: the
  smallest remaining replica finishes first and frees its share). A replica that has fetched
  the partition's size joins the ISR. When every target replica is in sync, Kafka finishes: the
  removing replicas leave the replica list and the ISR, replicas == target, and a leader that
  was removed is replaced by the first in-sync replica of the target.
- `cancel(tp)` is Kafka's revert (`planning.movement.cancel.compute_partition_after_cancel`);
  `elect_preferred_leader(tp)` makes replicas[0] lead if it is in sync.
- Faults: `kill_broker` / `fail_log_dir` take replicas offline and out of the ISR (the last ISR
  member stays, leaderless, as in Kafka with unclean election off); `restart_broker` /
  `restore_log_dir` bring them back, and they rejoin the ISR at the next tick (catch-up after a
  restart is not modelled). Fetching needs a live leader; the leader's outbound bandwidth is not
  modelled. As in Kafka, a broker never starts again a replica of a partition that its failed
  dir held, until it restarts: such a replica added back by a step stays out of the ISR.
COST: `snapshot()` is O(what changed since the last one) (the last view patched); a tick copies
only the replicas being added.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from planning.simulation import DEFAULT_BYTES_PER_SEC
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.cancel import compute_partition_after_cancel
from schemas.errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

DEFAULT_SIZE_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class SimulationParams:
    """bytes_per_sec: replication fetch capacity of one broker, shared by the replicas it copies.
    tick_seconds: time between two decisions of the driver.
    default_size_bytes: size assumed for partitions whose size is unknown.
    max_seconds: the driver gives up after this much simulated time.
    These describe the simulated hardware and driver, not the product: the product's settings
    (limits, `step.stall.timeout`) are passed to `run_plan` by the caller, from its settings.
    """

    bytes_per_sec: float = DEFAULT_BYTES_PER_SEC
    tick_seconds: float = 1.0
    default_size_bytes: int = DEFAULT_SIZE_BYTES
    max_seconds: float = 7 * 24 * 3600.0


class SimulatedCluster:
    """The simulated cluster (mutable; see the module docstring). `snapshot()` gives the
    immutable `Cluster` view the planning functions read."""

    def __init__(self, cluster: Cluster, params: SimulationParams = SimulationParams(), now: float = 0.0) -> None:
        self.params = params
        self.now = now
        self._brokers: dict[int, Broker] = {b.id: b for b in cluster.brokers}
        self._topic_order = [t.name for t in cluster.topics]
        self._min_isr = {t.name: t.min_insync_replicas for t in cluster.topics}
        self._partitions: dict[str, dict[int, PartitionState]] = {
            t.name: {p.partition: p for p in t.partitions} for t in cluster.topics
        }
        self._targets: dict[TopicPartition, tuple[int, ...]] = {}  # Kafka's target of a running reassignment
        self._fetched: dict[tuple[TopicPartition, int], float] = {}  # bytes copied by adding replicas
        self._rejoining: set[tuple[TopicPartition, int]] = set()
        self._stranded: dict[int, set[TopicPartition]] = defaultdict(set)  # held by a failed dir
        # Each topic's partitions in partition order, as a list patched in place by `_put`, and
        # the place of each partition in it: a snapshot copies a touched topic's list in C.
        self._lists: dict[str, list[PartitionState]] = {
            name: [parts[i] for i in sorted(parts)] for name, parts in self._partitions.items()}
        self._slots: dict[str, dict[int, int]] = {
            name: {i: k for k, i in enumerate(sorted(parts))} for name, parts in self._partitions.items()}
        self._view: Cluster | None = None  # the last snapshot
        self._topics: list[Topic] = []  # its topics, in order (patched for the touched ones)
        self._topic_slots = {name: k for k, name in enumerate(self._topic_order)}
        self._brokers_view: tuple[Broker, ...] | None = None  # its brokers, None once one changed
        self._touched: set[TopicPartition] = set()  # partitions put since the last snapshot
        self.last_changes: frozenset[TopicPartition] = frozenset()  # put between the last two snapshots
        self.version = 0  # counts the changes a snapshot can show (partitions, brokers)
        self.peak_replicas_per_partition = max((len(p.replicas) for p in cluster.partitions()), default=0)

    # -- views ---------------------------------------------------------------------------------

    def snapshot(self) -> Cluster:
        """The cluster as it is now. O(what changed since the last snapshot): the last view with
        only the topics that hold a partition put since replaced (`Cluster.with_topics`, which
        patches the partition index), the same brokers tuple while no broker changed. Equal to
        a view built from nothing (a property test compares them). `last_changes` is then the
        partitions put between the previous snapshot and this one."""
        if self._brokers_view is None:
            self._brokers_view = tuple(self._brokers[i] for i in sorted(self._brokers))
        if self._view is None:
            self._topics = [self._build_topic(name) for name in self._topic_order]
            self._view = Cluster(brokers=self._brokers_view, topics=tuple(self._topics))
        elif self._touched or self._view.brokers is not self._brokers_view:
            touched = {tp.topic for tp in self._touched}
            for name in touched:
                self._topics[self._topic_slots[name]] = self._build_topic(name)
            replaced = [self._partitions[tp.topic][tp.partition] for tp in self._touched]
            self._view = self._view.with_topics(self._brokers_view, tuple(self._topics), touched, replaced)
        self.last_changes = frozenset(self._touched)
        self._touched = set()
        return self._view

    def _build_topic(self, name: str) -> Topic:
        return Topic(name, tuple(self._lists[name]), self._min_isr[name])

    def partition(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._partitions[tp.topic][tp.partition]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"unknown partition {tp}") from None

    def reassigning(self) -> tuple[TopicPartition, ...]:
        return tuple(sorted(self._targets))

    # -- the Admin API ----------------------------------------------------------------------------

    def submit_step(self, tp: TopicPartition, target: Iterable[int], log_dirs: Mapping[int, str] | None = None) -> None:
        target = tuple(target)
        if not target or len(set(target)) != len(target) or any(b not in self._brokers for b in target):
            raise InvalidReplicaAssignmentError(f"{tp}: invalid target {list(target)}")
        if tp in self._targets:
            self.cancel(tp)
        p = self.partition(tp)
        if target == p.replicas:
            return
        if set(target) == set(p.replicas):
            dirs = dict(zip(p.replicas, p.log_dirs)) if p.log_dirs else {}
            self._put(replace(p, replicas=target, log_dirs=tuple(dirs.get(b) for b in target) if dirs else (),
                              leader_epoch=p.leader_epoch + 1))
            return
        adding = tuple(b for b in target if b not in p.replicas)
        removing = tuple(b for b in p.replicas if b not in target)
        replicas = removing + target
        dirs = dict(zip(p.replicas, p.log_dirs)) if p.log_dirs else {}
        for b in adding:
            dirs[b] = self._choose_dir(b, (log_dirs or {}).get(b))
        self._put(replace(p, replicas=replicas, adding=adding, removing=removing,
                          log_dirs=tuple(dirs.get(b) for b in replicas) if any(dirs.values()) else (),
                          offline_replicas=self._offline(tp, replicas, dirs),
                          leader_epoch=p.leader_epoch + 1))
        self._targets[tp] = target
        for b in adding:
            self._fetched[(tp, b)] = 0.0
        self.peak_replicas_per_partition = max(self.peak_replicas_per_partition, len(replicas))
        self._maybe_finish(tp)

    def cancel(self, tp: TopicPartition) -> None:
        if tp not in self._targets:
            raise NoReassignmentInProgressError(f"no reassignment in progress for {tp}")
        p = self.partition(tp)
        del self._targets[tp]
        for b in p.adding:
            self._fetched.pop((tp, b), None)
            self._rejoining.discard((tp, b))
        self._put(compute_partition_after_cancel(p))

    def elect_preferred_leader(self, tp: TopicPartition) -> bool:
        p = self.partition(tp)
        preferred = p.replicas[0]
        if preferred not in p.isr or not self._replica_online(p, preferred):
            return False
        if p.leader != preferred:
            self._put(replace(p, leader=preferred, leader_epoch=p.leader_epoch + 1))
        return True

    # -- faults ------------------------------------------------------------------------------------

    def kill_broker(self, broker_id: int) -> None:
        self._set_broker(replace(self._brokers[broker_id], alive=False))
        self._take_offline(lambda p, b: b == broker_id)

    def restart_broker(self, broker_id: int) -> None:
        self._set_broker(replace(self._brokers[broker_id], alive=True))
        self._stranded.pop(broker_id, None)
        self._bring_online(lambda p, b: b == broker_id)

    def fail_log_dir(self, broker_id: int, path: str) -> None:
        self._set_dir(broker_id, path, online=False)
        self._stranded[broker_id].update(
            p.tp for parts in self._partitions.values() for p in parts.values() if p.log_dir_of(broker_id) == path)
        self._take_offline(lambda p, b: b == broker_id and p.log_dir_of(b) == path)

    def restore_log_dir(self, broker_id: int, path: str) -> None:
        """The disk replaced; in Kafka that takes a broker restart, which forgets stranded replicas."""
        self._set_dir(broker_id, path, online=True)
        self._stranded.pop(broker_id, None)
        self._bring_online(lambda p, b: b == broker_id and p.log_dir_of(b) == path)

    def set_draining(self, broker_id: int, draining: bool = True) -> None:
        self._set_broker(replace(self._brokers[broker_id], draining=draining))

    def add_broker(self, broker: Broker) -> None:
        self._set_broker(broker)

    # -- time --------------------------------------------------------------------------------------

    def tick(self, seconds: float) -> None:
        self.now += seconds
        for tp, b in sorted(self._rejoining, key=lambda k: (k[0], k[1])):
            p = self.partition(tp)
            if b in p.replicas and self._replica_online(p, b) and p.leader is not None and b not in p.adding:
                self._put(replace(p, isr=p.isr + (b,) if b not in p.isr else p.isr))
                self._rejoining.discard((tp, b))
        self._fetch(seconds)
        for tp in sorted(self._targets):
            self._maybe_finish(tp)

    def _fetch(self, seconds: float) -> None:
        """Processor sharing per broker: the budget is split evenly; small remainders finish first."""
        by_broker: dict[int, list[tuple[float, TopicPartition]]] = defaultdict(list)
        for (tp, b), done in self._fetched.items():
            p = self.partition(tp)
            if b in p.isr or p.leader is None or not self._replica_online(p, b) or tp in self._stranded.get(b, ()):
                continue
            by_broker[b].append((self._size(p) - done, tp))
        for b, wanting in by_broker.items():
            budget = self.params.bytes_per_sec * seconds
            wanting.sort()
            left = len(wanting)
            for remaining, tp in wanting:
                share = budget / left
                if remaining <= share:
                    self._fetched[(tp, b)] = float(self._size(self.partition(tp)))
                    p = self.partition(tp)
                    self._put(replace(p, isr=p.isr + (b,)))
                    budget -= max(remaining, 0.0)
                else:
                    self._fetched[(tp, b)] += share
                    budget -= share
                left -= 1

    def _maybe_finish(self, tp: TopicPartition) -> None:
        """Kafka finishes a reassignment once every target replica is in the ISR — not only the
        adding ones: a target member that fell out of the ISR (a restarted broker) holds the
        removal of the others, or a pure removal could drop the last in-sync replica."""
        p = self.partition(tp)
        if any(b not in p.isr for b in self._targets[tp]):
            return
        target = self._targets.pop(tp)
        removing = set(p.removing)
        for b in p.adding:
            self._fetched.pop((tp, b), None)
        dirs = dict(zip(p.replicas, p.log_dirs)) if p.log_dirs else {}
        isr = tuple(b for b in p.isr if b not in removing)
        leader = p.leader
        if leader is None or leader in removing:
            leader = next((b for b in target if b in isr and self._replica_online(p, b)), None)
        for b in removing:
            self._rejoining.discard((tp, b))
        self._put(replace(p, replicas=target, isr=isr, leader=leader, adding=(), removing=(),
                          log_dirs=tuple(dirs.get(b) for b in target) if dirs else (),
                          offline_replicas=tuple(b for b in p.offline_replicas if b not in removing),
                          leader_epoch=p.leader_epoch + 1))

    # -- internals ---------------------------------------------------------------------------------

    def _put(self, p: PartitionState) -> None:
        self._partitions[p.topic][p.partition] = p
        self._lists[p.topic][self._slots[p.topic][p.partition]] = p
        self._touched.add(p.tp)
        self.version += 1

    def _size(self, p: PartitionState) -> int:
        return self.params.default_size_bytes if p.size_bytes is None else p.size_bytes

    def _replica_online(self, p: PartitionState, broker_id: int) -> bool:
        broker = self._brokers.get(broker_id)
        if broker is None or not broker.alive:
            return False
        path = p.log_dir_of(broker_id)
        return path is None or not broker.log_dirs or any(d.path == path and d.online for d in broker.log_dirs)

    def _offline(self, tp: TopicPartition, replicas: tuple[int, ...], dirs: Mapping[int, str | None]) -> tuple[int, ...]:
        probe = PartitionState(tp.topic, tp.partition, replicas, log_dirs=tuple(dirs.get(b) for b in replicas))
        return tuple(b for b in replicas if not self._replica_online(probe, b))

    def _choose_dir(self, broker_id: int, wanted: str | None) -> str | None:
        online = self._brokers[broker_id].online_log_dirs
        if wanted and wanted != "any" and any(d.path == wanted for d in online):
            return wanted
        return online[0].path if online else None

    def _set_dir(self, broker_id: int, path: str, online: bool) -> None:
        broker = self._brokers[broker_id]
        dirs = tuple(replace(d, online=online) if d.path == path else d for d in broker.log_dirs)
        self._set_broker(replace(broker, log_dirs=dirs))

    def _set_broker(self, broker: Broker) -> None:
        self._brokers[broker.id] = broker
        self._brokers_view = None
        self.version += 1

    def _take_offline(self, hit) -> None:
        for name in self._topic_order:
            for p in list(self._partitions[name].values()):
                gone = [b for b in p.replicas if hit(p, b)]
                if not gone:
                    continue
                isr = tuple(b for b in p.isr if b not in gone)
                if not isr and p.isr:
                    isr = (p.isr[0],)  # Kafka never empties the ISR: the last member stays, leaderless
                leader = p.leader if p.leader not in gone else None
                if leader is None:
                    leader = next((b for b in p.replicas if b in isr and b not in gone and self._replica_online(p, b)), None)
                offline = tuple(dict.fromkeys(p.offline_replicas + tuple(gone)))
                for b in gone:
                    self._rejoining.discard((p.tp, b))
                self._put(replace(p, isr=isr, leader=leader, offline_replicas=offline, leader_epoch=p.leader_epoch + 1))

    def _bring_online(self, hit) -> None:
        for name in self._topic_order:
            for p in list(self._partitions[name].values()):
                back = [b for b in p.replicas if hit(p, b) and self._replica_online(p, b)]
                if not back:
                    continue
                offline = tuple(b for b in p.offline_replicas if b not in back)
                leader = p.leader
                if leader is None:
                    leader = next((b for b in p.replicas if b in p.isr and self._replica_online(p, b)), None)
                self._put(replace(p, leader=leader, offline_replicas=offline, leader_epoch=p.leader_epoch + 1))
                for b in back:
                    if b not in p.isr and b not in p.adding:
                        self._rejoining.add((p.tp, b))
