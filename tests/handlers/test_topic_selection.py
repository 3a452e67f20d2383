"""Topic selection (issue 16 item 4): `topics.include` / `topics.exclude`, Kafka's internal topics
and the product's own excluded by default; excluded topics are healed and drained, never rebalanced."""

from __future__ import annotations

import pytest
from handler_builders import Loop, alerts, commands, request, simple_cluster

from handlers.policy import compute_config_text, compute_excluded_pattern, compute_excluded_topics
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic
from planning.placement.placer import Goal, plan_placement
from schemas.errors import InvalidConfigError
from runtime.settings import load_settings
from tests.settings_defaults import default_policy


def test_kafka_internal_topics_and_the_products_own_are_excluded_by_default():
    policy = default_policy()
    names = ["__consumer_offsets", "__transaction_state", "reassigner.events", "reassigner-x", "orders"]
    assert compute_excluded_topics(names, policy) == {"__consumer_offsets", "__transaction_state",
                                                      "reassigner.events"}
    assert compute_excluded_pattern(default_policy(topic_prefix="ops.r")) == r"__.*|ops\.r\..*"


def test_include_and_exclude_match_whole_names():
    policy = default_policy(topics_include="orders-.*|payments", topics_exclude="orders-eu")
    names = ["orders-us", "orders-eu", "payments", "payments-2", "__consumer_offsets"]
    assert compute_excluded_topics(names, policy) == {"orders-eu", "payments-2", "__consumer_offsets"}
    assert compute_excluded_topics(["__consumer_offsets"], default_policy(topics_exclude="(?!)")) == frozenset()


def test_patterns_are_dynamic_and_a_bad_one_is_refused_in_one_line():
    assert compute_config_text("topics.include", "orders-.*") == ("orders-.*", "orders-.*")
    with pytest.raises(InvalidConfigError, match="topics.exclude='orders-\\(': expected a regular expression"):
        compute_config_text("topics.exclude", "orders-(")
    with pytest.raises(InvalidConfigError, match="topics_include"):
        load_settings(topics_include="[")


def _cluster_with(extra_broker_alive: bool) -> Cluster:
    brokers = tuple(Broker(i, log_dirs=(LogDir("/d0"),)) for i in range(3))
    topics = tuple(
        Topic(name, tuple(PartitionState(name, p, (p % 3, (p + 1) % 3)) for p in range(6)))
        for name in ("orders", "__consumer_offsets")
    )
    return Cluster(brokers + (Broker(3, alive=extra_broker_alive, log_dirs=(LogDir("/d0"),)),), topics)


def test_an_excluded_topic_is_not_rebalanced_and_keeps_its_leaders():
    cluster = _cluster_with(True)  # broker 3 is new and empty
    plan = plan_placement(cluster, Goal(excluded_topics=frozenset({"__consumer_offsets"})))
    assert {tp.topic for tp in plan.targets} == {"orders"}
    assert plan.replicas_after[3] == 3  # orders' share only: 12 replicas over 4 brokers


def test_an_excluded_topic_is_still_healed():
    dead = Cluster(
        tuple(Broker(b.id, alive=b.id != 0, log_dirs=b.log_dirs) for b in _cluster_with(True).brokers),
        _cluster_with(True).topics,
    )
    plan = plan_placement(dead, Goal(excluded_topics=frozenset({"__consumer_offsets"})))
    healed = {tp: t for tp, t in plan.targets.items() if tp.topic == "__consumer_offsets"}
    assert healed and all(0 not in t for t in healed.values())
    before = {p.tp: p.replicas for p in dead.partitions()}
    # only the replicas on the dead broker move; the others stay where they are
    assert all(len(set(t) - set(before[tp])) == sum(1 for b in before[tp] if b == 0) for tp, t in healed.items())


def test_a_rebalance_request_naming_an_excluded_topic_is_refused():
    policy = default_policy(topics_exclude="orders")
    loop = Loop.start(simple_cluster(3, {"orders": (6, 2), "payments": (6, 2)}), policy)
    loop.step()
    decision = loop.step([request("Rebalance", {"topics": ["orders"]}, loop.now_ms)])
    (rejected,) = alerts(decision, "RequestRejected")
    assert "excluded from balancing" in rejected["message"] and "config set" in rejected["message"]
    assert not commands(decision)
