"""The batch rule: which partitions start their next step now, and the limits.

Batches are **rolling**: every decision looks at the steps in flight and the partitions that want
their next step, and refills the free slots. A limit change applies to the next decision, never
to steps already in flight.

GOALS, in priority order:
1. Partitions under min ISR or with offline replicas first: they are one failure from data loss.
2. Then leader movements (up to L): moving leadership early sheds load from old leaders.
3. Then the rest, smallest first (more partitions finish sooner; a small step frees its slot
   soon), ties by (topic, partition). A partition whose size is unknown sorts as the largest:
   its cost cannot be bounded, so known-small work goes first.

CONSTRAINTS (a candidate that would break one is deferred, with the reason):
- steps in flight never exceed P (partitions), L (leader movements), and per broker B (steps
  adding a replica to, or dropping one from, that broker; each step counts once per broker);
- never two steps in flight for one partition, and never a step while Kafka shows the partition
  reassigning for another reason: a candidate has no step of ours in flight, so such a
  partition is moved by another tool (`kafka-reassign-partitions.sh`, Cruise Control, ...) and
  waits, "moved by another tool", until Kafka shows that move ended (`planning.movement.external`);
- a step adds at most R and drops at most R replicas; only a step restoring min ISR may add more
  (up to the deficit) — and it still counts against P. Dropping a replica that is offline and
  out of sync is free, an eligible leader's only in a step that adds (`count_replica_drops`);
- never a step that would leave fewer than M in-sync replicas when it completes (|TR| < M);
- never a replica targeted to a dead or draining broker or an offline log dir (replicas a step
  keeps on a draining broker are fine: they stay in sync until a later step drops them; a kept
  replica on a dead broker or offline dir is not — it can never rejoin the ISR).

ALGORITHM: sort candidates by (class, size, topic, partition) with class 0 = urgent, 1 = leader
movement, 2 = rest; walk the list once, taking every candidate that passes the guards and fits
the counters, until P is reached (an example at `compute_batch`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Iterator, Mapping, Union

from planning.model import Cluster, PartitionState, TopicPartition
from planning.movement.partition_steps import Step
from schemas.errors import InvalidConfigError

# Kafka-style name → `Limits` field. No defaults here: they are `runtime.settings.Settings`'s
# alone (one table), and the caller builds `Limits` from it.
CONFIG_KEYS = {
    "reassignment.max.concurrent.partition.movements": "max_partition_movements",
    "reassignment.max.concurrent.leader.movements": "max_leader_movements",
    "reassignment.max.concurrent.replica.movements": "max_replica_movements",
    "reassignment.max.concurrent.movements.per.broker": "max_movements_per_broker",
}


@dataclass(frozen=True)
class Limits:
    """Cluster-wide movement limits; every one is at least 1. No field has a default
    (the defaults live in `runtime.settings.Settings` only; `compute_limits` builds this).

    max_partition_movements (P): partitions with a step in flight.
    max_leader_movements (L): leader-moving steps in flight.
    max_replica_movements (R): replicas one step may add, and may drop (per partition).
    max_movements_per_broker (B): steps in flight adding to or dropping from one broker.
    broker_moves: lower B for some brokers, as (broker, moves) pairs: the adaptive throttle's
        moves in flight (`planning.movement.throttle_control`), each at least 1 and at most B. Not
        a setting (so it has a default, the one exception): () is B for every broker.
    """

    max_partition_movements: int
    max_leader_movements: int
    max_replica_movements: int
    max_movements_per_broker: int
    broker_moves: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        for key, name in CONFIG_KEYS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidConfigError(f"{key} must be an integer of at least 1, got {value!r}")
        if any(moves < 1 for _, moves in self.broker_moves):
            raise InvalidConfigError(f"moves in flight per broker must be at least 1, got {self.broker_moves!r}")

    @cached_property
    def broker_limits(self) -> Mapping[int, int]:
        """Broker → its B where `broker_moves` lowers it (a lookup per broker of a candidate)."""
        most = self.max_movements_per_broker
        return {broker: min(moves, most) for broker, moves in self.broker_moves}

    def broker_limit(self, broker_id: int) -> int:
        """B for `broker_id`."""
        return self.broker_limits.get(broker_id, self.max_movements_per_broker)

    @classmethod
    def from_config(cls, config: Mapping[str, object], base: "Limits") -> "Limits":
        """`base` with Kafka-style config keys applied; unknown keys are ignored, missing ones keep `base`."""
        values = {name: getattr(base, name) for name in CONFIG_KEYS.values()}
        for key, name in CONFIG_KEYS.items():
            if key in config:
                raw = config[key]
                try:
                    values[name] = int(str(raw))
                except ValueError:
                    raise InvalidConfigError(f"{key} must be an integer of at least 1, got {raw!r}") from None
        return cls(**values)


@dataclass(frozen=True)
class PlannedStep:
    """A partition's next step, with the log dir wanted for each added replica ("any" allowed)."""

    tp: TopicPartition
    step: Step
    target_log_dirs: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Deferral:
    tp: TopicPartition
    reason: str


