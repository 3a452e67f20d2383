"""The fixed data of one bytes-balance plan (`planning.placement.bytes_balance`): the partitions
as the plan sees them, each broker's shares and bands, the closed rack groups and the per-topic
limits, the closed-form lower bound on the bytes any plan within the bands moves, and the even
edges (the bands' slack side brought in while that bound stays) that guide the greedy.

Pure: values in, fresh values out (a `Part`'s lists are the plan's scratch, never returned).
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Collection, Mapping, Sequence

from planning.model import Cluster, PartitionState
from planning.placement.goal import Goal
from planning.placement.replica_fates import compute_offline_dirs, compute_partition_fates
from planning.placement.quotas import compute_ideal_shares
from planning.placement.racks import ROOT, RackTree, compute_closed_groups, compute_partition_boxes


@dataclass(frozen=True)
class Tolerances:
    """Relative bands around each broker's share (0.10: within ±10 %)."""

    disk: float = 0.10
    replicas: float = 0.10
    leaders: float = 0.10
    topic_spread: float | None = 0.25  # None: no per-topic limit
    topic_slack: int = 2
    bytes_in: float = 0.10
    network_out: float = 0.10
    # The disk band's lower edge for the brokers that hold nothing before the plan (new ones),
    # when a byte budget widens `disk` past the operator's band (`bytes_budget`); None: `disk`.
    new_disk: float | None = None
    # EVEN EDGES (`compute_even_edges`): in each rack group, the side of the disk band that has
    # slack is tightened as long as the group's bound stays; False: the bands as set.
    even_edges: bool = True



class Part:
    """One partition while planning (scratch: mutated by the plan, never returned)."""

    __slots__ = ("state", "topic", "size", "original", "final", "replication", "movable", "excluded",
                 "members", "kept", "fixed", "hang")

    def __init__(self, state: PartitionState, topic: int, final: list, replication: int, movable: bool,
                 excluded: frozenset[int], members: set[int], size: int) -> None:
        self.state = state
        self.topic = topic
        self.size = size
        self.original = state.replicas
        self.final = final  # broker per position, None while a slot is open
        self.replication = replication  # positions in the rack tree (pinned ones are not)
        self.movable = movable
        self.excluded = excluded
        self.members = members  # tree brokers in `final`
        self.kept = frozenset(members)  # tree brokers that could stay (before rack repair)
        self.fixed = False  # left as it is: it cannot be completed on the eligible brokers
        self.hang: tuple[int, ...] | None = None  # members' tree nodes, sorted; None: to work out again

    def changed(self) -> None:
        """Its members changed: what was derived from them is worked out again when asked."""
        self.hang = None


def as_fraction(value: float) -> Fraction:
    return Fraction(repr(value))


def disk_weights(cluster: Cluster, brokers: Sequence[int]) -> dict[int, int] | None:
    """Each broker's disk size (its online dirs' volumes) when every one reports it and they
    differ; None (even shares) otherwise."""
    sizes = {}
    for b in brokers:
        broker = cluster.broker(b)
        dirs = broker.online_log_dirs if broker is not None else ()
        if not dirs or any(not d.total_bytes for d in dirs):
            return None
        sizes[b] = sum(d.total_bytes for d in dirs)
    return sizes if len(set(sizes.values())) > 1 else None


def compute_parts(cluster: Cluster, goal: Goal, tree: RackTree, brokers) -> tuple[list[Part], list[str]]:
    eligible = frozenset(brokers)
    offline = compute_offline_dirs(cluster)
    parts: list[Part] = []
    topics: list[str] = []
    # The common case of `compute_partition_fates` (every replica stays where it may: no
    # offline dir, no broker that cannot host, distinct eligible replicas) worked out here
    # without its record: a third of the model's build at 300k partitions.
    plain = not offline and not cluster.any_cannot_host
    nothing: frozenset[int] = frozenset()
    for topic in sorted(cluster.topics, key=lambda t: t.name):
        index = len(topics)
        topics.append(topic.name)
        movable = goal.rebalance and topic.name not in goal.excluded_topics
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            replicas = p.replicas
            if plain and not p.offline_replicas and eligible.issuperset(replicas):
                members = set(replicas)
                if len(members) == len(replicas):  # brokers of `eligible` are the tree's
                    parts.append(Part(p, index, list(replicas), len(replicas), movable, nothing, members,
                                      p.size_bytes or 0))
                    continue
            w = compute_partition_fates(p, cluster, {}, eligible, offline, goal.heal)
            final = list(w.replicas)
            members = {b for b in final if b is not None and b in tree.broker_node}
            parts.append(Part(p, index, final, w.replication, movable, w.excluded, members, p.size_bytes or 0))
    return parts, topics


