"""The Redis controller store against a real Redis: round trips, atomic idempotent commits,
the outbox, and the memory a partition costs."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from state.model import ControllerState, ObservationTimes, Proposal
from planning.model import Broker, Cluster, KafkaFacts, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.log_dirs import LogDirTask
from planning.movement.reassignment import StepInFlight, start_reassignment, start_step
from planning.movement.partition_steps import Step
from state.model import OutboundMessage
from schemas.errors import FencedError
from state.controller_store import ControllerStore
from state.stored_forms import reassignment_from_storage, reassignment_to_storage

pytestmark = [pytest.mark.stack]


def sample_state(isr=(1, 2, 3)) -> ControllerState:
    brokers = tuple(
        Broker(i, f"/dc1/r{i}", True, i == 3,
               (LogDir(f"/data/b{i}/d0", True, 100, 40, 2000, 2, frozenset({TopicPartition("orders", 1)})),
                LogDir(f"/data/b{i}/d1", i != 2, 100, 90)),
               # what broker 2's failed dir held (Broker.cannot_host)
               frozenset({TopicPartition("orders", 2), TopicPartition("pay.ments_x-y", 11)}) if i == 2
               else frozenset())
        for i in (1, 2, 3)
    )
    partitions = tuple(
        PartitionState("orders", p, (1, 2, 3), tuple(isr), 1, 1000 + p,
                       ("/data/b1/d0", "/data/b2/d1", None), (), (), (), 4,
                       *((1250.5, 3000.25) if p == 1 else (None, None)),
                       # KIP-966: eligible leaders outside the ISR, and the last known ones
                       eligible_leaders=tuple(b for b in (2, 3) if b not in isr) if p == 2 else (),
                       last_known_elr=(2, 3) if p == 2 else ())
        for p in range(3)
    )
    tp = TopicPartition("orders", 0)
    moving = start_step(start_reassignment("r1-orders-0", tp, (1, 2, 3), (4, 2, 3), reason="test"),
                        Step((4, 1, 2, 3), (4,), (), True, True), started_at=12.5)
    return ControllerState(
        cluster=Cluster(brokers, (Topic("orders", partitions, 2, "Kf3pAqGHT2uVvJZ4a0dB1w"),)),
        reassignments={tp: moving},
        broker_added_at_ms={4: 1000},
        broker_down_since_ms={2: 2000},
        healed_brokers=frozenset({7}),
        config={"reassignment.max.concurrent.partition.movements": "3"},
        proposals={"p1": Proposal("p1", {tp: (4, 2, 3)}, "broker 4 added", 99)},
        epoch=3,
        open_alerts=frozenset({"UnderMinIsr:orders-1"}),
        command_sequence=5,
        observed_at=ObservationTimes(topics={"orders": 1_800_000_000_123}, brokers={1: 7, 3: 9}),
        kafka=KafkaFacts("4.1", 27, ("log-dir moves and dir failures", "eligible leader replicas")),
        log_dir_moves={task.key: task for task in (
            LogDirTask(TopicPartition("orders", 1), 1, "/data/b1/d0", "/data/b1/d1", 1001, "dirs unbalanced",
                       "b7-dirs-1", 1, 14.5),
            LogDirTask(TopicPartition("orders", 2), 1, "/data/b1/d1", None, 1002, "reassign request r", "r"))},
    )


@pytest.fixture
def store(redis_client):
    return ControllerStore(redis_client, f"test-{uuid.uuid4().hex[:8]}")


def test_a_committed_state_loads_back_equal(store):
    state = sample_state()
    assert store.commit(0, ControllerState(), state, [])
    loaded = store.load()
    assert loaded.last_batch == 0
    assert loaded.with_changes(last_batch=-1) == state
    assert loaded.reassignments[TopicPartition("orders", 0)].in_flight == StepInFlight(
        Step((4, 1, 2, 3), (4,), (), True, True), 1, 12.5)


def test_a_replayed_batch_is_skipped_and_its_outbox_kept_until_published(store):
    state = sample_state()
    message = OutboundMessage("dead-letter", "orders-0", "DeadLetter", {
        "schema_version": 1, "event_time": 5, "id": "orders-0-7", "key": "orders-0",
        "source_topic": "reassigner.isr-changes", "source_partition": 0, "source_offset": 7,
        "source_key": None, "value": b"\x00\xffnot avro", "headers": {},
        "expected_schema": "PartitionState", "reason": "garbage"})
    assert store.commit(5, ControllerState(), state, [message])
    shrunk = sample_state(isr=(1,))
    assert not store.commit(5, state, shrunk, [])
    assert not store.commit(4, state, shrunk, [])
    assert store.load().cluster.partitions_by_tp[TopicPartition("orders", 1)].isr == (1, 2, 3)
    [(batch, [pending])] = store.pending_outbox()
    assert batch == 5 and pending == message
    store.mark_published(5)
    assert store.pending_outbox() == []


def test_only_changed_fields_are_written_and_removals_delete(store, redis_client):
    state = sample_state()
    store.commit(0, ControllerState(), state, [])
    shrunk = state.with_cluster(
        state.cluster.with_partitions(
            [PartitionState("orders", 1, (1, 2, 3), (1, 2), 1, 1001,
                            ("/data/b1/d0", "/data/b2/d1", None), leader_epoch=5)]),
    ).with_records({tp: None for tp in state.reassignments})
    from state.stored_forms import compute_changes

    changes = compute_changes(state, shrunk)
    assert changes["partitions"]["set"][0] == "orders:1" and len(changes["partitions"]["set"]) == 2
    assert changes["reassignments"] == {"set": [], "del": ["orders:0"]}
    assert "brokers" not in changes
    store.commit(1, state, shrunk, [])
    loaded = store.load()
    assert dict(loaded.reassignments) == {}
    assert loaded.cluster.partitions_by_tp[TopicPartition("orders", 1)].isr == (1, 2)


def test_a_finished_log_dir_move_is_deleted_and_the_others_untouched(store, redis_client):
    state = sample_state()
    store.commit(0, ControllerState(), state, [])
    (first, second) = sorted(state.log_dir_moves)
    after = state.with_changes(log_dir_moves={second: state.log_dir_moves[second]})
    store.commit(1, state, after, [])
    assert sorted(k.decode() for k in redis_client.hkeys(store.keys["logdir_moves"])) == ["1:orders:2"]
    assert store.load().log_dir_moves == after.log_dir_moves


def test_state_written_before_observation_times_were_kept_still_loads(store, redis_client):
    redis_client.hset(store.keys["brokers"], "1", '["/dc1/r1",true,false,[["/data/d0",true,100,40]]]')
    redis_client.hset(store.keys["topics"], "orders", "2")
    loaded = store.load()
    assert loaded.cluster.broker(1) == Broker(1, "/dc1/r1", True, False, (LogDir("/data/d0", True, 100, 40),))
    assert loaded.cluster.min_isr("orders") == 2
    assert loaded.observed_at == ObservationTimes()


def test_a_partition_row_written_before_traffic_was_kept_loads_without_it(store, redis_client):
    assert store.commit(0, ControllerState(), sample_state(), [])
    redis_client.hset(store.keys["partitions"], "orders:2", '[[1,2,3],[1,2,3],1,4,[],[],[],1002,[0,1,-1]]')
    loaded = store.load().cluster.partition(TopicPartition("orders", 2))
    assert loaded.size_bytes == 1002 and loaded.bytes_in_per_sec is None and loaded.bytes_out_per_sec is None


def test_a_topic_row_written_before_topic_ids_were_kept_loads_without_one(store, redis_client):
    redis_client.hset(store.keys["topics"], "orders", "[2,1800000000123]")
    loaded = store.load()
    assert loaded.cluster.topics_by_name["orders"].topic_id is None
    assert loaded.cluster.min_isr("orders") == 2
    assert loaded.observed_at.topics == {"orders": 1_800_000_000_123}


def test_epoch_only_grows(store):
    first = store.take_over()
    assert store.take_over() == first + 1


def test_redis_memory_per_partition_is_small(store, redis_client):
    brokers = tuple(Broker(i, f"/dc{i % 3}/r{i % 4}", True, False,
                           (LogDir(f"/var/lib/kafka/broker-{i}/data-0"), LogDir(f"/var/lib/kafka/broker-{i}/data-1")))
                    for i in range(1, 31))
    count = 20_000
    partitions = tuple(
        PartitionState(f"topic-{p % 50}", p // 50, (1 + p % 30, 1 + (p + 1) % 30, 1 + (p + 2) % 30),
                       (1 + p % 30, 1 + (p + 1) % 30, 1 + (p + 2) % 30), 1 + p % 30, 123_456_789,
                       (f"/var/lib/kafka/broker-{1 + p % 30}/data-0",
                        f"/var/lib/kafka/broker-{1 + (p + 1) % 30}/data-1",
                        f"/var/lib/kafka/broker-{1 + (p + 2) % 30}/data-0"), leader_epoch=17)
        for p in range(count)
    )
    topics = {}
    for partition in partitions:
        topics.setdefault(partition.topic, []).append(partition)
    state = ControllerState(cluster=Cluster(brokers, tuple(Topic(t, tuple(ps), 2) for t, ps in topics.items())))
    store.commit(0, ControllerState(), state, [])
    used = redis_client.memory_usage(store.keys["partitions"])
    per_partition = used / count
    print(f"redis memory per partition: {per_partition:.0f} bytes")
    assert per_partition <= 300
    assert len(store.load().cluster.partitions_by_tp) == count


def test_a_step_in_flight_keeps_its_seen_and_cancel_flags_and_older_rows_still_load():
    tp = TopicPartition("orders", 0)
    record = start_step(start_reassignment("r1-orders-0", tp, (1, 2, 3), (2, 3)),
                        Step((2, 3), (), (1,)), started_at=3.0)
    flagged = replace(record, in_flight=replace(record.in_flight, seen_in_kafka=True, cancel_confirmed=True))
    assert reassignment_from_storage(tp, reassignment_to_storage(flagged)) == flagged
    older = json.loads(reassignment_to_storage(record))
    older["in_flight"] = older["in_flight"][:3]  # written before the flags existed
    loaded = reassignment_from_storage(tp, json.dumps(older))
    assert loaded == record and not loaded.in_flight.seen_in_kafka


def test_a_step_retry_is_stored_and_a_row_without_one_loads_as_none():
    from planning.movement.reassignment import fail_step

    tp = TopicPartition("orders", 0)
    record = start_step(start_reassignment("r1-orders-0", tp, (1, 2, 3), (2, 3)),
                        Step((2, 3), (), (1,)), started_at=3.0)
    failed = fail_step(record, 10.0, "REQUEST_TIMED_OUT: no answer")
    assert reassignment_from_storage(tp, reassignment_to_storage(failed)) == failed
    assert "retries" not in json.loads(reassignment_to_storage(record))  # rows stay as small as before


def test_a_replaced_instance_can_commit_nothing(store):
    """Regression: two pipelines on one Redis both committed state (the commit never checked the
    epoch); the older one's state kept commands in flight that the executor had refused."""
    from schemas.errors import FencedError

    old_epoch = store.take_over()
    before = store.load()
    assert store.commit(0, before, sample_state().with_changes(epoch=old_epoch), [])
    new_epoch = store.take_over()
    committed = store.load()
    stale = committed.with_changes(epoch=old_epoch, command_sequence=99)
    with pytest.raises(FencedError) as refused:
        store.commit(1, committed, stale, [])
    assert refused.value.code == "FENCED_EPOCH" and f"replaced by epoch {new_epoch}" in str(refused.value)
    after = store.load()
    assert (after.epoch, after.last_batch, after.command_sequence) == (new_epoch, 0, committed.command_sequence)


