"""The fault-injection suite (issue 14, `make test-faults`): each fault the reliability issue lists,
injected into the whole product running on a real cluster, and every verdict taken from what
Kafka itself shows (Admin API), not from the product's view.

One world for the module (`world`, about a minute to start): a KRaft cluster of 4 brokers (racks
/dc1/r1, /dc1/r2, /dc2/r1, /dc2/r2; 2 log dirs each), Redis with AOF, sequenced traffic on three
topics (RF 3, min.insync.replicas 2), and the product as separate processes of the real CLI
(pipeline, watcher, executor, status page). After every fault the product must still do its
job: a manual move requested through the CLI completes in Kafka, every process still runs
(except the one the fault stopped on purpose), and at the end no record of the traffic was lost,
doubled or reordered.

  1. forged, oversized and nonsense records on the product's input topics (a 400-digit config
     value, a 400 KB request id, 1,040,000 bytes of garbage, broker id -1, partition -1, 10,000
     replicas, a leader epoch of 2^31-1, an event time in year 3000)
  2. a ~1 MB record on the commands topic
  3. the pipeline restarted on a fresh checkpoint dir (a new host)
  4. a second pipeline started on the same state
  5. the pipeline paused (SIGSTOP) for 60 s
  6. Redis killed while a command arrives, then restarted
  7. the executor killed (SIGKILL) while a slowed move copies data
  8. Redis emptied (FLUSHALL) while a throttled move copies data: the pipeline rewrites the state
     it knew, one `StateStoreLost` alert, the move completes, no throttle is left, the state
     matches Kafka
  9. Redis restored from a backup taken before a throttled move was requested, while it copies
     data: the same
 9b. Redis emptied while the pipeline and the executor are stopped, a throttled move copying:
     the pipeline rebuilds from Kafka at its start, Kafka finishes the move, no throttle is left
 9c. the same during the rebalance onto an added broker: the rebuilt pipeline requests the
     rebalance again, the new broker ends with its share
 10. SIGTERM to the whole process group of the pipeline (as a terminal or a supervisor sends it;
     Spark's JVM and what it forks run in a session of their own), three times in a row: each
     exits 0 without a traceback or an ERROR line, and the next start resumes;
     then a broker flapping (killed and restarted three times across the failure grace) while a
     move runs: everything settles, no alert per retried attempt
 11. a broker killed while a move runs: the move completes and the broker's replicas are healed
 12. SIGTERM: every process stops cleanly, without a traceback

Not here (tested below the process level, on real servers): a failed log dir whose partition
cannot keep rack spread (tests/handlers/test_reactions.py, partial heals) and a command whose
claim survived a crash (tests/edge/test_executor_applies_commands.py: Kafka is asked).
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest
from rich.console import Console

from planning.model import TopicPartition
from runtime.clients.kafka_admin import ClusterAdmin
from reassigner.dev.harness import world as harness
from reassigner.dev.harness.world import replica_disagreements
from reassigner.dev.harness.cluster_tools import SlowReplication, throttled_brokers, write_bulk
from reassigner.dev.harness.product import COMPONENTS, TopicCollector
from reassigner.dev.local.processes import tail
from schemas.codec import encode, version_headers
from tests.pipeline.harness import Harness, broker_event, partition_event, request
from tests.waiting import PATIENCE, eventually

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1", "/dc2/r2")
MOVE_TIMEOUT = 240
YEAR_3000_MS = 32_503_680_000_000


class Faults:
    def __init__(self, demo: harness.World, directory: Path) -> None:
        self.demo = demo
        self.directory = directory
        self.events = Harness(demo.bootstrap, "reassigner", harness.CLUSTER_NAME)
        self.dead_letters = TopicCollector(demo.bootstrap, "reassigner.dead-letter", "DeadLetter")
        self.moved: set[tuple[str, int]] = set()

    # --- what Kafka shows -----------------------------------------------------------------------
    def live_brokers(self) -> list[int]:
        return sorted(b for b, info in self.demo.probe.brokers().items() if not info.get("is_fenced", False))

    def replicas(self, topic: str, partition: int) -> dict:
        return self.demo.probe.partitions([topic])[(topic, partition)]

    # --- the product still does its job -----------------------------------------------------
    def pick(self, topic: str) -> tuple[tuple[str, int], list[int]]:
        """A partition of `topic` no earlier fault moved, and a target for it: its last replica
        replaced by a live broker that does not hold it."""
        parts = self.demo.probe.partitions([topic])
        tp = next(tp for tp in sorted(parts) if tp not in self.moved)
        self.moved.add(tp)
        current = parts[tp]["replicas"]
        return tp, [*current[:-1], next(b for b in self.live_brokers() if b not in current)]

    def request_move(self, topic: str = "orders") -> tuple[tuple[str, int], list[int]]:
        """Ask the product (CLI, Kafka tool JSON) to move a partition of `topic` (`pick`)."""
        tp, target = self.pick(topic)
        plan = self.directory / f"move-{uuid.uuid4().hex[:6]}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": tp[0], "partition": tp[1], "replicas": target}]}))
        self.demo.cli("request", "reassign", "--file", str(plan))
        return tp, target

    def wait_moved(self, tp: tuple[str, int], target: list[int], timeout: float = MOVE_TIMEOUT) -> None:
        """Until Kafka shows `tp` on `target`, in sync, and the product has finished with it."""
        def done() -> bool:
            seen = self.replicas(*tp)
            return (seen["replicas"] == target and not seen["reassigning"]
                    and sorted(seen["isr"]) == sorted(target)
                    and TopicPartition(*tp) not in self.demo.controller_state().reassignments)
        self.wait(f"Kafka shows {tp[0]}-{tp[1]} on {target}", done, timeout)

    def move_completes(self, topic: str = "orders") -> None:
        """The product still works: a manual move completes in Kafka."""
        tp, target = self.request_move(topic)
        self.wait_moved(tp, target)

    def wait(self, what: str, done, timeout: float) -> None:
        """`demo.wait`; a probe that Kafka does not answer (a broker just killed, still named the
        controller in the metadata) counts as not done yet."""
        from kafka.errors import KafkaError

        def attempt():
            try:
                return done()
            except KafkaError:
                return False

        try:
            self.demo.wait(what, attempt, timeout)
        except (TimeoutError, RuntimeError) as error:
            pytest.fail(f"{error}\n{self.demo.diagnostics()}", pytrace=False)

    def wait_alert(self, kind: str, since: int, timeout: float) -> dict:
        """`alerts.wait_for`, failing with the product's diagnostics (its alerts, commands, Kafka's
        moves and its logs' ends): CI keeps no log of the product but what a failure prints."""
        try:
            return self.demo.alerts.wait_for(kind, since, timeout)
        except TimeoutError as error:
            pytest.fail(f"{error}\n{self.demo.diagnostics(since)}", pytrace=False)

    # --- the processes ------------------------------------------------------------------------
    def process(self, name: str):
        return self.demo.product.handles[name]

    def log_mark(self, name: str) -> int:
        path = self.demo.product.log_dir / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, name: str, mark: int) -> str:
        with open(self.demo.product.log_dir / f"{name}.log", "rb") as log:
            log.seek(mark)
            return log.read().decode(errors="replace")

    def stop_cleanly(self, name: str, timeout: float = 60) -> None:
        """SIGTERM; the process must exit 0 within `timeout`, without a traceback."""
        process, mark = self.process(name), self.log_mark(name)
        os.kill(process.pid, signal.SIGTERM)
        try:
            code = process.wait(timeout)
        except Exception:
            pytest.fail(f"the {name} did not stop within {timeout} s of SIGTERM:\n"
                        f"{tail(self.demo.product.log_dir / f'{name}.log', 30)}", pytrace=False)
        said = self.log_since(name, mark)
        noisy = [line for line in said.splitlines() if "Traceback" in line or " ERROR " in line]
        assert code == 0 and not noisy, f"the {name} exited {code} on SIGTERM, saying:\n{said[-3000:]}"

    # --- a throttled move in flight, and Redis ---------------------------------------------------
    def start_throttled_move(self) -> tuple[tuple[str, int], list[int]]:
        """A move of a bulk partition (8 MB) under the product's own throttle (200 kB/s: about
        40 s), once Kafka shows it copying data."""
        demo = self.demo
        tp, target = self.pick(harness.BULK_TOPIC)
        write_bulk(demo.bootstrap, [tp], megabytes=8)
        demo.cli("config", "set", "throttle.bytes.per.sec=200000")
        plan = self.directory / f"throttled-{uuid.uuid4().hex[:6]}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": tp[0], "partition": tp[1], "replicas": target}]}))
        demo.cli("request", "reassign", "--file", str(plan))
        self.wait("Kafka shows the throttled move copying data", lambda: self.replicas(*tp)["reassigning"], 120)
        return tp, target

    def redis_keys(self) -> dict[bytes, bytes]:
        """Every key of the product's cluster in Redis, DUMPed: a backup."""
        client = self.demo.store.client
        return {key: client.dump(key) for key in client.scan_iter(match=f"reassigner:{{{harness.CLUSTER_NAME}}}:*")}

    def restore_redis(self, backup: dict[bytes, bytes]) -> None:
        """Redis as the backup has it: its keys restored, every other key of the cluster gone."""
        client = self.demo.store.client
        with client.pipeline(transaction=True) as pipe:
            for key in client.scan_iter(match=f"reassigner:{{{harness.CLUSTER_NAME}}}:*"):
                pipe.delete(key)
            for key, value in backup.items():
                pipe.restore(key, 0, value, replace=True)
            pipe.execute()

    def lose_redis_data_under_a_throttled_move(self, lose: Callable[[], None], found: str) -> None:
        """`lose` Redis data while a throttled move copies; then one StateStoreLost alert saying
        `found`, the move done in Kafka, no replication throttle left on any broker, the
        product's view of every partition Kafka's, every process still running, and a manual
        move completing."""
        demo = self.demo
        since = demo.alerts.mark()
        tp, target = self.start_throttled_move()
        lose()
        self.wait_alert("StateStoreLost", since, 60)
        assert self.replicas(*tp)["reassigning"], "the move ended before the fault: nothing was tested"
        self.wait_moved(tp, target)
        live = self.live_brokers()
        self.wait("the product clears its throttle (nothing moves)",
                  lambda: not throttled_brokers(demo.bootstrap, live), 120)
        demo.cli("config", "set", "throttle.bytes.per.sec=")
        self.wait("the product's view of every partition is Kafka's",
                  lambda: not replica_disagreements(demo.partitions(), demo.controller_state()), 120)
        lost = [a for a in demo.alerts.records(since) if a["kind"] == "StateStoreLost"]
        assert len(lost) == 1 and found in lost[0]["message"], lost
        for name in ("pipeline", "watcher", "executor", "status-server"):
            assert self.process(name).poll() is None, f"the {name} exited"
        self.move_completes()

    def close(self) -> None:
        self.events.close()
        self.dead_letters.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("faults")
    with open(directory / "story.txt", "w") as story:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, console=Console(file=story, width=120),
                             brokers=4, racks=RACKS)
        faults = None
        try:
            demo.setup()
            faults = Faults(demo, directory)
            yield faults
        finally:
            if faults is not None:
                faults.close()
            demo.keep_logs(directory / "logs")
            demo.teardown()