def count_new_bytes(part: Part, final: Sequence[int | None]) -> int:
    return part.size * sum(1 for b in final if b is not None and b not in part.original)


def count_moves(parts: Sequence[Part], finals) -> int:
    return sum(sum(1 for b in final if b is not None and b not in part.original) for part, final in zip(parts, finals))


class BalanceModel:
    """The fixed data of one plan: brokers, shares, bands, rack groups, topic limits."""

    def __init__(self, cluster: Cluster, tree: RackTree, brokers: tuple[int, ...], parts: list[Part],
                 topics: list[str], tolerances: Tolerances) -> None:
        self.cluster, self.tree, self.brokers, self.parts, self.topics = cluster, tree, brokers, parts, topics
        self.tolerances = tolerances
        bytes_histogram: dict[int, int] = {}
        count_histogram: dict[int, int] = {}
        for part in parts:
            if part.replication > 0:
                bytes_histogram[part.replication] = bytes_histogram.get(part.replication, 0) + part.size
                count_histogram[part.replication] = count_histogram.get(part.replication, 0) + 1
        self.replications = sorted(count_histogram)
        self.count_histogram = count_histogram
        zero = {b: Fraction(0) for b in brokers}
        weights = disk_weights(cluster, brokers)
        self.byte_share = compute_ideal_shares(tree, bytes_histogram, weights) if brokers else zero
        self.count_share = compute_ideal_shares(tree, count_histogram) if brokers else zero
        replicas = as_fraction(tolerances.replicas)
        held: set[int] = set()
        for part in parts:
            held.update(part.original)
        self.new_brokers = frozenset(b for b in brokers if b not in held)  # they hold nothing yet
        self.blo, self.bhi = compute_disk_bands(self.byte_share, tolerances.disk, self.new_brokers,
                                                tolerances.new_disk)
        self.clo = {b: math.floor((1 - replicas) * s) for b, s in self.count_share.items()}
        self.chi = {b: math.ceil((1 + replicas) * s) for b, s in self.count_share.items()}
        self.bshare_floor = {b: math.floor(s) for b, s in self.byte_share.items()}
        self.cshare_floor = {b: math.floor(s) for b, s in self.count_share.items()}
        self._fits: dict[tuple, bool] = {}  # `fits`'s answers (pure questions about the tree)
        self._groups(bytes_histogram)
        self.band_edges = (self.blo, self.bhi)  # the tolerance's, whatever EVEN EDGES guides the moves by
        self._topic_limits()

    def _groups(self, bytes_histogram) -> None:
        """Closed rack groups: each broker's deepest domain whose replicas per partition are fixed,
        and what every group holds once the plan is done (bytes and replicas)."""
        tree = self.tree
        boxes = {r: compute_partition_boxes(tree, r)[0] for r in self.replications}
        closed_groups = compute_closed_groups(tree, self.replications)
        self.group = {b: closed_groups[b] for b in self.brokers}
        self.group_members: dict[int, list[int]] = {}
        for b in self.brokers:
            self.group_members.setdefault(self.group[b], []).append(b)
        # What each group's node holds in the end, less what the closed groups nested in it hold.
        # A closed group holds a fixed number of replicas of each partition, which depends on
        # the partition's replication alone: sums per replication (the histograms), not a walk
        # over the partitions per group.
        inside = {g: 0 for g in self.group_members}
        self.group_bytes = {g: 0 for g in self.group_members}
        self.group_count = {g: 0 for g in self.group_members}
        for r, count in self.count_histogram.items():
            for g in self.group_members:
                held = r if g == ROOT else boxes[r][g][0]
                self.group_bytes[g] += held * bytes_histogram[r]
                self.group_count[g] += held * count
        nodes = sorted(self.group_members, key=lambda n: -len(tree.node_ancestry[n]))  # deepest first
        totals_bytes, totals_count = dict(self.group_bytes), dict(self.group_count)
        for g in nodes:
            parent = next((n for n in reversed(tree.node_ancestry[g][:-1]) if n in inside), None)
            if parent is not None:
                self.group_bytes[parent] -= totals_bytes[g]
                self.group_count[parent] -= totals_count[g]

    def _topic_limits(self) -> None:
        """Per (topic, broker): the most replicas of the topic a move may leave on the broker."""
        self.topic_count: dict[tuple[int, int], int] = {}
        for part in self.parts:
            for b in part.members:
                key = (part.topic, b)
                self.topic_count[key] = self.topic_count.get(key, 0) + 1
        self.topic_cap: dict[tuple[int, int], int] | None = None
        spread = self.tolerances.topic_spread
        if spread is None or not self.brokers:
            return
        histograms: dict[int, dict[int, int]] = {}
        for part in self.parts:
            if part.replication > 0:
                h = histograms.setdefault(part.topic, {})
                h[part.replication] = h.get(part.replication, 0) + 1
        # Topics of the same shape (replicas per partition) share their caps: computed once each
        # (exact fractions are slow, and a big cluster has thousands of topics of a few shapes).
        cache: dict[tuple, list[tuple[int, int]]] = {}
        slack, fraction = self.tolerances.topic_slack, as_fraction(spread)
        self.topic_cap = {}
        count = self.topic_count
        for topic, histogram in histograms.items():
            key = tuple(sorted(histogram.items()))
            caps = cache.get(key)
            if caps is None:
                caps = cache[key] = [(b, math.floor(s + max(slack, fraction * s)))
                                     for b, s in compute_ideal_shares(self.tree, histogram).items()]
            for b, cap in caps:
                held = count.get((topic, b), 0)
                self.topic_cap[(topic, b)] = cap if cap >= held else held

    def may_take(self, topic: int, broker: int, extra: int = 1) -> bool:
        caps = self.topic_cap
        if caps is None:
            return True
        key = (topic, broker)
        return self.topic_count.get(key, 0) + extra <= caps.get(key, 0)

    def fits(self, part: Part, leaving: int | None, coming: int) -> bool:
        """`coming` may join `part` in place of `leaving` (None: into an open slot).

        The rack rule only sees the tree nodes the members hang at: the answer is remembered per
        (replication, members' nodes, leaving's node, coming's node), a few hundred keys on a
        rack tree, so the balance loop's thousands of questions a step cost a lookup each."""
        members = part.members
        if coming in members or coming in part.excluded:
            return False
        tree = self.tree
        if tree.is_flat:
            return True
        node = tree.broker_node
        hang = part.hang
        if hang is None:
            hang = part.hang = tuple(sorted(node[b] for b in members))
        key = (part.replication, hang, node[leaving] if leaving in members else -1, node[coming])
        verdict = self._fits.get(key)
        if verdict is None:
            nodes = list(hang)
            if key[2] >= 0:
                nodes.remove(key[2])
            nodes.append(key[3])
            nodes.sort()
            verdict = self._fits[key] = tree.fits(tuple(nodes), part.replication)
        return verdict

    def repair_racks(self) -> int:
        """Open slots until every partition's kept members can be completed rack-spread (the
        placer's rule: followers before the leader, later positions first). Returns the bytes of
        the replicas dropped."""
        tree = self.tree
        dropped = 0
        if tree.is_flat:
            return 0
        for part in self.parts:
            while part.members and not tree.fits(tuple(sorted(tree.broker_node[b] for b in part.members)),
                                                 part.replication):
                leader = part.final[0]
                candidates = sorted(part.members, key=lambda b: (b == leader, -part.final.index(b)))
                victim = candidates[0]
                for b in candidates:
                    rest = part.members - {b}
                    if tree.fits(tuple(sorted(tree.broker_node[m] for m in rest)), part.replication):
                        victim = b
                        break
                part.final[part.final.index(victim)] = None
                part.members.discard(victim)
                part.changed()
                self.topic_count[(part.topic, victim)] -= 1
                dropped += part.size
        return dropped

    def adopt(self, finals) -> None:
        """Make `finals` (one list per part) the plan's: members and per-topic counts follow."""
        node = self.tree.broker_node
        self.topic_count = {}
        for part, final in zip(self.parts, finals):
            part.final = list(final)
            part.members = {b for b in part.final if b is not None and b in node}
            part.changed()
            for b in part.members:
                self.topic_count[(part.topic, b)] = self.topic_count.get((part.topic, b), 0) + 1

    def loads(self) -> tuple[dict[int, int], dict[int, int]]:
        load = {b: 0 for b in self.brokers}
        count = {b: 0 for b in self.brokers}
        for part in self.parts:
            for b in part.members:
                load[b] += part.size
                count[b] += 1
        return load, count

    def within_bands(self, load: Mapping[int, int], count: Mapping[int, int]) -> bool:
        return all(self.blo[b] <= load[b] <= self.bhi[b] and self.clo[b] <= count[b] <= self.chi[b]
                   for b in self.brokers)

    def guide_by_even_edges(self, bound: DiskBound) -> None:
        """EVEN EDGES (`compute_even_edges`, from the model's `bound`) in place of the tolerance's
        disk bands, when the tolerances ask for them, until `restore_bands`."""
        if self.tolerances.even_edges and self.brokers:
            self.blo, self.bhi = compute_even_edges(bound, self.byte_share, *self.band_edges)

    def restore_bands(self) -> bool:
        """The tolerance's disk bands back in place of EVEN EDGES' (`compute_even_edges`), once the
        moves they guide are made; whether they differed."""
        if (self.blo, self.bhi) == self.band_edges:
            return False
        self.blo, self.bhi = self.band_edges
        return True

    def closed_form_bound(self) -> int:
        """THE BOUND (`planning.placement.bytes_balance`) for the model's own disk bands."""
        return DiskBound(self).at(self.blo, self.bhi)


