"""The exact model of the bytes-balance plan (`planning.placement.bytes_balance`, step 3), on
clusters within `EXACT_VARIABLES` placement variables: an integer program
(`planning.placement.milp`) over which brokers hold each partition and, once traffic is
measured, which of them may lead it.

HARD, always: the replication factor, the rack rule at every level (`compute_partition_boxes`),
the per-topic limits (or the greedy's own counts where a forced replica passed them).

BANDS, each broker's, in the product's order of priority (`RESOURCES`): disk bytes; once traffic
is measured (`Traffic`), bytes in and network out; replica count. Network out is carried by a
partition's leader, (replicas - 1) x bytes in + bytes out: a leader variable per (partition,
broker holding it) of the partitions that carry some, one per partition. The leaders it chooses
(`leaders`) are where the plan's leader steps start from (4 and 4b of `bytes_balance`: the
fewest changes from them, then network out), which may still trade some for the leader counts'
band. A partition with a position outside the rack tree (pinned) keeps its leader in the model.

1. WITHIN. Every band as a constraint; minimise the bytes moved, then, at those bytes, the
   replicas moved. When a plan exists it is the plan (`reachable`: True).
2. CLOSEST, when no plan meets every band (proven): each band gets a slack, counted in whole
   units of its share (`unit`: 1 % of the share for bytes and rates, one replica for counts),
   and the program is solved lexicographically: the least disk slack; at that, the least
   bytes-in slack; then network out; then counts; then the fewest bytes moved; then the fewest
   replicas moved. Each level is fixed at what it reached before the next is solved, the
   percent levels (disk, bytes in, network out) within one unit (`ROUNDING`) when they reached
   more than zero: a slack rounded up per broker makes two plans a few bytes apart differ by a
   unit (a 68-byte replica that evens the replica counts crossed a percent boundary, and the
   counts stayed outside their band on a new broker). A band met stays met. A slack counted in
   percents, not bytes, lets the bytes moved decide among plans equally close: a kilobyte
   closer to a band is not worth gigabytes moved. `compute_violations` measures any plan the
   same way and `compare_closeness` weighs two plans by the same rule, so the caller can weigh
   the greedy's plan against this one.

BUDGET. Each solve gets `seconds` of deterministic time at most, and all of them together twice
that: a solve gets what the ones before it left, up to its own. When no plan meets every band,
up to seven programs are solved; with a budget each and none shared, a broker added to a
cluster of 60 partitions took 12 s of a pipeline batch (7 solves of 1.7 s, none proven), every
event and request of the cluster waiting behind it.

The greedy's plan is every solve's hint (with its slacks), so a budget that runs out still
leaves a plan at least as close as the greedy's at each level the solver reached. `bound` is the
bytes level's proven bound when every level before it was proven optimal (the fewest bytes any
plan as close to the bands can move), else None; `optimal` when every level was.

Pure: values in, a fresh value out; deterministic (the solver's budget is counted in work).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from planning.placement.bytes_model import BalanceModel, Part
from planning.placement.milp import IntegerProgram, LinearConstraint, linear, solve_integer_program
from planning.placement.racks import RackTree, compute_partition_boxes
from planning.placement.traffic_moves import outside_band

# The exact model runs when the cluster has at most this many (partition, broker) placement
# variables (about 100 partitions on 15 brokers), within a deterministic budget per solve.
EXACT_VARIABLES = 1_500
EXACT_DETERMINISTIC_SECONDS = 2.0  # per solve; every solve of the model shares twice that (BUDGET)

RESOURCES = ("disk", "bytes_in", "network_out", "replicas")  # the bands' order of priority (BANDS)
DISK, BYTES_IN, NETWORK_OUT, REPLICAS = range(4)
# Percent levels within this many units of their least count as reached (CLOSEST), unless the
# least is 0: the rounding of a slack counted per broker in whole percents of its share.
ROUNDING = 1


@dataclass(frozen=True)
class Traffic:
    """Measured traffic, per part (the plan's order): bytes in, and what its leader sends (network
    out); and each broker's band of each."""

    rates: Sequence[int]
    low: Mapping[int, int]
    high: Mapping[int, int]
    out: Sequence[int]
    out_low: Mapping[int, int]
    out_high: Mapping[int, int]