@dataclass(frozen=True)
class BatchDecision:
    started: tuple[PlannedStep, ...] = ()
    deferred: tuple[Deferral, ...] = ()


@dataclass
class _Counters:
    """Steps in flight per limit while one decision is being made (local, never escapes)."""

    partitions: int = 0
    leaders: int = 0
    per_broker: Counter = field(default_factory=Counter)

    def add(self, step: Step) -> None:
        self.partitions += 1
        self.leaders += step.leader_movement
        self.per_broker.update(step.moved_brokers)


StepsLike = Union[Mapping[TopicPartition, Step], Iterable[PlannedStep]]


def compute_batch(candidates: StepsLike, in_flight: StepsLike, cluster: Cluster, limits: Limits) -> tuple[PlannedStep, ...]:
    """The steps to start now, in the order chosen (see the module docstring).

    Example with P = 2, L = 1: candidates a (leader move, 9 MB), b (leader move, 1 MB), c (1 GB),
    nothing in flight → b (class 1, smaller), then a is refused by L, then c → batch (b, c).
    """
    return compute_batch_decision(candidates, in_flight, cluster, limits).started


def compute_batch_decision(
    candidates: StepsLike, in_flight: StepsLike, cluster: Cluster, limits: Limits, *, ranked: bool = False,
) -> BatchDecision:
    """Like `compute_batch`, plus why the candidates examined wait. `ranked`: the candidates come
    in `compute_priority` order already. Once P steps are in flight no candidate can start: the
    walk stops, and the ones not examined wait for a slot (they are not listed)."""
    ordered = candidates if ranked else sorted(_as_planned(candidates), key=lambda c: compute_priority(c, cluster))
    return _walk(iter(ordered), iter(()), in_flight, cluster, limits)


def compute_split_batch_decision(
    others: Iterable[tuple[tuple, PlannedStep]], leader_moving: Iterable[tuple[tuple, PlannedStep]],
    in_flight: StepsLike, cluster: Cluster, limits: Limits,
) -> BatchDecision:
    """`compute_batch_decision` of ranked candidates given as two streams of (rank, candidate),
    each in rank order: the steps that move leadership and the others. They are walked merged,
    in rank order, and the same steps start; what differs is which waiting ones are examined.
    A candidate that the limits L or B refuse whatever its guards say cannot start: it is
    passed over unexamined (a lookup in the counters, not the guards), and waits for a slot
    unlisted, as all do once P is reached. Once L leader movements are in flight the
    leader-moving stream is not walked any further. A backlog of steps waiting for L, or for
    brokers at B, then costs little or nothing per decision; `deferred` lists the candidates
    the limits let through and a guard refused."""
    return _walk(iter(others), iter(leader_moving), in_flight, cluster, limits, ranks=True)