@pytest.fixture(autouse=True)
def every_process_running(world):
    """Each test starts with the product running: a component a failed test left stopped (a stop
    it was checking went wrong) is started again first, so one failure stays one (CI, 2026-11-28:
    a group stop that failed test 10 left the next three tests without a pipeline)."""
    for name in COMPONENTS:
        handle = world.demo.product.handles.get(name)
        if handle is not None and handle.poll() is not None:
            mark = world.log_mark(name)
            world.demo.product.start_one(name)
            if name == "pipeline":
                world.wait("the pipeline started again", lambda: "pipeline running" in world.log_since(name, mark),
                           300)
    yield


def test_1_forged_oversized_and_nonsense_records_are_refused_and_the_loop_goes_on(world):
    demo = world.demo
    since = demo.alerts.mark()
    now = int(time.time() * 1000)
    orders_1 = world.replicas("orders", 1)
    isr_changes = TopicCollector(demo.bootstrap, "reassigner.isr-changes", "PartitionState")
    world.events.send("requests", request("SetConfig", {"key": "step.stall.timeout", "value": "9" * 400}, now))
    cancel = request("Cancel", {"topic": None, "partition": None, "keep": False}, now, request_id="c" * 400_000)
    world.events.send("requests", {**cancel, "key": "cancel"})
    world.events.send("requests", request("Tick", {}, YEAR_3000_MS))
    world.events.send("broker-membership", broker_event(-1, "UNFENCED", now))
    world.events.send("isr-changes", partition_event("orders", -1, [1, 2, 3], now))
    world.events.send("isr-changes", partition_event("orders", 0, list(range(10_000)), now))
    world.events.send("isr-changes", partition_event("orders", 1, orders_1["replicas"], now,
                                                     isr=orders_1["isr"], epoch=2**31 - 1))
    from confluent_kafka import Producer

    big = Producer({"bootstrap.servers": demo.bootstrap, "message.max.bytes": 2_000_000, "log_level": 0})
    big.produce("reassigner.isr-changes", key=b"garbage", value=os.urandom(1_040_000))
    assert big.flush(30) == 0

    def epoch_forgery_handled(alerts: list[dict]) -> bool:
        # Refused, or superseded: state events collapse to the latest per partition within a
        # micro-batch, so a true event of orders-1 (the watcher's, e.g. after a log-dir move)
        # in the same batch makes the forged one never applied (CI, 2026-11-24).
        if any(a["kind"] == "BadEvent" and a["subject"] == "orders-1" for a in alerts):
            return True
        told = [r for r in isr_changes.records() if r["topic"] == "orders" and r["partition"] == 1]
        forged = next((i for i, r in enumerate(told) if r["leader_epoch"] == 2**31 - 1), None)
        return forged is not None and any(r["leader_epoch"] < 2**31 - 1 for r in told[forged + 1:])

    def refused() -> bool:
        alerts = demo.alerts.records(since)
        kinds = [a["kind"] for a in alerts]
        bad_subjects = {a["subject"] for a in alerts if a["kind"] == "BadEvent"}
        return (kinds.count("RequestRejected") >= 2 and "ClockSkew" in kinds
                and {"-1", "orders--1", "orders-0"} <= bad_subjects
                and any("Avro decoding failed" in a["message"] for a in alerts if a["kind"] == "BadEvent")
                and epoch_forgery_handled(alerts))
    try:
        world.wait("every bad record refused (RequestRejected, BadEvent, ClockSkew)", refused, 120)
    finally:
        isr_changes.close()
    state = demo.controller_state()
    assert all(tp.partition >= 0 for tp in state.cluster.partitions_by_tp)
    assert all(b.id >= 0 for b in state.cluster.brokers)
    assert state.cluster.partition(TopicPartition("orders", 1)).leader_epoch < 2**31 - 1
    assert "step.stall.timeout" not in state.config
    assert max([*state.broker_down_since_ms.values(), *state.broker_added_at_ms.values(), 0]) < now + 600_000
    world.move_completes()


