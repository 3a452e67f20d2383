"""Balance disk bytes, replica counts and leaders within tolerances, moving the fewest bytes.

BALANCED. Each eligible broker b has a fair share of the cluster's replica bytes and of its
replica count: `compute_ideal_shares` (the rack rule decides what each domain holds; inside a
domain the share is even, or in proportion to disk size when every broker reports it). b is
within tolerance t on a resource when `(1 - t) * share <= value <= (1 + t) * share` (bytes
rounded inwards, counts outwards to whole replicas); leaders likewise around `L / n`. A
draining broker's share is 0: all its replicas leave. Loose per-topic spread: no move raises a
topic's count on a broker above `share + max(slack, topic_spread * share)` (or above what it
already holds there).

HARD RULES (never broken): rack spread at every level (`planning.placement.racks`), no broker
twice in a partition, the replication factor kept, new replicas only on eligible brokers that
may host the partition; replicas on dead brokers or offline dirs are replaced (`Goal.heal`),
excluded topics only lose what must leave.

THE PLAN, in this order; everything in a canonical order (topics, partitions, broker ids):
1. Forced: rack repairs (followers first) and every replica that must leave, largest first,
   each to the broker that lowers the bound below most, then the least loaded for its share.
2. Balance (`Goal.rebalance`): while some broker is outside a band, take the one furthest out
   (relative to its share) and make the single move touching it — a replica out of it, or into
   it, within its closed rack group — that keeps every hard rule, strictly lowers the total
   violation, and minimises, in order: bytes moved plus the lower bound that remains plus the
   bytes it traps (left to fix on a broker with no replica room: only a swap can), so a byte
   that fixes an excess and a deficit at once wins; the replica-count bound that remains; harm
   to the other broker (one it also helps first; then one kept on its side of its share); the
   distance of the size from what the broker still needs per replica (its bytes to fix over its
   replicas to fix or its replica room: few large replicas, or many small ones, as needed).
   When no single move helps, a swap (a replica each way) may. Stop when every broker is within
   its bands or nothing helps. Then shrink: a moved replica goes back and a smaller one takes
   its place when no broker ends further outside its bands (largest first).
3. Exact (clusters within `EXACT_VARIABLES` placement variables): the same problem as an
   integer program (`planning.placement.milp`, CP-SAT, a deterministic budget), started from
   the greedy plan; its plan replaces the greedy's when it is better (bytes, then replicas),
   and its optimum or its bound is reported.
4. Leaders, by reordering replica lists only (no data moves): one min-cost flow puts every
   broker's leader count in its band with the fewest leadership changes (the kept leader
   first, then a replica already in sync).

THE BOUND (`bytes_moved_lower_bound`). A closed group is a rack domain whose every partition
has a fixed number of replicas in it (3 DCs, RF 3: each DC): its bytes never change, so what
arrives at its brokers is at least `max(deficits, departures + what it still lacks)`, with
departures at least the excesses (at least the smallest replica that covers an excess, when
the smaller ones together do not). The sum over groups bounds every plan that meets the bands;
the exact model's proven bound replaces it when higher. `gap_percent` is measured against it.

Pure: no I/O, no clock, no randomness; the same cluster gives the same plan.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from planning.model import Cluster, PartitionState, TopicPartition
from planning.placement.flows import FlowBuilder, solve_min_cost_flow
from planning.placement.leadership import _add_penalised
from planning.placement.milp import IntegerProgram, linear, solve_integer_program
from planning.placement.placer import (Goal, _initial_dir_headroom, _initial_dir_usage, _led_by, _offline_dirs,
                                       _partition_fates, _planning_tree, _target_dirs, compute_planning_cluster)
from planning.placement.quotas import compute_ideal_shares
from planning.placement.racks import ROOT, RackTree, compute_partition_boxes, satisfies_rack_spread

# The exact model runs when the cluster has at most this many (partition, broker) placement
# variables (about 100 partitions on 15 brokers), within a deterministic budget per solve.
EXACT_VARIABLES = 1_500
EXACT_DETERMINISTIC_SECONDS = 2.0
_SCAN = 32  # replicas looked at either side of a wanted size before giving up on a pair
_PROBED_DEFICITS = 4  # other brokers' needs used as wanted sizes for a replica out
_SWAP_SMALLS = 4  # the smallest replicas tried as the way back of a swap
_SHRINK_PASSES = 3
_COUNTERPARTS = 8  # peers looked at first for a move

REBALANCE = Goal(heal=False, rebalance=True)


@dataclass(frozen=True)
class Tolerances:
    """Relative bands around each broker's share (0.10: within ±10 %)."""

    disk: float = 0.10
    replicas: float = 0.10
    leaders: float = 0.10
    topic_spread: float | None = 0.25  # None: no per-topic limit
    topic_slack: int = 2


@dataclass(frozen=True)
class Spread:
    """One resource over the eligible brokers: coefficient of variation, max and min over the
    mean, and how many brokers are outside their band."""

    cv: float
    max_over_mean: float
    min_over_mean: float
    outside: int


@dataclass(frozen=True)
class ResourceReport:
    before: Spread
    after: Spread


@dataclass(frozen=True)
class BytesBalancePlan:
    targets: Mapping[TopicPartition, tuple[int, ...]]  # only partitions whose list changes
    target_log_dirs: Mapping[TopicPartition, tuple[str | None, ...]]
    bytes_moved: int
    bytes_moved_lower_bound: int
    bytes_moved_optimum: int | None  # set when proven fewest (the exact model's optimum)
    forced_bytes: int  # bytes of replicas that had to leave (dead, draining, offline, racks)
    replica_moves: int
    leader_changes: int
    within_tolerance: bool  # every eligible broker inside its disk, replica and leader bands
    tolerance_reachable: bool | None  # the exact model's verdict on disk and replicas; None: not run
    resources: Mapping[str, ResourceReport]  # "disk", "replicas", "leaders"
    disk_shares: Mapping[int, int]
    bytes_before: Mapping[int, int]
    bytes_after: Mapping[int, int]
    replicas_after: Mapping[int, int]
    leaders_after: Mapping[int, int]
    eligible_brokers: tuple[int, ...]
    rack_violations: int
    greedy_bytes_moved: int  # the greedy plan's, before the exact model
    greedy_within_tolerance: bool  # disk and replicas, before the exact model
    exact: str  # what the exact model did
    steps: int  # balance moves made by the greedy
    warnings: tuple[str, ...] = ()

    @property
    def gap_percent(self) -> float:
        bound = self.bytes_moved_lower_bound
        return 100.0 * (self.bytes_moved - bound) / bound if bound else 0.0