def _walk(others: Iterator, leader_moving: Iterator, in_flight: StepsLike, cluster: Cluster, limits: Limits,
          ranks: bool = False) -> BatchDecision:
    """The walk of the module docstring's ALGORITHM over the candidates in order. With `ranks`,
    both iterators give (rank, candidate) and are merged; without, `others` gives candidates
    and `leader_moving` nothing."""
    flying = _as_planned(in_flight)
    counters = _Counters()
    busy: set[TopicPartition] = set()
    for planned in flying:
        counters.add(planned.step)
        busy.add(planned.tp)

    started: list[PlannedStep] = []
    deferred: list[Deferral] = []
    a = next(others, None)
    b = next(leader_moving, None)
    while a is not None or b is not None:
        if counters.partitions >= limits.max_partition_movements:
            break
        if b is not None and counters.leaders >= limits.max_leader_movements:
            b = None  # L is full and only grows: no leader-moving candidate can start now
            continue
        if b is None or (a is not None and a[0] <= b[0]):
            planned = a[1] if ranks else a
            a = next(others, None)
        else:
            planned = b[1]
            b = next(leader_moving, None)
        if ranks and _held_by_limits(planned.step, counters, limits):
            continue
        reason = _refusal(planned, busy, counters, cluster, limits)
        if reason is not None:
            deferred.append(Deferral(planned.tp, reason))
            continue
        started.append(planned)
        counters.add(planned.step)
        busy.add(planned.tp)
    return BatchDecision(tuple(started), tuple(deferred))


def _held_by_limits(step: Step, counters: _Counters, limits: Limits) -> bool:
    """L or B refuses `step` now (the cheap half of `_refusal`, for a walk that passes over it)."""
    if step.leader_movement and counters.leaders >= limits.max_leader_movements:
        return True
    per_broker, most, lowered = counters.per_broker, limits.max_movements_per_broker, limits.broker_limits
    for b in step.adding:  # `moved_brokers` without building it: the walk may pass over many
        if per_broker.get(b, 0) >= (lowered.get(b, most) if lowered else most):
            return True
    for b in step.removing:
        if per_broker.get(b, 0) >= (lowered.get(b, most) if lowered else most):
            return True
    return False


def is_urgent(partition: PartitionState, cluster: Cluster) -> bool:
    """Under min ISR, or holding a replica that is offline (dead broker or offline dir)."""
    if len(partition.isr) < cluster.min_isr(partition.topic) or partition.offline_replicas:
        return True
    return any(not cluster.is_replica_online(partition, b) for b in partition.replicas)


def count_replica_drops(step: Step, partition: PartitionState, cluster: Cluster) -> int:
    """The replicas `step` drops that count against R: all but those offline and out of sync.

    Such a drop costs no redundancy, and a partition that lost more such replicas than R must
    still be able to shed them in one step (`planning.movement.advance.compute_reachable_step`).
    An offline eligible leader replica (KIP-966) is a clean copy: its drop is free only in a step
    that adds a replica (it is traded for one in sync), and counts against R otherwise.
    """
    return sum(1 for b in step.removing
               if b in partition.isr or cluster.is_replica_online(partition, b)
               or (not step.adding and b in partition.eligible_leaders))


def compute_priority(planned: PlannedStep, cluster: Cluster) -> tuple:
    """The candidate's place in the batch order: (class, size, topic, partition), see ALGORITHM."""
    partition = cluster.partition(planned.tp)
    size = partition.size_bytes if partition is not None and partition.size_bytes is not None else float("inf")
    if partition is not None and is_urgent(partition, cluster):
        rank = 0
    elif planned.step.leader_movement:
        rank = 1
    else:
        rank = 2
    return (rank, size, planned.tp.topic, planned.tp.partition)


def _refusal(
    planned: PlannedStep, busy: set[TopicPartition], counters: _Counters, cluster: Cluster, limits: Limits
) -> str | None:
    """Why `planned` may not start now, or None: the limits first (cheap), then the guards."""
    step, tp = planned.step, planned.tp
    if tp in busy:
        return "a step is already in flight for this partition"
    # The limits first: a counter lookup each, where the guards read the partition and brokers;
    # in a big rebalance most candidates examined wait on a busy broker (B), and the walk then
    # costs a counter lookup for each of them.
    reason = _refusal_by_limits(step, counters, limits)
    if reason is not None:
        return reason
    partition = cluster.partition(tp)
    if partition is None:
        return "unknown partition"
    for guard in (_refuses_concurrent_kafka_reassignment, _refuses_stale_step, _refuses_too_many_replicas,
                  _refuses_below_min_isr, _refuses_unusable_broker):
        reason = guard(planned, partition, cluster, limits)
        if reason is not None:
            return reason
    return None


