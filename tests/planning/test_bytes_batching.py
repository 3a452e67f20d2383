"""The bytes-balance greedy's batched steps (`planning.placement.bytes_moves._continue_pair`): a
step's move followed by more moves relieving the same broker, on its pair or, past the water
level (SPREAD), on the next peer in line. Each further move keeps every hard rule,
strictly lowers the total violation, adds no more to bytes moved plus the bound (and to the
replica-count bound) than the step's own move did, and does no more harm to the other broker;
a plan made with batches keeps the rules and the bound as one made a move per step."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

import planning.placement.bytes_moves as bytes_moves
from planning.placement.bytes_balance import plan_bytes_balance
from planning.placement.racks import satisfies_rack_spread
from placement_checks import hard_constraint_violations
from test_bytes_balance import bands_met, greedy_state, small_clusters


def total_violation(ledger) -> int:
    return sum(ledger.violation(b, ledger.load[b], ledger.count[b]) for b in ledger.m.brokers)


def rules_kept(model, index: int, d: int) -> bool:
    """Partition `index`, which a move took to d: distinct brokers, rack-spread, and d within
    the topic's limit."""
    part = model.parts[index]
    members = [b for b in part.final if b is not None]
    if len(set(members)) != len(members) or not satisfies_rack_spread(model.tree, sorted(part.members)):
        return False
    return model.topic_cap is None or model.topic_count[(part.topic, d)] <= model.topic_cap[(part.topic, d)]


@settings(max_examples=60, deadline=None)
@given(case=small_clusters())
def test_each_move_of_a_batch_is_one_a_step_could_make(case):
    model, ledger = greedy_state(*case)
    for _ in range(6):  # a few steps into the greedy, each continued on its pair
        outside = [(ledger.relative_violation(b), -b) for b in model.brokers if ledger.relative_violation(b) > 0]
        if not outside:
            return
        worst = -max(outside)[1]
        move = bytes_moves._best_move(model, ledger, worst)
        if move is None:
            return
        key, index, s, d = move
        before = (ledger.lb_total, ledger.cb_total)
        ledger.move(index, s, d)
        made = []
        plain_move = ledger.move

        def recording(i, a, b):
            # The move's rank as a step ranks it (`Ledger.evaluate`: the bound after it plus
            # the bytes it traps), against the bounds before it.
            size = model.parts[i].size
            bound, count_bound, _, _ = ledger.evaluate(a, b, size)
            made.append((size + bound - ledger.lb_total, count_bound - ledger.cb_total, total_violation(ledger),
                         (a, b)))
            plain_move(i, a, b)
            assert rules_kept(model, i, b)

        ledger.move = recording
        try:
            touched = {s, d}
            count = bytes_moves._continue_pair(model, ledger, worst, s, d, key, before, 1000, touched)
        finally:
            del ledger.move
        assert count == len(made) <= bytes_moves._BATCH - 1
        # every broker a batch changed is told to the greedy's heap of brokers outside
        assert {b for *_, pair in made for b in pair} <= touched
        event("a step continued on its pair" if made else "a step alone")
        violations = [v for _, _, v, _ in made] + [total_violation(ledger)]
        for i, (waste, count_waste, _, pair) in enumerate(made):
            # on b and a peer of its rack group: the step's pair, or the next in line (SPREAD)
            assert worst in pair and (pair[1] == worst) == (d == worst)
            assert model.group[pair[0]] == model.group[pair[1]]
            assert violations[i + 1] < violations[i]
            assert waste <= key[0] - before[0]
            assert count_waste <= key[1] - before[1]


@settings(max_examples=30, deadline=None)
@given(case=small_clusters(), batch=st.sampled_from([1, 2, 32]))
def test_plans_keep_the_rules_and_the_bound_whatever_the_batch(case, batch):
    cluster, goal, tolerances = case
    saved = bytes_moves._BATCH
    bytes_moves._BATCH = batch
    try:
        plan = plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)
    finally:
        bytes_moves._BATCH = saved
    assert hard_constraint_violations(cluster, goal, plan) == []
    if bands_met(plan):
        assert plan.bytes_moved >= plan.bytes_moved_lower_bound
