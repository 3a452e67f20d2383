"""`list` and `status` rows from a hand-built ControllerState: step n of m, problems, progress."""

from __future__ import annotations

from state.model import ControllerState
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import Reassignment, ReassignmentState, StepInFlight
from planning.movement.partition_steps import Step, compute_step_sequence
from reassigner.operator.views import (
    compute_in_flight,
    compute_reassignment_rows,
    compute_status,
    status_to_json,
    step_label,
)

BROKERS = tuple(Broker(i, rack=f"/dc1/r{i % 3}", log_dirs=(LogDir("/d/a"), LogDir("/d/b"))) for i in range(10))
TP = TopicPartition("orders", 0)


def state_with(partition: PartitionState, reassignment: Reassignment, brokers=BROKERS, config=None,
               more_partitions=()) -> ControllerState:
    cluster = Cluster(brokers, (Topic("orders", (partition, *more_partitions), min_insync_replicas=1),))
    return ControllerState(cluster=cluster, reassignments={reassignment.tp: reassignment},
                           config=config or {}, epoch=3, last_batch=41)


def worked_example(in_flight: StepInFlight | None, steps_done: int, replicas, adding=()) -> ControllerState:
    partition = PartitionState("orders", 0, tuple(replicas), isr=tuple(b for b in replicas if b not in adding),
                               leader=0, size_bytes=1_000, adding=tuple(adding))
    r = Reassignment("req-1:orders-0", TP, (0, 1, 2, 3, 4), (5, 6, 7, 8, 9), in_flight=in_flight,
                     steps_done=steps_done)
    return state_with(partition, r, config={"reassignment.max.concurrent.replica.movements": "2"})


def test_step_n_of_m_follows_the_spec_worked_example():
    # The worked example of docs/design.md ("Incremental steps"), R = 2: four steps from (0..4) to (5..9).
    before = compute_reassignment_rows(worked_example(None, 0, (0, 1, 2, 3, 4)), default_replica_movements=1)[0]
    assert (before.step, before.steps_estimated, before.progress) == (0, 4, 0.0)
    first = Step(target=(5, 0, 1, 2, 3, 4), adding=(5,), elect_leader=True, leader_movement=True)
    during = compute_reassignment_rows(
        worked_example(StepInFlight(first, 1, 100.0), 0, (5, 0, 1, 2, 3, 4), adding=(5,)), 1)[0]
    assert step_label(during) == "step 1 of 4"
    assert during.adding == (5,) and during.final_target == (5, 6, 7, 8, 9) and during.in_flight
    later = compute_reassignment_rows(worked_example(None, 2, (5, 6, 2, 3, 4)), 1)[0]
    # Step 2 of 4 done; its percentage is by bytes, as the header's: 2 of the 5 replicas the
    # target adds are in sync (`views.progress`, ONE PERCENTAGE).
    assert (later.step, later.steps_estimated, later.progress) == (2, 4, 0.4)