def compute_limit_refusal(step: Step, in_flight: StepsLike, limits: Limits) -> str | None:
    """Why P, L or B holds `step` back while `in_flight` flies (the walk's own words), or None.
    For readers explaining a candidate the walk passed over unexamined (`list`, `status`)."""
    counters = _Counters()
    for planned in _as_planned(in_flight):
        counters.add(planned.step)
    return _refusal_by_limits(step, counters, limits)


def _refusal_by_limits(step: Step, counters: _Counters, limits: Limits) -> str | None:
    if counters.partitions >= limits.max_partition_movements:
        return f"{counters.partitions} partitions moving, limit P = {limits.max_partition_movements}"
    if step.leader_movement and counters.leaders >= limits.max_leader_movements:
        return f"{counters.leaders} leader movements in flight, limit L = {limits.max_leader_movements}"
    for broker_id in sorted(step.moved_brokers):
        most = limits.broker_limit(broker_id)
        if counters.per_broker[broker_id] >= most:
            return (f"broker {broker_id} has {counters.per_broker[broker_id]} movements in flight, "
                    + (f"limit B = {most}" if most == limits.max_movements_per_broker
                       else f"the adaptive throttle allows {most} (B = {limits.max_movements_per_broker})"))
    return None


def _refuses_concurrent_kafka_reassignment(planned, partition, cluster, limits) -> str | None:
    if partition.reassigning:
        return (f"moved by another tool: Kafka shows the partition reassigning (adding {list(partition.adding)}, "
                f"removing {list(partition.removing)}) with no step of ours in flight")
    return None


def _refuses_stale_step(planned, partition, cluster, limits) -> str | None:
    """The step was computed from other replicas than the partition holds now."""
    step = planned.step
    expected = (set(partition.replicas) | set(step.adding)) - set(step.removing)
    if (set(step.adding) & set(partition.replicas) or not set(step.removing) <= set(partition.replicas)
            or expected != set(step.target) or len(set(step.target)) != len(step.target)):
        return f"step to {list(step.target)} does not follow from replicas {list(partition.replicas)}"
    return None


def _refuses_too_many_replicas(planned, partition, cluster, limits) -> str | None:
    step, r = planned.step, limits.max_replica_movements
    deficit = max(0, cluster.min_isr(partition.topic) - len(set(partition.isr) & set(partition.replicas)))
    drops = count_replica_drops(step, partition, cluster)
    if drops > r:
        return f"step drops {drops} replicas, limit R = {r}"
    if len(step.adding) > max(r, deficit):
        return f"step adds {len(step.adding)} replicas, limit R = {r} (min ISR deficit {deficit})"
    return None


def _refuses_below_min_isr(planned, partition, cluster, limits) -> str | None:
    min_isr = cluster.min_isr(partition.topic)
    if len(planned.step.target) < min_isr:
        return f"step leaves {len(planned.step.target)} in-sync replicas, below min.insync.replicas = {min_isr}"
    return None


def _refuses_unusable_broker(planned, partition, cluster, limits) -> str | None:
    step = planned.step
    for broker_id in step.adding:
        broker = cluster.broker(broker_id)
        if broker is None:
            return f"step adds a replica to unknown broker {broker_id}"
        if not broker.eligible:
            why = "dead" if not broker.alive else "draining" if broker.draining else "without an online log dir"
            return f"step adds a replica to broker {broker_id}, which is {why}"
    for broker_id, log_dir in planned.target_log_dirs:
        broker = cluster.broker(broker_id)
        if log_dir != "any" and broker is not None and broker.log_dirs and log_dir not in {
            d.path for d in broker.online_log_dirs
        }:
            return f"step targets log dir {log_dir} on broker {broker_id}, which is offline or unknown"
    for broker_id in step.target:
        if broker_id not in step.adding and not cluster.is_replica_online(partition, broker_id):
            if broker_id in partition.eligible_leaders:
                return (f"step keeps the eligible leader replica on broker {broker_id}, which is offline: a clean "
                        "copy, kept until its broker is back or a step adds a replica")
            return f"step keeps the replica on broker {broker_id}, which is offline and can never rejoin the ISR"
    return None


def _as_planned(steps: StepsLike) -> list[PlannedStep]:
    if isinstance(steps, Mapping):
        return [PlannedStep(tp, step) for tp, step in steps.items()]
    return list(steps)