class _Part:
    """One partition while planning (scratch: mutated by the plan, never returned)."""

    __slots__ = ("state", "topic", "size", "original", "final", "replication", "movable", "excluded",
                 "members", "kept", "fixed")

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


def _fraction(value: float) -> Fraction:
    return Fraction(repr(value))


def _disk_weights(cluster: Cluster, brokers: Sequence[int]) -> dict[int, int] | None:
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


@dataclass(frozen=True)
class Bands:
    """Per eligible broker: its shares and the [low, high] a balanced plan keeps it in."""

    disk_share: Mapping[int, Fraction]
    replica_share: Mapping[int, Fraction]
    disk: Mapping[int, tuple[int, int]]
    replicas: Mapping[int, tuple[int, int]]


def compute_bands(cluster: Cluster, tolerances: Tolerances = Tolerances(), goal: Goal = REBALANCE) -> Bands:
    """The bands `plan_bytes_balance` balances to (module docstring, BALANCED)."""
    cluster = compute_planning_cluster(cluster, goal)
    tree = _planning_tree(cluster, goal)
    brokers = tuple(sorted(tree.broker_node))
    parts, topics = _parts(cluster, goal, tree, brokers)
    model = _Model(cluster, tree, brokers, parts, topics, tolerances)
    return Bands(MappingProxyType(dict(model.byte_share)), MappingProxyType(dict(model.count_share)),
                 MappingProxyType({b: (model.blo[b], model.bhi[b]) for b in brokers}),
                 MappingProxyType({b: (model.clo[b], model.chi[b]) for b in brokers}))


# --- the plan ----------------------------------------------------------------------------------


def plan_bytes_balance(cluster: Cluster, tolerances: Tolerances = Tolerances(), goal: Goal = REBALANCE,
                       exact_variables: int = EXACT_VARIABLES,
                       exact_seconds: float = EXACT_DETERMINISTIC_SECONDS) -> BytesBalancePlan:
    """The plan for `goal` on `cluster` (see the module docstring). `goal.explicit_targets`
    are not supported here (the count planner, `plan_placement`, takes them)."""
    if goal.explicit_targets:
        raise ValueError("plan_bytes_balance takes no explicit targets")
    cluster = compute_planning_cluster(cluster, goal)
    tree = _planning_tree(cluster, goal)
    brokers = tuple(sorted(tree.broker_node))
    warnings = list(tree.warnings)
    parts, topics = _parts(cluster, goal, tree, brokers)
    model = _Model(cluster, tree, brokers, parts, topics, tolerances)
    bound = model.closed_form_bound()
    forced = model.repair_racks()
    forced += sum(part.size * part.final.count(None) for part in parts)
    ledger = model.ledger()
    unplaced = _place_slots(model, ledger)
    steps = _balance(model, ledger) if goal.rebalance and brokers else 0
    if goal.rebalance and brokers:
        _shrink(model, ledger)
    greedy_finals = [tuple(part.final) for part in parts]
    greedy_bytes = sum(_new_bytes(part, final) for part, final in zip(parts, greedy_finals))
    greedy_within = model.within_bands(ledger.load, ledger.count)

    optimum, reachable, exact = None, None, "not run (no rebalance)"
    finals = greedy_finals
    if goal.rebalance and brokers:
        outcome = _exact(model, greedy_finals, exact_variables, exact_seconds)
        exact = outcome.note
        reachable = outcome.reachable
        if outcome.bound is not None:
            bound = max(bound, outcome.bound)
        if outcome.finals is not None:
            greedy_key = (not greedy_within, greedy_bytes, _moves(parts, greedy_finals))
            exact_key = (False, outcome.bytes, _moves(parts, outcome.finals))
            if exact_key < greedy_key:
                finals = outcome.finals
                exact += "; its plan replaced the greedy's"
            elif outcome.optimal:
                exact += "; the greedy's plan was as good"
            if outcome.optimal:  # the plan kept is within the bands with the fewest bytes
                optimum = outcome.bytes
    for part, final in zip(parts, finals):
        part.final = list(final)
    leaders = _choose_leaders(model, goal.rebalance)
    return _report(model, goal, parts, leaders, bound, optimum, forced, reachable, exact, steps,
                   greedy_bytes, greedy_within, unplaced, warnings)


def _parts(cluster: Cluster, goal: Goal, tree: RackTree, brokers) -> tuple[list[_Part], list[str]]:
    eligible = frozenset(brokers)
    offline = _offline_dirs(cluster)
    parts: list[_Part] = []
    topics: list[str] = []
    for topic in sorted(cluster.topics, key=lambda t: t.name):
        index = len(topics)
        topics.append(topic.name)
        movable = goal.rebalance and topic.name not in goal.excluded_topics
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            w = _partition_fates(p, cluster, {}, eligible, offline, goal.heal)
            final = list(w.replicas)
            members = {b for b in final if b is not None and b in tree.broker_node}
            parts.append(_Part(p, index, final, w.replication, movable, w.excluded, members, p.size_bytes or 0))
    return parts, topics


def _new_bytes(part: _Part, final: Sequence[int | None]) -> int:
    return part.size * sum(1 for b in final if b is not None and b not in part.original)


def _moves(parts: Sequence[_Part], finals) -> int:
    return sum(sum(1 for b in final if b is not None and b not in part.original) for part, final in zip(parts, finals))