def test_2_a_command_of_about_a_megabyte_is_dead_lettered_and_the_executor_goes_on(world):
    demo = world.demo
    letters = world.dead_letters.mark()
    command = {"schema_version": 1, "event_time": int(time.time() * 1000), "id": f"forged-{uuid.uuid4()}",
               "key": "k" * 500_000, "epoch": 0, "reassignment_id": "r", "step": 1, "reason": "r" * 500_000,
               "payload": ("CancelReassignment", {"topic": "orders", "partition": 0})}
    from confluent_kafka import Producer

    big = Producer({"bootstrap.servers": demo.bootstrap, "message.max.bytes": 2_000_000, "log_level": 0})
    big.produce("reassigner.commands", key=b"forged", value=encode("Command", command), headers=version_headers())
    assert big.flush(30) == 0
    world.wait("the command dead-lettered", lambda: len(world.dead_letters.records(letters)) >= 1, 60)
    assert "at most 256" in world.dead_letters.records(letters)[0]["reason"]
    world.move_completes()


def test_3_a_pipeline_on_a_fresh_checkpoint_dir_loses_no_request(world):
    demo = world.demo
    world.stop_cleanly("pipeline")
    fresh = world.directory / "new-host-checkpoints"
    mark = world.log_mark("pipeline")
    demo.product.start_one("pipeline", environment={"REASSIGNER_CHECKPOINT_DIR": str(fresh)})
    demo.set_config("reassignment.max.concurrent.leader.movements=2", timeout=240)
    assert demo.controller_state().config.get("reassignment.max.concurrent.leader.movements") == "2"
    world.move_completes()
    assert "Traceback" not in world.log_since("pipeline", mark)
    assert any(fresh.rglob("commits")), "the new pipeline did not checkpoint in the fresh dir"


