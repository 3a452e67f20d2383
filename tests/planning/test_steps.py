"""The step rule (`planning.movement.partition_steps`): the worked example, the special cases,
and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.movement.partition_steps import Step, compute_next_step, compute_step_sequence
from schemas.errors import InvalidConfigError, InvalidReplicaAssignmentError


def test_worked_example_of_spec_5_1():
    sequence = compute_step_sequence((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (0, 1, 2, 3, 4), 2, 1)
    assert [s.target for s in sequence] == [
        (5, 0, 1, 2, 3, 4),
        (5, 6, 2, 3, 4),
        (5, 6, 7, 8, 4),
        (5, 6, 7, 8, 9),
    ]
    assert [(s.adding, s.removing) for s in sequence] == [
        ((5,), ()),
        ((6,), (0, 1)),
        ((7, 8), (2, 3)),
        ((9,), (4,)),
    ]
    assert [s.elect_leader for s in sequence] == [True, False, False, False]
    assert sequence[0].leader_movement and not any(s.leader_movement for s in sequence[1:])


def test_done_when_current_equals_final():
    assert compute_next_step((1, 2, 3), (1, 2, 3), (1, 2, 3), 2, 2) is None
    assert compute_step_sequence((1, 2, 3), (1, 2, 3), (1,), 1, 1) == ()


def test_same_brokers_other_order_is_one_step_with_election():
    assert compute_step_sequence((0, 1, 2), (2, 0, 1), (0, 1, 2), 1, 1) == (
        Step(target=(2, 0, 1), elect_leader=True, leader_movement=True),
    )


def test_new_preferred_leader_is_added_alone_first_and_elected():
    step = compute_next_step((0, 1, 2), (3, 4, 5), (0, 1, 2), 3, 1)
    assert step == Step(target=(3, 0, 1, 2), adding=(3,), removing=(), elect_leader=True, leader_movement=True)


def test_new_preferred_leader_under_min_isr_brings_the_deficit_in_the_same_step():
    # ISR 1 of 3, M = 3: deficit 2 -> the new leader plus one more, nothing dropped.
    step = compute_next_step((0, 1, 2), (3, 4, 5), (0,), 1, 3)
    assert step.adding == (3, 4) and step.removing == () and step.target[0] == 3 and step.elect_leader


def test_deficit_may_exceed_r_in_the_general_case():
    # Leader 0 stays; ISR {0}, M = 3: deficit 2 > R = 1.
    step = compute_next_step((0, 1, 2), (0, 3, 4), (0,), 1, 3)
    assert step.adding == (3, 4)  # n_add = min(2, max(R - 0, deficit 2)) = 2
    assert step.removing == (1,)  # n_drop = min(|to_drop| 2, R 1, 3 + 2 - 3) = 1
    assert step.target == (0, 3, 4, 2)


def test_out_of_sync_replicas_are_dropped_first():
    step = compute_next_step((0, 1, 2), (0, 3, 4), (0, 1), 1, 1)
    assert step.removing == (2,)
    assert step.adding == (3,)
    assert step.target == (0, 3, 1)


def test_target_order_is_final_members_then_remaining_current():
    step = compute_next_step((5, 0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (5, 0, 1, 2, 3, 4), 2, 1)
    assert step.target == (5, 6, 2, 3, 4)


def test_dropping_the_leader_is_a_leader_movement():
    step = compute_next_step((0, 1, 2), (0, 1, 3), (0, 1, 2), 1, 1, leader=2)
    assert step.removing == (2,) and step.leader_movement and not step.elect_leader


@pytest.mark.parametrize(
    "current, final, error",
    [((), (1,), InvalidReplicaAssignmentError), ((1, 1), (2,), InvalidReplicaAssignmentError),
     ((1,), (), InvalidReplicaAssignmentError), ((1,), (-2,), InvalidReplicaAssignmentError)],
)
def test_bad_replica_lists_are_refused(current, final, error):
    with pytest.raises(error):
        compute_next_step(current, final, current, 1, 1)


def test_limits_below_one_are_refused():
    with pytest.raises(InvalidConfigError):
        compute_next_step((0,), (1,), (0,), 0, 1)
    with pytest.raises(InvalidConfigError):
        compute_next_step((0,), (1,), (0,), 1, 0)


# -- properties --------------------------------------------------------------------------------

replica_lists = st.lists(st.integers(0, 12), min_size=1, max_size=6, unique=True).map(tuple)


@st.composite
def step_inputs(draw):
    current = draw(replica_lists)
    final = draw(replica_lists)
    in_sync = tuple(b for b in current if draw(st.booleans()))
    return current, final, in_sync, draw(st.integers(1, 4)), draw(st.integers(1, 4))


@settings(max_examples=300, deadline=None)
@given(step_inputs())
def test_every_sequence_terminates_at_the_final_target_within_bounds(inputs):
    current, final, in_sync, r, m = inputs
    sequence = compute_step_sequence(current, final, in_sync, r, m)
    if current == final:
        assert sequence == ()
        return
    assert sequence[-1].target == final
    assert len(sequence) <= len(set(current) ^ set(final)) + 1
    replicas, isr = current, in_sync
    for step in sequence:
        surplus = max(0, len(replicas) - len(final))
        deficit = max(0, m - len(set(replicas) & set(isr)))
        assert len(set(step.target)) == len(step.target)
        assert set(step.target) == (set(replicas) | set(step.adding)) - set(step.removing)
        assert not set(step.adding) & set(replicas) and set(step.removing) <= set(replicas)
        assert len(step.removing) <= r
        if final[0] not in replicas:
            assert len(step.adding) <= max(1, deficit) and not step.removing and step.target[0] == final[0]
            assert step.elect_leader
        elif set(replicas) != set(final):
            assert len(step.adding) <= max(r - surplus, deficit)
        # Kafka holds the union while the step runs: never more than |CR| + max(R, deficit).
        assert len(set(replicas) | set(step.target)) <= len(replicas) + max(r, deficit)
        assert step.adding or step.removing or step.target != replicas
        replicas, isr = step.target, step.target


@settings(max_examples=200, deadline=None)
@given(replica_lists, replica_lists, st.integers(1, 4))
def test_with_all_in_sync_replicas_never_exceed_the_larger_list_plus_r(current, final, r):
    replicas = current
    for step in compute_step_sequence(current, final, current, r, 1):
        assert len(set(replicas) | set(step.target)) <= max(len(current), len(final)) + r
        replicas = step.target
