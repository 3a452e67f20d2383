"""ISR shrinks outside the moves, through `decide` (`handlers.triggers`, rule 7): a broker falling
out of the ISR of a partition nothing moves is counted by the event's time; a partition the
product reassigns, or Kafka shows reassigning, is the movement's own and is not counted; the
count forgets after ten minutes; no alert either way."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import T0, cluster_events, partition_event, reassign, simple_cluster
from tests.settings_defaults import default_policy
from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from planning.model import TopicPartition
from planning.movement.isr_shrinks import WINDOW_MS, count_isr_shrinks
from state.model import ControllerState


def test_a_shrink_outside_the_moves_counts_and_one_inside_does_not():
    cluster = simple_cluster(4, {"t": (4, 3)})
    policy = default_policy()
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), policy).state
    # Partition 0 is moved by the product (a Reassign request), partitions 1-3 are not.
    moved = TopicPartition("t", 0)
    state = decide(state, BatchInputs(1, T0 + 1000, requests=(reassign({moved: (1, 2, 3)}, T0 + 1000),)),
                   policy).state
    assert moved in state.reassignments
    p0, p1, p2 = (cluster.partition(TopicPartition("t", n)) for n in range(3))
    at = T0 + 5000
    events = (partition_event(replace(p0, isr=p0.isr[:1]), at),  # ours: not counted
              partition_event(replace(p1, isr=p1.isr[:2]), at),  # 3 out of 1's ISR
              partition_event(replace(p2, isr=p2.isr[:2], replicas=p2.replicas + (0,), adding=(0,)), at))  # Kafka's
    decision = decide(state, BatchInputs(2, at, events), policy)
    window = decision.state.isr_shrinks
    assert {b: count_isr_shrinks(window, b, at) for b in range(4)} == {0: 0, 1: 0, 2: 0, 3: 1}, window
    assert not [m for m in decision.outbox if m.schema == "Alert" and "Shrink" in str(m.record.get("kind"))]
    # Ten minutes later (a quiet batch), the count is gone from the state too.
    later = at + WINDOW_MS + 60_000
    quiet = decide(decision.state, BatchInputs(3, later, (partition_event(replace(p1, isr=p1.isr[:2]), later),)),
                   policy)
    assert quiet.state.isr_shrinks == {} and count_isr_shrinks(quiet.state.isr_shrinks, 3, later) == 0


def test_the_window_round_trips_through_the_stored_meta():
    import json

    from state.stored_forms import isr_shrinks_from_storage, meta_to_storage

    window = {3: ((T0, 2, T0 + 4_000), (T0 + 60_000, 1, T0 + 60_000)), 7: ((T0, 1, T0),)}
    stored = meta_to_storage(ControllerState(isr_shrinks=window))["isr_shrinks"]
    assert isr_shrinks_from_storage(json.loads(stored)) == window
    assert isr_shrinks_from_storage({}) == {}
    # Written before the latest shrink was kept: at the bucket's start (counted as before).
    assert isr_shrinks_from_storage({"3": [[T0, 2]]}) == {3: ((T0, 2, T0),)}
