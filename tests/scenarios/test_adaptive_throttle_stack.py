"""`config set throttle.mode=adaptive` mid-movement on a real cluster, the canary on: it takes
effect at the next decision, its alerts say why, Kafka holds the rates it announces, and
`throttle.mode=static` hands the brokers back to the static rate before the movement ends.

One world for the module (brokers 1-3, `reassigner.dev.harness.world.World`, its demo topics
and their sequenced traffic, the canary measuring every 0.2 s in windows of 5 s, a hold of 5 s,
the log-dir balance left out: its own moves are not this test's) and one topic of its own,
`moving`: PARTITIONS of MEGABYTES each on brokers 1 and 3, written before the product starts.
The operator moves them to brokers 2 and 3 at a static STATIC B/s, switches to adaptive between
FLOOR and CEILING while the copies run, and back to static; then the movement ends and every
throttle of the product is gone.
"""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from planning.model import TopicPartition
from reassigner.dev.harness import world as harness
from reassigner.dev.harness.cluster_tools import create_topics, throttle_rates, throttled_brokers, write_bulk
from reassigner.dev.harness.world import MIN_INSYNC_REPLICAS
from tests.waiting import PATIENCE

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.scenario]

TOPIC, PARTITIONS, MEGABYTES = "moving", 2, 60
STATIC, FLOOR, CEILING = 1_000_000, 200_000, 4_000_000
LEADER_RATE = "leader.replication.throttled.rate"
SETTINGS = {"REASSIGNER_CANARY_ENABLED": "true", "REASSIGNER_CANARY_INTERVAL_SECONDS": "0.2",
            "REASSIGNER_CANARY_WINDOW_SECONDS": "5", "REASSIGNER_THROTTLE_HOLD_SECONDS": "5",
            "REASSIGNER_LOGDIR_IMBALANCE_THRESHOLD": "1"}


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("adaptive-throttle")
    with open(directory / "story.txt", "w") as story:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, settings=SETTINGS,
                             console=Console(file=story, width=120))

        def prepare():
            create_topics(demo.bootstrap, {TOPIC: PARTITIONS}, MIN_INSYNC_REPLICAS,
                          assignments={TOPIC: [[1, 3]] * PARTITIONS}, client=demo.client)
            write_bulk(demo.bootstrap, [(TOPIC, p) for p in range(PARTITIONS)], MEGABYTES, client=demo.client)

        try:
            demo.setup(prepare)
            yield demo
        finally:
            demo.keep_logs(directory / "logs")
            demo.teardown()


def leader_rates(demo, brokers) -> dict[int, int | None]:
    return {b: rates[LEADER_RATE] for b, rates in throttle_rates(demo.bootstrap, brokers, demo.client).items()}


def announced(alerts) -> set[tuple[int, int]]:
    """(broker, rate) of every ThrottleChanged among `alerts`: the rates they set and the targets
    of the ramps they start (a ramp's steps are not announced; it ends at its target or says
    where it stopped)."""
    return {(int(b), int(r)) for a in alerts for key in ("rates", "targets") for b, r in
            (pair.split(":") for pair in a["details"].get(key, "").split(",") if pair)}


def test_adaptive_mode_set_mid_movement_takes_effect_at_the_next_decision_and_says_why(world):
    demo = world
    alerts_from, commands_from = demo.alerts.mark(), demo.commands.mark()
    try:
        switch_mid_movement(demo)
    except (TimeoutError, AssertionError) as error:
        # CI keeps nothing but what a failure prints: what the product did and what Kafka holds.
        try:
            rates = throttle_rates(demo.bootstrap, (1, 2, 3), demo.client)
        except Exception as unread:  # the diagnostics must never hide the failure
            rates = f"(not read: {unread!r})"
        pytest.fail(f"{error}\nthrottle rates in Kafka: {rates}\n{demo.diagnostics(alerts_from, commands_from)}",
                    pytrace=False)


def switch_mid_movement(demo) -> None:
    brokers = (1, 2, 3)
    demo.wait("the canary's baselines and the pipeline's view of the topic", lambda: all(
        (reading := demo.controller_state().canary.get(b)) is not None and reading.baseline_ms is not None
        for b in brokers) and all(demo.controller_state().cluster.partition(TopicPartition(TOPIC, p))
                                  for p in range(PARTITIONS)), 180)
    for assignment in (f"throttle.bytes.per.sec={STATIC}", f"throttle.min={FLOOR}", f"throttle.max={CEILING}"):
        demo.set_config(assignment)
    commands_before = demo.commands.mark()
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": p, "replicas": [2, 3]}
                                         for p in range(PARTITIONS)]}
    plan_file = demo.stack_dir / "adaptive-plan.json"
    plan_file.write_text(json.dumps(plan))
    demo.cli("request", "reassign", "--file", str(plan_file))
    demo.commands.wait_for("ReassignmentStep", commands_before, 90)
    demo.wait("the copies run at the static rate", lambda: leader_rates(demo, (1,))[1] == STATIC, 60)

    switched = demo.alerts.mark()
    demo.set_config("throttle.mode=adaptive")
    # The next decision: the batch of the ConfigChanged holds the moving brokers, starting at the
    # static rate (no change announced for that); the first change is from there.
    demo.wait("the adaptive throttle holds the moving brokers", lambda: {1, 2} <= set(demo.controller_state().throttles), 30)
    changed = demo.alerts.wait_for("ThrottleChanged", switched, 180)
    demo.say(f"  {changed['message']}")
    assert "1 MB/s -> " in changed["message"], changed["message"]
    reasons = changed["details"]["reasons"]
    assert any(why in reasons for why in ("canary p99", "canary probes", "in-sync replica", "every move")), reasons
    assert demo.controller_state().reassignments, "the movement ended before the adaptive throttle changed a rate"
    demo.wait("Kafka holds a rate the adaptive throttle announced", lambda: any(
        (b, r) in announced(demo.alerts.of_kind("ThrottleChanged", switched))
        for b, r in leader_rates(demo, brokers).items() if r is not None and r != STATIC), 60)

    back = demo.alerts.mark()
    demo.set_config("throttle.mode=static")
    handed = demo.alerts.wait_for("ThrottleChanged", back, 60, where=lambda a: "throttle.mode=static" in a["message"])
    demo.say(f"  {handed['message']}")
    held = [int(b) for b in handed["details"]["brokers"].split(",")]
    assert {1, 2} <= set(held), handed
    demo.wait("Kafka holds the static rate again, the movement still running", lambda: all(
        r == STATIC for r in leader_rates(demo, held).values()), 60)
    assert demo.controller_state().reassignments, "the movement ended before the static rate came back"

    demo.wait("the movement ends", lambda: moved(demo), 300)
    demo.wait("the product clears its throttles", lambda: not throttled_brokers(demo.bootstrap, brokers, demo.client),
              120)


def moved(demo) -> tuple[int, int]:
    """(partitions of the topic on brokers 2 and 3, in sync and still, total); one short while the
    product still tracks a move."""
    parts = demo.probe.partitions([TOPIC])
    done = sum(1 for p in parts.values() if sorted(p["replicas"]) == sorted(p["isr"]) == [2, 3] and not p["reassigning"])
    return (done if not demo.controller_state().reassignments else min(done, len(parts) - 1)), len(parts)
