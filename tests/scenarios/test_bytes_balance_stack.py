"""`balance.mode=bytes` on a real cluster: watcher → Spark pipeline → executor → Kafka, judged by
what Kafka's describe-log-dirs shows.

One world for the module (brokers 1-3 in racks /dc1/r1, /dc1/r2, /dc2/r1;
`reassigner.dev.harness.world.World`) and a topic of its own, `sized`: RF 2 (one replica per DC),
three partitions of 8 MB and six of 1 MB, placed badly on purpose: the 8 MB ones on brokers 1
and 3, the 1 MB ones on 2 and 3. Broker 1 holds 24 MB of it, broker 2 6 MB, broker 3 30 MB.

`config set balance.mode=bytes`, then broker 4 joins in /dc2/r2. Each DC holds one replica of
every partition, 30 MB, so every broker's share is 15 MB. The product's plan
(`PlanCreated`) says bytes mode and within tolerance; once it has run, Kafka shows every broker
within 20 % of 15 MB of the topic (the ±10 % tolerance of the plan, on every topic's bytes, plus
what the demo topics' traffic adds meanwhile), where a plan of replica counts would leave broker
1 with 24 MB and broker 2 with 6; and the bytes the plan reported are those Kafka copied (the
sizes of the replicas that are on a broker now and were not before).

Regression: before the bytes planner's same-topic swap, this plan stopped with every broker
outside its disk band (CV 0.81 -> 0.58, 6.4 MB moved of a 21.6 MB bound): the new broker, short of
replicas as well as bytes, took the topic's small replicas first and then, by the per-topic
limit, none of its big ones. Now: CV 0.81 -> 0.13, 22.4 MB moved for a 21.6 MB bound (gap 3.9 %); the
±10 % bands are not all met on this cluster (the alert says `within_tolerance: false`), hence
the 20 % the test allows. The bound holds for plans within the bands: a plan outside them may
move less (one run: 19.4 MB for a 21.5 MB bound, the demo topics' sizes at that moment), so the
test compares the two only when the plan says it is within.

Regression (CI, 2026-11-28): a plan left brokers 1 and 2 as they were (24.0 and 6.0 MB of the
topic, disk CV 0.46 after, 11.4 MB moved of a 21.5 MB bound): broker 1 was a few kB further above
its band than its biggest replica, and the greedy tried no swap whose big replica did not cover
the whole need (`tests/planning/test_bytes_balance.py`, `..._need_is_larger_than_any_replica`).
When the shares fail, the message shows every plan made since the broker joined and the bytes
planner run again on the view the plan was made on, saved as `planned-on.json` beside the logs
(a snapshot `reassigner plan` reads).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from handlers.policy import compute_excluded_topics
from planning.model import TopicPartition
from planning.placement.bytes_balance import REBALANCE, Tolerances, plan_bytes_balance
from planning.snapshot import cluster_to_json
from tests.settings_defaults import default_policy
from tests.waiting import PATIENCE
from reassigner.dev.harness import world as harness
from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
from reassigner.dev.harness.world import MIN_INSYNC_REPLICAS

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.scenario]

TOPIC = "sized"
BIG, SMALL = 8, 1  # megabytes per partition
ASSIGNMENT = [[1, 3]] * 3 + [[2, 3]] * 6
MB = 10**6


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("bytes-balance")
    with open(directory / "story.txt", "w") as story:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, console=Console(file=story, width=120))
        try:
            demo.setup()
            create_topics(demo.bootstrap, {TOPIC: len(ASSIGNMENT)}, MIN_INSYNC_REPLICAS,
                          assignments={TOPIC: ASSIGNMENT}, client=demo.client)
            write_bulk(demo.bootstrap, [(TOPIC, p) for p in range(3)], BIG, client=demo.client)
            write_bulk(demo.bootstrap, [(TOPIC, p) for p in range(3, len(ASSIGNMENT))], SMALL, client=demo.client)
            demo.wait("the pipeline knows the topic's sizes", lambda: all(
                (p := demo.controller_state().cluster.partition(TopicPartition(TOPIC, n))) is not None
                and (p.size_bytes or 0) >= (BIG if n < 3 else SMALL) * MB * 0.9 for n in range(len(ASSIGNMENT))),
                180)
            yield demo
        finally:
            demo.keep_logs(directory / "logs")
            demo.teardown()


def topic_bytes(demo, broker_ids) -> dict[int, int]:
    """Per broker, the bytes of `sized` its dirs hold, as Kafka's describe-log-dirs tells."""
    return {b: sum(size for d in demo.probe.log_dirs(b).values() for (topic, _), size in d["replicas"].items()
                   if topic == TOPIC) for b in broker_ids}


