"""Balance disk bytes, replica counts and leaders within tolerances, moving the fewest bytes.

BALANCED. Each eligible broker b has a fair share of the cluster's replica bytes, of its
replica count and, once traffic is measured, of its bytes in and network out (`traffic_moves`): `compute_ideal_shares` (the rack rule decides what each domain holds; inside a
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
   each to the broker that lowers the bound below most, then the least loaded for its share
   (in replicas for one below 1/20,000 of a broker's byte share, else in bytes: a drain's many
   small replicas no longer pile onto the emptiest broker, `bytes_moves.place_slots`).
2. Balance (`Goal.rebalance`): while some broker is outside a band, take the one furthest out
   (relative to its share) and make the single move touching it — a replica out of it, or into
   it, within its closed rack group — that keeps every hard rule, strictly lowers the total
   violation, and minimises, in order: bytes moved plus the lower bound that remains plus the
   bytes it traps (left to fix on a broker with no replica room: only a swap can), so a byte
   that fixes an excess and a deficit at once wins; the replica-count bound that remains; harm
   to the other broker (one it also helps first; then one kept on its side of its share); the
   other broker's load over its share (SPREAD: the fullest gives first, the emptiest takes
   first, so the bytes a plan must move anyway lower the disk spread most, at no cost in
   bytes); the distance of the size from what the broker still needs per replica (its bytes to
   fix over its replicas to fix or its replica room: few large replicas, or many small ones,
   as needed), or, when it takes replicas it needs on both bands (a new broker), from what
   suits the giver (WATER: its bytes above its byte share per replica above its replica share,
   so each giver comes down towards its shares on both, and the old brokers end level). When no single move helps, a swap (a replica each way) may. A step's move is
   followed by more moves relieving the same broker (up to `bytes_moves._BATCH` in all) while
   it is still outside, each as a step would rank it on one pair and no worse than the step's
   move on the first terms (bytes plus bound plus trapped bytes added, count bound added,
   harm); the other broker is the step's while it stays near the peers' water level, then the
   next peer in line: ranking a handful of counterparts is the bulk of a step. Stop when every
   broker is within its bands or nothing helps. Then shrink: a moved replica goes back and a
   smaller one takes its place when no broker ends further outside its bands (largest first).
   EVEN EDGES (`Tolerances.even_edges`, on by default; `bytes_model.compute_even_edges`): steps
   1-2 aim at disk bands whose slack side is tightened, per closed group, as far as the group's
   bound stays the same: where new brokers must receive more than the old ones above the band
   shed, the high edges come down to the level that sheds exactly that, so the bytes that must
   move anyway come off the fullest brokers and the disks end at the spread floor for those
   bytes (bench (d): disk CV 0.058 -> 0.053, floor 0.052, same bytes). Everything after
   (the exact model, 2b, 2c, the report, `within_tolerance`) keeps to the tolerance's bands.
3. Exact (clusters within `EXACT_VARIABLES` placement variables, `bytes_exact`): every band as
   an integer program (`planning.placement.milp`, CP-SAT, a deterministic budget: disk, bytes
   in and network out once measured, counts), started from the greedy plan; when no plan meets
   them all, the closest, level by level in that order (`bytes_exact`, CLOSEST). Its plan
   replaces the greedy's when it is closer to the bands (`compute_violations`, the same measure
   for both) or as close for fewer bytes, then replicas; its optimum or its bound is reported
   (when no plan meets the bands, the bound is the exact model's for plans as close as its own).
2b. Traffic, once measured (`planning.placement.traffic_moves`): moves and same-size swaps put
   every broker's bytes in within its band, never at the cost of the disk or count bands.
2c. Even counts, on the greedy's plan (the exact model's is its own optimum): the smallest
   replicas move from the broker with the most replicas for its share to the one with the
   fewest, in each closed group, while no broker leaves its disk or bytes-in band and the
   moves add at most `EVEN_COUNTS_SHARE` of the bytes the plan moves and as many replicas as
   it moves (`bytes_moves.even_counts`; a replica the plan already moves goes on to the taker
   at no byte more). A plan that moves nothing evens nothing; one that
   adds brokers ends with counts a replica apart where small replicas are common.
4. Leaders, by reordering replica lists only (no data moves): one min-cost flow puts every
   broker's leader count in its band with the fewest leadership changes (the kept leader
   first, then a replica already in sync), solved on brokers rather than partitions
   (`planning.placement.leader_bands`: the same optimum); then, when that changes leaders,
   the tightest of a few finer bands (even, a quarter, half, three quarters of the tolerance)
   whose changes stay within `EVEN_LEADERS_FACTOR` times the band's and which keeps in the band
   every broker the band put there (plans choosing up to `EVEN_LEADERS_ROWS` leaders); then (4b)
   leaderships handed over or traded put network out (followers' fetches and consumers' reads)
   within its band. A partition whose load alone is above every broker's band (a hot
   partition's leader) is named in the warnings: the broker carrying it stays outside whatever
   the plan.

THE BOUND (`bytes_moved_lower_bound`). A closed group is a rack domain whose every partition
has a fixed number of replicas in it (3 DCs, RF 3: each DC): its bytes never change, so what
arrives at its brokers is at least `max(deficits, departures + what it still lacks)`, with
departures at least the excesses (at least the smallest replica that covers an excess, when
the smaller ones together do not). The sum over groups bounds every plan that meets the bands;
the exact model's proven bound replaces it when higher. `gap_percent` is measured against it
(step 2c's bytes included: at most `EVEN_COUNTS_SHARE` of it).

Modules: `bytes_model` (shares, bands, rack groups, topic limits, the bound), `bytes_ledger`
(the loads, move by move), `bytes_moves` (steps 1 and 2), `bytes_exact` (step 3),
`leader_bands` (step 4's flow); the leaders' rows and the report here. Pure: no I/O, no clock,
no randomness; the same cluster gives the same plan. Its data is acyclic: its callers, the
shell, run it with CPython's automatic cycle collection paused (`runtime.heap.
automatic_collection_paused`; the collector's walks were 29 % of its CPU at 300k partitions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from planning.model import Cluster, PartitionState, TopicPartition
from planning.placement.bytes_exact import (EXACT_DETERMINISTIC_SECONDS, EXACT_VARIABLES, Traffic, compare_closeness,
                                            compute_violations, solve_exact)
from planning.placement.bytes_model import (BalanceModel, DiskBound, Part, Tolerances, as_fraction, compute_parts,
                                            count_moves, count_new_bytes)
from planning.placement.bytes_ledger import Ledger
from planning.placement.bytes_moves import balance_moves, even_counts, place_slots, shrink_moves
from planning.placement.leader_bands import compute_band_leaders
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.log_dir_choice import compute_target_dirs
from planning.placement.placer import compute_led_by
from planning.placement.replica_fates import compute_planning_tree
from planning.placement.racks import satisfies_rack_spread
from planning.placement.spread_floor import compute_plan_cv_floor
from planning.placement.traffic_moves import (BytesIn, balance_bytes_in, balance_network_out, compute_bytes_in_bands,
                                              compute_even_bands, compute_leader_loads, compute_rates)

__all__ = ["EXACT_DETERMINISTIC_SECONDS", "EXACT_VARIABLES", "REBALANCE", "Bands", "BytesBalancePlan",
           "ResourceReport", "Spread", "Tolerances", "compute_bands", "plan_bytes_balance"]

REBALANCE = Goal(heal=False, rebalance=True)
EVEN_LEADERS_FACTOR = 2  # step 4's finer band: at most this many times the changes its band needs
EVEN_LEADERS_ROWS = 100_000  # ... tried on plans choosing up to this many leaders
# ... the finer bands tried, tightest first, as shares of the tolerance
EVEN_LEADERS_BANDS = (Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
EVEN_COUNTS_SHARE = 0.01  # step 2c's bytes: at most this share of what the plan moved before it


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
    within_tolerance: bool  # every eligible broker inside every band reported (`resources`)
    tolerance_reachable: bool | None  # the exact model's verdict on every band it holds (disk, traffic, counts); None: not run
    resources: Mapping[str, ResourceReport]  # "disk", "replicas", "leaders"; "bytes_in", "network_out" once measured
    disk_shares: Mapping[int, int]
    bytes_before: Mapping[int, int]
    bytes_after: Mapping[int, int]
    replicas_before: Mapping[int, int]
    replicas_after: Mapping[int, int]
    leaders_before: Mapping[int, int]
    leaders_after: Mapping[int, int]
    eligible_brokers: tuple[int, ...]
    rack_violations: int
    greedy_bytes_moved: int  # the greedy plan's, before the exact model
    greedy_within_tolerance: bool  # disk and replicas, before the exact model
    exact: str  # what the exact model did
    steps: int  # balance moves made by the greedy
    warnings: tuple[str, ...] = ()
    unplaced: tuple[TopicPartition, ...] = ()  # partitions that cannot be completed: left as they are
    disk_overflow: int = 0  # new replicas that fit no dir of their broker under the disk limit
    disk_cv_floor: float = 0.0  # the lowest disk CV any plan moving these bytes reaches (`spread_floor`)
    disk_tolerance: float = 0.10  # the disk band planned to (a budget's choice: `bytes_budget`)
    byte_budget: int | None = None  # the budget the disk band was chosen for; None: the band was given

    @property
    def gap_percent(self) -> float:
        bound = self.bytes_moved_lower_bound
        return 100.0 * (self.bytes_moved - bound) / bound if bound else 0.0


@dataclass(frozen=True)
class Bands:
    """Per eligible broker: its shares and the [low, high] a balanced plan keeps it in."""

    disk_share: Mapping[int, Fraction]
    replica_share: Mapping[int, Fraction]
    disk: Mapping[int, tuple[int, int]]
    replicas: Mapping[int, tuple[int, int]]


def compute_bands(cluster: Cluster, tolerances: Tolerances = Tolerances(), goal: Goal = REBALANCE) -> Bands:
    """The bands `plan_bytes_balance` balances to (module docstring, BALANCED)."""
    model = compute_balance_model(cluster, tolerances, goal)
    brokers = model.brokers
    return Bands(MappingProxyType(dict(model.byte_share)), MappingProxyType(dict(model.count_share)),
                 MappingProxyType({b: (model.blo[b], model.bhi[b]) for b in brokers}),
                 MappingProxyType({b: (model.clo[b], model.chi[b]) for b in brokers}))


def compute_balance_model(cluster: Cluster, tolerances: Tolerances = Tolerances(),
                          goal: Goal = REBALANCE) -> BalanceModel:
    """The fixed data a plan for `goal` starts from (`bytes_model`): fresh parts each call."""
    cluster = compute_planning_cluster(cluster, goal)
    tree = compute_planning_tree(cluster, goal)
    brokers = tuple(sorted(tree.broker_node))
    parts, topics = compute_parts(cluster, goal, tree, brokers)
    return BalanceModel(cluster, tree, brokers, parts, topics, tolerances)


# --- the plan ----------------------------------------------------------------------------------


def plan_bytes_balance(cluster: Cluster, tolerances: Tolerances = Tolerances(), goal: Goal = REBALANCE,
                       exact_variables: int = EXACT_VARIABLES,
                       exact_seconds: float = EXACT_DETERMINISTIC_SECONDS,
                       byte_budget: int | None = None) -> BytesBalancePlan:
    """The plan for `goal` on `cluster` (see the module docstring). `goal.explicit_targets`
    are not supported here (the count planner, `plan_placement`, takes them). `byte_budget`
    (`bytes_budget`, which chooses the disk band for it) caps what step 2c adds."""
    if goal.explicit_targets:
        raise ValueError("plan_bytes_balance takes no explicit targets")
    return _plan(cluster, tolerances, goal, exact_variables, exact_seconds, byte_budget)


def _plan(cluster: Cluster, tolerances: Tolerances, goal: Goal, exact_variables: int,
          exact_seconds: float, byte_budget: int | None = None) -> BytesBalancePlan:
    model = compute_balance_model(cluster, tolerances, goal)
    brokers, parts = model.brokers, model.parts
    warnings = list(model.tree.warnings)
    disk_bound = DiskBound(model)
    bound = disk_bound.at(model.blo, model.bhi)  # THE BOUND for the tolerance's bands
    forced = model.repair_racks()
    forced += sum(part.size * part.final.count(None) for part in parts)
    model.guide_by_even_edges(disk_bound)  # steps 1-2 only: the same bound, the bytes taken from the fullest
    ledger = Ledger(model, *model.loads())
    rates_in, rates_out = compute_rates(model)
    unplaced = place_slots(model, ledger)
    steps = balance_moves(model, ledger) if goal.rebalance and brokers else 0
    greedy_finals = [tuple(part.final) for part in parts]
    greedy_bytes = sum(count_new_bytes(part, final) for part, final in zip(parts, greedy_finals))
    if goal.rebalance and brokers:
        within = model.within_bands(ledger.load, ledger.count)
        saved = shrink_moves(model, ledger, greedy_bytes - bound if within else None)
        if saved:
            greedy_finals = [tuple(part.final) for part in parts]
            greedy_bytes = sum(count_new_bytes(part, final) for part, final in zip(parts, greedy_finals))
    if model.restore_bands():  # EVEN EDGES guided steps 1-2; the rest keeps to the tolerance's bands
        ledger.reband()
    greedy_within = model.within_bands(ledger.load, ledger.count)

    optimum, reachable, exact = None, None, "not run (no rebalance)"
    finals = greedy_finals
    if goal.rebalance and brokers:
        outcome = solve_exact(model, greedy_finals, exact_variables, exact_seconds,
                              lambda: _traffic(model, rates_in, rates_out) if any(rates_in) or any(rates_out) else None)
        exact = outcome.note
        reachable = outcome.reachable
        if outcome.reachable is False and outcome.bound is not None:
            bound = outcome.bound  # the closed form's holds for plans within the bands; none is
        elif outcome.bound is not None:
            bound = max(bound, outcome.bound)
        if outcome.finals is not None:
            # Closest to the bands first (disk, bytes in, counts), then bytes, then replicas.
            greedy_key = (*compute_violations(model, greedy_finals, outcome.traffic), greedy_bytes,
                          count_moves(parts, greedy_finals))
            exact_key = (*outcome.violations, outcome.bytes, count_moves(parts, outcome.finals))
            if compare_closeness(exact_key, greedy_key) < 0:
                finals = outcome.finals
                exact += "; its plan replaced the greedy's"
            elif outcome.optimal:
                exact += "; the greedy's plan was as good"
            if outcome.optimal:  # the plan kept is the closest to the bands with the fewest bytes
                optimum = outcome.bytes
    if finals is not greedy_finals:  # the parts hold the greedy's plan already
        model.adopt(finals)
    if goal.rebalance and brokers and any(rates_in):  # no ledger to build when no traffic is known
        # The greedy's ledger holds the parts as they stand unless the exact plan replaced them
        # (`Ledger`'s invariant holds move by move): shared, not built again (~0.6 s at 300k).
        shared = ledger if finals is greedy_finals else Ledger(model, *model.loads())
        traffic_steps = balance_bytes_in(model, shared, rates_in)
        if traffic_steps:  # the exact model did not run, or did not reach its optimum
            steps += traffic_steps
            optimum = None
            exact += f"; then {traffic_steps} changes for bytes in"
    if goal.rebalance and brokers and optimum is None and finals is greedy_finals:
        # 2c (the greedy's plan only: the exact model's is its own optimum, counts included), on
        # the greedy's ledger, which 2b moved on.
        finals_now = [tuple(part.final) for part in parts]
        moved_now = sum(count_new_bytes(part, final) for part, final in zip(parts, finals_now))
        allowance = int(EVEN_COUNTS_SHARE * moved_now)
        if byte_budget is not None:  # what the budget leaves, at most
            allowance = max(0, min(allowance, byte_budget - moved_now))
        evened = even_counts(model, ledger, allowance, count_moves(parts, finals_now),
                             BytesIn(model, ledger, rates_in) if any(rates_in) else None)
        if evened:
            exact += "; then replica counts evened"
    preferred = outcome.leaders if goal.rebalance and brokers and finals is not greedy_finals else None
    leaders, choosable = _choose_leaders(model, goal.rebalance, preferred)
    if goal.rebalance and brokers:
        leaders = balance_network_out(model, leaders, rates_in, rates_out, choosable)
    return _report(model, goal, parts, leaders, bound, optimum, forced, reachable, exact, steps,
                   greedy_bytes, greedy_within, unplaced, warnings, rates_in, rates_out)


def _traffic(model: BalanceModel, rates_in: list[int], rates_out: list[int]) -> Traffic:
    """The exact model's view of the measured traffic: bytes in and network out (what a
    partition's leader sends) per part, and their bands (`traffic_moves`, BANDS)."""
    out = compute_leader_loads(model, rates_in, rates_out)
    in_tree = set(model.brokers)
    total = sum(load for part, load in zip(model.parts, out) if part.final and part.final[0] in in_tree)
    return Traffic(rates_in, *compute_bytes_in_bands(model, rates_in), out,
                   *compute_even_bands(total, model.brokers, model.tolerances.network_out))


