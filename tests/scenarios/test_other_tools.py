"""Kafka's own reassignment tool beside the product (issue 19 item 2), on a real cluster: watcher →
Spark pipeline → executor → Kafka, with `kafka-reassign-partitions.sh` run as Kafka ships it
(`org.apache.kafka.tools.reassign.ReassignPartitionsCommand` of the cluster's own jars).

One world for the module (brokers 1-3, `reassigner.dev.harness.world.World`), and a topic of its
own, `outside` (RF 2, explicit replicas, a few MB per partition, replication slowed by Kafka's
quotas so that a move stays in progress until the test lifts them). In file order:

  1. Kafka's tool moves outside-0 (`--execute`)     → `reassigner list` shows it `external`;
     a plan of ours for outside-0 made meanwhile   → no step of ours while Kafka's move runs,
                                                     `ExternalReassignment` (WARNING) and the
                                                     reason "moved by another tool"; once Kafka's
                                                     move ends, the plan steps from there and
                                                     completes;
  2. a step of ours on outside-1 is cancelled with  → `ReassignmentInterrupted` within a few
     Kafka's tool (`--cancel`)                        observation intervals (not the stall
                                                     timeout), the partition stepped again
                                                     (step 2), and it completes;
  3. a step of ours on outside-1 is cancelled with  → `ReassignmentInterrupted` at the first poll
     Kafka's tool right after the executor applied    after the apply (the watcher, stopped
     it, before any poll showed it running             meanwhile, starts again with a snapshot),
                                                     not the stall timeout; stepped again
                                                     (step 2), and it completes.
Every outcome is read from Kafka (Admin API), the product's alerts and commands, and its CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from tests.waiting import PATIENCE
from reassigner.dev.harness import world as harness
from reassigner.dev.harness.cluster_tools import SlowReplication, create_topics, write_bulk
from reassigner.dev.harness.world import MIN_INSYNC_REPLICAS
from reassigner.dev.local.processes import stop

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.scenario]

TOPIC = "outside"
ASSIGNMENT = [[1, 2], [2, 3]]  # outside-0, outside-1
MEGABYTES = 4  # per partition
SLOW_BYTES_PER_SEC = 40_000  # a move copies for about two minutes, until the quotas are lifted
OBSERVATIONS = 30  # seconds: a few watcher polls (1 s) and micro-batches, far below the stall timeout


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("other-tools")
    with open(directory / "story.txt", "w") as story:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, console=Console(file=story, width=120))
        try:
            demo.setup()
            create_topics(demo.bootstrap, {TOPIC: len(ASSIGNMENT)}, MIN_INSYNC_REPLICAS,
                          assignments={TOPIC: ASSIGNMENT}, client=demo.client)
            write_bulk(demo.bootstrap, [(TOPIC, p) for p in range(len(ASSIGNMENT))], MEGABYTES, client=demo.client)
            demo.wait("the pipeline sees the topic", lambda: all(
                demo.controller_state().cluster.partition(_tp(p)) is not None for p in range(len(ASSIGNMENT))), 120)
            yield demo
        finally:
            demo.keep_logs(directory / "logs")
            demo.teardown()


def _tp(partition: int):
    from planning.model import TopicPartition

    return TopicPartition(TOPIC, partition)


def kafka_reassign(demo, cache_dir: Path, action: str, targets: dict[int, list[int]]) -> str:
    """`kafka-reassign-partitions.sh --bootstrap-server B --reassignment-json-file F --<action>`."""
    plan = demo.stack_dir / f"kafka-tool-{action}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in targets.items()]}))
    completed = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", "-cp", demo.stack.classpath(),
         "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server", demo.bootstrap,
         "--reassignment-json-file", str(plan), f"--{action}",
         *(["--preserve-throttles"] if action == "cancel" else [])],  # keep the test's own quotas
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed.stdout


def product_plan(demo, name: str, targets: dict[int, list[int]]) -> str:
    path = demo.stack_dir / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in targets.items()]}))
    completed = demo.cli("request", "reassign", "--additional", "--file", str(path))
    return json.loads(completed.stdout.strip().splitlines()[-1])["request_id"]


def listed(demo) -> dict:
    return json.loads(demo.cli("list", "--json").stdout)


def steps_for(demo, partition: int, since: int) -> list[dict]:
    return [c for c in demo.commands.of_kind("ReassignmentStep", since)
            if c["payload"][1]["topic"] == TOPIC and c["payload"][1]["partition"] == partition]


def kafka_partition(demo, partition: int) -> dict:
    return demo.probe.partitions([TOPIC])[(TOPIC, partition)]


def test_a_move_by_kafkas_tool_is_listed_external_and_never_stepped(world, cache_dir):
    demo = world
    alerts, commands = demo.alerts.mark(), demo.commands.mark()
    with SlowReplication(demo.bootstrap, TOPIC, [1, 2, 3], SLOW_BYTES_PER_SEC, client=demo.client) as slow:
        kafka_reassign(demo, cache_dir, "execute", {0: [1, 3]})
        demo.wait("Kafka shows outside-0 reassigning", lambda: kafka_partition(demo, 0)["reassigning"], 60)
        demo.wait("`reassigner list` shows it external", lambda: any(
            e["topic"] == TOPIC and e["partition"] == 0 and e["kind"] == "external" and e["adding"] == [3]
            for e in listed(demo)["external"]), OBSERVATIONS)
        info = demo.alerts.wait_for("ExternalReassignment", alerts, OBSERVATIONS,
                                    where=lambda a: a["subject"] == f"{TOPIC}-0")
        assert info["severity"] == "INFO", info
        assert "no reassignment in progress" not in demo.cli("status").stdout
        request = product_plan(demo, "ours-0.json", {0: [3, 2]})
        held = demo.alerts.wait_for("ExternalReassignment", alerts, OBSERVATIONS,
                                    where=lambda a: a["subject"] == f"{TOPIC}-0" and a["severity"] == "WARNING")
        assert f"{request}/{TOPIC}-0" in held["message"], held
        demo.wait("`list` says why our plan waits", lambda: any(
            r["partition"] == 0 and r["topic"] == TOPIC and (r["waiting"] or "").startswith("moved by another tool")
            for r in listed(demo)["reassignments"]), OBSERVATIONS)
        assert kafka_partition(demo, 0)["reassigning"], "Kafka's move ended before the checks: too fast"
        assert not steps_for(demo, 0, commands), "a step of ours started on a partition Kafka's tool moves"
        slow.lift()
    demo.wait("Kafka's move ends", lambda: sorted(kafka_partition(demo, 0)["replicas"]) == [1, 3]
              and not kafka_partition(demo, 0)["reassigning"], 180)
    done = demo.alerts.wait_for("ReassignmentCompleted", alerts, 180, where=lambda a: a["subject"] == f"{TOPIC}-0")
    assert done["details"]["replicas"] == "[3, 2]", done
    first = steps_for(demo, 0, commands)[0]["payload"][1]
    assert first["adding"] == [2] and first["removing"] == [1], f"not from where Kafka's tool left it: {first}"
    assert kafka_partition(demo, 0)["replicas"] == [3, 2]
    assert not listed(demo)["external"]


def test_a_step_cancelled_with_kafkas_tool_is_noticed_and_stepped_again(world, cache_dir):
    demo = world
    alerts, commands = demo.alerts.mark(), demo.commands.mark()
    with SlowReplication(demo.bootstrap, TOPIC, [1, 2, 3], SLOW_BYTES_PER_SEC, client=demo.client) as slow:
        request = product_plan(demo, "ours-1.json", {1: [1, 3]})
        demo.commands.wait_for("ReassignmentStep", commands, 90,
                               where=lambda c: c["payload"][1]["topic"] == TOPIC and c["payload"][1]["partition"] == 1)
        demo.wait("Kafka runs our step", lambda: kafka_partition(demo, 1)["reassigning"], 60)
        demo.wait("the product has seen it run", lambda: (
            (record := demo.controller_state().reassignments.get(_tp(1))) is not None
            and record.in_flight is not None and record.in_flight.seen_in_kafka), OBSERVATIONS)
        kafka_reassign(demo, cache_dir, "cancel", {1: [1, 3]})
        cancelled_at = demo.alerts.mark()
        demo.wait("Kafka shows the step cancelled", lambda: not kafka_partition(demo, 1)["reassigning"], 60)
        assert_interrupted_then_stepped_again(demo, request, alerts, commands, cancelled_at, OBSERVATIONS)
        slow.lift()
    done = demo.alerts.wait_for("ReassignmentCompleted", alerts, 180, where=lambda a: a["subject"] == f"{TOPIC}-1")
    assert done["details"]["replicas"] == "[1, 3]", done
    assert kafka_partition(demo, 1)["replicas"] == [1, 3]


def test_a_step_cancelled_before_any_poll_showed_it_is_noticed_at_the_first_poll_after_the_apply(world, cache_dir):
    """The watcher is stopped, so no poll can show our step running: the executor applies it, Kafka's
    tool cancels it, and only then does the watcher poll again (its snapshot on start). That first
    view read after the apply shows the replicas from before the step: interrupted, not stalled."""
    demo = world
    alerts, commands = demo.alerts.mark(), demo.commands.mark()
    current = kafka_partition(demo, 1)["replicas"]
    target = [current[0], *sorted({1, 2, 3} - set(current))]
    watcher = demo.product.handles.pop("watcher")  # stopped on purpose: not a crash for `check_alive`
    stop(watcher.pid, timeout_seconds=20)
    watcher.poll()
    restarted = False
    try:
        with SlowReplication(demo.bootstrap, TOPIC, [1, 2, 3], SLOW_BYTES_PER_SEC, client=demo.client) as slow:
            request = product_plan(demo, "ours-unseen-1.json", {1: target})
            demo.commands.wait_for("ReassignmentStep", commands, 90, where=lambda c: (
                c["payload"][1]["topic"] == TOPIC and c["payload"][1]["partition"] == 1))
            demo.wait("the executor applied our step: Kafka runs it", lambda: kafka_partition(demo, 1)["reassigning"], 60)
            kafka_reassign(demo, cache_dir, "cancel", {1: target})
            cancelled_at = demo.alerts.mark()
            demo.wait("Kafka shows the step cancelled", lambda: not kafka_partition(demo, 1)["reassigning"], 60)
            demo.wait("the pipeline read the executor's result", lambda: (
                (record := demo.controller_state().reassignments.get(_tp(1))) is not None
                and record.in_flight is not None and record.in_flight.applied_at_ms is not None), OBSERVATIONS)
            unseen = demo.controller_state().reassignments[_tp(1)].in_flight
            assert unseen.number == 1 and not unseen.seen_in_kafka, f"a poll showed the step: {unseen}"
            demo.product.start_one("watcher", log_name="watcher-2")
            restarted = True
            assert_interrupted_then_stepped_again(demo, request, alerts, commands, cancelled_at, OBSERVATIONS + 30)
            slow.lift()
    finally:
        if not restarted:
            demo.product.start_one("watcher", log_name="watcher-2")
    done = demo.alerts.wait_for("ReassignmentCompleted", alerts, 180, where=lambda a: a["subject"] == f"{TOPIC}-1")
    assert done["details"]["replicas"] == str(target), done
    assert kafka_partition(demo, 1)["replicas"] == target


def assert_interrupted_then_stepped_again(demo, request, alerts, commands, cancelled_at, timeout) -> None:
    """Partition 1's step was cancelled by Kafka's tool: one ReassignmentInterrupted naming our
    reassignment (within `timeout`), then its second step, and no stall alert since the cancel."""
    interrupted = demo.alerts.wait_for("ReassignmentInterrupted", alerts, timeout,
                                       where=lambda a: a["subject"] == f"{TOPIC}-1")
    assert "cancelled by another tool" in interrupted["message"], interrupted
    assert interrupted["details"]["reassignment_id"] == f"{request}/{TOPIC}-1"
    demo.wait("the partition is stepped again", lambda: len(steps_for(demo, 1, commands)) >= 2, OBSERVATIONS)
    again = steps_for(demo, 1, commands)[1]
    assert again["id"] == f"{request}/{TOPIC}-1:2:ReassignmentStep", again["id"]
    assert not demo.alerts.of_kind("ReassignmentStalled", cancelled_at)
