"""Leaders within a band, with the fewest changes (`planning.placement.bytes_balance`, step 4).

GOALS, in order: (1) every broker leads between `low[j]` and `high[j]` partitions (as close as
the replica lists allow: a convex penalty `big_m` per unit outside); (2) the fewest leadership
changes, weighted per partition and broker (`cost`: 0 for the leader it has, 1 for a replica
that stays, 2 for a new one).

CONSTRAINTS. A partition is led by one of its members; only the first entry of a replica list
changes (no data moves). The same rows give the same leaders (deterministic).

ALGORITHM. The problem is a min-cost flow (row -> member -> sink, `planning.placement.flows`),
but at 300,000 partitions that flow has 900,000 arcs and took its solver ~4 s. Most rows are
*settled*: their leader stays a member at cost 0. Those of one broker o are interchangeable
but for their other members, so the flow is solved on brokers instead:

  node S_o (supply: o's settled rows) -> B_o at cost 0 (they keep o),
  S_o -> B_j at cost c, capacity the settled rows of o that have j as a member at cost c,
  each unsettled row (its leader left: no cost-0 member) -> B_j of its members, as before,
  B_j -> sink with the band penalties.

Every plan of the row flow maps onto this one at the same cost, so its optimum is at most the
row flow's; the flow on S_o -> B_j is then handed to distinct settled rows of o (a bipartite
matching, augmenting paths in row order). When every unit finds a row, the leaders cost the
broker flow's optimum: they are the row flow's optimum too. When one does not (two exchanges
of o wanting the same few rows: never seen at the benchmark's sizes), the row flow is solved
instead. Example: broker 1 leads 3 partitions {1,2,3}, {1,2,4}, {1,3,4}, broker 2 must lead one:
S_1 -> B_2 carries 1 unit (capacity 2: cost 1 each); the matching gives it the first row that
has 2, {1,2,3}, now led by 2: one change, as the row flow would make.

Pure: arrays in, a fresh array out.
"""

from __future__ import annotations

import numpy as np

from planning.placement.flows import FlowBuilder, solve_min_cost_flow
from planning.placement.leadership import add_penalised_bounds


def compute_band_leaders(row_count: int, member_row: np.ndarray, member_column: np.ndarray,
                         member_cost: np.ndarray, n: int, low: np.ndarray, high: np.ndarray,
                         big_m: int) -> np.ndarray:
    """The leader's column per row (module docstring): rows' members as flat arrays sorted by
    row, each row's cost-0 member at most one; `low`/`high` per column, less what is fixed."""
    picked = _by_broker(row_count, member_row, member_column, member_cost, n, low, high, big_m)
    if picked is None:
        picked = _by_row(row_count, member_row, member_column, member_cost, n, low, high, big_m)
    return picked


def _by_row(row_count, member_row, member_column, member_cost, n, low, high, big_m) -> np.ndarray:
    """The row flow: one node per row."""
    builder = FlowBuilder()
    first_row = builder.add_nodes(row_count, supply=1)
    first_broker = builder.add_nodes(n)
    sink = builder.add_node(-row_count)
    first_arc = builder.add_arcs(first_row + member_row, first_broker + member_column, 0, 1, member_cost)
    capacity = np.bincount(member_column, minlength=n)
    add_penalised_bounds(builder, first_broker + np.arange(n), np.full(n, sink), low, high, capacity, big_m)
    solution = solve_min_cost_flow(builder.problem())
    used = np.flatnonzero(solution.flows[first_arc:first_arc + len(member_row)])
    picked = np.zeros(row_count, dtype=np.int64)
    picked[member_row[used]] = member_column[used]
    return picked


def _by_broker(row_count, member_row, member_column, member_cost, n, low, high, big_m) -> np.ndarray | None:
    """The broker flow and its matching (module docstring); None when the matching fails."""
    keep = member_cost == 0
    home = np.full(row_count, -1, dtype=np.int64)  # a settled row's leader column, else -1
    home[member_row[keep]] = member_column[keep]
    settled = home[member_row] >= 0
    # Settled rows' other members, as exchange keys (o, j, cost) in one integer, sorted.
    other = settled & ~keep
    keys = (home[member_row[other]] * n + member_column[other]) * 3 + member_cost[other]
    exchange, exchange_count = np.unique(keys, return_counts=True)
    loose = ~settled  # the unsettled rows' members, one node per row
    loose_rows, loose_row_node = np.unique(member_row[loose], return_inverse=True)
    supply = np.bincount(home[home >= 0], minlength=n)

    builder = FlowBuilder()
    first_source = builder.add_nodes(n, supply=supply)
    first_broker = builder.add_nodes(n)
    first_loose = builder.add_nodes(len(loose_rows), supply=1)
    sink = builder.add_node(-row_count)
    builder.add_arcs(first_source + np.arange(n), first_broker + np.arange(n), 0, supply, 0)
    first_exchange = builder.add_arcs(first_source + exchange // 3 // n, first_broker + exchange // 3 % n, 0,
                                      exchange_count, exchange % 3)
    first_loose_arc = builder.add_arcs(first_loose + loose_row_node, first_broker + member_column[loose], 0, 1,
                                       member_cost[loose])
    capacity = np.bincount(member_column, minlength=n)
    add_penalised_bounds(builder, first_broker + np.arange(n), np.full(n, sink), low, high, capacity, big_m)
    solution = solve_min_cost_flow(builder.problem())
    if not solution.feasible:
        return None

    picked = np.where(home >= 0, home, 0)
    used = np.flatnonzero(solution.flows[first_loose_arc:first_loose_arc + int(loose.sum())])
    picked[member_row[loose][used]] = member_column[loose][used]
    flows = solution.flows[first_exchange:first_exchange + len(exchange)]
    wanted = {int(k): int(f) for k, f in zip(exchange.tolist(), flows.tolist()) if f}
    if wanted:
        matched = _match(wanted, member_row[other], keys)
        if matched is None:
            return None
        for row, key in matched.items():
            picked[row] = key // 3 % n
    return picked


def _match(wanted: dict[int, int], rows: np.ndarray, keys: np.ndarray) -> dict[int, int] | None:
    """Distinct settled rows for the exchanges' units: {row: exchange key}, every unit of
    `wanted` (key -> units) given a row offering that key; None when some unit finds none.
    Augmenting paths (Kuhn's), the candidates of a key in row order."""
    offering = np.isin(keys, np.fromiter(wanted, dtype=np.int64))
    candidates: dict[int, list[int]] = {}
    offers: dict[int, list[int]] = {}
    for row, key in zip(rows[offering].tolist(), keys[offering].tolist()):
        candidates.setdefault(key, []).append(row)
        offers.setdefault(row, []).append(key)
    held: dict[int, int] = {}  # row -> the key it serves

    def augment(key: int, seen: set[int]) -> bool:
        for row in candidates[key]:
            if row in seen:
                continue
            seen.add(row)
            current = held.get(row)
            if current is None or augment(current, seen):
                held[row] = key
                return True
        return False

    for key in sorted(wanted):
        for _ in range(wanted[key]):
            if not augment(key, set()):
                return None
    return held