class _Model:
    """The fixed data of one plan: brokers, shares, bands, rack groups, topic limits."""

    def __init__(self, cluster: Cluster, tree: RackTree, brokers: tuple[int, ...], parts: list[_Part],
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
        zero = {b: Fraction(0) for b in brokers}
        weights = _disk_weights(cluster, brokers)
        self.byte_share = compute_ideal_shares(tree, bytes_histogram, weights) if brokers else zero
        self.count_share = compute_ideal_shares(tree, count_histogram) if brokers else zero
        disk, replicas = _fraction(tolerances.disk), _fraction(tolerances.replicas)
        self.blo = {b: math.ceil((1 - disk) * s) for b, s in self.byte_share.items()}
        self.bhi = {b: math.floor((1 + disk) * s) for b, s in self.byte_share.items()}
        self.clo = {b: math.floor((1 - replicas) * s) for b, s in self.count_share.items()}
        self.chi = {b: math.ceil((1 + replicas) * s) for b, s in self.count_share.items()}
        self.bshare_floor = {b: math.floor(s) for b, s in self.byte_share.items()}
        self.cshare_floor = {b: math.floor(s) for b, s in self.count_share.items()}
        self._groups(bytes_histogram)
        self._topic_limits()

    def _groups(self, bytes_histogram) -> None:
        """Closed rack groups: each broker's deepest domain whose replicas per partition are fixed,
        and what every group holds once the plan is done (bytes and replicas)."""
        tree = self.tree
        boxes = {r: compute_partition_boxes(tree, r)[0] for r in self.replications}
        closed = [ROOT == node or all(node in box and box[node][0] == box[node][1] for box in boxes.values())
                  for node in range(len(tree.node_labels))]
        self.group = {b: max((n for n in tree.node_ancestry[tree.broker_node[b]] if closed[n]),
                             key=lambda n: len(tree.node_ancestry[n])) for b in self.brokers}
        self.group_members: dict[int, list[int]] = {}
        for b in self.brokers:
            self.group_members.setdefault(self.group[b], []).append(b)
        # What each group's node holds in the end, less what the closed groups nested in it hold.
        inside = {g: 0 for g in self.group_members}
        self.group_bytes = {g: 0 for g in self.group_members}
        self.group_count = {g: 0 for g in self.group_members}
        for part in self.parts:
            r = part.replication
            if r <= 0:
                continue
            for g in self.group_members:
                held = r if g == ROOT else boxes[r][g][0]
                self.group_bytes[g] += held * part.size
                self.group_count[g] += held
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
        cache: dict[tuple, dict[int, Fraction]] = {}
        slack, fraction = self.tolerances.topic_slack, _fraction(spread)
        self.topic_cap = {}
        for topic, histogram in histograms.items():
            key = tuple(sorted(histogram.items()))
            shares = cache.get(key)
            if shares is None:
                shares = cache[key] = compute_ideal_shares(self.tree, histogram)
            for b, s in shares.items():
                cap = math.floor(s + max(slack, fraction * s))
                self.topic_cap[(topic, b)] = max(cap, self.topic_count.get((topic, b), 0))

    def may_take(self, topic: int, broker: int, extra: int = 1) -> bool:
        if self.topic_cap is None:
            return True
        return self.topic_count.get((topic, broker), 0) + extra <= self.topic_cap.get((topic, broker), 0)

    def fits(self, part: _Part, leaving: int | None, coming: int) -> bool:
        """`coming` may join `part` in place of `leaving` (None: into an open slot)."""
        if coming in part.members or coming in part.excluded:
            return False
        tree = self.tree
        if tree.is_flat:
            return True
        nodes = [tree.broker_node[b] for b in part.members if b != leaving]
        nodes.append(tree.broker_node[coming])
        return tree.fits(tuple(sorted(nodes)), part.replication)

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
                self.topic_count[(part.topic, victim)] -= 1
                dropped += part.size
        return dropped

    def loads(self) -> tuple[dict[int, int], dict[int, int]]:
        load = {b: 0 for b in self.brokers}
        count = {b: 0 for b in self.brokers}
        for part in self.parts:
            for b in part.members:
                load[b] += part.size
                count[b] += 1
        return load, count

    def ledger(self) -> "_Ledger":
        load, count = self.loads()
        return _Ledger(self, load, count)

    def within_bands(self, load: Mapping[int, int], count: Mapping[int, int]) -> bool:
        return all(self.blo[b] <= load[b] <= self.bhi[b] and self.clo[b] <= count[b] <= self.chi[b]
                   for b in self.brokers)

    def closed_form_bound(self) -> int:
        """THE BOUND (module docstring), from the replicas that may stay."""
        load = {b: 0 for b in self.brokers}
        leaving: dict[int, list[int]] = {b: [] for b in self.brokers}
        for part in self.parts:
            for b in part.kept:
                load[b] += part.size
                if part.movable:
                    leaving[b].append(part.size)
        bound = 0
        for g, members in self.group_members.items():
            held = sum(load[b] for b in members)
            deficit = sum(max(0, self.blo[b] - load[b]) for b in members)
            departures = 0
            for b in members:
                excess = load[b] - self.bhi[b]
                if excess <= 0:
                    continue
                smaller = sum(s for s in leaving[b] if s < excess)
                larger = [s for s in leaving[b] if s >= excess]
                departures += min(larger) if smaller < excess and larger else excess
            bound += max(deficit, departures + self.group_bytes[g] - held)
        return bound


class _Ledger:
    """Per broker bytes and replicas, per closed group the sums the bound reads, updated move by
    move; and per broker its movable replicas sorted by size."""

    def __init__(self, model: _Model, load: dict[int, int], count: dict[int, int]) -> None:
        self.m = model
        self.load, self.count = load, count
        n = max(1, len(model.brokers))
        self.bunit = max(1, sum(model.byte_share.values()) // n if model.brokers else 1)
        self.cunit = max(1, sum(model.count_share.values()) // n if model.brokers else 1)
        self.g_held = {g: 0 for g in model.group_members}
        self.g_exc = dict.fromkeys(model.group_members, 0)
        self.g_def = dict.fromkeys(model.group_members, 0)
        self.gc_held = dict.fromkeys(model.group_members, 0)
        self.gc_exc = dict.fromkeys(model.group_members, 0)
        self.gc_def = dict.fromkeys(model.group_members, 0)
        for b in model.brokers:
            g = model.group[b]
            self.g_held[g] += load[b]
            self.g_exc[g] += max(0, load[b] - model.bhi[b])
            self.g_def[g] += max(0, model.blo[b] - load[b])
            self.gc_held[g] += count[b]
            self.gc_exc[g] += max(0, count[b] - model.chi[b])
            self.gc_def[g] += max(0, model.clo[b] - count[b])
        self.lb_total = self.bound()
        self.cb_total = self.count_bound()
        self.items: dict[int, list[tuple[int, int]]] = {b: [] for b in model.brokers}
        for index, part in enumerate(model.parts):
            if part.movable:
                for b in part.members:
                    self.items[b].append((part.size, index))
        for values in self.items.values():
            values.sort()

    def _group_bound(self, g: int, held: int, exc: int, deficit: int) -> int:
        return max(deficit, exc + self.m.group_bytes[g] - held)

    def _group_count_bound(self, g: int, held: int, exc: int, deficit: int) -> int:
        return max(deficit, exc + self.m.group_count[g] - held)

    def violation(self, b: int, load: int, count: int) -> int:
        m = self.m
        bytes_out = max(0, load - m.bhi[b]) + max(0, m.blo[b] - load)
        count_out = max(0, count - m.chi[b]) + max(0, m.clo[b] - count)
        return bytes_out * self.cunit + count_out * self.bunit

    def relative_violation(self, b: int) -> float:
        m = self.m
        load, count = self.load[b], self.count[b]
        bytes_out = max(0, load - m.bhi[b]) + max(0, m.blo[b] - load)
        count_out = max(0, count - m.chi[b]) + max(0, m.clo[b] - count)
        return max(bytes_out / max(1, m.bshare_floor[b]), count_out / max(1, m.cshare_floor[b]))

    def evaluate(self, s: int | None, d: int | None, x: int) -> tuple[int, int, int, int]:
        """For `x` bytes (one replica) moving from s to d (None: from outside or to outside the
        tree): (bytes bound after plus the bytes it traps, replica bound after, change of s's
        violation, of d's). Trapped: bytes a broker must still shed (receive) when it has no
        replica left to give (no room to take one): only a swap can fix them, which moves at
        least as much again."""
        m = self.m
        changes: dict[int, list[int]] = {}
        deltas = [0, 0]
        trap = 0
        for side, b, sign in ((0, s, -1), (1, d, 1)):
            if b is None:
                continue
            l0, c0 = self.load[b], self.count[b]
            l1, c1 = l0 + sign * x, c0 + sign
            hi, lo, chi, clo = m.bhi[b], m.blo[b], m.chi[b], m.clo[b]
            e0 = l0 - hi if l0 > hi else 0
            e1 = l1 - hi if l1 > hi else 0
            f0 = lo - l0 if l0 < lo else 0
            f1 = lo - l1 if l1 < lo else 0
            ce0 = c0 - chi if c0 > chi else 0
            ce1 = c1 - chi if c1 > chi else 0
            cf0 = clo - c0 if c0 < clo else 0
            cf1 = clo - c1 if c1 < clo else 0
            change = changes.get(m.group[b])
            if change is None:
                change = changes[m.group[b]] = [0, 0, 0, 0, 0, 0]
            change[0] += sign * x
            change[1] += e1 - e0
            change[2] += f1 - f0
            change[3] += sign
            change[4] += ce1 - ce0
            change[5] += cf1 - cf0
            deltas[side] = (e1 + f1 - e0 - f0) * self.cunit + (ce1 + cf1 - ce0 - cf0) * self.bunit
            if e1 and c1 <= clo:
                trap += e1
            elif f1 and c1 >= chi:
                trap += f1
            if e0 and c0 <= clo:
                trap -= e0
            elif f0 and c0 >= chi:
                trap -= f0
        lb = self.lb_total + trap
        cb = self.cb_total
        for g, (dh, de, dd, dch, dce, dcd) in changes.items():
            held, exc, deficit, target = self.g_held[g], self.g_exc[g], self.g_def[g], m.group_bytes[g]
            lb += max(deficit + dd, exc + de + target - held - dh) - max(deficit, exc + target - held)
            held, exc, deficit, target = self.gc_held[g], self.gc_exc[g], self.gc_def[g], m.group_count[g]
            cb += max(deficit + dcd, exc + dce + target - held - dch) - max(deficit, exc + target - held)
        return lb, cb, deltas[0], deltas[1]

    def bound(self) -> int:
        return sum(self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g]) for g in self.g_held)

    def count_bound(self) -> int:
        return sum(self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g]) for g in self.g_held)

    def shift(self, b: int, x: int, sign: int) -> None:
        m = self.m
        g = m.group[b]
        l0, c0 = self.load[b], self.count[b]
        l1, c1 = l0 + sign * x, c0 + sign
        self.lb_total -= self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g])
        self.cb_total -= self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g])
        self.g_held[g] += sign * x
        self.g_exc[g] += max(0, l1 - m.bhi[b]) - max(0, l0 - m.bhi[b])
        self.g_def[g] += max(0, m.blo[b] - l1) - max(0, m.blo[b] - l0)
        self.gc_held[g] += sign
        self.gc_exc[g] += max(0, c1 - m.chi[b]) - max(0, c0 - m.chi[b])
        self.gc_def[g] += max(0, m.clo[b] - c1) - max(0, m.clo[b] - c0)
        self.lb_total += self._group_bound(g, self.g_held[g], self.g_exc[g], self.g_def[g])
        self.cb_total += self._group_count_bound(g, self.gc_held[g], self.gc_exc[g], self.gc_def[g])
        self.load[b], self.count[b] = l1, c1

    def move(self, index: int, s: int | None, d: int) -> None:
        """Apply: partition `index`'s replica on s (None: an open slot) goes to d."""
        m = self.m
        part = m.parts[index]
        position = part.final.index(s)
        part.final[position] = d
        if s is not None:
            part.members.discard(s)
            self.shift(s, part.size, -1)
            m.topic_count[(part.topic, s)] -= 1
            if part.movable:
                values = self.items[s]
                del values[bisect.bisect_left(values, (part.size, index))]
        part.members.add(d)
        self.shift(d, part.size, 1)
        m.topic_count[(part.topic, d)] = m.topic_count.get((part.topic, d), 0) + 1
        if part.movable:
            bisect.insort(self.items[d], (part.size, index))