def big_state(partitions: int, isr=(1, 2, 3)) -> ControllerState:
    state = sample_state()
    topic = state.cluster.topics[0]
    parts = tuple(PartitionState("orders", p, (1, 2, 3), tuple(isr), 1, 1000 + p, ("/data/b1/d0", None, None),
                                 leader_epoch=4) for p in range(partitions))
    return state.with_cluster(Cluster(state.cluster.brokers, (replace(topic, partitions=parts),)))


def test_a_big_batch_is_staged_in_chunks_and_swapped_in_whole(store, redis_client, monkeypatch):
    import state.controller_store as controller_store

    monkeypatch.setattr(controller_store, "STAGE_ABOVE_ROWS", 10)
    monkeypatch.setattr(controller_store, "STAGE_CHUNK_FIELDS", 4)
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.slowlog_reset()
    first = big_state(30)
    assert store.commit(0, ControllerState(), first, [])
    commands = [entry["command"].decode() if isinstance(entry["command"], bytes) else entry["command"]
                for entry in redis_client.slowlog_get(1000)]
    staged_writes = [len(c.split()) for c in commands if c.upper().startswith("HSET") and ":staged:" in c]
    assert len(staged_writes) == 8 and max(staged_writes) == 2 + 2 * 4  # 30 rows, 4 a command
    assert store.load().with_changes(last_batch=-1) == first
    assert redis_client.ttl(store.keys["partitions"]) == -1  # the staging TTL did not come along
    assert not list(redis_client.scan_iter(match="*staged*"))
    # A big batch of a replaced instance changes nothing and leaves no staged hash behind.
    redis_client.hset(store.keys["meta"], "epoch", 9)
    with pytest.raises(FencedError):
        store.commit(1, first, big_state(30, isr=(1, 2)), [])
    assert store.load().with_changes(last_batch=-1, epoch=first.epoch) == first
    assert not list(redis_client.scan_iter(match="*staged*"))
    # A small batch still goes in the one script.
    monkeypatch.setattr(controller_store, "STAGE_ABOVE_ROWS", 1000)
    newer = big_state(30, isr=(1, 3)).with_changes(epoch=9)
    assert store.commit(1, first.with_changes(epoch=9), newer, [])
    assert store.load().cluster == newer.cluster


