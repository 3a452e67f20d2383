"""Disk-pressure relief: the fewest bytes off a log dir whose volume is filling up (pure).

PRESSURE. A dir is under pressure when its volume is more than `high` percent used
(`LogDir.used_bytes` over `total_bytes`, as describe-log-dirs reports them; a dir that does not
report its volume is never judged). Relief sheds `need = used + arriving - low % x total` bytes:
down to the low-water mark, below the high one, so that the next bytes written do not start it
again. ARRIVING: copies in flight into the dir (`LogDir.copying_bytes`: log-dir moves into it, and
replicas of reassignments adding its broker) take their partition's full size once landed; what
they still lack counts in `need`, so a relief judged mid-copy frees the room they will take.

PLAN (`plan_disk_relief`). The candidates are the dir's replicas of known size, of partitions
not being reassigned, not leaving it by a log-dir move, and not in `skip`. Each may go
1. to another online dir of the same broker that is on another volume (one that reports other
   volume figures: dirs on the pressed dir's volume relieve nothing) and stays at most `low`
   percent used with it, the least used first: an intra-broker log-dir move, no network;
2. else to another broker: eligible, not already holding the partition nor barred from it
   (`Cluster.brokers_that_cannot_host`: `Broker.cannot_host`, or every dir cordoned), keeping
   the rack rule when the partition kept it, with an online dir that stays at most `low` percent
   used with it (or that reports no volume), the most room first, then the lowest id: the
   partition's replica list with that broker in this one's place.
Never into a cordoned dir (`LogDir.cordoned`: Kafka takes no new replica there), in either case;
the pressed dir itself may be cordoned (the product cordons the dirs it empties).
Which replicas: the fewest bytes that cover `need`. The smallest replica that covers it alone
and has somewhere to go, if any; else the largest first among those with somewhere to go until
`need` is covered, and then the last one taken is swapped for the smallest that still covers
what remained. Destinations' usage grows with what the plan puts there. What cannot be covered
is `short_bytes`, in two parts the alert tells apart: `stranded_bytes`, what `need` exceeds the
candidates by (the volume holds other files, or old copies Kafka deletes `file.delete.delay.ms`
after a log-dir move: nothing the product can move), and the rest, replicas with nowhere to go (a
human must add disk or brokers). `held_bytes` are the dir's replicas left out because they are
moving, and the copies in flight into it (its future replicas: log-dir moves into the dir, at
their partition's full size, which is what they will hold once landed; the copy's told size while
its partition's is unknown): a relief short while they move is better judged again once they are
still. A replica of the dir with a future copy in another dir of its broker is leaving already:
held (a second move would only redirect the copy).

Pure: values in, a fresh plan out; ties by partition and broker id, so the same cluster gives
the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Collection, Mapping

from planning.model import Broker, Cluster, LogDir, PartitionState, PlannedDirMove, TopicPartition
from planning.placement.racks import compute_rack_tree, satisfies_rack_spread


@dataclass(frozen=True)
class DiskRelief:
    """The plan for one pressed dir: moves within its broker, replica lists that take replicas
    to other brokers, and what it achieves."""

    broker_id: int
    path: str
    total_bytes: int
    used_bytes: int
    need_bytes: int
    within: tuple[PlannedDirMove, ...] = ()
    away: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    away_dirs: Mapping[TopicPartition, tuple[str | None, ...]] = field(default_factory=lambda: MappingProxyType({}))
    away_bytes: int = 0
    short_bytes: int = 0
    stranded_bytes: int = 0
    held_bytes: int = 0

    @property
    def nowhere_bytes(self) -> int:
        """The part of `short_bytes` that replicas with nowhere to go account for."""
        return self.short_bytes - self.stranded_bytes

    @property
    def shed_bytes(self) -> int:
        return sum(m.size_bytes for m in self.within) + self.away_bytes

    @property
    def used_fraction_before(self) -> float:
        return self.used_bytes / self.total_bytes

    @property
    def used_fraction_after(self) -> float:
        return (self.used_bytes - self.shed_bytes) / self.total_bytes


def compute_pressed_dirs(broker: Broker, high_percent: float) -> tuple[LogDir, ...]:
    """The broker's online dirs whose volume is more than `high_percent` used (PRESSURE)."""
    return tuple(d for d in broker.online_log_dirs
                 if d.total_bytes and d.used_bytes is not None and d.used_bytes > high_percent / 100 * d.total_bytes)


def _landed_bytes(cluster: Cluster, tp: TopicPartition, told: int) -> int:
    """What a copy in flight, `told` bytes so far, will hold once landed: its partition's size
    (never less than what it already holds) (PLAN, ARRIVING)."""
    partition = cluster.partition(tp)
    return max(partition.size_bytes or 0, told) if partition is not None else told