def test_4_a_second_pipeline_fences_the_first(world):
    demo = world.demo
    older = world.process("pipeline")
    commands_before = demo.commands.mark()
    newer = demo.product.start_one("pipeline", log_name="pipeline-2")  # watched from now on
    try:
        code = older.wait(240)
    except Exception:
        pytest.fail("the older pipeline still runs 240 s after a newer one started", pytrace=False)
    said = tail(demo.product.log_dir / "pipeline.log", 40)
    assert code != 0 and "replaced by epoch" in said, said
    assert newer.poll() is None
    world.move_completes()
    by_id: dict[str, list] = {}
    for command in demo.commands.records(commands_before):
        by_id.setdefault(command["id"], []).append({k: v for k, v in command.items() if k != "epoch"})
    twice = [i for i, copies in by_id.items() if any(c != copies[0] for c in copies)]
    assert not twice, f"command ids published with different contents: {twice}"


def test_5_a_pipeline_paused_for_60_s_recovers_by_itself(world):
    process = world.process("pipeline")
    os.kill(process.pid, signal.SIGSTOP)
    try:
        time.sleep(60)  # the fault itself: a process starved or paused for a minute
    finally:
        os.kill(process.pid, signal.SIGCONT)
    world.move_completes()
    assert process.poll() is None


