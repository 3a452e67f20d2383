"""The end of a plan (`handlers.plan_ends`): one PlanCompleted when its last partition stops
moving for it, telling how each ended; a partition a later plan re-targets counts as superseded
in the earlier one and as a member of the later one; a cancelled one makes the end a WARNING.
And the cancel of a decommission (`handlers.requests`): the broker stops draining once nothing
moves off it any more, unless the Cancel asks to keep it draining."""

from __future__ import annotations

from handler_builders import Loop, alerts, reassign, request

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from tests.settings_defaults import default_policy

MB = 10**6


def small_cluster() -> Cluster:
    brokers = tuple(Broker(b, log_dirs=(LogDir("/d0", replica_count=0, replica_bytes=0),)) for b in range(5))
    parts = tuple(PartitionState("t", n, (0, 1), (0, 1), 0, size_bytes=200 * MB, log_dirs=("/d0", "/d0"))
                  for n in range(3))
    return Cluster(brokers, (Topic("t", parts, 1),))


def ends(loop: Loop) -> list[dict]:
    return [a for d in loop.decisions for a in alerts(d, "PlanCompleted")]


def run_until_idle(loop: Loop, seconds: int = 600) -> None:
    loop.run(seconds, until=lambda lp: lp.idle())


def test_each_plan_ends_once_counting_what_a_later_plan_took_over():
    loop = Loop.start(small_cluster(), default_policy(), bytes_per_sec=10 * MB)  # a step copies for 20 s
    loop.step()
    tp = [TopicPartition("t", n) for n in range(3)]
    loop.step([reassign({tp[0]: (2, 3), tp[1]: (2, 3)}, loop.now_ms, "first")])
    assert loop.state.plans["first"].partitions == 2 and loop.state.plans["first"].bytes_planned == 800 * MB
    loop.sim.tick(1.0)
    loop.step([reassign({tp[1]: (3, 4), tp[2]: (3, 4)}, loop.now_ms, "second", additional=True)])
    assert loop.state.plans["first"].superseded == 1 and loop.state.plans["second"].partitions == 2
    run_until_idle(loop)
    by_plan = {a["details"]["plan_id"]: a for a in ends(loop)}
    assert sorted(by_plan) == ["first", "second"] and len(ends(loop)) == 2 and not loop.state.plans
    first, second = by_plan["first"]["details"], by_plan["second"]["details"]
    assert (first["partitions"], first["completed"], first["superseded"], first["cancelled"]) == ("2", "1", "1", "0")
    assert (second["partitions"], second["completed"], second["cancelled"]) == ("2", "2", "0")
    assert by_plan["second"]["severity"] == "INFO" and "ended after" in by_plan["second"]["message"]
    assert float(second["duration_seconds"]) >= 20  # at least one 200 MB copy at 10 MB/s


def test_a_cancelled_partition_makes_the_end_a_warning():
    loop = Loop.start(small_cluster(), default_policy(), bytes_per_sec=10 * MB)
    loop.step()
    loop.step([reassign({TopicPartition("t", 0): (2, 3), TopicPartition("t", 1): (2, 3)}, loop.now_ms, "moving")])
    loop.sim.tick(1.0)
    loop.step([request("Cancel", {"topic": "t", "partition": 0, "keep": False}, loop.now_ms, "stop-0")])
    run_until_idle(loop)
    (end,) = ends(loop)
    assert end["severity"] == "WARNING" and end["key"] == "moving", end
    assert (end["details"]["completed"], end["details"]["cancelled"]) == ("1", "1") and "1 cancelled" in end["message"]


def decommissioning(keep_draining: bool | None, topic: str | None = None):
    """Broker 0 decommissioned (its 3 replicas of t and 1 of u leave, slowly), then a Cancel."""
    cluster = small_cluster()
    other = Topic("u", (PartitionState("u", 0, (0, 2), (0, 2), 0, size_bytes=200 * MB, log_dirs=("/d0", "/d0")),), 1)
    loop = Loop.start(Cluster(cluster.brokers, cluster.topics + (other,)), default_policy(), bytes_per_sec=10 * MB)
    loop.step()
    loop.step([request("Decommission", {"broker_ids": [0]}, loop.now_ms, "drain-0")])
    assert loop.state.cluster.broker(0).draining and loop.state.reassignments
    loop.sim.tick(1.0)
    fields = {"topic": topic, "partition": None, "keep": False}
    if keep_draining is not None:
        fields["keep_draining"] = keep_draining
    decision = loop.step([request("Cancel", fields, loop.now_ms, "stop")])
    (said,) = [a for a in alerts(decision, "ReassignmentCancelled") if a["key"] == "stop"]
    return loop, said


def test_cancelling_a_decommission_ends_the_drain_unless_asked_to_keep_it():
    loop, said = decommissioning(None)  # a request written before keep_draining: the default
    assert not loop.state.cluster.broker(0).draining and said["details"]["drains_stopped"] == "0"
    assert "no longer draining" in said["message"]
    loop, said = decommissioning(True)
    assert loop.state.cluster.broker(0).draining and "stay draining (--keep-draining)" in said["message"]


def test_a_cancel_that_leaves_part_of_the_drain_running_keeps_the_broker_draining():
    loop, said = decommissioning(False, topic="t")  # u-0 still moves off broker 0
    assert loop.state.cluster.broker(0).draining and said["details"]["drains_stopped"] == ""