def test_a_big_rebalance_stages_its_reassignments_and_the_partitions_together(store, redis_client, monkeypatch):
    """Both staged hashes of one batch are swapped in by the one script; a small batch after it
    writes its few reassignment rows in place."""
    import state.controller_store as controller_store

    monkeypatch.setattr(controller_store, "STAGE_ABOVE_ROWS", 10)
    monkeypatch.setattr(controller_store, "STAGE_CHUNK_FIELDS", 4)
    first = big_state(30)
    moves = {p.tp: start_reassignment(f"rb/{p.partition}", p.tp, p.replicas, (4, 2, 3), reason="rebalance")
             for p in first.cluster.topics[0].partitions}
    planned = first.with_records(moves)
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.slowlog_reset()
    assert store.commit(0, ControllerState(), planned, [])
    commands = [entry["command"].decode() if isinstance(entry["command"], bytes) else entry["command"]
                for entry in redis_client.slowlog_get(1000)]
    staged = [c for c in commands if c.upper().startswith("HSET") and ":staged:" in c]
    assert sum(1 for c in staged if ":reassignments:" in c) == 8  # 30 rows, 4 a command
    assert sum(1 for c in staged if ":partitions:" in c) == 8
    assert store.load().with_changes(last_batch=-1) == planned
    assert not list(redis_client.scan_iter(match="*staged*"))
    tp = first.cluster.topics[0].partitions[0].tp
    fewer = planned.with_records({tp: None})
    redis_client.slowlog_reset()
    assert store.commit(1, planned, fewer, [])
    assert not [e for e in redis_client.slowlog_get(1000) if b":staged:" in bytes(str(e["command"]), "utf-8")]
    assert store.load().reassignments == fewer.reassignments


