"""Multi-level rack spread (the planner's hard constraint 3; KIP-879 style rack paths).

THE TREE. Rack ids are paths: `/dc1/r2/host3` has three levels, a flat `r1` has one. Internal
nodes are rack domains; brokers are the leaves and hang under the node their path names. A
broker without a rack hangs directly under the root, so it is a top-level domain of its own.
Paths of different depths may be mixed: a broker whose path is shorter than its neighbours'
(`/dc1` beside `/dc1/r1`) is its own domain at every level below its path; this is accepted and
reported as a warning, because it usually means a typo in `broker.rack`. Only eligible brokers
(alive, not draining, an online dir) belong to the tree: replicas may only go there.

THE RULE (water-filling). A node that must hold `m` replicas of a partition gives each child
(sub-domain or broker) either `min(capacity, q)` or `min(capacity, q + 1)` of them, where the
capacity of a child is the number of brokers under it (1 for a broker) and `q` is the largest
level with `sum(min(capacity, q)) <= m`; exactly `m - sum(min(capacity, q))` children get the
higher count. This is "as evenly as the tree allows": with `m` <= number of
children every replica sits in a different child; otherwise counts differ by at most one, except
where a child has too few brokers to take its share (then it is full and the rest spill over).
It applies recursively inside each child with the count that child got. At the broker level it
says "no broker twice". Because capacities are counted in brokers the rule can always be met
when the replication factor does not exceed the number of eligible brokers.

Invariants: the tree is immutable once built; its caches only remember answers to pure
questions about it (water-fill levels, "does this partial set fit"), so they never go stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from planning.model import Broker

ROOT = 0


@dataclass(frozen=True, eq=False)
class RackTree:
    """The failure-domain tree of the eligible brokers. Node 0 is the root."""

    node_labels: tuple[str, ...]  # "/dc1/r2" style, "" for the root
    node_parent: tuple[int, ...]  # -1 for the root
    node_children: tuple[tuple[int, ...], ...]  # child domains, sorted by label
    node_brokers: tuple[tuple[int, ...], ...]  # brokers hanging directly under the node
    node_capacity: tuple[int, ...]  # brokers in the whole subtree
    node_ancestry: tuple[tuple[int, ...], ...]  # root .. node inclusive
    broker_node: Mapping[int, int]  # broker id -> node it hangs under
    warnings: tuple[str, ...] = ()
    _levels: dict = field(default_factory=dict, repr=False)
    _fits: dict = field(default_factory=dict, repr=False)
    _boxes: dict = field(default_factory=dict, repr=False)

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.broker_node))

    @property
    def is_flat(self) -> bool:
        """No rack information at all: the constraint is only "no broker twice"."""
        return len(self.node_labels) == 1

    def waterfill(self, node: int, replicas: int) -> tuple[int, int]:
        """(q, extras) for `replicas` replicas at `node`: see the module docstring."""
        key = (node, replicas)
        cached = self._levels.get(key)
        if cached is not None:
            return cached
        caps = sorted(
            [self.node_capacity[c] for c in self.node_children[node]]
            + [1] * len(self.node_brokers[node])
        )
        level, used, remaining_children, index = 0, 0, len(caps), 0
        # Raise the level one step at a time while everyone below it still fits.
        while remaining_children:
            while index < len(caps) and caps[index] <= level:
                index += 1
                remaining_children -= 1
            if remaining_children == 0 or used + remaining_children > replicas:
                break
            used += remaining_children
            level += 1
        result = (level, replicas - used)
        self._levels[key] = result
        return result

    def ideal_counts(self, node: int, replicas: int) -> dict[object, tuple[int, int]]:
        """Per child of `node`: the (low, high) replica counts the rule allows.

        Keys are child node ids (int) and `("broker", id)` for brokers hanging at `node`.
        """
        level, extras = self.waterfill(node, replicas)
        step = 1 if extras else 0  # no extras: every child gets exactly its low count
        counts: dict[object, tuple[int, int]] = {}
        for child in self.node_children[node]:
            cap = self.node_capacity[child]
            counts[child] = (min(cap, level), min(cap, level + step))
        for broker_id in self.node_brokers[node]:
            counts[("broker", broker_id)] = (min(1, level), min(1, level + step))
        return counts

    def fits(self, hang_nodes: tuple[int, ...], replication_factor: int, pending: int = -1) -> bool:
        """Can distinct brokers hanging at `hang_nodes` (sorted) be completed to a spread set?

        `pending` names a node that holds one more replica not yet given to a child (used when
        choosing a domain top-down). A complete set (len == replication_factor) fits exactly
        when it satisfies the rule at every level.
        """
        key = (replication_factor, hang_nodes, pending)
        cached = self._fits.get(key)
        if cached is not None:
            return cached
        subtree: dict[int, int] = {}
        direct: dict[int, int] = {}
        for node in hang_nodes:
            direct[node] = direct.get(node, 0) + 1
            for ancestor in self.node_ancestry[node]:
                subtree[ancestor] = subtree.get(ancestor, 0) + 1
        if pending >= 0:
            for ancestor in self.node_ancestry[pending]:
                subtree[ancestor] = subtree.get(ancestor, 0) + 1
        result = (
            replication_factor <= self.node_capacity[ROOT]
            and self._subtree_fits(ROOT, replication_factor, subtree, direct)
        )
        self._fits[key] = result
        return result

    def _subtree_fits(self, node: int, replicas: int, subtree: dict, direct: dict) -> bool:
        placed = subtree.get(node, 0)
        if placed > replicas:
            return False
        if placed == 0:
            return True
        level, extras = self.waterfill(node, replicas)
        need_high = 0
        for child in self.node_children[node]:
            in_child = subtree.get(child, 0)
            if in_child == 0:
                continue
            cap = self.node_capacity[child]
            low, high = min(cap, level), min(cap, level + 1)
            if in_child > high:
                return False
            if in_child > low or not self._subtree_fits(child, low, subtree, direct):
                if high == low or not self._subtree_fits(child, high, subtree, direct):
                    return False
                need_high += 1
        if level == 0:  # every broker leaf here holding a replica takes one of the extras
            need_high += direct.get(node, 0)
        return need_high <= extras


def compute_rack_tree(brokers: Iterable[Broker]) -> RackTree:
    """Build the tree of the given (eligible) brokers. Deterministic: children sorted by label."""
    labels: list[str] = [""]
    parent: list[int] = [-1]
    children: list[list[int]] = [[]]
    hanging: list[list[int]] = [[]]
    index_of: dict[tuple[str, ...], int] = {(): ROOT}
    broker_node: dict[int, int] = {}
    depths: set[int] = set()
    for broker in sorted(brokers, key=lambda b: b.id):
        path = () if broker.rack is None or not broker.rack.strip("/ ") else broker.rack_path
        depths.add(len(path))
        node = ROOT
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            if prefix not in index_of:
                index_of[prefix] = len(labels)
                labels.append("/" + "/".join(prefix))
                parent.append(node)
                children.append([])
                hanging.append([])
                children[node].append(index_of[prefix])
            node = index_of[prefix]
        hanging[node].append(broker.id)
        broker_node[broker.id] = node
    warnings: list[str] = []
    racked = {d for d in depths if d > 0}
    if len(racked) > 1:
        warnings.append(
            f"rack paths have mixed depths {sorted(racked)}: brokers with shorter paths are "
            "their own domains below their last level"
        )
    if 0 in depths and racked:
        unracked = sorted(b for b, n in broker_node.items() if n == ROOT)
        warnings.append(f"brokers {unracked} have no rack: each is its own top-level domain")
    count = len(labels)
    capacity = [0] * count
    ancestry: list[tuple[int, ...]] = [()] * count
    for node in range(count):  # parents are created before children
        ancestry[node] = (ancestry[parent[node]] if parent[node] >= 0 else ()) + (node,)
    for node in range(count):
        for ancestor in ancestry[node]:
            capacity[ancestor] += len(hanging[node])
    order = sorted(range(count), key=lambda n: labels[n])
    rank = {n: i for i, n in enumerate(order)}
    return RackTree(
        node_labels=tuple(labels),
        node_parent=tuple(parent),
        node_children=tuple(tuple(sorted(c, key=rank.__getitem__)) for c in children),
        node_brokers=tuple(tuple(h) for h in hanging),
        node_capacity=tuple(capacity),
        node_ancestry=tuple(ancestry),
        broker_node=broker_node,
        warnings=tuple(warnings),
    )


def hang_key(tree: RackTree, replicas: Iterable[int]) -> tuple[int, ...]:
    """The sorted nodes the given (tree) brokers hang under: all `fits` needs to know."""
    return tuple(sorted(tree.broker_node[b] for b in replicas))


def satisfies_rack_spread(tree: RackTree, replicas: Sequence[int]) -> bool:
    """True when `replicas` are distinct tree brokers spread as the rule demands at every level."""
    if len(set(replicas)) != len(replicas) or any(b not in tree.broker_node for b in replicas):
        return False
    return tree.fits(hang_key(tree, replicas), len(replicas))


def compute_ideal_domain_counts(
    tree: RackTree, replication_factor: int
) -> dict[str, tuple[int, int]]:
    """For a partition with `replication_factor` replicas: the (low, high) count per domain label.

    The high count of a domain is used for its own children (an upper bound over all the ways
    the extras can fall). Brokers are not listed: each holds at most one replica.
    """
    result: dict[str, tuple[int, int]] = {"/": (replication_factor, replication_factor)}

    def visit(node: int, low: int, high: int) -> None:
        for child in tree.node_children[node]:
            child_low = tree.ideal_counts(node, low)[child][0]
            child_high = tree.ideal_counts(node, high)[child][1]
            result[tree.node_labels[child]] = (child_low, child_high)
            visit(child, child_low, child_high)

    visit(ROOT, replication_factor, replication_factor)
    return result


def compute_partition_boxes(
    tree: RackTree, replication_factor: int
) -> tuple[Mapping[int, tuple[int, int]], Mapping[int, tuple[int, int]]]:
    """The rule as intervals: per domain (node below the root) and per tree broker, the fewest
    and most replicas of one partition with `replication_factor` replicas it may hold.

    Top-down: a node that may hold `k` in [lo, hi] replicas gives each child the range of
    `ideal_counts` over every such `k`. A set of distinct tree brokers of that size satisfies the
    rule exactly when every domain's and broker's count lies in its box (checked exhaustively
    against `satisfies_rack_spread` in tests/planning/test_rack_spread.py): the rule becomes
    interval constraints on a laminar family, which a min-cost flow can carry
    (`planning.placement.topic_flow`). Cached per replication factor.
    """
    cached = tree._boxes.get(replication_factor)
    if cached is not None:
        return cached
    node_box: dict[int, tuple[int, int]] = {}
    broker_box: dict[int, tuple[int, int]] = {}
    pending = [(ROOT, replication_factor, replication_factor)]
    while pending:
        node, low, high = pending.pop()
        ranges = [tree.ideal_counts(node, k) for k in range(low, high + 1)]
        for key in ranges[0]:
            child_low = min(r[key][0] for r in ranges)
            child_high = max(r[key][1] for r in ranges)
            if isinstance(key, tuple):
                broker_box[key[1]] = (child_low, child_high)
            else:
                node_box[key] = (child_low, child_high)
                pending.append((key, child_low, child_high))
    result = (node_box, broker_box)
    tree._boxes[replication_factor] = result
    return result


def count_rack_violations(tree: RackTree, assignments: Iterable[Sequence[int]]) -> int:
    """How many replica lists break the rule (or use a broker outside the tree, or one twice)."""
    return sum(1 for replicas in assignments if not satisfies_rack_spread(tree, replicas))


def compute_closed_groups(tree: RackTree, replications: Iterable[int]) -> dict[int, int]:
    """Each tree broker's closed group: its deepest domain (the root at least) whose replicas of
    every partition are fixed by the rule, for every replication factor in `replications` (3 DCs
    and RF 3: each DC holds one of each). A closed group's bytes are the same for every plan
    that keeps the rule: data moves into or out of it only as the drains and heals force."""
    boxes = [compute_partition_boxes(tree, r)[0] for r in set(replications)]
    closed = [node == ROOT or all(node in box and box[node][0] == box[node][1] for box in boxes)
              for node in range(len(tree.node_labels))]
    return {b: max((n for n in tree.node_ancestry[node] if closed[n]), key=lambda n: len(tree.node_ancestry[n]))
            for b, node in tree.broker_node.items()}
