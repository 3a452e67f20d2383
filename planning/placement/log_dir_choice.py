"""Which log dir each replica of a plan goes to, under the disk limit.

RULES (`compute_target_dirs`, over the partitions a plan changes):
- a kept replica keeps its dir;
- a replica leaving its broker first gives its bytes back to its dir's load, so that what
  arrives sees the dirs as they will be (a dir the plan empties is not judged full);
- the new replicas are placed largest first, each on its broker's online dir with the lowest
  load relative to its share once the replica is in (then the fewest replicas relative to it,
  for replicas of no size; then the lowest path), among the dirs with room for it. The load is
  Kafka's bytes in the dir (describe-log-dirs; else the volume's used bytes); the shares are
  the log-dir balance's (`planning.model.compute_dir_weights`): in proportion to each dir's
  capacity when every online dir of the broker reports one, else equal. So a plan puts a
  replica where the log-dir balance would leave it: with one rule for both, a plan does not
  fill a small dir that the balance then empties (a replica copied twice, over the network and
  then inside the broker);
- DISK CAPACITY (`Goal.disk_max_usage_percent`, as Cruise Control's DiskCapacityGoal): no new
  replica goes into a dir whose projected usage — the volume's used bytes (total - usable) plus
  the bytes the plan puts there — would exceed the limit. A replica leaving gives no room back
  here (both copies exist while it moves). Dirs that do not report their volume's size are not
  limited. Dirs sharing one volume each count only their own incoming bytes against it (the
  volume is not recognised);
- CORDONS: no new replica goes into a cordoned dir (`LogDir.cordoned`: Kafka takes none there),
  as none goes into a dir without room; a kept replica in one keeps it (a cordon is not a
  drain). A broker whose every online dir is cordoned gets no new replica at all: the placer
  never picks it (`Cluster.brokers_that_cannot_host`);
- a new replica that fits no online dir of its broker gets no dir (None: any) and is recorded
  as a `DiskOverflow`; the placer then keeps that broker out of the partition and plans again
  (`planning.placement.placer`), and `describe_disk_overflow` words the failure when replicas
  still do not fit.
Cost: the plan's changed partitions, twice; nothing else of the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from planning.model import Cluster, LogDir, PartitionState, TopicPartition, compute_dir_weights


@dataclass(frozen=True)
class DiskOverflow:
    """A new replica that fits no online dir of its broker under the disk limit."""

    tp: TopicPartition
    broker_id: int
    size_bytes: int


class _TargetDirs:
    """The dirs chosen so far in one plan (mutable, private to one `compute_target_dirs` call):
    each online dir's load in bytes and in replicas, its room under the limit, and the replicas
    that fit nowhere."""

    def __init__(self, cluster: Cluster, limit: float | None) -> None:
        self.cluster = cluster
        # Bytes per online dir: Kafka's own (the replicas describe-log-dirs listed) where
        # reported — dirs sharing one volume all report that volume's usage — else the volume's
        # used bytes.
        self.usage: dict[tuple[int, str], int] = {
            (b.id, d.path): d.replica_bytes if d.replica_bytes is not None else d.used_bytes or 0
            for b in cluster.brokers for d in b.log_dirs if d.online
        }
        # Replicas per online dir: what breaks ties of bytes (replicas of no size: the log-dir
        # balance then evens the dirs by count).
        self.count: dict[tuple[int, str], int] = {
            (b.id, d.path): d.replica_count or 0 for b in cluster.brokers for d in b.log_dirs if d.online}
        # Bytes each online dir may still take under `limit` percent of its volume (only dirs
        # that report their volume's size and free space).
        self.headroom: dict[tuple[int, str], float] = {
            (b.id, d.path): room for b in cluster.brokers for d in b.log_dirs
            if d.online and (room := d.room_bytes(limit)) is not None
        }
        # Each online dir's weight in its broker's shares, as the log-dir balance's shares are.
        self.weight: dict[tuple[int, str], float] = {
            (b.id, path): weight for b in cluster.brokers for path, weight in compute_dir_weights(b.log_dirs).items()}
        self.overflow: list[DiskOverflow] = []

    def release(self, p, final) -> None:
        """The replicas of `p` that leave their broker (in `p.replicas`, not in `final`) give
        their bytes back to their dir's load (not to its room under the limit)."""
        size = p.size_bytes or 0
        for b in p.replicas:
            if b not in final:
                key = (b, p.log_dir_of(b))
                if key in self.usage:
                    self.usage[key] = max(0, self.usage[key] - size)
                    self.count[key] = max(0, self.count[key] - 1)

    def choose(self, p, final) -> tuple[str | None, ...]:
        """Kept replicas keep their dir; a new one goes to its broker's online dir with the lowest
        load relative to its share once the replica is in, among those with room for it under
        the disk limit (none: a `DiskOverflow`)."""
        dirs: list[str | None] = []
        size = p.size_bytes or 0
        dir_usage, headroom, weight, count = self.usage, self.headroom, self.weight, self.count
        for b in final:
            if b in p.replicas:
                dirs.append(p.log_dir_of(b))
                continue
            broker = self.cluster.broker(b)
            online = broker.online_log_dirs if broker is not None else ()
            fitting = [d for d in online if not d.cordoned and headroom.get((b, d.path), float("inf")) >= size]
            if not fitting:
                if online:
                    self.overflow.append(DiskOverflow(p.tp, b, size))
                dirs.append(None)
                continue
            best = min(fitting, key=lambda d: ((dir_usage.get((b, d.path), 0) + size) / weight[(b, d.path)],
                                               (count.get((b, d.path), 0) + 1) / weight[(b, d.path)], d.path))
            dir_usage[(b, best.path)] = dir_usage.get((b, best.path), 0) + size
            count[(b, best.path)] = count.get((b, best.path), 0) + 1
            if (b, best.path) in headroom:
                headroom[(b, best.path)] -= size
            dirs.append(best.path)
        return tuple(dirs)


