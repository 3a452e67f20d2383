"""The evenest disk balance a byte budget buys: the tightest disk band whose plan moves at most
the budget (pure).

WHY. `plan_bytes_balance` takes the disk band as given and moves the fewest bytes into it; its
plans sit on the frontier of bytes moved against disk spread (each plan's disk CV is at or next
to the lowest any plan moving as many bytes reaches: `spread_floor`). An operator often thinks
the other way round: "tonight's window copies 500 GB; make the disks as even as that allows",
or "never move more than 2 TB for a rebalance". The budget picks the point on the frontier.

RULE (`plan_within_budget`). The disk tolerance is searched on a grid of thousandths between
`TIGHTEST` (1 %) and 1 (a band from 0 to twice the share: nothing but what must move):
1. The closed-form bound (`bytes_model.DiskBound`: the fewest bytes any plan within a band
   moves, drains and heals included) falls as the band widens; the tightest tolerance whose
   bound is within the budget, less step 2c's share (`EVEN_COUNTS_SHARE`: the counts are
   evened within the budget too), is found by bisection, each step a bisection per broker.
2. The plan is made at that tolerance. A plan may move more than its bound (indivisible
   replicas, the replica-count and traffic bands, which the bound does not hold): then the
   next tolerance tried is the tightest whose bound is lower by what the plan overshot, at
   most `MAX_PLANS` plans in all, the last at 1. Step 2c (counts evened) spends only what the budget leaves.
   The operator's own band (`tolerances.disk`, rounded in onto the grid) is never passed by:
   when its bound is within the budget, it is planned before any wider band, besides the
   `MAX_PLANS` (its plan fits whenever the plain plan does, yet step 1's share for 2c lifts its
   bound above the aim when the budget is about the plain plan's bytes, and an overshoot's
   step can jump over it).
3. USE THE ROOM: step 1 set aside 2c's share, and the plan that fits may leave room (2c and
   the indivisible replicas cost what they cost, often far less). One more plan is made at the
   tightest band whose bound plus what the fitting plan moved beyond its own bound is within
   the budget, when that band is tighter (bench (b) at 9.001 TB: ±8.9 % and 8.904 TB before,
   ±8.0 % and 8.992 TB after, disk CV 0.031 -> 0.028). NARROW: when that plan moves more than
   the budget, the bands between it and the one that fits are bisected, `NARROW_PLANS` plans
   more: a plan's overshoot of its bound differs from band to band (indivisible replicas: on
   the budget tests' cluster, ±7.4 % moved 176.6 GB and ±7.7 % 165.9 GB), so one just looser may
   fit where the first estimate went over.
4. The plan kept is the tightest tried that moves at most the budget. When none does, the
   widest band's plan moves more than the budget (a drain, a heal or a rack repair alone moves
   more): it is kept and a warning says so; what must move is never cut.
New brokers (the ones that hold nothing before the plan: `BalanceModel.new_brokers`) keep the
operator's low edge while the band widens up to `NEW_FIRST_WIDENING` times the operator's, when
the bound there is within the budget (`_new_edge`): brokers are added to take their share,
and a band wide enough for the budget let them end at 0.88x the mean bytes where Cruise Control's
plan, for the same bytes, fills them to 0.92-0.99x and leaves the old brokers lower. Past that
width, or when the budget cannot fill them even there (filling them is then most of what the plan
moves), their edge is the band's, as every broker's: holding it would widen the old brokers' band
to nothing (±100 %, counts unevened) for no byte saved. Either way the bound falls as k grows,
so one bisection searches it.
The replica-count and bytes-in bands move data too: at a disk tolerance wider than theirs they
widen with it (`compute_budget_tolerances`), so a budget below what the operator's bands need
loosens them together; they are never tightened. The leader and network-out bands (leadership
only, no data) and the topic spread stay as set. The plan reports the disk tolerance it reached
(`BytesBalancePlan.disk_tolerance`) and the budget.

INVARIANTS: the plan kept moves at most the budget whenever the plan at the widest band does;
when the plan at the operator's band (on the grid) moves at most the budget, and so does that
band's bound, the band kept is at most the operator's;
it is the plan `plan_bytes_balance` makes at the reported tolerance (same cluster, same plan);
a goal that does not rebalance is planned as it is (there is nothing to trade).

Pure: no I/O, no clock; up to `MAX_PLANS` plans (one more at the operator's band, one more to
use the room, `NARROW_PLANS` more to narrow it) and one model
for the bound.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from planning.model import Cluster
from planning.placement.goal import Goal
from planning.placement.bytes_balance import (EVEN_COUNTS_SHARE, REBALANCE, BytesBalancePlan,
                                              compute_balance_model, plan_bytes_balance)
from planning.placement.bytes_model import DiskBound, Tolerances, compute_disk_bands

__all__ = ["MAX_PLANS", "TIGHTEST", "compute_budget_tolerances", "plan_within_budget"]

TIGHTEST = 0.01  # the tightest disk tolerance a budget buys: finer is noise for indivisible replicas
MAX_PLANS = 4  # plans made at most, when the first overshoots its bound (the operator's band's besides)
NARROW_PLANS = 2  # plans more between the room's band, over the budget, and the one that fits (RULE 3)
NEW_FIRST_WIDENING = 2  # how far the band widens, in multiples of the operator's, before new brokers' edge does
_GRID = 1000  # tolerances in thousandths


def compute_budget_tolerances(tolerances: Tolerances, disk: float, new_disk: float | None = None) -> Tolerances:
    """The bands a budget plans to at disk tolerance `disk`, new brokers' low edge at `new_disk`
    (None: `disk`): the replica-count and bytes-in bands move data too, and are loosened with the
    disk band, never tightened (module RULE)."""
    return replace(tolerances, disk=disk, replicas=max(tolerances.replicas, disk),
                   bytes_in=max(tolerances.bytes_in, disk), new_disk=new_disk)


def _new_edge(k: int, own: int, held_to: int) -> int:
    """New brokers' low edge, in thousandths, at point `k` of the search (the band's is k; module
    RULE): the operator's `own` while the band is at most `held_to`, past it the band's."""
    return min(k, own) if k <= held_to else k


def plan_within_budget(cluster: Cluster, budget: int, tolerances: Tolerances = Tolerances(),
                       goal: Goal = REBALANCE, **planner: Any) -> BytesBalancePlan:
    """The plan with the tightest disk band that moves at most `budget` bytes (module RULE);
    `planner`: `plan_bytes_balance`'s options (the exact model's size and time)."""
    if budget < 0:
        raise ValueError(f"a byte budget of {budget}: at least 0")
    if not goal.rebalance:
        return plan_bytes_balance(cluster, tolerances, goal, **planner)
    model = compute_balance_model(cluster, tolerances, goal)
    bound, shares = DiskBound(model), model.byte_share
    del model  # its parts are the size of the cluster; each plan builds its own
    cache: dict[int, int] = {}
    # The operator's own band, rounded in onto the grid (the inner round absorbs float noise).
    own = min(_GRID, max(round(TIGHTEST * _GRID), math.floor(round(tolerances.disk * _GRID, 6))))

    def bound_for(disk: int, new: int) -> int:
        return bound.at(*compute_disk_bands(shares, disk / _GRID, bound.new_brokers, new / _GRID))

    # The band is sized for all but step 2c's share of the budget: the counts are evened within it.
    aim = budget - int(EVEN_COUNTS_SHARE * budget)
    cap = min(_GRID, NEW_FIRST_WIDENING * own)
    held_to = cap if bound.new_brokers and own < cap and bound_for(cap, own) <= aim else 0

    def bound_at(k: int) -> int:
        if k not in cache:
            cache[k] = bound_for(k, _new_edge(k, own, held_to))
        return cache[k]

    def plan_at(k: int) -> BytesBalancePlan:
        """The planner's plan at disk tolerance k (thousandths), recorded in `tried`."""
        new = _new_edge(k, own, held_to)
        plan = plan_bytes_balance(cluster, compute_budget_tolerances(
            tolerances, k / _GRID, new / _GRID if new != k else None), goal, byte_budget=budget, **planner)
        tried.append((k, plan))
        return plan

    def tightest(limit: int, start: int) -> int:
        """The least k in [start, _GRID] whose bound is within `limit` (the bound never rises
        as k grows), or _GRID when none is."""
        low, high = start, _GRID
        if bound_at(high) > limit:
            return _GRID
        while low < high:
            middle = (low + high) // 2
            if bound_at(middle) <= limit:
                high = middle
            else:
                low = middle + 1
        return low

    # Its plan fits whenever the plain plan does (the same plan when the count and bytes-in bands
    # are no tighter; step 2c is capped by what the budget leaves), yet the search can pass it by:
    # 2c's share lifts its bound above the aim when the budget is about the plain plan's bytes,
    # and an overshoot's step can jump over it. So, when its bound is within the budget, it is
    # planned before any wider band (besides `MAX_PLANS`): a budget never buys a looser band than
    # the operator's when the operator's plan fits it.
    tried: list[tuple[int, BytesBalancePlan]] = []
    own_open = bound_at(own) <= budget
    k = tightest(aim, round(TIGHTEST * _GRID))
    attempts = 0
    while True:
        if own_open and k > own:
            k = own
        else:
            attempts += 1
        own_open = own_open and k < own  # once planned, not again
        plan = plan_at(k)
        if plan.bytes_moved <= budget or k == _GRID:
            break
        # The last attempt is the widest band: whether anything fits is then known.
        k = _GRID if attempts == MAX_PLANS - 1 else tightest(bound_at(k) - (plan.bytes_moved - aim), k + 1)
    within = [(k, plan) for k, plan in tried if plan.bytes_moved <= budget]
    if within:
        # USE THE ROOM: the band was sized for the aim, step 2c's share of the budget set aside,
        # yet the plan kept may have moved less than the budget (2c and the indivisible replicas
        # cost what they cost, often far less than their share). One more plan, at the tightest
        # band whose bound plus what this plan moved beyond its own bound fits the budget.
        k, plan = min(within, key=lambda item: item[0])
        overhead = max(0, plan.bytes_moved - bound_at(k))
        finer = tightest(budget - overhead, round(TIGHTEST * _GRID))
        if finer < k and all(finer != tried_k for tried_k, _ in tried):
            refined = plan_at(finer)
            if refined.bytes_moved <= budget:
                within.append((finer, refined))
            else:
                # NARROW: a plan's overshoot of its bound differs from band to band (indivisible
                # replicas), so a band between the one that fits and the one over may fit.
                over = finer
                for _ in range(NARROW_PLANS):
                    middle = (over + k) // 2
                    if middle in (over, k):
                        break
                    tighter = plan_at(middle)
                    if tighter.bytes_moved <= budget:
                        within.append((middle, tighter))
                        k = middle
                    else:
                        over = middle
    k, plan = min(within, key=lambda item: item[0]) if within else tried[-1]
    warnings = plan.warnings
    if not within:
        warnings += (f"the plan moves {plan.bytes_moved:,} bytes, above the budget of {budget:,}, at the "
                     f"widest bands tried (±{k / _GRID:.1%}): what must move (drains, heals, rack repairs: "
                     f"{plan.forced_bytes:,} bytes) needs more",)
    return replace(plan, byte_budget=budget, warnings=warnings)
