"""Crash tests: the real pipeline process (`reassigner run`) is SIGKILLed at random moments of a
multi-step reassignment and restarted; Redis is killed and restarted mid-run. The cluster side is
the simulated cluster (see simulated_kafka.py). Nothing may be lost or contradictory:
- no command id is ever published with two different contents;
- every partition's steps are exactly those of an uninterrupted run (the SPEC 5.1 sequence when
  each step completes in sync), and every partition ends at its target.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from harness import T0, Harness, broker_event, request, topic_event
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.partition_steps import compute_step_sequence
from reassigner.dev.local.processes import free_port, stop, tail
from reassigner.dev.local.redis_server import (free_cluster_ports, move_slot, slot_owner, start_redis,
                                                start_redis_cluster)
from simulated_kafka import SimulatedKafka
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.long]

PARTITIONS = 6
ORIGINAL = (1, 2, 3)
TARGETS = {p: ((4, 5, 3), (3, 4, 5), (2, 4, 1), (5, 1, 2), (4, 2, 3), (1, 5, 4))[p] for p in range(PARTITIONS)}


def start_pipeline(environment: dict[str, str], log_file: Path) -> subprocess.Popen:
    with open(log_file, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "reassigner.cli", "run", "--verbose"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **environment}, start_new_session=True)


def prepare_run(local_stack, tmp_path, cache_dir, redis_url: str) -> dict:
    """The pipeline's environment, its topics and the simulated cluster, with the state in Redis
    at `redis_url`."""
    prefix = f"c{uuid.uuid4().hex[:8]}"
    environment = {
        "REASSIGNER_BOOTSTRAP_SERVERS": local_stack.bootstrap_servers,
        "REASSIGNER_REDIS_URL": redis_url,
        "REASSIGNER_TOPIC_PREFIX": prefix, "REASSIGNER_CLUSTER_NAME": prefix,
        "REASSIGNER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "REASSIGNER_CACHE_DIR": str(cache_dir), "REASSIGNER_TICK_INTERVAL_SECONDS": "0",
        "REASSIGNER_TRIGGER_INTERVAL": "300 milliseconds",
        "REASSIGNER_MAX_PARTITION_MOVEMENTS": "3", "REASSIGNER_MAX_LEADER_MOVEMENTS": "3",
        "REASSIGNER_MAX_REPLICA_MOVEMENTS": "1", "REASSIGNER_MAX_MOVEMENTS_PER_BROKER": "3",
        "PYSPARK_PYTHON": sys.executable,
    }
    from runtime.settings import load_settings
    from runtime.clients.kafka_admin import ensure_topics
    from streams.query import compute_topic_names

    settings = load_settings(topic_prefix=prefix)
    ensure_topics(local_stack.bootstrap_servers, None, compute_topic_names(settings), 1, replication_factor=1)
    harness = Harness(local_stack.bootstrap_servers, prefix, prefix)
    cluster = Cluster(
        tuple(Broker(i, f"/dc1/r{i}") for i in range(1, 6)),
        (Topic("orders", tuple(PartitionState("orders", p, ORIGINAL, ORIGINAL, 1, 20_000)
                               for p in range(PARTITIONS)), 1),),
    )
    simulated = SimulatedKafka(harness, cluster, bytes_per_sec=10_000)
    for broker in range(1, 6):
        harness.send("broker-membership", broker_event(broker, "UNFENCED", T0))
    harness.send("topic-state", topic_event("orders", PARTITIONS, T0, min_isr=1))
    simulated.publish_all()
    return {"environment": environment, "harness": harness, "simulated": simulated,
            "log": tmp_path / "pipeline.log"}


@pytest.fixture
def crash_run(local_stack, tmp_path, cache_dir):
    redis_port = free_port()
    redis_dir = tmp_path / "redis"
    redis_pid = start_redis(redis_port, redis_dir)
    run = prepare_run(local_stack, tmp_path, cache_dir, f"redis://127.0.0.1:{redis_port}/0")
    run["redis"] = (redis_port, redis_dir, redis_pid)
    yield run
    process = run.get("process")
    if process is not None:
        stop(process.pid)
    stop(run["redis"][2])
    run["harness"].close()


@pytest.fixture
def cluster_run(local_stack, tmp_path, cache_dir):
    """`crash_run` with the state on a local 3-master Redis Cluster (issue 17 item 4)."""
    ports = free_cluster_ports()
    pids = start_redis_cluster(ports, tmp_path / "redis-cluster")
    run = prepare_run(local_stack, tmp_path, cache_dir, f"redis+cluster://127.0.0.1:{ports[1]}")
    run["cluster_ports"] = ports
    yield run
    process = run.get("process")
    if process is not None:
        stop(process.pid)
    for pid in pids:
        stop(pid, timeout_seconds=20)
    run["harness"].close()


def request_the_reassignment(run) -> None:
    run["harness"].send("requests", request("Reassign", {
        "partitions": [{"topic": "orders", "partition": p, "replicas": list(t), "log_dirs": None}
                       for p, t in TARGETS.items()], "additional": False}, T0 + 100, "crash-test"))


def finished(simulated: SimulatedKafka) -> bool:
    return all(simulated.sim.partition(TopicPartition("orders", p)).replicas == TARGETS[p]
               and not simulated.sim.partition(TopicPartition("orders", p)).reassigning
               for p in range(PARTITIONS))


def drive(run, seconds: float, disturb=None) -> None:
    """Pump the simulated cluster until every partition is at its target (or time runs out)."""
    simulated = run["simulated"]
    deadline = time.monotonic() + seconds
    while not finished(simulated):
        assert time.monotonic() < deadline, (
            f"not finished in {seconds} s; pipeline log:\n{tail(run['log'], 40)}")
        if run["process"].poll() is not None and not run.get("expect_down"):
            raise AssertionError(f"the pipeline died:\n{tail(run['log'], 40)}")
        simulated.pump(1.0)
        simulated.tick_request()
        if disturb is not None:
            disturb()


def check_no_contradiction_and_exact_steps(simulated: SimulatedKafka) -> None:
    by_id: dict[str, list[dict]] = defaultdict(list)
    for command in simulated.commands:
        by_id[command["id"]].append(command)
    for command_id, copies in by_id.items():
        # A copy re-published by a later instance carries that instance's epoch (else its
        # executor would refuse it as stale); everything else is the first decision's, byte for byte.
        contents = [{k: v for k, v in c.items() if k != "epoch"} for c in copies]
        assert all(c == contents[0] for c in contents), f"{command_id} published with different contents"
        epochs = [c["epoch"] for c in copies]
        assert epochs == sorted(epochs), f"{command_id} re-published with an older epoch: {epochs}"
    targets_by_partition: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for command in sorted({c["id"]: c for c in simulated.commands}.values(), key=lambda c: c["step"]):
        kind, fields = command["payload"]
        if kind == "ReassignmentStep":
            targets_by_partition[fields["partition"]].append(tuple(fields["target_replicas"]))
    for p, target in TARGETS.items():
        expected = [s.target for s in compute_step_sequence(ORIGINAL, target, ORIGINAL, 1, 1)]
        assert targets_by_partition[p] == expected, (p, targets_by_partition[p], expected)


def test_sigkill_at_random_moments_loses_and_doubles_nothing(crash_run):
    run = crash_run
    run["process"] = start_pipeline(run["environment"], run["log"])
    request_the_reassignment(run)
    # Kill points are drawn in units of progress (distinct commands seen), so every kill lands
    # mid-reassignment however fast this machine is; the moment within that is random.
    chooser = random.Random(int(os.environ.get("CRASH_SEED", "7")))
    kill_points = sorted(chooser.sample(range(2, 11), 3))  # of about 12-17 commands
    kills_done = []

    def maybe_kill() -> None:
        distinct = len({c["id"] for c in run["simulated"].commands})
        if kill_points and distinct >= kill_points[0]:
            time.sleep(chooser.uniform(0, 1.5))
            os.kill(run["process"].pid, signal.SIGKILL)
            run["process"].wait(30)
            run["process"] = start_pipeline(run["environment"], run["log"])
            kills_done.append(kill_points.pop(0))

    drive(run, 480, maybe_kill)
    assert len(kills_done) >= 2, f"only {kills_done} kills before the end (points {kill_points})"
    starts = run["log"].read_text().count("pipeline started: epoch")
    assert 2 <= starts <= 1 + len(kills_done)  # a kill may land before a restart finished starting
    epochs = {c["epoch"] for c in run["simulated"].commands}
    assert len(epochs) >= 2, f"every command came from one instance: {epochs}"
    check_no_contradiction_and_exact_steps(run["simulated"])


def test_a_redis_restart_mid_run_keeps_the_state(crash_run):
    import redis

    from state.controller_store import ControllerStore

    run = crash_run
    run["process"] = start_pipeline(run["environment"], run["log"])
    request_the_reassignment(run)
    redis_port, redis_dir, redis_pid = run["redis"]
    store = ControllerStore(redis.Redis(port=redis_port), run["environment"]["REASSIGNER_CLUSTER_NAME"])
    # Run until some steps have completed, then kill Redis (SIGKILL: no shutdown save).
    deadline = time.monotonic() + 180
    while len({c["id"] for c in run["simulated"].commands}) < 4:
        assert time.monotonic() < deadline, tail(run["log"], 40)
        run["simulated"].pump(1.0)
        run["simulated"].tick_request()
    before = store.load()
    assert before.reassignments
    outages_told = run["log"].read_text(errors="replace").count("Redis unavailable")
    stop(redis_pid, kill=True)

    def pipeline_meets_the_outage() -> bool:
        """Events keep coming; true once a batch has found Redis away (and is retrying)."""
        run["simulated"].pump(1.0)
        run["simulated"].tick_request()
        return run["log"].read_text(errors="replace").count("Redis unavailable") > outages_told

    eventually(pipeline_meets_the_outage, 60, 0, what="the pipeline retrying while Redis is away")
    run["redis"] = (redis_port, redis_dir, start_redis(redis_port, redis_dir))
    after = ControllerStore(redis.Redis(port=redis_port), store.cluster_name).load()
    assert after.last_batch >= before.last_batch
    assert set(after.cluster.partitions_by_tp) == set(before.cluster.partitions_by_tp)
    if after.last_batch == before.last_batch:
        assert after.reassignments == before.reassignments
    drive(run, 300)
    check_no_contradiction_and_exact_steps(run["simulated"])


def test_the_pipeline_rides_out_a_resharding_of_its_slot(cluster_run):
    """The running pipeline on a Redis Cluster (`redis+cluster://`, one node named): the slot
    of its keys moves to another master mid-run, keys and all; the same process carries on
    (MOVED/ASK followed by the cluster client, TRYAGAIN retried) and the run ends exact."""
    from runtime.clients.redis_io import connect_redis
    from state.controller_store import ControllerStore

    run = cluster_run
    ports = run["cluster_ports"]
    run["process"] = start_pipeline(run["environment"], run["log"])
    request_the_reassignment(run)
    client = connect_redis(run["environment"]["REASSIGNER_REDIS_URL"])
    store = ControllerStore(client, run["environment"]["REASSIGNER_CLUSTER_NAME"])
    slot = client.keyslot(store.keys["meta"])
    source = slot_owner(ports, slot)
    target = next(p for p in ports if p != source)
    moved: list[int] = []

    def reshard_once() -> None:
        if not moved and len({c["id"] for c in run["simulated"].commands}) >= 3:
            moved.append(move_slot(slot, source, target))

    drive(run, 480, reshard_once)
    assert moved and moved[0] >= 3, moved  # the state's keys went with the slot
    assert slot_owner(ports, slot) == target
    assert run["process"].poll() is None, "the pipeline stopped"
    assert run["log"].read_text(errors="replace").count("pipeline started: epoch") == 1
    check_no_contradiction_and_exact_steps(run["simulated"])
    assert store.load().last_batch > 0
