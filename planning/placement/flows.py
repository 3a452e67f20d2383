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

from schemas.errors import ReassignerError


@dataclass(frozen=True, eq=False)
class FlowProblem:
    """A min-cost-flow problem; build one with `FlowBuilder`. Arc i is the i-th entry of each
    array (read-only numpy int64 arrays: problems reach millions of arcs)."""

    node_count: int
    supplies: np.ndarray
    tails: np.ndarray
    heads: np.ndarray
    lowers: np.ndarray
    uppers: np.ndarray
    costs: np.ndarray


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """The least-cost flow per arc (a read-only array, same order as the problem's arcs), or
    `feasible=False` (and no flows)."""

    feasible: bool
    cost: int
    flows: np.ndarray


def _frozen(values, dtype=np.int64) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


class FlowBuilder:
    """Collects nodes and arcs for one `FlowProblem` (a local, write-only scratchpad).

    Arcs come one at a time (`add_arc`) or as arrays (`add_arcs`, for the bulk of a big problem);
    indices follow the order of the calls either way.
    """

    def __init__(self) -> None:
        self._supplies: list[int] = []
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._single: list[tuple[int, int, int, int, int]] = []
        self._arc_count = 0

    def add_node(self, supply: int = 0) -> int:
        self._supplies.append(supply)
        return len(self._supplies) - 1

    def add_nodes(self, count: int, supply=0) -> int:
        """Add `count` nodes, each with `supply` (or the i-th of a sequence of `count` supplies);
        returns the first one's id (they are consecutive)."""
        first = len(self._supplies)
        if np.ndim(supply) == 0:
            self._supplies.extend([int(supply)] * count)
        else:
            supplies = [int(s) for s in supply]
            if len(supplies) != count:
                raise ValueError(f"{count} nodes but {len(supplies)} supplies")
            self._supplies.extend(supplies)
        return first

    def add_arc(self, tail: int, head: int, lower: int, upper: int, cost: int = 0) -> int:
        """Add an arc; returns its index in the solution's `flows`."""
        if not 0 <= lower <= upper:
            raise ValueError(f"arc {tail}->{head}: bounds [{lower}, {upper}] are not 0 <= lower <= upper")
        self._single.append((tail, head, lower, upper, cost))
        self._arc_count += 1
        return self._arc_count - 1

    def add_arcs(self, tails, heads, lowers, uppers, costs) -> int:
        """Add arcs given as equal-length arrays (heads, bounds and costs may be scalars);
        returns the first index."""
        self._flush()
        tails = np.asarray(tails, np.int64)
        heads, lowers, uppers, costs = (np.broadcast_to(np.asarray(values, np.int64), tails.shape)
                                        for values in (heads, lowers, uppers, costs))
        bad = np.flatnonzero((lowers < 0) | (lowers > uppers))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"arc {tails[i]}->{heads[i]}: bounds [{lowers[i]}, {uppers[i]}] "
                             "are not 0 <= lower <= upper")
        first = self._arc_count
        self._chunks.append((tails, heads, lowers, uppers, costs))
        self._arc_count += len(tails)
        return first

    def _flush(self) -> None:
        if self._single:
            columns = np.array(self._single, dtype=np.int64).T
            self._chunks.append(tuple(columns))
            self._single = []

    @property
    def arc_count(self) -> int:
        return self._arc_count

    def problem(self) -> FlowProblem:
        self._flush()
        columns = [np.concatenate([c[i] for c in self._chunks]) if self._chunks else np.zeros(0, np.int64)
                   for i in range(5)]
        for column in columns:
            column.setflags(write=False)
        return FlowProblem(len(self._supplies), _frozen(self._supplies), *columns)


def solve_min_cost_flow(problem: FlowProblem) -> FlowSolution:
    """The least-cost flow meeting every bound and supply (see the module docstring)."""
    total_supply = int(problem.supplies.sum())
    if total_supply != 0:
        raise ValueError(f"supplies add up to {total_supply}, not 0")
    if not len(problem.tails):
        return FlowSolution(not problem.supplies.any(), 0, _frozen(()))
    tails, heads, lowers = problem.tails, problem.heads, problem.lowers
    supplies = problem.supplies.copy()
    # Send the lower bounds up front: out of the tail, into the head.
    np.subtract.at(supplies, tails, lowers)
    np.add.at(supplies, heads, lowers)
    from ortools.graph.python import min_cost_flow  # at first use, as the CP-SAT door does

    solver = min_cost_flow.SimpleMinCostFlow()
    arcs = solver.add_arcs_with_capacity_and_unit_cost(
        tails.astype(np.int32), heads.astype(np.int32), problem.uppers - lowers, problem.costs
    )
    solver.set_nodes_supplies(np.arange(problem.node_count, dtype=np.int32), supplies)
    status = solver.solve()
    if status != solver.OPTIMAL:
        if status in (solver.INFEASIBLE, solver.UNBALANCED):
            return FlowSolution(False, 0, _frozen(()))
        raise ReassignerError(
            f"the min-cost flow solver failed ({status.name}) on {len(tails)} arcs; "
            "this is a bug: report it with the cluster snapshot"
        )
    flows = solver.flows(arcs) + lowers
    flows.setflags(write=False)
    return FlowSolution(True, int(np.dot(flows, problem.costs)), flows)
