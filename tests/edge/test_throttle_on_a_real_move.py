"""A throttle that throttles, on the real stack (issue 19 item 1): a move the product makes (the
handlers decide, the real executor applies) runs under its throttle from its first byte, and the
product's clear leaves the throttles another tool set (Kafka's kafka-reassign-partitions.sh)."""

from __future__ import annotations

import uuid

import pytest

from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
from reassigner.dev.harness.handlers_loop import HandlersLoop, MoveTimer, run_kafka_reassign_tool
from runtime.clients.jars import kafka_classpath
from runtime.settings import compute_policy, load_settings
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow]

RATES = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"]
LISTS = ["leader.replication.throttled.replicas", "follower.replication.throttled.replicas"]


def policy(rate: int):
    return compute_policy(load_settings(throttle_bytes_per_sec=rate))


def test_a_move_the_product_makes_runs_under_its_throttle_from_its_first_byte(local_stack):
    """3 MB at 200,000 B/s is ≥ 15 s of copying; the operator's report was ≤ 5 s for 10 MB at
    100,000 B/s, the throttle arriving after the step. A looser rate someone set on broker 1
    gives way to ours while we move and is back after."""
    state = local_stack
    topic, megabytes, rate = f"slowed-{uuid.uuid4().hex[:6]}", 3, 200_000
    create_topics(state.bootstrap_servers, {topic: 1}, 1, assignments={topic: [[1]]})
    write_bulk(state.bootstrap_servers, [(topic, 0)], megabytes)
    with HandlersLoop(state.bootstrap_servers, state.redis_url, policy(rate)) as loop:
        loop.admin.alter_broker_configs([1], {RATES[0]: "50000000"})
        try:
            with MoveTimer(loop.admin, topic, 0, [2]) as timer:
                loop.decide([loop.reassign({(topic, 0): [2]})])
                (step,) = [c for c in loop.commands_of("ReassignmentStep") if c["payload"][1]["topic"] == topic]
                assert step["payload"][1]["throttle_rate_bytes_per_sec"] == rate
                eventually(lambda: timer.started is not None, 60, what="the move shown by Kafka")
                assert loop.admin.describe_broker_configs(1, RATES) == {RATES[0]: str(rate), RATES[1]: str(rate)}
                assert loop.admin.describe_broker_configs(2, RATES) == {RATES[0]: str(rate), RATES[1]: str(rate)}
                assert loop.admin.describe_topic_configs(topic, LISTS) == {LISTS[0]: "0:1", LISTS[1]: "0:2"}
                loop.run_until_settled([], timeout=300)
                seconds = timer.wait(30)
            nominal = megabytes * 1_000_000 / rate
            assert seconds >= 0.5 * nominal, \
                f"{megabytes} MB moved in {seconds:.1f} s at {rate:,} B/s (≥ {nominal:.0f} s expected)"
            assert loop.commands_of("ClearThrottle")
            assert loop.admin.describe_broker_configs(1, RATES) == {RATES[0]: "50000000", RATES[1]: None}
            assert loop.admin.describe_broker_configs(2, RATES) == {RATES[0]: None, RATES[1]: None}
            assert loop.admin.describe_topic_configs(topic, LISTS) == {LISTS[0]: "", LISTS[1]: ""}
        finally:
            loop.admin.alter_broker_configs([1], {RATES[0]: None})