def replica_sizes(demo, broker_ids) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) → the replica's size, every topic but the product's own."""
    return {(topic, partition, b): size for b in broker_ids for d in demo.probe.log_dirs(b).values()
            for (topic, partition), size in d["replicas"].items() if not topic.startswith("reassigner.")}


def world_dir(demo) -> Path:
    return demo.stack_dir.parent


def explain(demo, since: int, seen, after, details) -> str:
    """What a failed balance looked like: Kafka's bytes of the topic, every plan made since the
    broker joined, and the bytes planner run again on the view saved (`planned-on.json`)."""
    plans = [(a["message"], a["details"].get("spread"), a["details"].get("bytes_moved"))
             for a in demo.alerts.of_kind("PlanCreated", since)]
    excluded = compute_excluded_topics((t.name for t in seen.topics), default_policy())  # the product's own, Kafka's
    again = plan_bytes_balance(seen, Tolerances(), replace(REBALANCE, excluded_topics=excluded))
    sized = {b: sum(p.size_bytes or 0 for p in seen.topics_by_name[TOPIC].partitions
                    if b in again.targets.get(p.tp, p.replicas))
             for b in sorted(again.eligible_brokers)}
    return (f"Kafka shows {after} of {TOPIC}; the first plan said {details}; plans since the broker joined: {plans}; "
            f"planned again on the view saved: {again.bytes_moved} B moved, {TOPIC} after {sized}, "
            f"within {again.within_tolerance}, exact: {again.exact}, warnings {again.warnings}")


def test_a_broker_added_in_bytes_mode_gets_its_share_of_bytes_as_kafka_shows_them(world):
    demo = world
    before = topic_bytes(demo, (1, 2, 3))
    assert before == pytest.approx({1: 3 * BIG * MB, 2: 6 * SMALL * MB, 3: 30 * MB}, rel=0.1), before
    held_before = set(replica_sizes(demo, (1, 2, 3)))
    demo.set_config("balance.mode=bytes")
    since = demo.alerts.mark()
    added = demo.stack.add_broker(rack="/dc2/r2")
    plan = demo.alerts.wait_for("PlanCreated", since, 180)
    details = plan["details"]
    seen = demo.controller_state().cluster  # what the plan was made on, near enough (no step has ended yet)
    (world_dir(demo) / "planned-on.json").write_text(json.dumps(cluster_to_json(seen)))
    assert details.get("balance_mode") == "bytes", plan
    demo.say(f"  plan: {plan['message']}; {details}")
    reported = int(details["bytes_moved"])
    assert int(details["bytes_lower_bound"]) > 0, details
    if details["within_tolerance"] == "true":  # the bound holds for plans within the bands only
        assert reported >= int(details["bytes_lower_bound"]), details
    demo.wait("the plan ran (every partition in sync, nothing moving)", lambda: demo.settled(since), 300)

    after = topic_bytes(demo, (1, 2, 3, added.id))
    share = 30 * MB / 2
    assert all(abs(held - share) <= 0.2 * share for held in after.values()), explain(demo, since, seen, after, details)
    # What Kafka copied: the replicas on a broker now that were not there before the plan.
    copied = sum(size for key, size in replica_sizes(demo, (1, 2, 3, added.id)).items() if key not in held_before)
    assert abs(copied - reported) <= 0.05 * reported + MB, (copied, reported, details)
    demo.product.check_alive()
