"""The lowest disk spread any plan can reach for the bytes it moves (pure).

RULE. Brokers hold `before` bytes. A plan lands `arriving` bytes on them from outside (the
replicas of a drained or dead broker, a replica added by a heal; negative: replicas dropped)
and, besides those, moves `budget` bytes between them. Every byte moved between them takes as
much off one broker as it puts on another, so the most a plan moving those bytes can do to the
spread is: take `budget` bytes off the fullest brokers, lowering them to one common level, and
put them, with what arrives, on the emptiest, raising them to one common level
(water-filling at both ends; dropped bytes come off the fullest, for free). `compute_cv_floor`
is the coefficient of variation of that outcome: no plan moving at most `budget` bytes between
these brokers ends with a lower one, whatever its replicas, racks or rules.

CLOSED GROUPS. Where the rack rule fixes how many replicas of each partition a domain holds
(3 DCs, RF 3: one each; `racks.compute_closed_groups`), each domain's bytes at the end are fixed
too, and bytes cannot even out between domains. `compute_plan_cv_floor` then water-fills each
group on its own: what its net arrival (`after - before` over its brokers) needs lands at its
bottom, and the budget left once every group's arrival is paid for is shared between the groups
where it lowers the total squared deviation most: each group's marginal gain per byte is twice
its gap (top level minus bottom level), and the gain shrinks as the budget grows (convex), so
the best share gives every group that gets any budget the same gap, and the others a gap no
larger (found by bisection on the gap). A plan moving bytes across groups only lands more there
and takes more off, which is what the group's own water-filling already allows for.

WHY. The bytes planner stops at its tolerance and moves the fewest bytes; another tool may move
as many and claim a lower spread. On one snapshot, the floor at a tool's bytes bounds any
tool's spread at those bytes: a plan whose CV is at the floor of its own bytes cannot be beaten
on spread by any plan moving as little (`benchmarks/bench_bytes_balance.py`, the plan's
`disk_cv_floor`).

INVARIANTS
- The floor is reached by a real transfer: the clipped vector `compute_water_filled` returns
  costs exactly `min(budget, what a flat end needs)` bytes between the brokers.
- It never rises with the budget, and it is 0 once the budget flattens everything (or more is
  dropped than the fullest hold over the mean: then 0, the only bound that holds for any drop).
- With groups, it is a bound for every plan ending with the same bytes in each group (every
  plan keeping the rack rule, when the groups are closed); one group is the plain floor.
- Partitions are indivisible in a real plan, so a plan sits at or above the floor, never below.

Pure: numbers in, numbers out; O(n log n) in the brokers, and O(g log n) per bisection step.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

__all__ = ["compute_cv_floor", "compute_plan_cv_floor", "compute_water_filled"]


def compute_water_filled(before: Sequence[int], arriving: int, budget: int) -> list[float]:
    """The brokers' bytes at the floor (module RULE), in the order of `before`."""
    if budget < 0:
        raise ValueError(f"a budget of {budget} bytes: at least 0")
    if not before:
        return []
    return _Group(before, arriving).filled(budget)


def compute_cv_floor(before: Sequence[int], arriving: int, budget: int) -> float:
    """The lowest coefficient of variation (standard deviation over mean) of the brokers' bytes
    any plan moving at most `budget` bytes between them reaches (module RULE); 0 without bytes."""
    return _cv(compute_water_filled(before, arriving, budget))


def compute_plan_cv_floor(before: Sequence[int], after: Sequence[int], moved: int,
                          groups: Sequence[Hashable] | None = None) -> float:
    """The floor at a plan's bytes, from the brokers' bytes before and after it and the bytes it
    moved: what lands on them from outside (a drained broker's replicas, a heal's) is forced, the
    rest of what it moved moved between them. `groups` (one label per broker, in the same order):
    the closed groups (module CLOSED GROUPS); None: one group."""
    if groups is None or len(set(groups)) <= 1:
        arriving = sum(after) - sum(before)
        return compute_cv_floor(before, arriving, max(0, moved - max(arriving, 0)))
    members: dict[Hashable, list[int]] = {}
    for index, label in enumerate(groups):
        members.setdefault(label, []).append(index)
    sides = [_Group([before[i] for i in indices], sum(after[i] for i in indices) - sum(before[i] for i in indices))
             for indices in members.values()]
    budget = max(0.0, moved - sum(side.landing for side in sides))
    shares = _share_budget(sides, budget)
    return _cv([v for side, share in zip(sides, shares) for v in side.filled(share)])