def test_6_redis_killed_while_a_command_arrives_is_ridden_out(world):
    demo = world.demo
    tp, target = world.pick("payments")
    epoch = demo.controller_state().epoch  # the running pipeline's: the executor takes it
    mark = world.log_mark("executor")
    demo.stack.stop_redis(kill=True)
    try:
        command = {"schema_version": 1, "event_time": int(time.time() * 1000), "id": f"outage-{uuid.uuid4()}",
                   "key": f"{tp[0]}-{tp[1]}", "epoch": epoch, "reassignment_id": "outage", "step": 1,
                   "reason": "fault suite: Redis away", "payload": ("ReassignmentStep", {
                       "topic": tp[0], "partition": tp[1], "target_replicas": target})}
        world.events.producer.produce("reassigner.commands", key=command["key"].encode(),
                                      value=encode("Command", command), headers=version_headers())
        assert world.events.producer.flush(30) == 0
        eventually(lambda: "Redis" in world.log_since("executor", mark), 60, what="the executor meets the outage")
        for name in ("pipeline", "watcher", "executor"):
            assert world.process(name).poll() is None, f"the {name} exited while Redis was away"
    finally:
        demo.stack.start_redis()
    world.wait_moved(tp, target)
    world.move_completes()


def test_7_the_executor_killed_mid_move_resumes_it(world):
    demo = world.demo
    tp, target = world.pick(harness.BULK_TOPIC)  # not a traffic topic: filler is written to it
    live = world.live_brokers()
    write_bulk(demo.bootstrap, [tp], megabytes=4)
    plan = world.directory / "slow-move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": tp[0], "partition": tp[1], "replicas": target}]}))
    with SlowReplication(demo.bootstrap, tp[0], live, 200_000):
        demo.cli("request", "reassign", "--file", str(plan))
        world.wait("Kafka shows the move copying data", lambda: world.replicas(*tp)["reassigning"], 120)
        os.kill(world.process("executor").pid, signal.SIGKILL)
        world.process("executor").wait(30)
        demo.product.start_one("executor")
    world.wait_moved(tp, target)
    interrupted = [a for a in demo.alerts.records() if "COMMAND_INTERRUPTED" in json.dumps(a)]
    assert not interrupted, interrupted
    world.wait("the product's reassignment done", lambda: not demo.controller_state().reassignments, 120)


def test_8_redis_emptied_under_a_throttled_move_is_rewritten_and_the_move_completes(world):
    # as a restart without persistence, or a failover to an empty replica
    world.lose_redis_data_under_a_throttled_move(world.demo.store.client.flushall, "holds no state at all")