# --- 1. forced moves -------------------------------------------------------------------------------


def _place_slots(model: _Model, ledger: _Ledger) -> list[TopicPartition]:
    """Fill every open slot, largest replica first; the partitions that could not be completed
    (too few eligible brokers for the rack rule) go back to their original replicas."""
    slots = sorted(((part.size, index) for index, part in enumerate(model.parts) for b in part.final if b is None),
                   key=lambda s: (-s[0], s[1]))
    unplaced: list[TopicPartition] = []
    for size, index in slots:
        part = model.parts[index]
        if None not in part.final:
            continue
        best, best_key = None, None
        for d in model.brokers:
            if not model.fits(part, None, d):
                continue
            lb, cb, _, _ = ledger.evaluate(None, d, size)
            key = (not model.may_take(part.topic, d), lb, cb,
                   (ledger.load[d] + size) / max(1, model.bshare_floor[d]),
                   (ledger.count[d] + 1) / max(1, model.cshare_floor[d]), d)
            if best_key is None or key < best_key:
                best, best_key = d, key
        if best is None:
            unplaced.append(part.state.tp)
            _restore(model, ledger, index)
            continue
        ledger.move(index, None, best)
    return unplaced


def _restore(model: _Model, ledger: _Ledger, index: int) -> None:
    """Give a partition that cannot be completed its original replicas back (it stays as it is)."""
    part = model.parts[index]
    for b in list(part.members):
        position = part.final.index(b)
        part.final[position] = None
        part.members.discard(b)
        ledger.shift(b, part.size, -1)
        model.topic_count[(part.topic, b)] -= 1
        if part.movable:
            values = ledger.items[b]
            del values[bisect.bisect_left(values, (part.size, index))]
    part.final = list(part.original)
    part.movable = False
    part.fixed = True
    for b in part.final:
        if b in model.tree.broker_node:
            part.members.add(b)
            ledger.shift(b, part.size, 1)
            model.topic_count[(part.topic, b)] = model.topic_count.get((part.topic, b), 0) + 1