# --- 4. leaders ----------------------------------------------------------------------------------


def _choose_leaders(model: BalanceModel, rebalance: bool,
                    preferred: Sequence[int | None] | None = None) -> tuple[list[int | None], frozenset[int]]:
    """Every partition's leader (its final list's first entry): each broker's count inside its
    band, with the fewest changes, by one min-cost flow (module docstring, step 4); and the
    partitions whose leader was chosen (the others' is fixed)."""
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
        # The fewest changes from the exact model's leaders where it chose them (network out),
        # else from the partition's own.
        anchor = preferred[index] if preferred is not None and preferred[index] in eligible else original
        for b in eligible:
            members_row.append(row)
            members_column.append(column[b])
            members_cost.append(0 if b == anchor else 1 if b == original or b in part.kept else 2)
    if rows:
        total = len(rows) + int(fixed.sum())
        share = Fraction(total, n)
        member_row = np.asarray(members_row, dtype=np.int64)
        member_column = np.asarray(members_column, dtype=np.int64)
        member_cost = np.asarray(members_cost, dtype=np.int64)
        anchors = np.full(len(rows), -1, dtype=np.int64)
        anchors[member_row[member_cost == 0]] = member_column[member_cost == 0]

        def bounds(tolerance: Fraction) -> tuple[np.ndarray, np.ndarray]:
            return (np.array([math.floor((1 - tolerance) * share)] * n, dtype=np.int64) - fixed,
                    np.array([math.ceil((1 + tolerance) * share)] * n, dtype=np.int64) - fixed)

        def within(tolerance: Fraction) -> tuple[np.ndarray, int]:
            """The leaders with every count within ±tolerance (as near as the partitions allow),
            and how many rows change."""
            chosen = compute_band_leaders(len(rows), member_row, member_column, member_cost, n,
                                          *bounds(tolerance), 2 * len(rows) + 1)
            return chosen, int(np.count_nonzero(chosen != anchors))

        tolerance = as_fraction(model.tolerances.leaders)
        picked, changes = within(tolerance)
        if rebalance and changes and EVEN_LEADERS_FACTOR and len(rows) <= EVEN_LEADERS_ROWS:
            # Even leaders (step 4): the tightest of a few finer bands that costs at most
            # `EVEN_LEADERS_FACTOR` times the changes the band itself needs and keeps every count
            # that was in the band in it (a plan that changes none evens none). A finer band
            # often needs `leader_bands`' row flow (~4 s a solve at 300k partitions): bounded.
            low, high = bounds(tolerance)
            counts = np.bincount(picked, minlength=n)
            inside = (counts >= low) & (counts <= high)
            for finer in (tolerance * share for share in EVEN_LEADERS_BANDS):
                tighter, more = within(finer)
                evened = np.bincount(tighter, minlength=n)
                if more <= EVEN_LEADERS_FACTOR * changes and np.all(~inside | ((evened >= low) & (evened <= high))):
                    picked = tighter
                    break
        for index, j in zip(rows, picked.tolist()):
            leaders[index] = brokers[j]
    return leaders, frozenset(rows)


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