def compute_disk_bands(byte_share: Mapping[int, Fraction], tolerance: float, new: Collection[int] = (),
                       new_tolerance: float | None = None) -> tuple[dict[int, int], dict[int, int]]:
    """Each broker's disk band [low, high] for `tolerance`: bytes rounded inwards; the brokers
    in `new` have their low edge at `new_tolerance` instead, when one is given."""
    disk = as_fraction(tolerance)
    low = {b: math.ceil((1 - disk) * s) for b, s in byte_share.items()}
    if new_tolerance is not None:
        floor = as_fraction(new_tolerance)
        low.update({b: math.ceil((1 - floor) * byte_share[b]) for b in new if b in byte_share})
    return low, {b: math.floor((1 + disk) * s) for b, s in byte_share.items()}


class DiskBound:
    """THE BOUND (`planning.placement.bytes_balance`) from the replicas that may stay, for any
    disk bands: what it reads of the parts (each broker's kept bytes, the sizes that may leave
    it) is gathered once, and a broker's sizes are sorted with their running sums the first time
    a band puts it above its top, so each band asked costs a bisection per broker, not a walk
    over the partitions (`bytes_budget` asks for many; a plan asks once, and pays the sorting
    only for the brokers above their band)."""

    def __init__(self, model: BalanceModel) -> None:
        # The groups' figures, not the model: a budget's search keeps this while it plans.
        self.group_members, self.group_bytes = model.group_members, model.group_bytes
        self.new_brokers = model.new_brokers
        load = {b: 0 for b in model.brokers}
        leaving: dict[int, list[int]] = {b: [] for b in model.brokers}
        for part in model.parts:
            for b in part.kept:
                load[b] += part.size
                if part.movable:
                    leaving[b].append(part.size)
        self.load, self.leaving = load, leaving
        self.sorted: dict[int, tuple[list[int], list[int]]] = {}  # broker -> (sizes, running sums)

    def _sizes(self, b: int) -> tuple[list[int], list[int]]:
        found = self.sorted.get(b)
        if found is None:
            sizes = sorted(self.leaving[b])
            found = self.sorted[b] = (sizes, [0, *itertools.accumulate(sizes)])
        return found

    def at(self, blo: Mapping[int, int], bhi: Mapping[int, int]) -> int:
        """The fewest bytes any plan putting every broker within [blo, bhi] moves."""
        return sum(max(self.sides(g, blo, bhi)) for g in self.group_members)

    def sides(self, g, blo: Mapping[int, int], bhi: Mapping[int, int]) -> tuple[int, int]:
        """Group `g`'s two bounds: the bytes its brokers below their low edges must receive, and
        the bytes that must arrive in it for those above their high edges to shed theirs (what
        leaves them, and what the group must gain or lose in all). Its bound is the larger."""
        load = self.load
        members = self.group_members[g]
        held = sum(load[b] for b in members)
        deficit = sum(max(0, blo[b] - load[b]) for b in members)
        departures = 0
        for b in members:
            excess = load[b] - bhi[b]
            if excess <= 0:
                continue
            # The sizes below the excess together, and the smallest at or above it: one
            # replica that covers the excess alone, when the smaller ones do not.
            sizes, sums = self._sizes(b)
            below = bisect.bisect_left(sizes, excess)
            smaller = sums[below]
            departures += sizes[below] if smaller < excess and below < len(sizes) else excess
        return deficit, departures + self.group_bytes[g] - held