# --- 2. balance --------------------------------------------------------------------------------------


def _balance(model: _Model, ledger: _Ledger) -> int:
    steps = 0
    budget = 2 * sum(len(p.members) for p in model.parts) + 100
    stuck: set[int] = set()
    outside = {b: ledger.relative_violation(b) for b in model.brokers}  # kept for the brokers moves touch
    while steps < budget:
        worst, worst_value = None, 0.0
        for b, value in outside.items():
            if value > worst_value and b not in stuck:
                worst, worst_value = b, value
        if worst is None:
            break
        move = _best_move(model, ledger, worst)
        if move is not None:
            _, index, s, d = move
            ledger.move(index, s, d)
            touched = (s, d)
        else:
            swap = _best_swap(model, ledger, worst)
            if swap is None:
                stuck.add(worst)
                continue
            _, (i1, s1, d1), (i2, s2, d2) = swap
            ledger.move(i1, s1, d1)
            ledger.move(i2, s2, d2)
            touched = (s1, d1)
        for b in touched:
            outside[b] = ledger.relative_violation(b)
        steps += 1
        stuck.clear()
    return steps


def _needs(ledger: _Ledger, b: int) -> tuple[int, int, int, int]:
    """(bytes over, replicas over, bytes under, replicas under) of broker b."""
    m = ledger.m
    load, count = ledger.load[b], ledger.count[b]
    return (max(0, load - m.bhi[b]), max(0, count - m.chi[b]),
            max(0, m.blo[b] - load), max(0, m.clo[b] - count))


def _nearest(values: list[tuple[int, int]], wanted: float, accept) -> list[tuple[int, int]]:
    """The largest entry of `values` at most `wanted` and the smallest above it that `accept`
    takes (each within `_SCAN` entries of the wanted size)."""
    found = []
    start = bisect.bisect_right(values, (wanted, 1 << 62))
    for i in range(start - 1, max(-1, start - 1 - _SCAN), -1):
        if accept(values[i]):
            found.append(values[i])
            break
    for i in range(start, min(len(values), start + _SCAN)):
        if accept(values[i]):
            found.append(values[i])
            break
    return found


def _move_key(model: _Model, ledger: _Ledger, index: int, s: int, d: int, b: int, wanted: float):
    """The ranking of one move (smaller is better), or None when it does not lower the total
    violation (module docstring, step 2)."""
    part = model.parts[index]
    x = part.size
    lb, cb, ds, dd = ledger.evaluate(s, d, x)
    if ds + dd >= 0:
        return None
    if s == b:
        other_delta = dd
        other_side = ledger.load[d] + x <= model.bshare_floor[d] and ledger.count[d] + 1 <= model.cshare_floor[d] + 1
    else:
        other_delta = ds
        other_side = ledger.load[s] - x >= model.bshare_floor[s] and ledger.count[s] - 1 >= model.cshare_floor[s]
    harm = 0 if other_delta < 0 else (1 if other_side else 2)
    return (x + lb, cb, harm, abs(x - wanted), s, d, index)


def _best_move(model: _Model, ledger: _Ledger, b: int):
    """The best single move into or out of broker b: (key, partition index, from, to) or None.
    Looks at the `_COUNTERPARTS` most useful peers first (those outside their bands the other
    way, then the furthest from their share the other way), and at all of them when none of
    those has a move."""
    peers = [c for c in model.group_members[model.group[b]] if c != b]
    if len(peers) <= _COUNTERPARTS:
        return _best_move_among(model, ledger, b, peers, peers)

    def relative(c: int) -> float:
        return ledger.load[c] / max(1, model.bshare_floor[c])

    receivers = sorted(peers, key=lambda c: (ledger.load[c] >= model.blo[c] and ledger.count[c] >= model.clo[c],
                                             relative(c), c))[:_COUNTERPARTS]
    donors = sorted(peers, key=lambda c: (ledger.load[c] <= model.bhi[c] and ledger.count[c] <= model.chi[c],
                                          -relative(c), c))[:_COUNTERPARTS]
    best = _best_move_among(model, ledger, b, receivers, donors)
    return best if best is not None else _best_move_among(model, ledger, b, peers, peers)


