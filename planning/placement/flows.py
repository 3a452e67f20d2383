"""The one door to the min-cost-flow solver (OR-Tools `SimpleMinCostFlow`).

RULE. A problem is a directed network: nodes `0..node_count-1`, each with a supply (positive: flow
leaves it; negative: flow must arrive there), and arcs `tail -> head`, each carrying an integer flow
in `[lower, upper]` at `cost` per unit. The solution is a flow on every arc that meets every bound,
conserves flow at every node (out - in == supply) and has the least total cost; or `feasible=False`
when no flow meets the bounds. Supplies must add up to 0.

Lower bounds are not native to the solver: the door sends `lower` units through each arc up front
(the tail's supply falls by `lower`, the head's rises) and asks the solver for the rest within
`upper - lower`; the reported flows and cost include those units again.

WHY A FLOW. Placement problems here are two laminar families of interval constraints (a
partition's or topic's rack tree on one side; brokers and the cluster's rack tree on the other).
Their constraint matrix is totally unimodular, so the least-cost flow is integral and is the
optimum of the integer problem, not a relaxation: a proven optimum, found in near-linear time.

DETERMINISM. The solver is single-threaded and deterministic for a given arc order; callers add arcs
in a canonical order (sorted topics, partitions, brokers) so the same cluster gives the same plan.

Pure from the caller's side: values in, a fresh value out; no clock, no global state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.graph.python import min_cost_flow

from reassigner.errors import ReassignerError


@dataclass(frozen=True)
class FlowProblem:
    """A min-cost-flow problem; build one with `FlowBuilder`. Arc i is the i-th entry of each tuple."""

    node_count: int
    supplies: tuple[int, ...]
    tails: tuple[int, ...]
    heads: tuple[int, ...]
    lowers: tuple[int, ...]
    uppers: tuple[int, ...]
    costs: tuple[int, ...]


@dataclass(frozen=True)
class FlowSolution:
    """The least-cost flow per arc (same order as the problem's arcs), or `feasible=False`."""

    feasible: bool
    cost: int
    flows: tuple[int, ...]


class FlowBuilder:
    """Collects nodes and arcs for one `FlowProblem` (a local, write-only scratchpad)."""

    def __init__(self) -> None:
        self._supplies: list[int] = []
        self._tails: list[int] = []
        self._heads: list[int] = []
        self._lowers: list[int] = []
        self._uppers: list[int] = []
        self._costs: list[int] = []

    def add_node(self, supply: int = 0) -> int:
        self._supplies.append(supply)
        return len(self._supplies) - 1

    def add_supply(self, node: int, supply: int) -> None:
        self._supplies[node] += supply

    def add_arc(self, tail: int, head: int, lower: int, upper: int, cost: int = 0) -> int:
        """Add an arc; returns its index in the solution's `flows`."""
        if not 0 <= lower <= upper:
            raise ValueError(f"arc {tail}->{head}: bounds [{lower}, {upper}] are not 0 <= lower <= upper")
        self._tails.append(tail)
        self._heads.append(head)
        self._lowers.append(lower)
        self._uppers.append(upper)
        self._costs.append(cost)
        return len(self._tails) - 1

    @property
    def arc_count(self) -> int:
        return len(self._tails)

    def problem(self) -> FlowProblem:
        return FlowProblem(
            node_count=len(self._supplies),
            supplies=tuple(self._supplies),
            tails=tuple(self._tails),
            heads=tuple(self._heads),
            lowers=tuple(self._lowers),
            uppers=tuple(self._uppers),
            costs=tuple(self._costs),
        )


def solve_min_cost_flow(problem: FlowProblem) -> FlowSolution:
    """The least-cost flow meeting every bound and supply (see the module docstring)."""
    if sum(problem.supplies) != 0:
        raise ValueError(f"supplies add up to {sum(problem.supplies)}, not 0")
    if not problem.tails:
        feasible = not any(problem.supplies)
        return FlowSolution(feasible, 0, ())
    tails = np.asarray(problem.tails, dtype=np.int32)
    heads = np.asarray(problem.heads, dtype=np.int32)
    lowers = np.asarray(problem.lowers, dtype=np.int64)
    uppers = np.asarray(problem.uppers, dtype=np.int64)
    costs = np.asarray(problem.costs, dtype=np.int64)
    supplies = np.asarray(problem.supplies, dtype=np.int64).copy()
    # Send the lower bounds up front: out of the tail, into the head.
    np.subtract.at(supplies, tails, lowers)
    np.add.at(supplies, heads, lowers)
    solver = min_cost_flow.SimpleMinCostFlow()
    arcs = solver.add_arcs_with_capacity_and_unit_cost(tails, heads, uppers - lowers, costs)
    solver.set_nodes_supplies(np.arange(problem.node_count, dtype=np.int32), supplies)
    status = solver.solve()
    if status != solver.OPTIMAL:
        if status in (solver.INFEASIBLE, solver.UNBALANCED):
            return FlowSolution(False, 0, ())
        raise ReassignerError(
            f"the min-cost flow solver failed ({status.name}) on {len(problem.tails)} arcs; "
            "this is a bug: report it with the cluster snapshot"
        )
    flows = solver.flows(arcs) + lowers
    return FlowSolution(True, int(np.dot(flows, costs)), tuple(int(f) for f in flows))