def test_a_state_written_before_the_clusters_kafka_was_kept_loads_without_it(store, redis_client):
    state = sample_state(isr=(1,))
    assert store.commit(0, ControllerState(), state, [])
    loaded = store.load()
    assert loaded.kafka == state.kafka
    assert loaded.cluster.partition(TopicPartition("orders", 2)).eligible_leaders == (2, 3)
    redis_client.hdel(store.keys["meta"], "kafka")  # a state written before schema set 9
    assert store.load().kafka is None


def test_the_waiting_reasons_load_back_and_state_written_before_them_loads_without(store, redis_client):
    from planning.model import TopicPartition

    waiting = {TopicPartition("orders", 1): "Kafka shows the partition reassigning (adding [4], removing [])"}
    assert store.commit(0, ControllerState(), ControllerState(waiting=waiting), [])
    assert store.load().waiting == waiting
    redis_client.hdel(store.keys["meta"], "waiting")  # a state written before issue 19
    assert store.load().waiting == {}


def test_the_moves_of_other_tools_load_back_and_state_written_before_them_loads_without(store, redis_client):
    from planning.model import TopicPartition
    from planning.movement.external import ExternalMove

    moves = {TopicPartition("orders", 1): ExternalMove((1, 2, 3, 4), (4,), (3,), 1_800_000_000_000, True)}
    assert store.commit(0, ControllerState(), ControllerState(external_moves=moves), [])
    assert store.load().external_moves == moves
    redis_client.hdel(store.keys["meta"], "external_moves")  # a state written before issue 19 item 2
    assert store.load().external_moves == {}


def test_the_meter_keeps_the_ended_reassignments_and_one_written_before_them_loads_with_zeros(store, redis_client):
    from planning.movement.eta import ReplicationMeter

    meter = ReplicationMeter(1_800_000_000_000, 5 << 20, 12, 24, 120 << 20)
    assert store.commit(0, ControllerState(), ControllerState(replication_meter=meter), [])
    assert store.load().replication_meter == meter
    redis_client.hset(store.keys["meta"], "replication_meter", json.dumps([1_800_000_000_000, 5 << 20]))  # before
    assert store.load().replication_meter == ReplicationMeter(1_800_000_000_000, 5 << 20)


def test_the_plans_and_a_record_s_plan_load_back_and_older_state_loads_without(store, redis_client):
    from planning.movement.reassignment import supersede
    from state.model import PlanRecord

    plans = {"rebalance-3": PlanRecord("rebalance-3", "broker-4", "broker 4 added", 1_800_000_000_000, 12, 5,
                                       7 * 10**9, 6, 1, 0)}
    assert store.commit(0, ControllerState(), ControllerState(plans=plans), [])
    assert store.load().plans == plans
    redis_client.hdel(store.keys["meta"], "plans")  # a state written before plans were kept
    assert store.load().plans == {}
    tp = TopicPartition("orders", 0)
    record = start_reassignment("r1/orders-0", tp, (1, 2, 3), (2, 3, 4))
    assert record.plan == "r1" and "plan" not in json.loads(reassignment_to_storage(record))  # rows as before
    moved_on = supersede(record, (3, 4, 5), plan_id="r2")
    assert moved_on.plan == "r2" and reassignment_from_storage(tp, reassignment_to_storage(moved_on)) == moved_on