@dataclass(frozen=True)
class ExactOutcome:
    note: str
    finals: list | None = None
    bytes: int | None = None
    optimal: bool = False
    bound: int | None = None
    reachable: bool | None = None
    violations: tuple[int, ...] = (0, 0, 0, 0)
    traffic: Traffic | None = None  # what it was given, to measure the greedy's plan alike
    leaders: tuple | None = None  # per part, the leader it chose where it chose one (BANDS), else None


@dataclass(frozen=True)
class _Band:
    resource: int  # index in RESOURCES
    broker: int
    low: int
    high: int
    unit: int

    def slack(self, value: int) -> int:
        """How far `value` is outside the band, in whole units (module CLOSEST)."""
        return -(-outside_band(value, self.low, self.high) // self.unit)


def _bands(model: BalanceModel, traffic: Traffic | None) -> list[_Band]:
    def percent(low: int, high: int) -> int:
        return max(1, (low + high) // 200)

    bands = []
    for b in model.brokers:
        bands.append(_Band(DISK, b, model.blo[b], model.bhi[b], percent(model.blo[b], model.bhi[b])))
        if traffic is not None:
            bands.append(_Band(BYTES_IN, b, traffic.low[b], traffic.high[b], percent(traffic.low[b], traffic.high[b])))
            bands.append(_Band(NETWORK_OUT, b, traffic.out_low[b], traffic.out_high[b],
                               percent(traffic.out_low[b], traffic.out_high[b])))
        bands.append(_Band(REPLICAS, b, model.clo[b], model.chi[b], 1))
    return bands


def _leader_modelled(part: Part, traffic: Traffic | None, index: int) -> bool:
    """Whether the model chooses `part`'s leader (BANDS): it carries network out and every
    position is in the tree."""
    return traffic is not None and traffic.out[index] > 0 and part.replication == len(part.original)


def compute_violations(model: BalanceModel, finals: Sequence[Sequence[int | None]], traffic: Traffic | None = None,
                       leaders: Sequence[int | None] | None = None) -> tuple[int, int, int, int]:
    """How far `finals` (led by `leaders`, else by each list's first) leave the brokers outside
    their bands, per resource (module CLOSEST): the sum over brokers of the slack, in whole units
    of the band's share."""
    totals = {(r, b): 0 for r in range(len(RESOURCES)) for b in model.brokers}
    for index, (part, final) in enumerate(zip(model.parts, finals)):
        for b in final:
            if b is not None and (DISK, b) in totals:
                totals[(DISK, b)] += part.size
                totals[(REPLICAS, b)] += 1
                if traffic is not None:
                    totals[(BYTES_IN, b)] += traffic.rates[index]
        leader = leaders[index] if leaders is not None else (final[0] if final else None)
        if traffic is not None and (NETWORK_OUT, leader) in totals:
            totals[(NETWORK_OUT, leader)] += traffic.out[index]
    result = [0] * len(RESOURCES)
    for band in _bands(model, traffic):
        result[band.resource] += band.slack(totals[(band.resource, band.broker)])
    return tuple(result)


def compare_closeness(first: Sequence[int], second: Sequence[int]) -> int:
    """-1, 0 or 1 as the plan of `first` is closer to the bands than that of `second`, as close,
    or further: both `compute_violations` tuples, optionally followed by more terms compared
    plainly (bytes, then replicas moved). Level by level in `RESOURCES` order; a percent level
    ties within `ROUNDING` units when neither is 0 (module CLOSEST)."""
    for level, (a, b) in enumerate(zip(first, second)):
        if a == b:
            continue
        if level < REPLICAS and a and b and abs(a - b) <= ROUNDING:
            continue
        return -1 if a < b else 1
    return 0


def solve_exact(model: BalanceModel, greedy_finals, budget: int, seconds: float,
                measured: Callable[[], Traffic | None] = lambda: None) -> ExactOutcome:
    """The plan within every band with the fewest bytes, else the closest (module docstring).
    `measured` gives the traffic, asked for only when the model runs (a walk over every
    partition, for nothing on a cluster far over the budget)."""
    tree, parts = model.tree, model.parts
    most = len(model.brokers) * sum(1 for part in parts if part.replication > 0 and not part.fixed)
    if most > 4 * budget:  # far over: not worth counting exactly
        return ExactOutcome(f"not run (up to {most} placement variables, over the budget of {budget})")
    traffic = measured()
    candidates: list[list[int]] = []
    variables = 0
    boxes = {r: compute_partition_boxes(tree, r) for r in model.replications}
    constant = {(r, b): 0 for r in range(len(RESOURCES)) for b in model.brokers}
    constant_topic: dict[tuple[int, int], int] = {}
    for index, (part, final) in enumerate(zip(parts, greedy_finals)):
        fixed = part.replication <= 0 or part.fixed
        if fixed:
            for b in part.members:
                constant[(DISK, b)] += part.size
                constant[(REPLICAS, b)] += 1
                if traffic is not None:
                    constant[(BYTES_IN, b)] += traffic.rates[index]
                constant_topic[(part.topic, b)] = constant_topic.get((part.topic, b), 0) + 1
        if traffic is not None and traffic.out[index] and (fixed or not _leader_modelled(part, traffic, index)):
            if final and (NETWORK_OUT, final[0]) in constant:
                constant[(NETWORK_OUT, final[0])] += traffic.out[index]
        if fixed:
            candidates.append([])
            continue
        broker_box = boxes[part.replication][1]
        allowed = [b for b in model.brokers if b not in part.excluded and broker_box.get(b, (0, 1))[1] >= 1]
        candidates.append(allowed)
        variables += len(allowed)
    if variables > budget:
        return ExactOutcome(f"not run ({variables} placement variables, over the budget of {budget})")
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
    rules: list[LinearConstraint] = []
    for part, index in zip(parts, var):
        if not index:
            continue
        rules.append(linear(list(index.values()), [1] * len(index), part.replication, part.replication))
        node_box = boxes[part.replication][0]
        for node, (low, high) in node_box.items():
            inside = [v for b, v in index.items() if node in tree.node_ancestry[tree.broker_node[b]]]
            if low > 0 or high < len(inside):
                rules.append(linear(inside, [1] * len(inside), low, high))
    terms: dict[tuple[int, int], list[tuple[int, int]]] = {key: [] for key in constant}
    by_topic_broker: dict[tuple[int, int], list[int]] = {}
    leads: list[dict[int, int]] = []  # per part: broker -> its leader variable (BANDS)
    for part_index, (part, index, final) in enumerate(zip(parts, var, greedy_finals)):
        for b, v in index.items():
            terms[(DISK, b)].append((v, part.size))
            terms[(REPLICAS, b)].append((v, 1))
            if traffic is not None:
                terms[(BYTES_IN, b)].append((v, traffic.rates[part_index]))
            by_topic_broker.setdefault((part.topic, b), []).append(v)
        lead = {}
        if index and _leader_modelled(part, traffic, part_index):
            first = final[0] if final and final[0] in index else next((b for b in final if b in index), None)
            for b, v in index.items():
                lead[b] = len(lowers)
                lowers.append(0)
                uppers.append(1)
                hint.append(1 if b == first else 0)
                rules.append(linear([lead[b], v], [1, -1], -1, 0))  # leads only where it is a replica
                terms[(NETWORK_OUT, b)].append((lead[b], traffic.out[part_index]))
            rules.append(linear(list(lead.values()), [1] * len(lead), 1, 1))
        leads.append(lead)
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
                rules.append(linear(vs, [1] * len(vs), 0, cap))
    bands = _bands(model, traffic)
    new = [(v, part.size) for part, index in zip(parts, var) for b, v in index.items() if b not in part.original]
    new_vars = tuple(v for v, _ in new)

    # 1. WITHIN: every band a constraint.
    within = list(rules)
    for band in bands:
        entries = terms[(band.resource, band.broker)]
        held = constant[(band.resource, band.broker)]
        if band.low - held > 0 or band.high - held < sum(w for _, w in entries):
            within.append(linear([v for v, _ in entries], [w for _, w in entries], band.low - held, band.high - held))
    left = 2 * seconds  # BUDGET: what the solves so far left of the model's

    def solve(program: IntegerProgram):
        nonlocal left
        solution = solve_integer_program(program, min(seconds, left))
        left = max(0.0, left - solution.work)
        return solution

    first = solve(IntegerProgram(tuple(lowers), tuple(uppers), tuple(within), new_vars,
                                 tuple(s for _, s in new), tuple(hint)))
    if first.status == "unknown":
        return ExactOutcome("the budget ran out before a plan within the bands was found", bound=first.bound)
    if first.status != "infeasible":
        fewest_bytes = first.objective
        second = solve(IntegerProgram(tuple(lowers), tuple(uppers),
                                      tuple(within) + (linear(new_vars, [s for _, s in new], 0, fewest_bytes),),
                                      new_vars, tuple([1] * len(new)), first.values)) if left > 0 else None
        values = second.values if second is not None and second.values else first.values
        optimal = first.status == "optimal"
        note = (f"{variables} variables: " + ("optimal" if optimal else "best found within the budget")
                + f" ({fewest_bytes:,} B)")
        return ExactOutcome(note, _finals(parts, var, greedy_finals, values, tree), fewest_bytes, optimal,
                            first.bound, True, traffic=traffic, leaders=_leaders(leads, values))

    # 2. CLOSEST: a slack per band, in units of its share; solved level by level.
    closest = list(rules)
    slack_lowers, slack_uppers, slack_hint = list(lowers), list(uppers), list(hint)
    slacks: list[list[int]] = [[] for _ in RESOURCES]
    for band in bands:
        entries = terms[(band.resource, band.broker)]
        held = constant[(band.resource, band.broker)]
        vs, ws = [v for v, _ in entries], [w for _, w in entries]
        q = len(slack_lowers)
        slack_lowers.append(0)
        slack_uppers.append(-(-(held + sum(ws) + band.high + band.low) // band.unit))
        slack_hint.append(band.slack(held + sum(w for v, w in entries if hint[v])))
        slacks[band.resource].append(q)
        span = sum(ws) + band.unit * slack_uppers[q] + abs(band.high - held) + abs(band.low - held)
        closest.append(linear(vs + [q], ws + [-band.unit], -span, band.high - held))  # above: within a slack
        closest.append(linear(vs + [q], ws + [band.unit], band.low - held, span))  # below: likewise
    levels = [(tuple(slacks[r]), (1,) * len(slacks[r])) for r in range(len(RESOURCES))]
    bytes_level = len(levels)
    levels += [(new_vars, tuple(s for _, s in new)), (new_vars, (1,) * len(new))]
    values, proven, bound = tuple(slack_hint), True, None
    for level, (objective_vars, weights) in enumerate(levels):
        if not objective_vars:
            continue
        if left <= 0:  # BUDGET spent: the levels reached stand, unproven
            proven = False
            break
        solution = solve(IntegerProgram(tuple(slack_lowers), tuple(slack_uppers), tuple(closest),
                                        objective_vars, weights, values))
        if solution.status not in ("optimal", "feasible"):
            proven = False
            break
        if level == bytes_level and proven:
            bound = solution.bound
        proven = proven and solution.status == "optimal"
        values = solution.values
        reached = solution.objective + (ROUNDING if level < REPLICAS and solution.objective > 0 else 0)
        closest.append(linear(objective_vars, weights, 0, reached))
    finals = _finals(parts, var, greedy_finals, values, tree)
    chosen = _leaders(leads, values)
    moved = sum(s for v, s in new if values[v])
    violations = compute_violations(model, finals, traffic, [
        leader if leader is not None else (final[0] if final else None) for leader, final in zip(chosen, finals)])
    shown = ", ".join(f"{name} {v}" for name, v in zip(RESOURCES, violations)
                      if traffic is not None or name in ("disk", "replicas"))
    note = (f"no plan meets every band (proven); {variables} variables, the closest "
            + ("(proven)" if proven else "found within the budget") + f": outside by {shown} (units of 1 % of a "
            f"share, replicas for counts), {moved:,} B")
    return ExactOutcome(note, finals, moved, proven, bound if proven else None, False, violations, traffic, chosen)


def _leaders(leads: list[dict[int, int]], values) -> tuple:
    return tuple(next((b for b, v in lead.items() if values[v]), None) if lead else None for lead in leads)


def _finals(parts: list[Part], var: list[dict[int, int]], greedy_finals, values, tree: RackTree) -> list:
    finals = []
    for part, index, final in zip(parts, var, greedy_finals):
        chosen = {b for b, v in index.items() if values[v]}
        finals.append(_arrange(part, chosen, final, tree) if index else final)
    return finals


def _arrange(part: Part, chosen: set[int], template: Sequence[int | None], tree: RackTree) -> tuple:
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