def compute_target_dirs(cluster: Cluster, limit: float | None, changed: Sequence[tuple[PartitionState, tuple[int, ...]]]
                        ) -> tuple[dict[TopicPartition, tuple[str | None, ...]], list[DiskOverflow]]:
    """The dirs of each changed partition's final replicas (`changed`: (partition, final
    replicas)), in the order given, and the new replicas that fit no dir (RULES), largest
    first."""
    dirs = _TargetDirs(cluster, limit)
    for p, final in changed:
        dirs.release(p, final)
    chosen: list[tuple[str | None, ...]] = [()] * len(changed)
    # Largest first (ties in the order given): the big replicas are the ones a dir's share must
    # be kept for; small ones then fill in.
    for i in sorted(range(len(changed)), key=lambda i: -(changed[i][0].size_bytes or 0)):
        p, final = changed[i]
        chosen[i] = dirs.choose(p, final)
    return {p.tp: choice for (p, _), choice in zip(changed, chosen)}, dirs.overflow


def describe_disk_overflow(cluster: Cluster, overflow: Sequence[DiskOverflow], limit: float | None) -> str:
    """One line: which replicas fit no dir, and each dir's figures against the limit (and
    whether it is cordoned)."""
    brokers = sorted({o.broker_id for o in overflow})
    parts = []
    for broker_id in brokers[:5]:
        broker = cluster.broker(broker_id)
        dirs = ", ".join(filter(None, map(_dir_figures, broker.online_log_dirs if broker else ())))
        mine = [o for o in overflow if o.broker_id == broker_id]
        parts.append(f"broker {broker_id}: {len(mine)} replica(s) ({sum(o.size_bytes for o in mine):,} B, e.g. "
                     f"{mine[0].tp}) fit none of its dirs [{dirs or 'no online dir'}]")
    more = f"; and {len(brokers) - 5} more brokers" if len(brokers) > 5 else ""
    if limit is None:  # no disk limit: the dirs left were cordoned
        return ("no plan finds an uncordoned log dir for every new replica: " + "; ".join(parts) + more
                + ": uncordon a dir (cordoned.log.dirs), or add brokers or disks")
    return (f"no plan keeps every log dir under the disk limit {limit:g}% (disk.max.usage.percent, at most "
            "disk.low.water.percent): " + "; ".join(parts) + more
            + ": free space, add brokers or disks, or raise disk.max.usage.percent (and disk.low.water.percent)")


def _dir_figures(d: LogDir) -> str:
    """A dir's figures against the limit, and whether it is cordoned; '' when it tells neither."""
    told = [f"{100 * d.used_bytes / d.total_bytes:.0f}% used ({d.used_bytes:,} of {d.total_bytes:,} B)"
            ] if d.total_bytes and d.used_bytes is not None else []
    told += ["cordoned"] if d.cordoned else []
    return f"{d.path} {', '.join(told)}" if told else ""