def test_9_redis_rolled_back_under_a_throttled_move_is_rewritten_and_the_move_completes(world):
    backup = world.redis_keys()  # before the move is requested
    world.lose_redis_data_under_a_throttled_move(lambda: world.restore_redis(backup), "went back from batch")


def test_9b_redis_emptied_while_the_pipeline_and_executor_were_stopped_leaves_no_throttle(world):
    """Redis emptied while neither the pipeline nor the executor ran, a throttled move copying:
    the pipeline rebuilds from Kafka at start (one StateStoreLost), Kafka finishes the move, and
    the throttle is still cleared (the rebuilt marker; the executor adopts what its step set),
    on the brokers and on the topic; the product's view is Kafka's and it moves again."""
    demo = world.demo
    since = demo.alerts.mark()
    tp, target = world.start_throttled_move()
    world.stop_cleanly("pipeline")
    world.stop_cleanly("executor")
    assert world.replicas(*tp)["reassigning"], "the move ended before the fault: nothing was tested"
    demo.store.client.flushall()
    demo.product.start_one("pipeline")
    demo.product.start_one("executor")
    world.wait_alert("StateStoreLost", since, 240)
    world.wait_moved(tp, target)
    live = world.live_brokers()
    lists = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
    with ClusterAdmin(demo.bootstrap) as admin:
        world.wait("the throttle cleared on the brokers and the topic",
                   lambda: not throttled_brokers(demo.bootstrap, live)
                   and not any(admin.describe_topic_configs(tp[0], lists).values()), 180)
    lost = [a for a in demo.alerts.records(since) if a["kind"] == "StateStoreLost"]
    assert len(lost) == 1 and "but commands of epoch" in lost[0]["message"], lost
    world.wait("the product's view of every partition is Kafka's",
               lambda: not replica_disagreements(demo.partitions(), demo.controller_state()), 120)
    for name in ("pipeline", "watcher", "executor", "status-server"):
        assert world.process(name).poll() is None, f"the {name} exited"
    world.move_completes()


def test_9c_a_rebalance_cut_by_redis_emptied_while_stopped_is_resumed(world):
    """A broker added, its rebalance under way (throttled), then the pipeline and the executor
    stopped and Redis emptied: the rebuilt pipeline requests the rebalance again once its replay
    has caught up (its partitions not stepped yet are in no command), and the new broker ends
    with its share of replicas, no throttle left, the view Kafka's."""
    demo = world.demo
    since = demo.alerts.mark()
    demo.cli("config", "set", "throttle.bytes.per.sec=200000")
    added = demo.stack.add_broker(rack="/dc1/r3")
    world.wait_alert("PlanCreated", since, 120)
    world.wait("the rebalance's first steps copying",
               lambda: any(p["reassigning"] for p in demo.partitions().values()), 120)
    world.stop_cleanly("pipeline")
    world.stop_cleanly("executor")
    partitions = demo.partitions()
    total = sum(len(p["replicas"]) for p in partitions.values())
    share = total // len(world.live_brokers())
    held = demo.replicas_on(added.id)
    assert held < share // 2, f"the rebalance was nearly over before the fault ({held} of {share}): nothing tested"
    demo.store.client.flushall()
    demo.product.start_one("pipeline")
    demo.product.start_one("executor")
    world.wait_alert("StateStoreLost", since, 240)
    lost = [a for a in demo.alerts.records(since) if a["kind"] == "StateStoreLost"]
    assert len(lost) == 1 and "the plans that were running" in lost[0]["message"], lost
    world.wait("the new broker holds its share of replicas again",
               lambda: demo.replicas_on(added.id) >= share - len({t for t, _ in partitions}), 420)
    world.wait("nothing moves", lambda: not any(p["reassigning"] for p in demo.partitions().values())
               and not demo.controller_state().reassignments, 300)
    # A step that added a replica, cut before the one that drops the replica it replaces: the
    # resume must bring the partition back to its replication factor (a run in bytes mode left
    # orders-0 at 4 replicas here, and only the tests after this one failed).
    off = {f"{t}-{n}": p["replicas"] for (t, n), p in demo.partitions().items() if len(p["replicas"]) != 3}
    assert not off, f"partitions left off their replication factor (3) after the resume: {off}"
    live = world.live_brokers()
    world.wait("the product clears its throttle (nothing moves)",
               lambda: not throttled_brokers(demo.bootstrap, live), 120)
    world.wait("the product's view of every partition is Kafka's",
               lambda: not replica_disagreements(demo.partitions(), demo.controller_state()), 120)
    for name in ("pipeline", "watcher", "executor", "status-server"):
        assert world.process(name).poll() is None, f"the {name} exited"