def test_the_products_clear_leaves_the_throttle_kafkas_tool_set(local_stack, cache_dir, tmp_path):
    """The operator's report: Kafka's --execute --throttle 50000 set rates on brokers 1-3; the
    product moved another partition over the same brokers and its clear removed them. (Their
    partition is empty: its move is over at once, its throttle stays until --verify.)"""
    state = local_stack
    theirs, ours = f"theirs-{uuid.uuid4().hex[:6]}", f"ours-{uuid.uuid4().hex[:6]}"
    create_topics(state.bootstrap_servers, {theirs: 1, ours: 1}, 1,
                  assignments={theirs: [[1, 2]], ours: [[2]]})
    def their_tool_run() -> bool:
        try:
            run_kafka_reassign_tool(state.bootstrap_servers, kafka_classpath(cache_dir, state.kafka_version), tmp_path,
                                    {(theirs, 0): [1, 3]}, ["--execute", "--throttle", "50000"])
            return True
        except RuntimeError as error:  # CI, a starved machine: broker 3 fenced for a moment; the tool
            if "Unknown broker id" in str(error):  # checks the brokers before it changes anything
                return False
            raise
    eventually(their_tool_run, 60, 1, "Kafka's tool run with brokers 1-3 unfenced")
    with HandlersLoop(state.bootstrap_servers, state.redis_url, policy(10_000_000)) as loop:
        admin = loop.admin
        try:
            eventually(lambda: all(admin.describe_broker_configs(b, RATES) == {RATES[0]: "50000", RATES[1]: "50000"}
                                   for b in (1, 2, 3)), 30, what="Kafka's tool's throttle on brokers 1-3")
            loop.run_until_settled([loop.reassign({(ours, 0): [3]})], timeout=300)
            # The clear comes once Kafka moves nothing any more: their move too (an empty partition,
            # over at once at full speed; on a starved machine a few polls later).
            eventually(lambda: (loop.decide(), loop.commands_of("ClearThrottle"))[1], 120, 0.5, "our ClearThrottle")
            eventually(lambda: (loop.decide(), {r["command_id"] for r in loop.results} >= {
                c["id"] for c in loop.commands_of("ClearThrottle")})[1], 120, 0.5, "our ClearThrottle applied")
            for broker in (1, 2, 3):
                assert admin.describe_broker_configs(broker, RATES) == {RATES[0]: "50000", RATES[1]: "50000"}
            assert admin.describe_topic_configs(theirs, LISTS)[LISTS[1]] == "0:3"
            assert admin.describe_topic_configs(ours, LISTS) == {LISTS[0]: "", LISTS[1]: ""}
        finally:
            eventually(lambda: admin.read_assignment(theirs, 0) == ((1, 3), (), ()), 60, what="their move done")
            run_kafka_reassign_tool(state.bootstrap_servers, kafka_classpath(cache_dir, state.kafka_version), tmp_path, {(theirs, 0): [1, 3]},
                                    ["--verify"])  # removes the tool's throttles, its move being over


def test_throttles_whose_records_redis_lost_while_the_executor_was_stopped_are_still_cleared(local_stack):
    """The store emptied while no executor ran (FLUSHALL, a Redis restarted without persistence):
    the new executor finds no throttle record and adopts, from the brokers' configs, what the
    product's recent steps set (`reassigner.edge.throttles`, ADOPTION), so the clear at the end
    of the move removes it and leaves the rate someone else set on broker 3."""
    state = local_stack
    topic, rate = f"adopted-{uuid.uuid4().hex[:6]}", 200_000
    create_topics(state.bootstrap_servers, {topic: 1}, 1, assignments={topic: [[1]]})
    write_bulk(state.bootstrap_servers, [(topic, 0)], 3)
    with HandlersLoop(state.bootstrap_servers, state.redis_url, policy(rate)) as loop:
        admin = loop.admin
        admin.alter_broker_configs([3], {RATES[0]: str(rate)})  # theirs: not on a broker of the step
        try:
            loop.decide([loop.reassign({(topic, 0): [2]})])
            eventually(lambda: admin.describe_topic_configs(topic, LISTS) == {LISTS[0]: "0:1", LISTS[1]: "0:2"},
                       60, what="the step's throttle in force")
            loop.stop_executor()
            executor_keys = list(loop.redis.scan_iter(match=f"reassigner:{{{loop.prefix}}}:executor:*"))
            assert any(k.endswith(b":throttles") for k in executor_keys)
            loop.redis.delete(*executor_keys)
            loop.start_executor()
            loop.run_until_settled([], timeout=300)
            assert loop.commands_of("ClearThrottle")
            eventually(lambda: admin.describe_broker_configs(1, RATES) == {RATES[0]: None, RATES[1]: None}
                       and admin.describe_broker_configs(2, RATES) == {RATES[0]: None, RATES[1]: None},
                       30, what="the adopted rates cleared")
            assert admin.describe_topic_configs(topic, LISTS) == {LISTS[0]: "", LISTS[1]: ""}
            assert admin.describe_broker_configs(3, RATES)[RATES[0]] == str(rate)
        finally:
            admin.alter_broker_configs([3], {RATES[0]: None})
