"""The solver door: lower bounds, infeasibility, determinism, and optimality against brute force."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.placement.flows import FlowBuilder, solve_min_cost_flow


def test_lower_bounds_are_met_and_counted_in_the_cost():
    builder = FlowBuilder()
    source, middle, sink = builder.add_node(4), builder.add_node(), builder.add_node(-4)
    cheap = builder.add_arc(source, sink, 0, 4, cost=1)
    forced = builder.add_arc(source, middle, 3, 4, cost=5)  # at least 3 units, though dearer
    onward = builder.add_arc(middle, sink, 0, 4, cost=0)
    solution = solve_min_cost_flow(builder.problem())
    assert solution.feasible
    assert solution.flows[forced] == 3 and solution.flows[onward] == 3 and solution.flows[cheap] == 1
    assert solution.cost == 3 * 5 + 1


def test_no_flow_meets_the_bounds_is_reported_not_raised():
    builder = FlowBuilder()
    source, sink = builder.add_node(5), builder.add_node(-5)
    builder.add_arc(source, sink, 0, 4)
    assert not solve_min_cost_flow(builder.problem()).feasible


def test_contradicting_lower_bounds_are_infeasible():
    builder = FlowBuilder()
    a, b, c = builder.add_node(2), builder.add_node(), builder.add_node(-2)
    builder.add_arc(a, b, 0, 2)
    builder.add_arc(b, c, 3, 3)  # needs 3 units through b, only 2 can arrive
    assert not solve_min_cost_flow(builder.problem()).feasible


def test_unbalanced_supplies_are_a_caller_bug():
    builder = FlowBuilder()
    builder.add_node(1)
    with pytest.raises(ValueError, match="add up to 1"):
        solve_min_cost_flow(builder.problem())


def test_bad_bounds_are_rejected_when_added():
    with pytest.raises(ValueError, match="bounds"):
        FlowBuilder().add_arc(0, 1, 3, 2)


def test_same_problem_same_flows():
    """Ties broken the same way every time: the planner's determinism rests on it."""
    builder = FlowBuilder()
    source = builder.add_node(6)
    middles = [builder.add_node() for _ in range(4)]
    sink = builder.add_node(-6)
    for m in middles:
        builder.add_arc(source, m, 0, 3)
        builder.add_arc(m, sink, 0, 3)
    problem = builder.problem()
    first = solve_min_cost_flow(problem)
    for _ in range(5):
        again = solve_min_cost_flow(problem)
        assert again.cost == first.cost and list(again.flows) == list(first.flows)


def test_arcs_added_as_arrays_and_one_by_one_keep_their_order():
    builder = FlowBuilder()
    source, sink = builder.add_node(3), builder.add_node(-3)
    assert builder.add_arc(source, sink, 0, 1, cost=2) == 0
    assert builder.add_arcs([source, source], [sink, sink], [0, 0], [1, 1], [1, 3]) == 1
    assert builder.add_arc(source, sink, 0, 1, cost=0) == 3
    solution = solve_min_cost_flow(builder.problem())
    assert list(solution.flows) == [1, 1, 0, 1] and solution.cost == 3
    with pytest.raises(ValueError, match="bounds"):
        builder.add_arcs([source], [sink], [2], [1], 0)


@st.composite
def small_networks(draw):
    nodes = draw(st.integers(2, 4))
    arc_count = draw(st.integers(1, 6))
    arcs = []
    for _ in range(arc_count):
        tail = draw(st.integers(0, nodes - 1))
        head = draw(st.integers(0, nodes - 1).filter(lambda h, t=tail: h != t))
        lower = draw(st.integers(0, 1))
        upper = draw(st.integers(lower, 2))
        arcs.append((tail, head, lower, upper, draw(st.integers(-3, 3))))
    supply = draw(st.integers(0, 3))
    return nodes, arcs, supply


@settings(max_examples=300, deadline=None)
@given(small_networks())
def test_least_cost_equals_brute_force(network):
    nodes, arcs, supply = network
    supplies = [0] * nodes
    supplies[0] += supply
    supplies[-1] -= supply
    builder = FlowBuilder()
    for s in supplies:
        builder.add_node(s)
    for tail, head, lower, upper, cost in arcs:
        builder.add_arc(tail, head, lower, upper, cost)
    solution = solve_min_cost_flow(builder.problem())

    best = None
    for flows in itertools.product(*(range(lo, hi + 1) for _, _, lo, hi, _ in arcs)):
        balance = list(supplies)
        for (tail, head, *_), f in zip(arcs, flows):
            balance[tail] -= f
            balance[head] += f
        if any(balance):
            continue
        cost = sum(f * arc[4] for arc, f in zip(arcs, flows))
        best = cost if best is None else min(best, cost)

    assert solution.feasible == (best is not None)
    if best is not None:
        assert solution.cost == best
        for (tail, head, lower, upper, _), f in zip(arcs, solution.flows):
            assert lower <= f <= upper