EVEN_TIGHTEST = Fraction(1, 100)  # an edge is never tightened closer than 1 % to the share
_EVEN_GRID = 1000  # the levels tried, in thousandths of the share


def compute_even_edges(bound: DiskBound, byte_share: Mapping[int, Fraction], blo: Mapping[int, int],
                       bhi: Mapping[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    """EVEN EDGES. A band's bound is, per rack group, the larger of what its brokers below the
    band must receive and what must arrive for those above it to shed theirs. The smaller side
    is slack: when brokers are added, the new ones must receive far more than the old ones
    above the band shed, and the bytes they receive may come from any old broker within it. So
    the slack side's edges are brought in, to one level of the share for the whole group (a
    level on a grid of thousandths, never closer than `EVEN_TIGHTEST`), as far as the group's
    bound stays where it is: the bytes that must move anyway are then taken from the fullest
    brokers (or given to the emptiest), what water-filling does, and the plan moving them ends
    evener. An edge is only ever tightened, never loosened; the bound is unchanged by
    construction (a lower bound still: no plan within the tighter bands moves less)."""
    low, high = dict(blo), dict(bhi)
    for g, members in bound.group_members.items():
        deficit, arrivals = bound.sides(g, low, high)
        if deficit == arrivals:
            continue
        raise_low = arrivals > deficit  # the low edges have slack; else the high ones

        def edges(k: int, members=members, raise_low=raise_low) -> tuple[dict[int, int], dict[int, int]]:
            level = Fraction(k, _EVEN_GRID)
            if raise_low:
                return {**low, **{b: max(low[b], math.ceil((1 - level) * byte_share[b])) for b in members}}, high
            return low, {**high, **{b: min(high[b], math.floor((1 + level) * byte_share[b])) for b in members}}

        # The group's bound stays at its binding side: true at the grid's top (the edges as they
        # are) and, as k grows (edges looser), never stops being true.
        binding = max(deficit, arrivals)
        lo, hi = int(EVEN_TIGHTEST * _EVEN_GRID), _EVEN_GRID
        while lo < hi:
            middle = (lo + hi) // 2
            if max(bound.sides(g, *edges(middle))) <= binding:
                hi = middle
            else:
                lo = middle + 1
        if max(bound.sides(g, *edges(lo))) <= binding:
            low, high = edges(lo)
    return low, high
