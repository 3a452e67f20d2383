"""Scale benchmark (issue 17): prints figures, asserts nothing.

The pipeline driver's own path — decode (fastavro) → decide (`handlers.decide.decide_isolating`)
→ persist (`ControllerStore.commit`, one Lua script against a real Redis with AOF) — exactly the
steps 3-5 of `streams.runner.PipelineRunner.process_rows` (Spark's collect before and the
publish after are not in it), on a controller state of N partitions (RF 3, topics of 1,000
partitions, max(30, N / 1,000) brokers with 2 log dirs each), per batch kind:

    isr_events_10   ten PartitionState events, each an ISR change of one partition
    tick            one Tick request and nothing else (one a second in production)
    completion      the PartitionState that completes a step in flight, and the next step decided

CPU time of this process (`time.process_time`, median of `--repeat` batches; the machine is
shared, CPU time is what is comparable), and: the pipeline start (`ControllerStore.load`), the
Redis server time of the first commit of the whole view and of the largest batch commit (SLOWLOG
with threshold 0), and this process's resident set while it holds the driver's state after the
batches (`rss_mib`; the built and the loaded state are both alive then, so it is an upper bound)
and its peak so far (`peak_rss_mib`: every earlier size and the watcher's synthetic snapshots
count in it, so only the first run's is the driver's own).

The watcher's own work per poll beyond the Admin API reads (`watcher_cpu_ms`), on a synthetic
observation of the same size (`benchmarks/bench_watcher.synthetic_observation`, RF 3, 2 dirs a
broker):

    merge_dirs_carried   `compute_observation` given the previous poll, 10 ISR changes, the dirs
                         carried over (most polls: the dirs are read every `log.dirs.interval`)
    merge_dirs_carried_plain_list  the same given a plain list of observations (every partition
                         walked in Python: the merge before `PartitionList`)
    partition_list_build `PartitionList.of` those observations (an upper bound of what the
                         decoding adds: it appends one tuple per partition from locals)
    merge_dirs_read      the same with every dir read again (new objects, new sizes), as
                         `compute_log_dirs` decodes them from answer structs
    diff_dirs_read       `compute_events` after such a poll
    log_dirs_decode      `compute_log_dirs` of every dir's answer structs (900k replicas at
                         300k: the decoding's part beyond kafka-python's own, not in the merge)
    collection_after_dirs_read  the young collection after such a poll (the watcher runs with
                         `runtime.heap`: no automatic collection, one after every poll)
    diff                 `compute_events` of the 10 changes
    snapshot_whole       a snapshot in one poll: its events and their Avro encoding
    snapshot_slice       one poll's share of a sliced snapshot (`snapshot.slice.partitions`
                         partitions, events and encoding): what a snapshot adds to a poll

    .venv/bin/python benchmarks/bench_scale.py [--partitions 10000,100000,300000] [--repeat 5] [--json]
        [--simulated 333334]

With `--simulated N`, also the whole control loop at N partitions (`bench_decision_path.py`: the
product's decode → decide → commit and the executor's commands against the simulated cluster,
20 brokers added and 5 drained, to the end, SPEC 6 checked every batch): wall, batches
(decisions), steps, steps per second, violations, under `simulated_run`.

With `--json`, one JSON object: {"machine": ..., "runs": {N: {"driver_cpu_ms": {kind: ms}, ...}}}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from handlers.decide import decide_isolating  # noqa: E402
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic  # noqa: E402
from planning.movement.partition_steps import Step  # noqa: E402
from planning.movement.reassignment import start_reassignment, start_step  # noqa: E402
from schemas.codec import encode  # noqa: E402
from state.model import ControllerState  # noqa: E402

T0 = 1_800_000_000_000
TOPIC_SIZE = 1_000


def build_cluster(partitions: int, size_bytes=lambda topic, partition: 10**8) -> Cluster:
    """N partitions, RF 3, topics of TOPIC_SIZE, max(30, N / 1,000) brokers with 2 dirs each;
    `size_bytes(topic number, partition)` gives each partition's size."""
    broker_count = max(30, partitions // 1_000)
    brokers = tuple(Broker(b, f"/dc{b % 3}/r{b % 9}", True, False, broker_dirs(b)) for b in range(broker_count))
    topics = []
    for t in range(max(1, partitions // TOPIC_SIZE)):
        name = f"topic-{t:04d}"
        parts = []
        for p in range(min(TOPIC_SIZE, partitions)):
            first = (t * 7 + p) % broker_count
            replicas = (first, (first + 1) % broker_count, (first + 2) % broker_count)
            parts.append(PartitionState(name, p, replicas, replicas, first, size_bytes(t, p),
                                        tuple(f"/var/lib/kafka/{b}/data-{p % 2}" for b in replicas),
                                        leader_epoch=5))
        topics.append(Topic(name, tuple(parts), 2))
    return Cluster(brokers, tuple(topics))


def broker_dirs(broker_id: int) -> tuple[LogDir, ...]:
    return tuple(LogDir(f"/var/lib/kafka/{broker_id}/data-{d}", True, 10**13, 9 * 10**12) for d in range(2))


def build_state(partitions: int) -> ControllerState:
    return ControllerState(cluster=build_cluster(partitions), epoch=1)


def header(key: str, at_ms: int, number: int) -> dict:
    return {"schema_version": 3, "event_time": at_ms, "id": f"bench-{number}", "key": key}


def partition_record(p: PartitionState, at_ms: int, number: int) -> dict:
    return {**header(f"{p.topic}-{p.partition}", at_ms, number), "snapshot_id": None, "topic": p.topic,
            "partition": p.partition, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
            "leader_epoch": p.leader_epoch, "adding": list(p.adding), "removing": list(p.removing),
            "offline_replicas": list(p.offline_replicas), "size_bytes": p.size_bytes, "log_dirs": list(p.log_dirs)}


class Driver:
    """decode → decide → persist, as the pipeline's driver runs them."""

    def __init__(self, store, state: ControllerState, settings, policy) -> None:
        self.store, self.state, self.settings, self.policy = store, state, settings, policy
        self.offset = 0
        self.now_ms = T0

    def rows(self, suffix: str, schema: str, records: list[dict]) -> list[tuple]:
        rows = []
        for record in records:
            self.offset += 1
            rows.append((self.settings.topic(suffix), 0, self.offset, encode(schema, record)))
        return rows

    def run(self, rows: list[tuple]) -> float:
        """One batch; returns the driver's CPU seconds for it."""
        from streams.input_rows import compute_batch_inputs

        started = time.process_time()
        batch_id = self.state.last_batch + 1
        inputs = compute_batch_inputs(batch_id, rows, self.settings)
        decision = decide_isolating(self.state, replace(inputs, clock_ms=self.now_ms + 1000), self.policy)
        after = decision.state.with_changes(last_batch=batch_id, epoch=self.state.epoch)
        self.store.commit(batch_id, self.state, after, decision.outbox,
                          {(self.settings.topic("isr-changes"), 0): self.offset})
        self.state = after
        return time.process_time() - started


def with_rebalance(state: ControllerState, count: int, in_flight: int) -> ControllerState:
    """`count` reassignments of a big rebalance under way: each moves one replica of its partition
    to another broker; the first `in_flight` (= P) have their step running."""
    brokers = len(state.cluster.brokers)
    records = {}
    for n, p in enumerate(p for t in state.cluster.topics for p in t.partitions):
        if n >= count:
            break
        spare = next(b for b in range(brokers) if b not in p.replicas and b % 7 == n % 7)
        target = (spare,) + p.replicas[1:]
        record = start_reassignment(f"bench-rebalance/{p.tp}", p.tp, p.replicas, target, reason="rebalance")
        if n < in_flight:
            record = start_step(record, Step((spare,) + p.replicas, (spare,), (), True, True), started_at=T0 / 1000)
        records[p.tp] = record
    return state.with_records(records)


def measure(partitions: int, repeat: int, redis_client, rebalancing: int = 0) -> dict:
    from runtime.settings import compute_policy, load_settings
    from state.controller_store import ControllerStore

    # Limits of a brisk production rebalance: 50 steps in flight (the default P is 5).
    settings = load_settings(cluster_name=f"bench-{partitions}", max_partition_movements=50,
                             max_movements_per_broker=50, max_leader_movements=50,
                             broker_add_grace_seconds=10**6)
    policy = compute_policy(settings)
    redis_client.flushall()
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.config_set("slowlog-max-len", 100_000)
    state = build_state(partitions)
    # One reassignment with its first step in flight, for the completion batches.
    first = state.cluster.topics[0].partitions[0]
    moving = start_step(start_reassignment("bench/0", first.tp, first.replicas, (27, 28, 29), reason="bench"),
                        Step((27,) + first.replicas, (27,), (), True, True), started_at=T0 / 1000)
    if rebalancing:
        state = with_rebalance(state, rebalancing, in_flight=50)
    state = state.with_records({first.tp: moving})
    store = ControllerStore(redis_client, settings.cluster_name)
    redis_client.slowlog_reset()
    built = time.perf_counter()
    store.commit(0, ControllerState(), state.with_changes(last_batch=0), [])
    first_commit_wall = time.perf_counter() - built
    first_commit_server_ms = max((e["duration"] for e in redis_client.slowlog_get(100_000)), default=0) / 1000
    started = time.perf_counter()
    cpu = time.process_time()
    loaded = store.load()
    load_wall, load_cpu = time.perf_counter() - started, time.process_time() - cpu
    driver = Driver(store, loaded, settings, policy)
    redis_client.slowlog_reset()
    figures: dict[str, list[float]] = {"isr_events_10": [], "tick": [], "completion": []}
    number = 0
    partitions_list = [p for t in loaded.cluster.topics[:10] for p in t.partitions[:1]]
    for round_ in range(repeat):
        driver.now_ms += 1000
        records = []
        for p in partitions_list:
            number += 1
            shrunk = replace(p, isr=p.replicas[:2] if round_ % 2 == 0 else p.replicas,
                             leader_epoch=p.leader_epoch + round_ + 1)
            records.append(partition_record(shrunk, driver.now_ms, number))
        figures["isr_events_10"].append(driver.run(driver.rows("isr-changes", "PartitionState", records)))
        driver.now_ms += 1000
        number += 1
        tick = {**header("tick", driver.now_ms, number), "requested_by": "pipeline", "payload": ("Tick", {})}
        figures["tick"].append(driver.run(driver.rows("requests", "Request", [tick])))
        # Complete the step in flight of the one reassignment: Kafka shows its target, in sync.
        record = driver.state.reassignments.get(first.tp)
        if record is not None and record.in_flight is not None:
            target = record.in_flight.step.target
            current = driver.state.cluster.partition(first.tp)
            done = replace(current, replicas=target, isr=target, leader=target[0], adding=(), removing=(),
                           log_dirs=(), leader_epoch=current.leader_epoch + 1)
            driver.now_ms += 1000
            number += 1
            figures["completion"].append(driver.run(driver.rows(
                "isr-changes", "PartitionState", [partition_record(done, driver.now_ms, number)])))
    largest_batch_ms = max((e["duration"] for e in redis_client.slowlog_get(100_000)), default=0) / 1000
    used = redis_client.info("memory")["used_memory"]
    return {
        "driver_cpu_ms": {kind: round(statistics.median(values) * 1000, 1) for kind, values in figures.items() if values},
        "store_load_s": round(load_wall, 2),
        "store_load_cpu_s": round(load_cpu, 2),
        "first_commit_wall_s": round(first_commit_wall, 2),
        "first_commit_redis_ms": round(first_commit_server_ms, 1),
        "largest_batch_commit_redis_ms": round(largest_batch_ms, 2),
        "redis_bytes_per_partition": round(used / partitions),
        "rss_mib": round(resident_bytes() / 2**20),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def resident_bytes() -> int:
    """This process's resident set now (Linux `/proc/self/statm`)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_watcher(partitions: int, repeat: int) -> dict:
    import random

    from bench_watcher import log_dirs_answer, synthetic_observation
    from runtime.clients.cluster_merge import compute_observation
    from runtime.clients.cluster_observation import PartitionList, PartitionObservation
    from runtime.clients.kafka_admin import compute_log_dirs
    from reassigner.edge.observation import compute_events, compute_snapshot_events, compute_snapshot_slice
    from runtime.heap import HeapKeeper
    from runtime.settings import load_settings
    from schemas.codec import TOPICS

    # As the watcher runs (`runtime.heap`): no automatic collection, one young collection and a
    # freeze between polls (here between measurements, not timed; the one after a dirs-read merge
    # is reported, `collection_after_dirs_read`).
    keeper = HeapKeeper(automatic_collection=False)
    collections: dict[str, float] = {}

    def cpu_ms(action, given=lambda: None, times: int = repeat, name: str = "") -> float:
        """Median CPU ms of `action(given())`; `given` made and the heap collected untimed."""
        spent, collecting = [], []
        for _ in range(times):
            keeper.after_batch()
            argument = given()  # young, as a poll's decoded answer is when the merge runs
            started = time.process_time()
            result = action(argument)
            spent.append(time.process_time() - started)
            started = time.process_time()
            keeper.after_batch()  # what the action made survives it, as a poll's view does
            collecting.append(time.process_time() - started)
            del result, argument
        collections[name] = round(statistics.median(collecting) * 1000, 1)
        return round(statistics.median(spent) * 1000, 1)

    def encoded(events) -> list:
        return [encode(TOPICS[suffix], record) for suffix, _key, record in events]

    whole = synthetic_observation(partitions, brokers=max(30, partitions // TOPIC_SIZE))
    raw = [PartitionObservation(p.topic, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch)
           for p in whole.partitions.values()]
    brokers = list(whole.brokers.values())
    synthetic_dirs = list(whole.log_dirs.values())
    # Read again: the same replicas with new sizes (what a DescribeLogDirs brings), as answer
    # structs with a new string per topic entry and a new int per partition (as kafka-python
    # decodes them), decoded by `compute_log_dirs` as the adapter does; new ones for each
    # measurement (a dir caches what it derives from its replicas).
    def answer_structs() -> list:
        return log_dirs_answer(synthetic_dirs, size_delta=1)

    def decoded(answers) -> list:
        return [compute_log_dirs(broker_id, [entry])[0] for broker_id, entry in answers]

    def read_again() -> list:
        return decoded(answer_structs())

    # As `ClusterAdmin.observe` hands them: decoded from the answer (its cost, `log_dirs_decode`,
    # is reported: it is the decoding's, not the merge's).
    dirs = read_again()
    topic_ids = {t.name: t.topic_id for t in whole.topics.values()}
    min_isr = {name: 2 for name in topic_ids}
    # The next poll: every partition a new object with new tuples, as a decoded answer is; 10
    # ISR changes.
    churned = [PartitionObservation(p.topic, p.partition, tuple(list(p.replicas)), tuple(list(p.isr)), p.leader,
                                    p.leader_epoch) for p in raw]
    for index in random.Random(2).sample(range(partitions), 10):
        churned[index] = replace(churned[index], isr=churned[index].isr[:2])
    # As `ClusterAdmin.observe` hands them: a PartitionList built while the answer is decoded
    # (its cost, `partition_list_build`, is reported: it is added to the decoding).
    listed_raw, listed_churned = PartitionList.of(raw), PartitionList.of(churned)
    previous = compute_observation(brokers, listed_raw, topic_ids, {}, dirs, min_isr)
    current = compute_observation(brokers, listed_churned, topic_ids, {}, dirs, min_isr, previous)
    read_merged = compute_observation(brokers, listed_churned, topic_ids, {}, read_again(), min_isr, previous)
    slice_size = load_settings().snapshot_slice_partitions
    keys = list(current.partitions)[:slice_size]
    try:
        figures = {
            "merge_dirs_carried": cpu_ms(lambda _: compute_observation(brokers, listed_churned, topic_ids, {}, dirs,
                                                                       min_isr, previous)),
            "merge_dirs_carried_plain_list": cpu_ms(lambda _: compute_observation(brokers, churned, topic_ids, {}, dirs,
                                                                                  min_isr, previous)),
            "partition_list_build": cpu_ms(lambda _: PartitionList.of(churned)),  # upper bound: decoding appends from locals
            "merge_dirs_read": cpu_ms(lambda fresh: compute_observation(brokers, listed_churned, topic_ids, {}, fresh,
                                                                        min_isr, previous), read_again, name="dirs_read"),
            "diff": cpu_ms(lambda _: compute_events(previous, current, T0)),
            "diff_dirs_read": cpu_ms(lambda _: compute_events(previous, read_merged, T0)),
            "log_dirs_decode": cpu_ms(decoded, answer_structs),
            "snapshot_whole": cpu_ms(lambda _: encoded(compute_snapshot_events(current, "s", T0)), times=1),
            "snapshot_slice": cpu_ms(lambda _: encoded(compute_snapshot_slice(current, "s", keys, T0)), times=1),
        }
    finally:
        keeper.close()
    figures["collection_after_dirs_read"] = collections["dirs_read"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", default="10000,100000,300000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-watcher", action="store_true", help="Leave out the watcher's figures.")
    parser.add_argument("--simulated", type=int, default=0, metavar="PARTITIONS",
                        help="Also run the product's decision path against the simulated cluster at this many "
                             "partitions, RF 3 (333334 = 1M replicas): add 20 brokers, drain 5, to the end "
                             "(benchmarks/bench_decision_path.py; about 2-3 minutes at 1M replicas).")
    parser.add_argument("--rebalancing", type=int, default=0,
                        help="Also measure each size with this many reassignments under way (50 in flight).")
    arguments = parser.parse_args()

    import redis

    from reassigner.dev.local.processes import free_port, stop
    from reassigner.dev.local.redis_server import start_redis

    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    port = free_port()
    pid = start_redis(port, work / "redis")
    client = redis.Redis(port=port, socket_timeout=120)
    runs = {}
    try:
        for count in (int(n) for n in arguments.partitions.split(",")):
            runs[count] = measure(count, arguments.repeat, client)
            if not arguments.skip_watcher:
                runs[count]["watcher_cpu_ms"] = measure_watcher(count, arguments.repeat)
            if not arguments.json:
                print(f"{count:>9,} partitions: {json.dumps(runs[count])}", flush=True)
            if arguments.rebalancing:
                key = f"{count}+{arguments.rebalancing}_reassigning"
                runs[key] = measure(count, arguments.repeat, client, arguments.rebalancing)
                if not arguments.json:
                    print(f"{count:>9,} partitions, {arguments.rebalancing:,} reassigning: "
                          f"{json.dumps(runs[key])}", flush=True)
        if arguments.simulated:
            from bench_decision_path import run as run_decision_path

            runs["simulated_run"] = run_decision_path(arguments.simulated, 20, 5, 200, client)
            if not arguments.json:
                print(f"simulated run: {json.dumps(runs['simulated_run'])}", flush=True)
    finally:
        stop(pid, timeout_seconds=30)
    if arguments.json:
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                          "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