def _best_move_among(model: _Model, ledger: _Ledger, b: int, receivers: list[int], donors: list[int]):
    over_bytes, over_count, under_bytes, under_count = _needs(ledger, b)
    best = None
    parts = model.parts
    if over_bytes or over_count:
        # What it still needs per replica, and at least what its replica room allows.
        wanted = max(over_bytes / max(1, over_count), over_bytes / max(1, ledger.count[b] - model.clo[b]))
        deficits = sorted((ledger.load[d] - model.blo[d], d) for d in receivers if ledger.load[d] < model.blo[d])
        probes = sorted({wanted, 0} | {min(wanted, -gap) for gap, _ in deficits[:_PROBED_DEFICITS]})
        values = ledger.items[b]
        for d in receivers:
            def accept(item, d=d):
                part = parts[item[1]]
                return model.may_take(part.topic, d) and model.fits(part, b, d)

            seen = set()
            for probe in probes:
                for item in _nearest(values, probe, accept):
                    if item in seen:
                        continue
                    seen.add(item)
                    key = _move_key(model, ledger, item[1], b, d, b, wanted)
                    if key is not None and (best is None or key < best[0]):
                        best = (key, item[1], b, d)
    if under_bytes or under_count:
        wanted = max(under_bytes / max(1, under_count), under_bytes / max(1, model.chi[b] - ledger.count[b]))

        def accept(item):
            part = parts[item[1]]
            return model.may_take(part.topic, b) and model.fits(part, donor, b)

        for donor in donors:
            excess = ledger.load[donor] - model.bhi[donor]
            probes = {wanted, 0}
            if excess > 0:
                probes |= {excess, min(wanted, excess)}
            seen = set()
            for probe in sorted(probes):
                for item in _nearest(ledger.items[donor], probe, accept):
                    if item in seen:
                        continue
                    seen.add(item)
                    key = _move_key(model, ledger, item[1], donor, b, b, wanted)
                    if key is not None and (best is None or key < best[0]):
                        best = (key, item[1], donor, b)
    return best


def _best_swap(model: _Model, ledger: _Ledger, b: int):
    """When no single move helps b on bytes: one replica from a giver to a taker and a smaller one
    back (b is one of them), whose difference covers b's bytes need and lowers the total
    violation. The smallest replicas go back, each against the smallest one out that covers
    it: the fewest bytes for the net change."""
    over_bytes, _, under_bytes, _ = _needs(ledger, b)
    need = over_bytes or under_bytes
    if not need:
        return None
    parts = model.parts
    peers = [c for c in model.group_members[model.group[b]] if c != b]
    best = None
    for peer in peers:
        giver, taker = (b, peer) if over_bytes else (peer, b)
        smalls = []
        for item in ledger.items[taker][:_SCAN]:
            part = parts[item[1]]
            if model.may_take(part.topic, giver) and model.fits(part, taker, giver):
                smalls.append(item)
                if len(smalls) == _SWAP_SMALLS:
                    break
        bigs = ledger.items[giver]
        for small in smalls:
            start = bisect.bisect_left(bigs, (small[0] + need, -1))
            for big in bigs[start:start + _SCAN]:
                part = parts[big[1]]
                if big[1] == small[1] or not (model.may_take(part.topic, taker) and model.fits(part, giver, taker)):
                    continue
                before = sum(ledger.violation(c, ledger.load[c], ledger.count[c]) for c in (giver, taker))
                ledger.move(big[1], giver, taker)
                lb, cb, ds, dd = ledger.evaluate(taker, giver, small[0])
                after = sum(ledger.violation(c, ledger.load[c], ledger.count[c]) for c in (giver, taker)) + ds + dd
                ledger.move(big[1], taker, giver)
                if after < before:
                    key = (big[0] + small[0] + lb, cb, giver, taker, big[1], small[1])
                    if best is None or key < best[0]:
                        best = (key, (big[1], giver, taker), (small[1], taker, giver))
                break
    return best


def _shrink(model: _Model, ledger: _Ledger) -> int:
    """Once the greedy is done: a replica moved from s to d goes back to s and a smaller one of a
    peer in d's group moves to d instead, when no broker touched ends further outside its bands
    and the bytes fall (largest moves first, until a pass finds nothing). Returns the bytes saved."""
    parts, tree = model.parts, model.tree
    saved = 0
    for _ in range(_SHRINK_PASSES):
        changes = []
        for index, part in enumerate(parts):
            if not part.movable:
                continue
            new = [b for b in part.final if b not in part.original]
            gone = [b for b in part.original if b not in part.final and b in tree.broker_node]
            if len(new) == 1 and len(gone) == 1:
                changes.append((part.size, index, gone[0], new[0]))
        changes.sort(key=lambda c: (-c[0], c[1]))
        found = 0
        for x, index, s, d in changes:
            part = parts[index]
            if d not in part.members or s in part.members:  # changed earlier in this pass
                continue
            if not (model.may_take(part.topic, s) and model.fits(part, d, s)):
                continue
            touched = {s, d}
            before = {b: ledger.violation(b, ledger.load[b], ledger.count[b]) for b in touched}
            ledger.move(index, d, s)
            best = None
            need = max(0, model.blo[d] - ledger.load[d])
            for peer in model.group_members[model.group[d]]:
                if peer == d:
                    continue
                values = ledger.items[peer]
                start = bisect.bisect_left(values, (need, -1))
                for y, other in values[start:start + _SCAN]:
                    if y >= x or (best is not None and y >= best[0]):
                        break
                    candidate = parts[other]
                    if other == index or not (model.may_take(candidate.topic, d) and model.fits(candidate, peer, d)):
                        continue
                    old = sum(before.values()) + (0 if peer in touched else
                                                  ledger.violation(peer, ledger.load[peer], ledger.count[peer]))
                    lb, cb, dp, dd = ledger.evaluate(peer, d, y)
                    now = sum(ledger.violation(b, ledger.load[b], ledger.count[b]) for b in touched | {peer}) + dp + dd
                    if now <= old:
                        best = (y, other, peer)
                    break
            if best is None:
                ledger.move(index, s, d)
                continue
            y, other, peer = best
            ledger.move(other, peer, d)
            saved += x - y
            found += 1
        if not found:
            break
    return saved


# --- 3. the exact model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _ExactOutcome:
    note: str
    finals: list | None = None
    bytes: int | None = None
    optimal: bool = False
    bound: int | None = None
    reachable: bool | None = None


