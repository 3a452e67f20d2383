"""Reactions to the cluster (SPEC 3): broker added / failed / recovered, decommission, disk failure."""

from __future__ import annotations

from handler_builders import (
    T0,
    Loop,
    alerts,
    broker_event,
    cluster_events,
    commands,
    log_dir_event,
    partition_event,
    reassign,
    simple_cluster,
    topic_event,
)

from tests.settings_defaults import default_policy
from state.model import ControllerState
from planning.model import Broker, LogDir, TopicPartition


def new_broker(broker_id: int, dirs=("/d0",)) -> Broker:
    return Broker(broker_id, rack=f"r{broker_id % 3}", log_dirs=tuple(LogDir(d) for d in dirs))


def test_broker_added_plans_after_the_grace_period_and_not_before():
    policy = default_policy(broker_add_grace_seconds=30, max_partition_movements=2, max_movements_per_broker=10)
    loop = Loop.start(simple_cluster(3, {"t": (12, 2)}), policy)
    assert not loop.step().outbox  # the first view of the cluster: nothing to say
    loop.sim.add_broker(new_broker(3))
    first = loop.step()
    assert [a["kind"] for a in alerts(first)] == ["BrokerAdded"]
    assert not commands(first)
    for _ in range(29):
        loop.sim.tick(1.0)
        assert not commands(loop.step()), "no plan before broker.add.grace"
    loop.sim.tick(1.0)
    planned = loop.step()
    assert alerts(planned, "PlanCreated")
    steps = commands(planned, "ReassignmentStep")
    assert 1 <= len(steps) <= policy.max_partition_movements
    assert any(3 in c["payload"][1]["target_replicas"] for c in steps)
    loop.run(600, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    counts = {b: 0 for b in range(4)}
    for p in loop.sim.snapshot().partitions():
        for b in p.replicas:
            counts[b] += 1
    assert counts == {0: 6, 1: 6, 2: 6, 3: 6}


def test_a_broker_whose_dirs_arrive_before_its_membership_is_still_added():
    """The watcher publishes a new broker's dirs and its membership to different topics, and a
    micro-batch may read the dirs first (fault test 9c, 2026-11-29: a LogDirState made broker 5
    alive, its UNFENCED then changed nothing, and no BrokerAdded or rebalance ever came)."""
    loop = Loop.start(simple_cluster(3, {"t": (12, 2)}), default_policy(broker_add_grace_seconds=0))
    loop.step()
    joining = new_broker(3)
    early = loop.step(extra_events=[log_dir_event(3, joining.log_dirs[0], loop.now_ms)])
    assert not alerts(early, "BrokerAdded"), "its dirs alone do not say it is up"
    assert loop.state.cluster.broker(3) is not None and not loop.state.cluster.broker(3).alive
    loop.sim.add_broker(joining)
    joined = loop.step()
    assert [a["kind"] for a in alerts(joined)] == ["BrokerAdded", "PlanCreated"]
    assert any(3 in c["payload"][1]["target_replicas"] for c in commands(joined, "ReassignmentStep"))


def test_several_additions_coalesce_into_one_plan():
    loop = Loop.start(simple_cluster(3, {"t": (12, 2)}), default_policy(broker_add_grace_seconds=30))
    loop.step()
    loop.sim.add_broker(new_broker(3))
    loop.step()
    loop.sim.tick(10.0)
    loop.sim.add_broker(new_broker(4))
    loop.step()
    plans = []
    for _ in range(40):
        loop.sim.tick(1.0)
        plans += alerts(loop.step(), "PlanCreated")
    assert len(plans) == 1 and plans[0]["message"].startswith("brokers 3, 4 added")


def test_broker_failure_heals_after_grace_unless_it_comes_back():
    policy = default_policy(broker_failure_grace_seconds=60)
    loop = Loop.start(simple_cluster(4, {"t": (8, 2)}), policy)
    loop.step()
    loop.sim.kill_broker(3)
    down = loop.step()
    assert [a["kind"] for a in alerts(down, "BrokerFailed")] == ["BrokerFailed"]
    loop.sim.tick(30.0)
    loop.sim.restart_broker(3)
    back = loop.step()
    assert alerts(back, "BrokerRecovered")
    loop.sim.tick(60.0)
    assert not commands(loop.step()) and not loop.state.broker_down_since_ms

    loop.sim.kill_broker(2)
    loop.step()
    for _ in range(59):
        loop.sim.tick(1.0)
        assert not commands(loop.step())
    loop.sim.tick(1.0)
    healing = loop.step()
    assert alerts(healing, "PlanCreated") and commands(healing, "ReassignmentStep")
    loop.run(900, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert all(2 not in p.replicas for p in loop.sim.snapshot().partitions())


def test_healing_two_dead_replicas_with_the_preferred_leader_completes_with_r_1():
    # t-0 (0, 1, 2) and t-5 (5, 0, 1) lose two replicas each, t-0 its preferred leader too. R = 1
    # lets a step drop one replica, yet both dead ones must go (they never rejoin the ISR).
    policy = default_policy(broker_failure_grace_seconds=10, max_replica_movements=1)
    loop = Loop.start(simple_cluster(6, {"t": (6, 3)}), policy)
    loop.step()
    assert loop.sim.partition(TopicPartition("t", 0)).replicas == (0, 1, 2)
    loop.sim.kill_broker(0)
    loop.sim.kill_broker(1)
    loop.run(600, until=lambda lp: lp.idle() and lp.state.healed_brokers)
    assert loop.idle() and not loop.violations
    assert all(not {0, 1} & set(p.replicas) for p in loop.sim.snapshot().partitions())


def test_a_new_preferred_leader_replaces_two_dead_replicas_with_r_1():
    # SPEC 5.1 adds a new preferred leader alone; the step also drops both dead replicas.
    tp = TopicPartition("t", 0)
    loop = Loop.start(simple_cluster(6, {"t": (1, 3)}), default_policy(max_replica_movements=1))
    loop.step()
    loop.sim.kill_broker(0)
    loop.sim.kill_broker(1)
    first = loop.step([reassign({tp: (3, 4, 2)}, loop.now_ms, "heal")])
    assert [c["payload"][1]["target_replicas"] for c in commands(first, "ReassignmentStep")] == [[3, 2]]
    loop.run(600, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert loop.sim.partition(tp).replicas == (3, 4, 2) and loop.sim.partition(tp).leader == 3


def test_self_healing_is_suppressed_when_too_many_brokers_are_down():
    policy = default_policy(broker_failure_grace_seconds=10, self_healing_max_failed_brokers=1)
    loop = Loop.start(simple_cluster(6, {"t": (12, 3)}), policy)
    loop.step()
    loop.sim.kill_broker(4)
    loop.sim.kill_broker(5)
    loop.step()
    suppressed = []
    for _ in range(30):
        loop.sim.tick(1.0)
        decision = loop.step()
        assert not commands(decision)
        suppressed += alerts(decision, "SelfHealingSuppressed")
    assert len(suppressed) == 1 and suppressed[0]["severity"] == "CRITICAL"


def test_decommission_drains_the_broker_then_says_so():
    loop = Loop.start(simple_cluster(4, {"t": (8, 2)}), default_policy(max_movements_per_broker=4))
    loop.step()
    from handler_builders import request
    first = loop.step([request("Decommission", {"broker_ids": [1]}, loop.now_ms, "decom-1")])
    assert loop.state.cluster.broker(1).draining
    assert commands(first, "ReassignmentStep")
    drained = []
    for _ in range(600):
        loop.sim.tick(1.0)
        drained += alerts(loop.step(), "BrokerDrained")
        if drained:
            break
    assert [a["subject"] for a in drained] == ["broker-1"]
    assert all(1 not in p.replicas for p in loop.sim.snapshot().partitions())
    assert not loop.violations


def test_disk_failure_alerts_and_heals_the_replicas_to_other_brokers():
    loop = Loop.start(simple_cluster(4, {"t": (8, 2)}, dirs=("/d0", "/d1")), default_policy())
    loop.step()
    hit = [p.tp for p in loop.sim.snapshot().partitions() if p.log_dir_of(1) == "/d1"]
    assert hit
    loop.sim.fail_log_dir(1, "/d1")
    failed = loop.step()
    disk = alerts(failed, "DiskFailed")
    assert len(disk) == 1 and disk[0]["details"]["replicas"] == str(len(hit))
    assert commands(failed, "ReassignmentStep")
    loop.run(900, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    for tp in hit:
        assert 1 not in loop.sim.partition(tp).replicas
    assert all(p.offline_replicas == () for p in loop.sim.snapshot().partitions())


def test_under_min_isr_alerts_once_per_condition():
    cluster = simple_cluster(3, {"t": (3, 3)}, min_isr=2)
    loop = Loop.start(cluster, default_policy(broker_failure_grace_seconds=10_000))
    loop.step()
    loop.sim.kill_broker(0)
    loop.sim.kill_broker(1)
    first = loop.step()
    under = alerts(first, "UnderMinIsr")
    assert len(under) == 1 and under[0]["details"]["count"] == "3"
    loop.sim.tick(1.0)
    assert not alerts(loop.step(), "UnderMinIsr")
    loop.sim.restart_broker(0)
    loop.sim.restart_broker(1)
    for _ in range(3):
        loop.sim.tick(1.0)
        loop.step()
    assert not any(k.startswith("UnderMinIsr") for k in loop.state.open_alerts)
    loop.sim.kill_broker(0)
    loop.sim.kill_broker(1)
    assert alerts(loop.step(), "UnderMinIsr"), "a new occurrence alerts again"


def test_fenced_broker_event_for_an_unknown_broker_is_tracked_as_down():
    loop = Loop.start(simple_cluster(3), default_policy())
    loop.step()
    decision = loop.step(extra_events=[broker_event(Broker(9, alive=False), loop.now_ms, "FENCED")])
    assert alerts(decision, "BrokerFailed")



def test_a_new_broker_first_seen_fenced_is_still_rebalanced_onto():
    """Regression (scenario test, add two brokers): KRaft registers a new broker fenced and
    unfences it a second or two later; a poll in between made it a failed broker that then
    "recovered", and no plan ever moved a replica onto it."""
    policy = default_policy(broker_add_grace_seconds=5)
    loop = Loop.start(simple_cluster(3, {"t": (12, 2)}), policy)
    loop.step()
    fenced = loop.step(extra_events=[broker_event(Broker(3, rack="r0", alive=False), loop.now_ms, "FENCED")])
    assert [a["kind"] for a in alerts(fenced)] == ["BrokerFailed"]
    loop.sim.add_broker(new_broker(3))
    joined = loop.step()
    assert [a["kind"] for a in alerts(joined)] == ["BrokerRecovered", "BrokerAdded"]
    plans = []
    for _ in range(10):
        loop.sim.tick(1.0)
        plans += alerts(loop.step(), "PlanCreated")
    assert len(plans) == 1 and plans[0]["message"].startswith("broker 3 added")

def test_disk_failure_is_traced_when_the_watcher_no_longer_knows_the_replicas_dir():
    """Regression: Kafka describes an offline dir with no replicas, so the watcher's partition
    events carry None as the dir of a replica in it (and list it offline). The replica must
    still count as hit by the failure, and be healed."""
    from dataclasses import replace as replace_

    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide

    cluster = simple_cluster(4, {"t": (8, 2)}, dirs=("/d0", "/d1"))
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    hit = [p for p in cluster.partitions() if p.log_dir_of(1) == "/d1"]
    assert hit
    failed_dir = next(d for d in cluster.broker(1).log_dirs if d.path == "/d1")
    as_the_watcher_reports = tuple(
        partition_event(replace_(
            p, isr=tuple(b for b in p.isr if b != 1), offline_replicas=(1,),
            log_dirs=tuple(None if b == 1 else d for b, d in zip(p.replicas, p.log_dirs))), T0 + 1000)
        for p in hit)
    events = (log_dir_event(1, replace_(failed_dir, online=False), T0 + 1000),) + as_the_watcher_reports
    decision = decide(state, BatchInputs(1, T0 + 1000, events), default_policy())
    [disk] = alerts(decision, "DiskFailed")
    assert disk["details"]["replicas"] == str(len(hit))
    healing = {(c["payload"][1]["topic"], c["payload"][1]["partition"])
               for c in commands(decision, "ReassignmentStep")}
    assert healing and healing <= {(p.topic, p.partition) for p in hit}


def _after_a_dir_failure():
    """A 4-broker cluster whose broker 1 loses /d1, and one partition whose replica on broker 1
    the product last knew in /d2 (a log-dir move into /d1 completed just before the failure):
    (decide's state, the failed dir's event, that partition as Kafka then reports it)."""
    from dataclasses import replace as replace_

    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide

    cluster = simple_cluster(4, {"t": (8, 2)}, dirs=("/d0", "/d1", "/d2"))
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    moved = next(p for p in cluster.partitions() if p.log_dir_of(1) == "/d2")
    failed_dir = next(d for d in cluster.broker(1).log_dirs if d.path == "/d1")
    isr = tuple(b for b in moved.isr if b != 1)
    offline = replace_(moved, isr=isr, leader=isr[0], leader_epoch=moved.leader_epoch + 1, offline_replicas=(1,))
    return state, log_dir_event(1, replace_(failed_dir, online=False), T0 + 1000), offline


def test_a_replica_kafka_reports_offline_in_a_failed_dir_is_healed_whatever_dir_was_last_known():
    """Regression (CI scenarios, 2026-11-30): a log-dir move of orders-10 into broker 1's data-0
    completed 0.5 s before the dir failed; the product still knew the replica in data-1, so the
    failure's DiskFailed counted 33 replicas where Kafka took 34 offline, and orders-10 stayed
    under-replicated for good. An offline replica on a broker whose dir failed is in that dir."""
    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide

    state, dir_failed, offline = _after_a_dir_failure()
    hit = [p for p in state.cluster.partitions() if p.log_dir_of(1) == "/d1"]
    decision = decide(state, BatchInputs(1, T0 + 1000, (dir_failed, partition_event(offline, T0 + 1000))),
                      default_policy())
    [disk] = alerts(decision, "DiskFailed")
    assert disk["details"]["replicas"] == str(len(hit) + 1)
    healing = decision.state.reassignments.get(offline.tp)
    assert healing is not None and 1 not in healing.final_target
    assert offline.tp in decision.state.cluster.broker(1).cannot_host


def test_a_replica_reported_offline_after_its_dirs_failure_is_healed_once():
    """The partition's event may reach a batch after the dir's (they travel on different topics):
    the replica is healed then, once; the same report again plans nothing more."""
    from handlers.micro_batch import BatchInputs
    from handlers.decide import decide

    policy = default_policy()
    state, dir_failed, offline = _after_a_dir_failure()
    first = decide(state, BatchInputs(1, T0 + 1000, (dir_failed,)), policy)
    first_healed = {(c["payload"][1]["topic"], c["payload"][1]["partition"])
                    for c in commands(first, "ReassignmentStep")}
    assert (offline.tp.topic, offline.tp.partition) not in first_healed
    assert offline.tp not in first.state.cluster.broker(1).cannot_host
    late = decide(first.state, BatchInputs(2, T0 + 2000, (partition_event(offline, T0 + 2000),)), policy)
    [plan] = alerts(late, "PlanCreated")
    assert "1 more replicas found offline in log dir /d1 on broker 1" in plan["message"]
    assert set(late.state.reassignments) - set(first.state.reassignments) == {offline.tp}
    assert 1 not in late.state.reassignments[offline.tp].final_target
    assert offline.tp in late.state.cluster.broker(1).cannot_host
    again = decide(late.state, BatchInputs(3, T0 + 3000, (partition_event(offline, T0 + 3000),)), policy)
    assert not alerts(again, "PlanCreated")


def test_partitions_a_failed_dir_held_stay_off_its_broker_until_it_restarts():
    """Kafka never starts again, on a broker, a replica of a partition its failed dir held (until
    the broker restarts); the simulator does the same, so a plan putting one back would stall."""
    from handler_builders import request

    loop = Loop.start(simple_cluster(4, {"t": (8, 2), "u": (8, 2)}, dirs=("/d0", "/d1")), default_policy())
    loop.step()
    hit = {p.tp for p in loop.sim.snapshot().partitions() if p.log_dir_of(1) == "/d1"}
    loop.sim.fail_log_dir(1, "/d1")
    loop.step()
    assert loop.state.cluster.broker(1).cannot_host == hit
    loop.run(900, until=lambda lp: lp.idle())
    assert all(1 not in loop.sim.partition(tp).replicas for tp in hit)

    rebalance = request("Rebalance", {"topics": []}, loop.now_ms, "rebalance-1")
    assert alerts(loop.step([rebalance]), "PlanCreated"), "broker 1 is light: there is work"
    loop.run(900, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert not [a for d in loop.decisions for a in alerts(d, "ReassignmentStalled")]
    assert all(1 not in loop.sim.partition(tp).replicas for tp in hit)
    assert sum(1 in p.replicas for p in loop.sim.snapshot().partitions()) > 0

    # Down and up with the dir still offline: from the outside the same as a broker fenced for a
    # missed heartbeat, which still refuses them; kept (conservative after a real restart).
    loop.sim.kill_broker(1)
    loop.step()
    loop.sim.restart_broker(1)
    loop.step()
    assert loop.state.cluster.broker(1).cannot_host == hit
    loop.sim.restore_log_dir(1, "/d1")  # disk replaced, broker restarted: Kafka forgot them
    loop.step()
    assert loop.state.cluster.broker(1).cannot_host == frozenset()


def test_a_topic_re_created_under_its_name_drops_the_old_incarnations_reassignments():
    """Regression (found by the watcher-to-pipeline property): a new topic id means the old
    topic is gone with its partitions and reassignments; the new one's partitions are taken
    as told, although their leader epochs start again."""
    from dataclasses import replace as replace_

    from handlers.decide import decide
    from handlers.micro_batch import BatchInputs

    cluster = simple_cluster(4, {"t": (4, 2)})
    old_topic = replace_(cluster.topics_by_name["t"], topic_id="id-1")
    cluster = replace_(cluster, topics=(old_topic,))
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(cluster, T0)), default_policy()).state
    state = decide(state, BatchInputs(1, T0 + 1, requests=(
        reassign({TopicPartition("t", 0): (2, 3)}, T0 + 1, "move"),)), default_policy()).state
    assert TopicPartition("t", 0) in state.reassignments
    new_partition = replace_(old_topic.partitions[0], replicas=(3, 0), isr=(3, 0), leader=3, leader_epoch=0)
    new_topic = replace_(old_topic, partitions=(new_partition,), topic_id="id-2")
    decision = decide(state, BatchInputs(2, T0 + 2000, (topic_event(new_topic, T0 + 2000),
                                                        partition_event(new_partition, T0 + 2000))),
                      default_policy())
    [deleted] = alerts(decision, "TopicDeleted")
    assert "re-created" in deleted["message"] and deleted["details"]["reassignments_dropped"] == "1"
    after = decision.state.cluster.topics_by_name["t"]
    assert (after.topic_id, [p.replicas for p in after.partitions]) == ("id-2", [(3, 0)])
    assert not decision.state.reassignments


def racked_cluster(min_isr_t: int):
    """Broker 0 alone in rack ra: a replica of t-0 (RF 3 over three racks) that leaves broker 0
    has nowhere to go without putting two replicas in one rack; u-0 (RF 2) has."""
    from planning.model import Cluster, PartitionState, Topic

    dirs = (LogDir("/d0"), LogDir("/d1"))
    brokers = tuple(Broker(b, rack=rack, log_dirs=dirs) for b, rack in enumerate(("ra", "rb", "rc", "rc")))
    t0 = PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, size_bytes=10**6, log_dirs=("/d1", "/d0", "/d0"),
                        leader_epoch=0)
    u0 = PartitionState("u", 0, (0, 1), (0, 1), 0, size_bytes=10**6, log_dirs=("/d1", "/d0"), leader_epoch=0)
    return Cluster(brokers, (Topic("t", (t0,), min_isr_t), Topic("u", (u0,), 1)))


def test_a_heal_restores_what_it_can_and_names_only_what_cannot_keep_rack_spread():
    """Regression: one partition that could not keep rack spread made the whole heal of a failed
    dir infeasible, and every replica of it stayed under-replicated until the broker restarted."""
    loop = Loop.start(racked_cluster(min_isr_t=2), default_policy())
    loop.step()
    loop.sim.fail_log_dir(0, "/d1")
    failed = loop.step()
    [infeasible] = alerts(failed, "PlanInfeasible")
    assert infeasible["severity"] == "ERROR" and "1 partitions cannot be healed" in infeasible["message"]
    assert infeasible["details"]["partitions"] == "t-0"
    loop.run(900, until=lambda lp: lp.idle())
    assert 0 not in loop.sim.partition(TopicPartition("u", 0)).replicas
    assert loop.sim.partition(TopicPartition("t", 0)).replicas == (0, 1, 2), "left as it is"


def test_the_last_resort_heals_a_partition_under_min_isr_without_rack_spread():
    loop = Loop.start(racked_cluster(min_isr_t=3), default_policy())
    loop.step()
    loop.sim.fail_log_dir(0, "/d1")
    failed = loop.step()
    [relaxed] = alerts(failed, "PlanInfeasible")
    assert relaxed["severity"] == "WARNING" and "without rack spread" in relaxed["message"]
    loop.run(900, until=lambda lp: lp.idle())
    healed = loop.sim.partition(TopicPartition("t", 0))
    assert 0 not in healed.replicas and len(healed.isr) == 3
    assert 0 not in loop.sim.partition(TopicPartition("u", 0)).replicas