def test_m_uses_the_default_replica_movements_when_not_overridden():
    state = worked_example(None, 0, (0, 1, 2, 3, 4)).with_changes(config={})
    row = compute_reassignment_rows(state, default_replica_movements=1)[0]
    assert row.steps_estimated == len(compute_step_sequence((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (0, 1, 2, 3, 4), 1, 1))


def test_unknown_partition_shows_unknown_not_an_error():
    r = Reassignment("x", TopicPartition("gone", 1), (1, 2), (2, 3))
    row = compute_reassignment_rows(ControllerState(reassignments={r.tp: r}), 1)[0]
    assert row.current_replicas is None and row.steps_estimated is None and step_label(row) == "step 0 of ?"


def test_batch_in_flight_lists_steps_oldest_first_with_age():
    first = Step(target=(5, 0, 1, 2, 3, 4), adding=(5,), elect_leader=True, leader_movement=True)
    state = worked_example(StepInFlight(first, 1, 100.0), 0, (5, 0, 1, 2, 3, 4), adding=(5,))
    (row,) = compute_in_flight(state, now_seconds=130.0)
    assert (row.topic, row.partition, row.step, row.adding, row.leader_movement, row.age_seconds) == \
        ("orders", 0, 1, (5,), True, 30.0)


def test_status_shows_dead_brokers_offline_dirs_and_partition_problems():
    brokers = (Broker(1, "/dc1/r1", log_dirs=(LogDir("/d/a"), LogDir("/d/b", online=False)),
                      cannot_host=frozenset({TopicPartition("orders", 7), TopicPartition("audit", 0)})),
               Broker(2, "/dc1/r2", alive=False), Broker(3, "/dc2/r1", draining=True))
    healthy = PartitionState("orders", 0, (1, 2, 3), isr=(1, 2, 3), leader=1)
    under = PartitionState("orders", 1, (1, 2, 3), isr=(1, 3), leader=1)
    offline = PartitionState("orders", 2, (2,), isr=(), leader=None)
    r = Reassignment("r", TopicPartition("orders", 0), (1, 2, 3), (1, 3, 4), state=ReassignmentState.RUNNING)
    state = state_with(healthy, r, brokers=brokers, more_partitions=(under, offline))
    view = compute_status(state, default_replica_movements=1)
    by_id = {b.id: b for b in view.brokers}
    assert (by_id[1].dirs_online, by_id[1].dirs_total, by_id[1].offline_dirs) == (1, 2, ("/d/b",))
    assert by_id[1].cannot_host == 2 and by_id[2].cannot_host == 0
    assert not by_id[2].alive and by_id[3].draining
    assert by_id[1].leaders == 2 and by_id[1].replicas == 2
    assert [p.partition for p in view.under_replicated] == [1, 2]
    assert [p.partition for p in view.under_min_isr] == [2]
    assert [p.partition for p in view.offline] == [2]
    document = status_to_json(view)
    assert document["progress"]["steps_estimated"] >= 1 and document["epoch"] == 3
    assert document["reassignments"][0]["step_label"].startswith("step 0 of ")


def test_status_shows_the_topic_selection_in_force_with_overrides():
    from tests.settings_defaults import default_policy

    cluster = Cluster(BROKERS, tuple(
        Topic(name, (PartitionState(name, 0, (1,), isr=(1,), leader=1),))
        for name in ("orders", "__consumer_offsets", "reassigner.events")))
    state = ControllerState(cluster=cluster)
    document = status_to_json(compute_status(state, 1, policy=default_policy()))
    assert document["topic_selection"] == {"include": ".*", "exclude": r"__.*|reassigner\..*",
                                           "excluded_topics": ["__consumer_offsets", "reassigner.events"]}
    overridden = ControllerState(cluster=cluster, config={"topics.exclude": "orders"})
    document = status_to_json(compute_status(overridden, 1, policy=default_policy()))
    assert document["topic_selection"]["excluded_topics"] == ["orders"]


def test_rows_say_what_each_reassignment_does_and_what_is_left_to_add_and_drop():
    from dataclasses import replace

    from tests.settings_defaults import default_policy

    first = Step(target=(5, 0, 1, 2, 3, 4), adding=(5,), elect_leader=True, leader_movement=True)
    running = compute_reassignment_rows(
        worked_example(StepInFlight(first, 1, 100.0), 0, (5, 0, 1, 2, 3, 4), adding=(5,)), 1)[0]
    assert (running.state, running.adding, running.removing) == ("running", (5,), ())
    # Between steps Kafka moves nothing: the row shows what is left to reach the target.
    between = compute_reassignment_rows(worked_example(None, 1, (5, 6, 1, 2, 3, 4)), 1)[0]
    assert (between.state, between.adding, between.removing) == ("waiting", (7, 8, 9), (1, 2, 3, 4))
    paused = compute_reassignment_rows(worked_example(None, 1, (5, 6, 1, 2, 3, 4)), 1,
                                       policy=replace(default_policy(), paused=True))[0]
    assert paused.state == "paused"
    state = worked_example(None, 1, (5, 6, 1, 2, 3, 4))
    record = replace(state.reassignments[TP], state=ReassignmentState.REVERTING,
                     in_flight=StepInFlight(Step(target=(0, 5, 1, 2, 3, 4), adding=(0,)), 2, 100.0))
    back = compute_reassignment_rows(state.with_records({TP: record}), 1)[0]
    assert back.state == "reverting"


def test_status_carries_a_banner_when_the_product_does_not_move_things_on_its_own():
    from dataclasses import replace

    from reassigner.operator.views.documents import compute_banner
    from tests.settings_defaults import default_policy

    state = worked_example(None, 0, (0, 1, 2, 3, 4))
    assert status_to_json(compute_status(state, 1, policy=default_policy()))["banner"] is None
    observing = status_to_json(compute_status(state, 1, policy=replace(default_policy(), mode="observe", paused=True)))
    assert observing["mode"] == "observe" and observing["banner"].startswith("mode observe")
    assert "paused" in observing["banner"]
    assert compute_banner("approve", False).startswith("mode approve: plans wait as proposals")