def _exact(model: _Model, greedy_finals, budget: int, seconds: float) -> _ExactOutcome:
    """The disk and replica bands as an integer program: fewest bytes, then fewest replicas."""
    tree, parts = model.tree, model.parts
    most = len(model.brokers) * sum(1 for part in parts if part.replication > 0 and not part.fixed)
    if most > 4 * budget:  # far over: not worth counting exactly
        return _ExactOutcome(f"not run (up to {most} placement variables, over the budget of {budget})")
    candidates: list[list[int]] = []
    variables = 0
    boxes = {r: compute_partition_boxes(tree, r) for r in model.replications}
    constant_bytes = {b: 0 for b in model.brokers}
    constant_count = {b: 0 for b in model.brokers}
    constant_topic: dict[tuple[int, int], int] = {}
    for part in parts:
        if part.replication <= 0 or part.fixed:
            for b in part.members:
                constant_bytes[b] += part.size
                constant_count[b] += 1
                constant_topic[(part.topic, b)] = constant_topic.get((part.topic, b), 0) + 1
            candidates.append([])
            continue
        broker_box = boxes[part.replication][1]
        allowed = [b for b in model.brokers if b not in part.excluded and broker_box.get(b, (0, 1))[1] >= 1]
        candidates.append(allowed)
        variables += len(allowed)
    if variables > budget:
        return _ExactOutcome(f"not run ({variables} placement variables, over the budget of {budget})")
    lowers, uppers, hint = [], [], []
    var: list[dict[int, int]] = []
    for part, allowed, final in zip(parts, candidates, greedy_finals):
        index = {}
        box = boxes.get(part.replication, ({}, {}))[1]
        stays = part.kept & set(final) if not part.movable else set()
        for b in allowed:
            index[b] = len(lowers)
            low, high = box.get(b, (0, 1))
            lowers.append(1 if b in stays else low)
            uppers.append(min(1, high))
            hint.append(1 if b in final else 0)
        var.append(index)
    constraints = []
    for part, index in zip(parts, var):
        if not index:
            continue
        constraints.append(linear(list(index.values()), [1] * len(index), part.replication, part.replication))
        node_box = boxes[part.replication][0]
        for node, (low, high) in node_box.items():
            inside = [v for b, v in index.items() if node in tree.node_ancestry[tree.broker_node[b]]]
            if low > 0 or high < len(inside):
                constraints.append(linear(inside, [1] * len(inside), low, high))
    by_broker: dict[int, list[tuple[int, int]]] = {b: [] for b in model.brokers}
    by_topic_broker: dict[tuple[int, int], list[int]] = {}
    for part, index in zip(parts, var):
        for b, v in index.items():
            by_broker[b].append((v, part.size))
            by_topic_broker.setdefault((part.topic, b), []).append(v)
    for b, entries in by_broker.items():
        vs = [v for v, _ in entries]
        held, count = constant_bytes[b], constant_count[b]
        if model.blo[b] - held > 0 or model.bhi[b] - held < sum(s for _, s in entries):
            constraints.append(linear(vs, [s for _, s in entries], model.blo[b] - held, model.bhi[b] - held))
        if model.clo[b] - count > 0 or model.chi[b] - count < len(vs):
            constraints.append(linear(vs, [1] * len(vs), model.clo[b] - count, model.chi[b] - count))
    if model.topic_cap is not None:
        planned: dict[tuple[int, int], int] = {}
        for part, final in zip(parts, greedy_finals):
            for b in final:
                if b in tree.broker_node:
                    planned[(part.topic, b)] = planned.get((part.topic, b), 0) + 1
        for key, vs in by_topic_broker.items():
            # The greedy's own counts are allowed too (a forced replica may have had to pass the
            # cap), so that its plan is a solution and the bound covers it.
            cap = max(model.topic_cap.get(key, len(vs)), planned.get(key, 0)) - constant_topic.get(key, 0)
            if cap < len(vs):
                constraints.append(linear(vs, [1] * len(vs), 0, cap))
    new = [(v, part.size) for part, index in zip(parts, var) for b, v in index.items() if b not in part.original]
    program = IntegerProgram(tuple(lowers), tuple(uppers), tuple(constraints),
                             tuple(v for v, _ in new), tuple(s for _, s in new), tuple(hint))
    first = solve_integer_program(program, seconds)
    if first.status == "infeasible":
        return _ExactOutcome("no plan meets the disk and replica bands (proven)", reachable=False)
    if first.status == "unknown":
        return _ExactOutcome("the budget ran out before a plan within the bands was found", bound=first.bound)
    fewest_bytes = first.objective
    second = solve_integer_program(
        IntegerProgram(tuple(lowers), tuple(uppers),
                       tuple(constraints) + (linear([v for v, _ in new], [s for _, s in new], 0, fewest_bytes),),
                       tuple(v for v, _ in new), tuple([1] * len(new)), first.values), seconds)
    values = second.values if second.values else first.values
    finals = []
    for part, index, final in zip(parts, var, greedy_finals):
        chosen = {b for b, v in index.items() if values[v]}
        finals.append(_arrange(part, chosen, final, tree) if index else final)
    optimal = first.status == "optimal"
    note = (f"{variables} variables: " + ("optimal" if optimal else "best found within the budget")
            + f" ({fewest_bytes:,} B)")
    return _ExactOutcome(note, finals, fewest_bytes, optimal, first.bound, True)


def _arrange(part: _Part, chosen: set[int], template: Sequence[int | None], tree: RackTree) -> tuple:
    """`chosen` (tree brokers) as a replica list: a pinned position (a broker outside the tree
    that `template` keeps) and an original member that stays keep their position; the new
    members fill the other positions in id order."""
    incoming = iter(sorted(chosen - set(part.original)))
    final, used = [], set()
    for original, planned in zip(part.original, template):
        if planned is not None and planned not in tree.broker_node:
            final.append(planned)
        elif original in chosen and original not in used:
            final.append(original)
            used.add(original)
        else:
            final.append(next(incoming))
    return tuple(final)


# --- 4. leaders ----------------------------------------------------------------------------------