def plan_disk_relief(cluster: Cluster, broker_id: int, path: str, high_percent: float, low_percent: float,
                     skip: Collection[TopicPartition] = frozenset()) -> DiskRelief | None:
    """The relief of dir `path` of broker `broker_id` (module PLAN); None when it is not under
    pressure (or not an online dir of a known broker)."""
    broker = cluster.broker(broker_id)
    pressed = next((d for d in broker.online_log_dirs if d.path == path), None) if broker is not None else None
    if pressed is None or pressed not in compute_pressed_dirs(broker, high_percent):
        return None
    total, used = pressed.total_bytes, pressed.used_bytes
    copying = dict(pressed.copying_bytes)
    arriving = sum(_landed_bytes(cluster, tp, told) - told for tp, told in copying.items())
    need = used + arriving - int(low_percent / 100 * total)
    usage = {(b.id, d.path): d.used_bytes for b in cluster.brokers for d in b.online_log_dirs}
    in_dir = [p for p in cluster.partitions()
              if broker_id in p.replicas and p.log_dir_of(broker_id) == path and p.size_bytes]
    moving = {tp for d in broker.log_dirs for tp in d.future_replicas}

    def still(p: PartitionState) -> bool:
        return not p.reassigning and p.tp not in skip and p.tp not in moving

    held = sum(p.size_bytes for p in in_dir if not still(p)) + sum(
        _landed_bytes(cluster, tp, copying.get(tp, 0)) for tp in pressed.future_replicas)
    candidates = sorted((p for p in in_dir if still(p)), key=lambda p: (p.size_bytes, p.topic, p.partition))
    stranded = max(0, need - sum(p.size_bytes for p in candidates) - held)
    tree = compute_rack_tree(b for b in cluster.brokers if b.eligible)

    def destination(p: PartitionState):
        """(kind, broker, dir) for `p`'s replica, or None; kind 0 = same broker, 1 = away."""
        size = p.size_bytes
        for d in sorted(broker.online_log_dirs, key=lambda d: (usage.get((broker_id, d.path)) or 0, d.path)):
            if d.path == path or d.cordoned or d.total_bytes is None or d.used_bytes is None:
                continue
            if (d.total_bytes, d.usable_bytes) == (pressed.total_bytes, pressed.usable_bytes):
                continue  # the same volume, most likely: a move there relieves nothing
            if (usage[(broker_id, d.path)] or 0) + size <= low_percent / 100 * d.total_bytes:
                return 0, broker_id, d.path
        kept_spread = satisfies_rack_spread(tree, p.replicas)
        barred = cluster.brokers_that_cannot_host(p.tp)
        best = None
        for other in cluster.brokers:
            if not other.eligible or other.id in p.replicas or other.id in barred:
                continue
            final = tuple(other.id if b == broker_id else b for b in p.replicas)
            if kept_spread and not satisfies_rack_spread(tree, final):
                continue
            for d in other.online_log_dirs:
                if d.cordoned:
                    continue
                if d.total_bytes is None or d.used_bytes is None:
                    room = float("inf")
                else:
                    room = low_percent / 100 * d.total_bytes - (usage[(other.id, d.path)] or 0) - size
                if room >= 0 and (best is None or (-room, other.id, d.path) < best[0]):
                    best = ((-room, other.id, d.path), (1, other.id, d.path))
        return None if best is None else best[1]

    chosen: list[tuple[PartitionState, tuple[int, int, str]]] = []

    def take(p: PartitionState) -> bool:
        where = destination(p)
        if where is None:
            return False
        key = (where[1], where[2])
        usage[key] = (usage.get(key) or 0) + p.size_bytes
        chosen.append((p, where))
        return True

    alone = next((p for p in candidates if p.size_bytes >= need and destination(p) is not None), None)
    if alone is not None:
        take(alone)
    else:
        covered = 0
        for p in reversed(candidates):
            if covered >= need:
                break
            if take(p):
                covered += p.size_bytes
        if covered >= need and len(chosen) > 1:
            # The last one taken may be more than what remained: a smaller one may do.
            last, where = chosen.pop()
            usage[(where[1], where[2])] -= last.size_bytes
            remaining = need - (covered - last.size_bytes)
            taken = {p.tp for p, _ in chosen}
            smaller = next((p for p in candidates if remaining <= p.size_bytes <= last.size_bytes
                            and p.tp not in taken and destination(p) is not None), last)
            take(smaller)
    within = tuple(PlannedDirMove(p.tp, broker_id, path, where[2], p.size_bytes)
                   for p, where in chosen if where[0] == 0)
    leaving = [(p, where) for p, where in chosen if where[0] == 1]
    away = {p.tp: tuple(where[1] if b == broker_id else b for b in p.replicas) for p, where in leaving}
    away_dirs = {p.tp: tuple(where[2] if b == broker_id else p.log_dir_of(b) for b in p.replicas)
                 for p, where in leaving}
    short = max(0, need - sum(p.size_bytes for p, _ in chosen))
    return DiskRelief(broker_id, path, total, used, need, within, MappingProxyType(away),
                      MappingProxyType(away_dirs), sum(p.size_bytes for p, _ in leaving), short,
                      min(stranded, short), held)
