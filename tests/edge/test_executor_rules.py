"""The executor's pure rules: bounds on a command envelope; whether Kafka shows an interrupted
command applied."""

from __future__ import annotations

from reassigner.edge.executor import compute_envelope_problem, compute_interrupted_command_applied


def test_a_command_envelope_out_of_bounds_is_named():
    good = {"id": "b1-step-1", "key": "t-0", "reassignment_id": "r1", "reason": "heal", "epoch": 3}
    assert compute_envelope_problem(good) is None
    assert "id has 300 characters" in compute_envelope_problem({**good, "id": "x" * 300})
    assert "reason has 2,001 characters" in compute_envelope_problem({**good, "reason": "x" * 2001})
    assert "epoch -1" in compute_envelope_problem({**good, "epoch": -1})


def test_kafka_shows_an_interrupted_step_applied_when_its_target_is_moving_or_reached():
    step = {"target_replicas": [4, 2, 3]}
    assert compute_interrupted_command_applied("ReassignmentStep", step, (4, 2, 3), (), ())
    # moving: Kafka lists the target first, then the replicas being removed
    assert compute_interrupted_command_applied("ReassignmentStep", step, (4, 2, 3, 1), (4,), (1,))
    assert not compute_interrupted_command_applied("ReassignmentStep", step, (1, 2, 3), (), ())
    assert not compute_interrupted_command_applied("ReassignmentStep", step, (2, 4, 3), (), ())  # leader order
    assert compute_interrupted_command_applied("CancelReassignment", {}, (1, 2, 3), (), ())
    assert not compute_interrupted_command_applied("CancelReassignment", {}, (4, 2, 3, 1), (4,), (1,))