def _choose_leaders(model: _Model, rebalance: bool) -> list[int | None]:
    """Every partition's leader (its final list's first entry): each broker's count inside its
    band, with the fewest changes, by one min-cost flow (module docstring, step 4)."""
    brokers = model.brokers
    column = {b: j for j, b in enumerate(brokers)}
    n = len(brokers)
    leaders: list[int | None] = []
    fixed = np.zeros(max(1, n), dtype=np.int64)
    rows: list[int] = []
    members_row, members_column, members_cost = [], [], []
    for index, part in enumerate(model.parts):
        original = part.original[0] if part.original else None
        eligible = [b for b in part.final if b in column]
        stays = original in column and original in part.final
        if not eligible or (original is not None and original not in column and original in part.final):
            leaders.append(part.final[0] if part.final else None)  # nothing to choose, or a pinned leader
            continue
        if len(eligible) == 1 or (stays and (not rebalance or not part.movable)):
            leader = original if stays else eligible[0]
            leaders.append(leader)
            fixed[column[leader]] += 1
            continue
        leaders.append(None)
        row = len(rows)
        rows.append(index)
        for b in eligible:
            members_row.append(row)
            members_column.append(column[b])
            members_cost.append(0 if b == original else 1 if b in part.kept else 2)
    if rows:
        total = len(rows) + int(fixed.sum())
        share = Fraction(total, n)
        tolerance = _fraction(model.tolerances.leaders)
        low = np.array([math.floor((1 - tolerance) * share)] * n, dtype=np.int64) - fixed
        high = np.array([math.ceil((1 + tolerance) * share)] * n, dtype=np.int64) - fixed
        builder = FlowBuilder()
        first_row = builder.add_nodes(len(rows), supply=1)
        first_broker = builder.add_nodes(n)
        sink = builder.add_node(-len(rows))
        r = np.asarray(members_row, dtype=np.int64)
        c = np.asarray(members_column, dtype=np.int64)
        first_arc = builder.add_arcs(first_row + r, first_broker + c, 0, 1, np.asarray(members_cost, dtype=np.int64))
        capacity = np.bincount(c, minlength=n)
        _add_penalised(builder, first_broker + np.arange(n), np.full(n, sink), low, high, capacity,
                       2 * len(rows) + 1)
        solution = solve_min_cost_flow(builder.problem())
        used = np.flatnonzero(solution.flows[first_arc:first_arc + len(r)])
        for arc in used.tolist():
            leaders[rows[members_row[arc]]] = brokers[members_column[arc]]
    return leaders


# --- the report ----------------------------------------------------------------------------------


def _spread(values: Mapping[int, int], low: Mapping[int, int], high: Mapping[int, int]) -> Spread:
    numbers = list(values.values())
    if not numbers:
        return Spread(0.0, 0.0, 0.0, 0)
    mean = sum(numbers) / len(numbers)
    if mean == 0:
        return Spread(0.0, 0.0, 0.0, 0)
    variance = sum((v - mean) ** 2 for v in numbers) / len(numbers)
    outside = sum(1 for b, v in values.items() if v < low[b] or v > high[b])
    return Spread(math.sqrt(variance) / mean, max(numbers) / mean, min(numbers) / mean, outside)


def _report(model: _Model, goal: Goal, parts: list[_Part], leaders, bound, optimum, forced, reachable, exact,
            steps, greedy_bytes, greedy_within, unplaced, warnings) -> BytesBalancePlan:
    cluster, tree, brokers = model.cluster, model.tree, model.brokers
    in_tree = set(brokers)
    bytes_before = {b: 0 for b in brokers}
    count_before = {b: 0 for b in brokers}
    leaders_before = {b: 0 for b in brokers}
    bytes_after = {b: 0 for b in brokers}
    count_after = {b: 0 for b in brokers}
    leaders_after = {b: 0 for b in brokers}
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    dirs: dict[TopicPartition, tuple[str | None, ...]] = {}
    usage = _initial_dir_usage(cluster)
    headroom = _initial_dir_headroom(cluster, goal.disk_max_usage_percent)
    overflow: list = []
    moved = moves = changes = violations = 0
    for part, leader in zip(parts, leaders):
        for b in part.original:
            if b in in_tree:
                bytes_before[b] += part.size
                count_before[b] += 1
        if part.original and part.original[0] in in_tree:
            leaders_before[part.original[0]] += 1
        final = _led_by(tuple(part.final), leader)
        for b in final:
            if b in in_tree:
                bytes_after[b] += part.size
                count_after[b] += 1
        if final and final[0] in in_tree:
            leaders_after[final[0]] += 1
        if final == tuple(part.original):
            continue
        tp = part.state.tp
        targets[tp] = final
        new = sum(1 for b in final if b not in part.original)
        moves += new
        moved += new * part.size
        changes += bool(final and part.original and final[0] != part.original[0])
        if not satisfies_rack_spread(tree, [b for b in final if b in in_tree]):
            violations += 1
        dirs[tp] = _target_dirs(part.state, final, cluster, usage, headroom, overflow)
    leader_total = sum(leaders_after.values())
    n = max(1, len(brokers))
    tolerance = _fraction(model.tolerances.leaders)
    leader_low = {b: math.floor((1 - tolerance) * Fraction(leader_total, n)) for b in brokers}
    leader_high = {b: math.ceil((1 + tolerance) * Fraction(leader_total, n)) for b in brokers}
    resources = {
        "disk": ResourceReport(_spread(bytes_before, model.blo, model.bhi), _spread(bytes_after, model.blo, model.bhi)),
        "replicas": ResourceReport(_spread(count_before, model.clo, model.chi),
                                   _spread(count_after, model.clo, model.chi)),
        "leaders": ResourceReport(_spread(leaders_before, leader_low, leader_high),
                                  _spread(leaders_after, leader_low, leader_high)),
    }
    within = all(r.after.outside == 0 for r in resources.values())
    if unplaced:
        warnings.append(f"{len(unplaced)} partitions cannot be completed on the eligible brokers and stay "
                        f"as they are: {', '.join(map(str, unplaced[:5]))}")
    for name, resource in resources.items():
        if resource.after.outside:
            warnings.append(f"{resource.after.outside} brokers end outside their {name} band")
    if overflow:
        warnings.append(f"{len(overflow)} new replicas fit no dir under the disk limit")
    return BytesBalancePlan(
        targets=MappingProxyType(targets), target_log_dirs=MappingProxyType(dirs), bytes_moved=moved,
        bytes_moved_lower_bound=bound,
        bytes_moved_optimum=optimum, forced_bytes=forced, replica_moves=moves, leader_changes=changes,
        within_tolerance=within, tolerance_reachable=reachable, resources=MappingProxyType(resources),
        disk_shares=MappingProxyType({b: math.floor(s) for b, s in model.byte_share.items()}),
        bytes_before=MappingProxyType(bytes_before), bytes_after=MappingProxyType(bytes_after),
        replicas_after=MappingProxyType(count_after), leaders_after=MappingProxyType(leaders_after),
        eligible_brokers=brokers, rack_violations=violations, greedy_bytes_moved=greedy_bytes,
        greedy_within_tolerance=greedy_within, exact=exact, steps=steps, warnings=tuple(warnings))
