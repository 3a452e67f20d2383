"""The exact model of the bytes-balance plan (`planning.placement.bytes_balance`, step 3): the disk
and replica bands as an integer program (`planning.placement.milp`), fewest bytes, then fewest
replica moves, on clusters within `EXACT_VARIABLES` placement variables.

Pure: values in, a fresh value out; deterministic (the solver's budget is counted in work).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from planning.placement.bytes_model import BalanceModel, Part
from planning.placement.milp import IntegerProgram, linear, solve_integer_program
from planning.placement.racks import RackTree, compute_partition_boxes

# The exact model runs when the cluster has at most this many (partition, broker) placement
# variables (about 100 partitions on 15 brokers), within a deterministic budget per solve.
EXACT_VARIABLES = 1_500
EXACT_DETERMINISTIC_SECONDS = 2.0


@dataclass(frozen=True)
class ExactOutcome:
    note: str
    finals: list | None = None
    bytes: int | None = None
    optimal: bool = False
    bound: int | None = None
    reachable: bool | None = None


def solve_exact(model: BalanceModel, greedy_finals, budget: int, seconds: float) -> ExactOutcome:
    """The disk and replica bands as an integer program: fewest bytes, then fewest replicas."""
    tree, parts = model.tree, model.parts
    most = len(model.brokers) * sum(1 for part in parts if part.replication > 0 and not part.fixed)
    if most > 4 * budget:  # far over: not worth counting exactly
        return ExactOutcome(f"not run (up to {most} placement variables, over the budget of {budget})")
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
        return ExactOutcome("no plan meets the disk and replica bands (proven)", reachable=False)
    if first.status == "unknown":
        return ExactOutcome("the budget ran out before a plan within the bands was found", bound=first.bound)
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
    return ExactOutcome(note, finals, fewest_bytes, optimal, first.bound, True)


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