def _too_hot(parts: list[Part], loads: list[int], high: int, name: str, where: str) -> list[str]:
    """One warning naming the partitions whose load alone is above every broker's `name` band:
    the brokers carrying them stay outside, whatever the plan (the band is out of reach there)."""
    hot = sorted(((load, part.state.tp) for part, load in zip(parts, loads) if high and load > high),
                 key=lambda x: (-x[0], str(x[1])))
    if not hot:
        return []
    listed = ", ".join(f"{tp} ({load / high:.2f}x the band's top)" for load, tp in hot[:3])
    more = f" and {len(hot) - 3} more" if len(hot) > 3 else ""
    return [f"{len(hot)} partitions carry more {name} alone than a broker's band allows, so a broker stays "
            f"outside {where}: {listed}{more}; raise the {name} tolerance or spread the topic over more partitions"]


def _report(model: BalanceModel, goal: Goal, parts: list[Part], leaders, bound, optimum, forced, reachable, exact,
            steps, greedy_bytes, greedy_within, unplaced, warnings, rates_in, rates_out) -> BytesBalancePlan:
    cluster, tree, brokers = model.cluster, model.tree, model.brokers
    in_tree = set(brokers)
    bytes_before = {b: 0 for b in brokers}
    count_before = {b: 0 for b in brokers}
    leaders_before = {b: 0 for b in brokers}
    bytes_after = {b: 0 for b in brokers}
    count_after = {b: 0 for b in brokers}
    leaders_after = {b: 0 for b in brokers}
    in_before, in_after = dict.fromkeys(brokers, 0), dict.fromkeys(brokers, 0)
    out_before, out_after = dict.fromkeys(brokers, 0), dict.fromkeys(brokers, 0)
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    changed: list[tuple[PartitionState, tuple[int, ...]]] = []  # (partition, final): their dirs chosen at the end
    moved = moves = changes = violations = 0
    traffic = any(rates_in) or any(rates_out)  # else the rates' sums stay 0: not summed (300k walks)
    leader_out: list[int] = []  # per partition once traffic is known: its leader's network out after
    for part, leader, rate_in, rate_out in zip(parts, leaders, rates_in, rates_out):
        original, size = part.original, part.size
        for b in original:
            if b in in_tree:
                bytes_before[b] += size
                count_before[b] += 1
                if traffic:
                    in_before[b] += rate_in
        if original and original[0] in in_tree:
            leaders_before[original[0]] += 1
            if traffic:
                out_before[original[0]] += (len(original) - 1) * rate_in + rate_out
        final = compute_led_by(tuple(part.final), leader)
        for b in final:
            if b in in_tree:
                bytes_after[b] += size
                count_after[b] += 1
                if traffic:
                    in_after[b] += rate_in
        if traffic:
            leader_out.append((len(final) - 1) * rate_in + rate_out)  # what its leader carries
        if final and final[0] in in_tree:
            leaders_after[final[0]] += 1
            if traffic:
                out_after[final[0]] += leader_out[-1]
        if final == tuple(original):
            continue
        tp = part.state.tp
        targets[tp] = final
        new = sum(1 for b in final if b not in part.original)
        moves += new
        moved += new * part.size
        changes += bool(final and part.original and final[0] != part.original[0])
        if not satisfies_rack_spread(tree, [b for b in final if b in in_tree]):
            violations += 1
        changed.append((part.state, final))
    dirs, overflow = compute_target_dirs(cluster, goal.disk_max_usage_percent, changed)
    leader_low, leader_high = compute_even_bands(sum(leaders_after.values()), brokers, model.tolerances.leaders)
    resources = {
        "disk": ResourceReport(_spread(bytes_before, model.blo, model.bhi), _spread(bytes_after, model.blo, model.bhi)),
        "replicas": ResourceReport(_spread(count_before, model.clo, model.chi),
                                   _spread(count_after, model.clo, model.chi)),
        "leaders": ResourceReport(_spread(leaders_before, leader_low, leader_high),
                                  _spread(leaders_after, leader_low, leader_high)),
    }
    if traffic:  # traffic known: judged too (module docstring, TRAFFIC)
        in_low, in_high = compute_bytes_in_bands(model, rates_in)
        out_low, out_high = compute_even_bands(sum(out_after.values()), brokers, model.tolerances.network_out)
        resources["bytes_in"] = ResourceReport(_spread(in_before, in_low, in_high), _spread(in_after, in_low, in_high))
        resources["network_out"] = ResourceReport(_spread(out_before, out_low, out_high),
                                                  _spread(out_after, out_low, out_high))
    within = all(r.after.outside == 0 for r in resources.values())
    if unplaced:
        warnings.append(f"{len(unplaced)} partitions cannot be completed on the eligible brokers and stay "
                        f"as they are: {', '.join(map(str, unplaced[:5]))}")
    for name, resource in resources.items():
        if resource.after.outside:
            warnings.append(f"{resource.after.outside} brokers end outside their {name} band")
    if "network_out" in resources:
        warnings.extend(_too_hot(parts, leader_out, max(out_high.values(), default=0), "network_out",
                                 "wherever it leads"))
        warnings.extend(_too_hot(parts, rates_in, max(in_high.values(), default=0), "bytes_in",
                                 "on every broker holding it"))
    if overflow:
        warnings.append(f"{len(overflow)} new replicas fit no dir under the disk limit")
    return BytesBalancePlan(
        targets=MappingProxyType(targets), target_log_dirs=MappingProxyType(dirs), bytes_moved=moved,
        bytes_moved_lower_bound=bound,
        bytes_moved_optimum=optimum, forced_bytes=forced, replica_moves=moves, leader_changes=changes,
        within_tolerance=within, tolerance_reachable=reachable, resources=MappingProxyType(resources),
        disk_shares=MappingProxyType({b: math.floor(s) for b, s in model.byte_share.items()}),
        bytes_before=MappingProxyType(bytes_before), bytes_after=MappingProxyType(bytes_after),
        replicas_before=MappingProxyType(count_before), replicas_after=MappingProxyType(count_after),
        leaders_before=MappingProxyType(leaders_before), leaders_after=MappingProxyType(leaders_after),
        eligible_brokers=brokers, rack_violations=violations, greedy_bytes_moved=greedy_bytes,
        greedy_within_tolerance=greedy_within, exact=exact, steps=steps, warnings=tuple(warnings),
        unplaced=tuple(unplaced), disk_overflow=len(overflow),
        disk_cv_floor=compute_plan_cv_floor(list(bytes_before.values()), list(bytes_after.values()), moved,
                                            [model.group[b] for b in bytes_before]),
        disk_tolerance=model.tolerances.disk)
