"""A store found behind what the product published, at the pipeline's start (`streams.store_recovery`):
the pure rules."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, strategies as st

from planning.model import TopicPartition
from state.model import ControllerState
from streams.store_recovery import (PlansToResume, PublishedMarks, compute_caught_up, compute_published_marks,
                                    compute_rebuilt_offsets, compute_rebuilt_state, compute_resume_step,
                                    compute_store_behind)


def command(epoch: int, sequence: int = 0, kind: str = "ReassignmentStep") -> dict:
    return {"id": f"b3-rebalance-1/orders-0:1:{kind}", "key": "orders-0", "epoch": epoch,
            "payload": (kind, {"topic": "orders", "partition": 0, "throttle_sequence": sequence})}


def test_marks_are_the_highest_epoch_sequence_and_alert_batch():
    marks = compute_published_marks([command(4, 9), command(6, 2), command(5, 0, "ClearThrottle")],
                                    [{"id": "alert-12-0"}, {"id": "alert-40-store-lost"}, {"id": "alert-7-3"}])
    assert marks == PublishedMarks(epoch=6, batch=40, command_sequence=9)


def test_records_of_other_shapes_are_skipped():
    marks = compute_published_marks([{"id": "x", "epoch": None, "payload": "garbage"}],
                                    [{"id": "alert-x-1"}, {"id": "nonsense"}, {}])
    assert marks == PublishedMarks()


def test_an_intact_store_is_not_behind():
    assert compute_store_behind(taken_epoch=8, stored_last_batch=40, marks=PublishedMarks(7, 40, 3)) is None
    assert compute_store_behind(1, -1, PublishedMarks()) is None  # a first start


def test_an_emptied_store_is_behind_by_its_epoch():
    why = compute_store_behind(taken_epoch=1, stored_last_batch=-1, marks=PublishedMarks(7, 40, 3))
    assert why is not None and "planner epoch 0, but commands of epoch 7" in why


def test_a_store_rolled_back_within_one_epoch_is_behind_by_its_batches():
    why = compute_store_behind(taken_epoch=8, stored_last_batch=25, marks=PublishedMarks(7, 40, 3))
    assert why is not None and "ends at batch 25, but batch 40 raised alerts" in why


@given(st.integers(0, 50), st.integers(-1, 500), st.integers(0, 50), st.integers(-1, 500), st.integers(0, 900),
       st.integers(0, 900))
def test_a_rebuilt_state_issues_nothing_used_before(taken, stored_batch, published_epoch, published_batch,
                                                    stored_sequence, published_sequence):
    stored = ControllerState(config={"throttle.bytes.per.sec": "1000"}, last_batch=stored_batch,
                             command_sequence=stored_sequence)
    rebuilt = compute_rebuilt_state(stored, taken, PublishedMarks(published_epoch, published_batch,
                                                                  published_sequence))
    assert rebuilt.epoch >= taken and rebuilt.epoch > published_epoch
    assert rebuilt.last_batch >= max(stored_batch, published_batch)  # the next batch is above both
    assert rebuilt.command_sequence > max(stored_sequence, published_sequence)
    assert rebuilt.config == stored.config and not rebuilt.reassignments and not rebuilt.cluster.brokers


def test_requests_and_results_start_at_their_ends_and_the_events_from_the_start():
    logs = {("p.requests", 0): (0, 12), ("p.requests", 1): (0, 0), ("p.command-results", 0): (5, 9),
            ("p.isr-changes", 0): (0, 300)}
    assert compute_rebuilt_offsets(logs, ["p.requests", "p.command-results"]) == {
        ("p.requests", 0): 11, ("p.command-results", 0): 8}


def throttled_step(topic: str, partition: int, leaders: list[int], followers: list[int], rate=1000) -> dict:
    return {"id": f"b9-rebalance-2/{topic}-{partition}:1:ReassignmentStep", "epoch": 3,
            "payload": ("ReassignmentStep", {"topic": topic, "partition": partition, "throttle_sequence": 4,
                                             "throttle_rate_bytes_per_sec": rate,
                                             "throttle_leader_broker_ids": leaders,
                                             "throttle_follower_broker_ids": followers})}


def test_the_throttled_steps_and_log_dir_moves_published_are_marked():
    unthrottled = throttled_step("logs", 3, [9], [8], rate=None)
    log_dir_move = {"id": "m", "epoch": 3, "payload": ("LogDirMove", {"broker_id": 5, "topic": "a", "partition": 0,
                                                                      "target_dir": "/d", "throttle_bytes_per_sec": 10})}
    marks = compute_published_marks([throttled_step("orders", 0, [1, 2], [4]), throttled_step("orders", 7, [2, 3], [5]),
                                     unthrottled, log_dir_move], [])
    assert marks.throttled_brokers == {1, 2, 3, 4, 5}
    assert marks.throttled_partitions == {("orders", 0), ("orders", 7)}
    assert marks.log_dir_throttled == {5}


def test_a_rebuilt_state_carries_the_throttle_markers_so_their_throttles_are_cleared():
    marks = compute_published_marks([throttled_step("orders", 0, [1, 2], [4])], [])
    rebuilt = compute_rebuilt_state(ControllerState(), 5, marks)
    assert rebuilt.open_alerts == {'Throttle:{"brokers":[1,2,4],"partitions":[["orders",0]]}'}
    assert compute_rebuilt_state(ControllerState(), 5, PublishedMarks(3, 9, 4)).open_alerts == frozenset()


def step_to(topic: str, partition: int, final, kind: str = "ReassignmentStep") -> dict:
    fields = {"topic": topic, "partition": partition}
    if kind == "ReassignmentStep":
        fields["final_target_replicas"] = final
    return {"id": f"b5-rebalance-1/{topic}-{partition}:1:{kind}", "key": f"{topic}-{partition}", "epoch": 3,
            "payload": (kind, fields)}


def test_the_plans_running_are_the_partitions_whose_newest_command_is_a_step():
    marks = compute_published_marks([step_to("a", 0, [1, 2, 3]), step_to("a", 1, [4, 5, 6]),
                                     step_to("a", 1, None, "CancelReassignment"), step_to("b", 2, None),
                                     step_to("a", 0, [1, 2, 4])], [])
    assert marks.plans == (("a", 0, (1, 2, 4)),)  # a-1 cancelled; b-2 from a pipeline that did not say


def test_the_replay_has_caught_up_once_every_partition_reached_its_end_at_the_rebuild():
    ends = {("p.isr-changes", 0): 41, ("p.snapshots", 0): 3}
    assert not compute_caught_up({("p.isr-changes", 0): 41}, ends)
    assert compute_caught_up({("p.isr-changes", 0): 41, ("p.snapshots", 0): 7}, ends)
    assert compute_caught_up({}, {})


def test_the_resume_request_asks_only_for_partitions_not_at_their_target_nor_planned_since():
    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide
    from tests.handlers.handler_builders import T0, cluster_events, simple_cluster
    from tests.settings_defaults import default_policy

    cluster = simple_cluster(6, {"t": (3, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    plans = (("t", 0, (3, 4, 5)), ("t", 1, tuple(state.cluster.partition(TopicPartition("t", 1)).replicas)),
             ("gone", 0, (1, 2, 3)))
    request, left = compute_resume_step(PlansToResume(plans, {}), state, [], T0 + 5, "resume-1")
    assert left is None  # no rebalance was running: nothing after the Reassign
    assert request["payload"][0] == "Reassign" and request["payload"][1]["additional"] is True
    assert request["payload"][1]["partitions"] == [{"topic": "t", "partition": 0, "replicas": [3, 4, 5],
                                                    "log_dirs": None}]
    assert_encodes_request(request)
    assert compute_resume_step(PlansToResume(plans[1:], {}), state, [], T0 + 5, "resume-2") == (None, None)


def assert_encodes_request(request: dict) -> None:
    from schemas.codec import decode, encode
    assert decode("Request", encode("Request", request))["payload"] == request["payload"]


def test_a_rebalance_that_was_running_is_resumed_by_a_reassign_then_a_rebalance():
    """The Reassign first (a partition a finished step left with a replica too many gets its
    replication factor back), the Rebalance once that Reassign was applied and is over."""
    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide
    from tests.handlers.handler_builders import T0, cluster_events, simple_cluster
    from tests.settings_defaults import default_policy

    by_trigger = dict(step_to("t", 0, [3, 4, 5]), reassignment_id="b12-rebalance-1/t-0")
    by_request = dict(step_to("t", 1, [3, 4, 5]), reassignment_id="r-9/t-1", reason="rebalance request r-9: step 1")
    assert compute_published_marks([by_trigger, by_request], []).rebalance_topics == frozenset()  # every topic
    assert compute_published_marks([by_request], []).rebalance_topics == {"t"}
    assert compute_published_marks([step_to("t", 2, [1, 2, 3])], []).rebalance_topics is None
    cancelled = [by_request, step_to("t", 1, None, "CancelReassignment")]
    assert compute_published_marks(cancelled, []).rebalance_topics is None

    cluster = simple_cluster(6, {"t": (3, 3)})
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    marks = compute_published_marks([by_request], [])
    pending = PlansToResume(marks.plans, {}, marks.rebalance_topics)
    request, pending = compute_resume_step(pending, state, [], T0, "resume-3")
    assert request["payload"][0] == "Reassign" and pending.reassign_id == "resume-3"
    # Not applied yet: the Rebalance waits, however often it is asked.
    assert compute_resume_step(pending, state, ["someone-else"], T0, "resume-4") == (None, pending)
    moving = replace(state, reassignments={TopicPartition("t", 1): object()})  # only its keys are read
    request, pending = compute_resume_step(pending, moving, ["resume-3"], T0, "resume-5")
    assert request is None and pending.reassign_applied  # applied, its partition still moving
    request, left = compute_resume_step(pending, state, [], T0, "resume-6")
    assert left is None and request["payload"] == ("Rebalance", {"topics": ["t"], "log_dirs": False, "broker_ids": []})
    assert_encodes_request(request)
    # Nothing left to reassign (every partition at its target): the Rebalance at once.
    at_target = tuple(state.cluster.partition(TopicPartition("t", 1)).replicas)
    done = PlansToResume((("t", 1, at_target),), {}, frozenset())
    request, left = compute_resume_step(done, state, [], T0, "resume-7")
    assert left is None and request["payload"][1]["topics"] == []  # every topic
    gone = PlansToResume(marks.plans, {}, frozenset({"deleted-since"}), "resume-3", True)
    assert compute_resume_step(gone, state, [], T0, "resume-8") == (None, None)


def test_a_command_for_a_partition_under_another_key_does_not_end_its_plan():
    """The product keys every command of a partition by it (`<topic>-<partition>`), so they are
    read in their log's order. One under another key (fault test 2 forges a CancelReassignment
    of orders-0 keyed "forged") sits in another partition of the commands topic, read before or
    after in no given order: it must not drop orders-0 from the plans to resume (fault 9c)."""
    step = dict(step_to("orders", 0, [5, 4, 3]), reassignment_id="b40-rebalance-1/orders-0")
    forged = {"id": "forged-1", "key": "k" * 500, "epoch": 0, "reassignment_id": "r", "step": 1,
              "payload": ("CancelReassignment", {"topic": "orders", "partition": 0})}
    for read in ([forged, step], [step, forged]):
        marks = compute_published_marks(read, [])
        assert marks.plans == (("orders", 0, (5, 4, 3)),)
        assert marks.rebalance_topics == frozenset()