class _Group:
    """Brokers water-filled together (module RULE): their bytes sorted both ways with prefix
    sums, so their levels for a budget cost O(log n), for the floor (`filled`) and for sharing a
    budget between closed groups (`gap`)."""

    def __init__(self, values: Sequence[int], arriving: int) -> None:
        self.values = [float(v) for v in values]
        self.mean = (sum(self.values) + arriving) / len(self.values)
        self.taken = -arriving if arriving < 0 else 0  # dropped bytes come off the fullest, for free
        self.landing = max(arriving, 0)
        self.excess = sum(v - self.mean for v in self.values if v > self.mean)
        self.spare = max(0.0, self.excess - self.taken)  # budget past which nothing changes
        # More dropped than the fullest hold over the mean: which replicas go is the plan's
        # choice, not a level's; the flat end is the only bound that holds for every choice.
        self.flat = self.excess + self.landing - self.taken < 0
        self.high, self.low = max(self.values), min(self.values)
        self.down = _Levels(self.values)
        self.up = _Levels([-v for v in self.values])  # the bottom's level: the top's of the values negated

    def levels(self, budget: float) -> tuple[float, float] | None:
        """(top level, bottom level) once `budget` is spent; None: flat at the mean. From the top:
        what the budget (and the drops) can take, no more than the excess over the final mean; to
        the bottom: what arrives plus what was taken (what leaves lands somewhere)."""
        if self.flat:
            return None
        top = min(self.excess, budget + self.taken)
        return self.down.level(top), -self.up.level(top + self.landing - self.taken)

    def filled(self, budget: float) -> list[float]:
        levels = self.levels(budget)
        if levels is None:
            return [self.mean] * len(self.values)
        high, low = levels
        return [min(max(v, low), high) for v in self.values]

    def gap(self, budget: float) -> float:
        """Top level minus bottom level once `budget` is spent here (0: flat)."""
        levels = self.levels(budget)
        if levels is None:
            return 0.0
        return max(0.0, min(self.high, levels[0]) - max(self.low, levels[1]))

    def budget_for(self, gap: float) -> float:
        """The least budget that brings the gap down to `gap` (bisection: the gap falls as the
        budget grows)."""
        if self.gap(0.0) <= gap:
            return 0.0
        low, high = 0.0, self.spare
        for _ in range(64):
            middle = (low + high) / 2
            if self.gap(middle) <= gap:
                high = middle
            else:
                low = middle
        return high


class _Levels:
    """Values sorted from the top with prefix sums. `level(amount)`: the level L such that the values
    above it sum `amount` over it (infinite for nothing to take)."""

    def __init__(self, values: Sequence[float]) -> None:
        self.ordered = sorted(values, reverse=True)
        self.prefix = [0.0]
        for v in self.ordered:
            self.prefix.append(self.prefix[-1] + v)

    def level(self, amount: float) -> float:
        if amount <= 0:
            return math.inf
        ordered, prefix, n = self.ordered, self.prefix, len(self.ordered)
        # The first k whose level (prefix[k] - amount) / k reaches the next value; once reached it
        # stays reached (the level moves towards values that only fall), so bisect on k.
        low, high = 1, n
        while low < high:
            k = (low + high) // 2
            if (prefix[k] - amount) / k >= ordered[k]:
                high = k
            else:
                low = k + 1
        return (prefix[low] - amount) / low


def _share_budget(sides: Sequence[_Group], budget: float) -> list[float]:
    """Each group's part of the budget: the same gap for every group that gets any (module
    CLOSED GROUPS), what is left over to the widest gaps."""
    if budget >= sum(side.spare for side in sides):
        return [side.spare for side in sides]
    low, high = 0.0, max(side.gap(0.0) for side in sides)
    for _ in range(100):
        middle = (low + high) / 2
        if sum(side.budget_for(middle) for side in sides) <= budget:
            high = middle
        else:
            low = middle
    shares = [side.budget_for(high) for side in sides]
    left = budget - sum(shares)
    for index in sorted(range(len(sides)), key=lambda i: -sides[i].gap(shares[i])):
        extra = min(left, sides[index].spare - shares[index])
        if extra > 0:
            shares[index] += extra
            left -= extra
    return shares


def _cv(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    if mean <= 0:
        return 0.0
    variance = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(variance) / mean