def test_10_sigterm_to_the_pipelines_whole_process_group_is_clean_three_times(world):
    demo = world.demo
    for attempt in range(3):
        process, mark = world.process("pipeline"), world.log_mark("pipeline")
        world.wait("the pipeline's query runs", lambda: "pipeline running" in world.log_since("pipeline", mark)
                   or attempt == 0, 300)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            code = process.wait(120)
        except Exception:
            pytest.fail(f"the pipeline did not stop within 120 s of a group SIGTERM:\n"
                        f"{tail(demo.product.log_dir / 'pipeline.log', 30)}", pytrace=False)
        said = world.log_since("pipeline", mark)
        noisy = [line for line in said.splitlines() if "Traceback" in line or " ERROR " in line]
        assert code == 0 and not noisy, f"group stop {attempt + 1}: exit {code}, saying:\n{said[-3000:]}"
        demo.product.start_one("pipeline")
    world.move_completes()


def test_10b_a_flapping_broker_settles_without_an_alert_per_attempt(world):
    """A broker killed and restarted three times (down 20-25 s, over the 15 s failure grace; up
    25-30 s) while a move runs. Once it stops flapping everything settles in Kafka (the heal and
    the rebalance onto it when it is back may move the same partitions again, superseding the
    move), the product's view is Kafka's, every process runs, a step retried because the broker
    was down raised no alert per attempt, and a manual move completes."""
    demo = world.demo
    since = demo.alerts.mark()
    _tp, target = world.request_move("payments")  # something moving when the flapping starts
    flapping = next(b for b in world.live_brokers() if b not in target)
    for down, up in ((20, 25), (25, 30), (22, 27)):
        demo.stack.stop_broker(flapping, kill=True)
        world.wait(f"broker {flapping} fenced", lambda: flapping not in world.live_brokers(), 60)
        time.sleep(down)  # the fault itself: the broker stays down this long
        demo.stack.start_broker(flapping)
        world.wait(f"broker {flapping} back", lambda: flapping in world.live_brokers(), 120)
        time.sleep(up)  # the fault itself: up this long before it dies again

    def settled() -> bool:
        good, total = demo.fully_replicated()
        return good == total and not demo.controller_state().reassignments
    world.wait("every partition back to 3 in-sync replicas, nothing moving", settled, 360)
    world.wait("the product's view of every partition is Kafka's",
               lambda: not replica_disagreements(demo.partitions(), demo.controller_state()), 120)
    for name in ("pipeline", "watcher", "executor", "status-server"):
        assert world.process(name).poll() is None, f"the {name} exited"
    failed = [a for a in demo.alerts.records(since) if a["kind"] == "CommandFailed"]
    per_subject: dict[str, int] = {}
    for alert in failed:
        per_subject[alert["subject"]] = per_subject.get(alert["subject"], 0) + 1
    assert all(count == 1 for count in per_subject.values()), "\n".join(
        f"{a['subject']}: {a['message']}" for a in failed)
    world.move_completes()


def test_11_a_broker_killed_mid_move_is_healed_and_the_move_completes(world):
    demo = world.demo
    since = demo.alerts.mark()
    tp, target = world.request_move("payments")
    victim = next(b for b in world.live_brokers() if b not in target)
    demo.stack.stop_broker(victim, kill=True)
    world.wait_moved(tp, target)
    world.wait_alert("BrokerFailed", since, 120)

    def healed() -> bool:
        good, total = demo.fully_replicated()
        return good == total and not demo.controller_state().reassignments
    world.wait(f"every partition back to 3 in-sync replicas without broker {victim}", healed, 300)
    assert all(victim not in p["replicas"] for p in demo.partitions().values())


def test_12_sigterm_stops_every_process_cleanly_and_no_record_was_lost(world):
    report, monitor = world.demo.finish()
    for name in ("watcher", "executor", "status-server", "pipeline"):
        world.stop_cleanly(name)
    assert report.clean, report
    assert not monitor.violations, monitor.violations
