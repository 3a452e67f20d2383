"""One partition's mutable working copy while its topic is placed, and the rack checks on it.

`PartitionWork` is made from the frozen `PartitionFates` the placer hands over and never escapes
`planning.placement.topic_replicas.plan_topic_replicas` (the caller's values stay unchanged).

INVARIANTS of the working copy: `final` keeps its length and positions (a new replica takes
the position of the one it replaces); `members` holds the brokers of `final` the rack rule counts (kept
and new replicas, not pinned ones); once the slots are filled no broker is in `final` twice. `swap` is the one way a placed replica is
re-pointed, and it tells `take` of the replica lost and the one gained, so the topic's quota and
count books stay in step with the lists. `fits_after` is the check before every re-point: the
receiver is neither in the partition nor excluded from it, and the members after the change can
still be completed to a rack-spread set.
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.model import TopicPartition
from planning.placement.racks import RackTree
from planning.placement.replica_fates import PartitionFates


@dataclass
class PartitionWork:
    """Mutable working copy of one partition while its topic is planned (never escapes)."""

    tp: TopicPartition
    final: list  # broker id per position, None while the position is an open slot
    members: set  # the brokers in `final` the rack rule counts (kept and new, not pinned)
    kept: frozenset  # tree brokers that were there before and may stay
    excluded: frozenset  # brokers this partition must not be placed on (offline dir there)
    replication: int  # non-pinned positions: what the rack rule is applied to
    size: int
    fixed: bool  # an explicit target: never touched

    @classmethod
    def of(cls, p: PartitionFates) -> "PartitionWork":
        return cls(p.tp, list(p.replicas), set(p.kept), p.kept, p.excluded, p.replication, p.size, p.fixed)


def rack_key(tree: RackTree, members) -> tuple[int, ...]:
    """The sorted tree nodes of `members`: what `RackTree.fits` takes."""
    node_of = tree.broker_node
    return tuple(sorted([node_of[b] for b in members]))


def fits_after(tree: RackTree, w: PartitionWork, out: int, into: int) -> bool:
    """May `into` replace `out` in `w` (not there, not excluded, racks still completable)?"""
    if into in w.members or into in w.excluded:
        return False
    return tree.fits(rack_key(tree, (w.members - {out}) | {into}), w.replication)


def swap(w: PartitionWork, position: int, out: int, into: int, take) -> None:
    """Re-point `w`'s replica at `position` from `out` to `into`, and tell `take`."""
    w.final[position] = into
    w.members.discard(out)
    w.members.add(into)
    take(out, -1)
    take(into, +1)
