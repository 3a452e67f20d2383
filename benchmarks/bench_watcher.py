"""Cost of one watcher poll: the pure diff on a synthetic 10,000-partition cluster, and the
Admin API reads (`ClusterAdmin.observe`) against the real local stack with many partitions.

The synthetic part also measures COPIES IN FLIGHT (`cluster_merge.compute_changed_log_dirs`):
polls merged as the watcher merges them (a `PartitionList`, dirs decoded from answer structs,
each poll merged from the one before), with `--moves` partitions being reassigned to an added
broker, against the same polls without the moves: the diff when the dirs are read again and
nothing changed, and when the copies grew (their dirs told again, with every replica in them).

Run:  .venv/bin/python benchmarks/bench_watcher.py [--partitions 10000] [--stack-partitions 3000]
      [--bootstrap-server HOST:PORT]   (default: start a private 3-broker local stack, then stop it)
      [--skip-stack]                   (synthetic part only)
      [--settle-seconds 60]            (wait before measuring: new partitions keep brokers busy)
      [--moves 50]                     (partitions with a copy in flight, synthetic part)
      [--brokers 30]                   (brokers of the synthetic cluster, 2 dirs each)

Prints milliseconds per operation (best of `--repeat`; the Admin API reads also their median,
since the brokers share the machine's cores); asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.clients.admin_answers import compute_log_dirs  # noqa: E402
from runtime.clients.cluster_merge import compute_observation  # noqa: E402
from runtime.clients.cluster_observation import (  # noqa: E402
    BrokerObservation,
    LogDirObservation,
    PartitionList,
    PartitionObservation,
    ReplicaInDir,
)
from reassigner.edge.observation import compute_events, compute_snapshot_events  # noqa: E402
from schemas.codec import TOPICS, encode  # noqa: E402


def synthetic_observation(partitions: int, brokers: int = 30, dirs: int = 2, seed: int = 1):
    rng = random.Random(seed)
    broker_list = [BrokerObservation(b, f"/dc{b % 3}/r{b % 5}", "10.0.0.1", 9092, False)
                   for b in range(1, brokers + 1)]
    parts, hosted = [], {}
    for i in range(partitions):
        topic, index = f"topic-{i // 100}", i % 100
        replicas = tuple(rng.sample(range(1, brokers + 1), 3))
        parts.append(PartitionObservation(topic, index, replicas, replicas, replicas[0], 7))
        for b in replicas:
            hosted.setdefault((b, rng.randrange(dirs)), []).append(
                ReplicaInDir(topic, index, False, rng.randrange(10**9)))
    log_dirs = [LogDirObservation(b, f"/data/{d}", True, None, tuple(sorted(hosted.get((b, d), ()))),
                                  10**12, 5 * 10**11) for b in range(1, brokers + 1) for d in range(dirs)]
    topics = sorted({p.topic for p in parts})
    return compute_observation(broker_list, parts, {t: f"id-{t}" for t in topics}, {}, log_dirs,
                               {t: 2 for t in topics})


def log_dirs_answer(log_dirs, size_delta: int = 0) -> list:
    """The DescribeLogDirs answer structs of `log_dirs`, as kafka-python hands them: per dir, a
    new string per topic entry and a new int per partition; each replica's size + `size_delta`.
    Pairs of (broker id, dir struct), for `compute_log_dirs`."""
    from types import SimpleNamespace

    answers = []
    for d in log_dirs:
        by_topic: dict[str, list] = {}
        for r in d.replicas:
            by_topic.setdefault(r.topic, []).append(SimpleNamespace(
                partition_index=int(str(r.partition)), is_future_key=r.is_future,
                partition_size=r.size_bytes + size_delta, offset_lag=r.offset_lag))
        topics = [SimpleNamespace(name=name.encode().decode(), partitions=parts) for name, parts in by_topic.items()]
        answers.append((d.broker_id, SimpleNamespace(error_code=0, log_dir=d.path, total_bytes=d.total_bytes,
                                                     usable_bytes=d.usable_bytes, topics=topics)))
    return answers


def timed_ms(action) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def best_ms(action, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def bench_synthetic(partitions: int, repeat: int, moves: int = 50, brokers: int = 30) -> None:
    before = synthetic_observation(partitions, brokers)
    churned = dict(before.partitions)
    for key in random.Random(2).sample(sorted(churned), partitions // 100):  # 1 % lose a follower
        p = churned[key]
        churned[key] = replace(p, isr=p.isr[:2])
    after = replace(before, partitions=churned)
    events = compute_events(before, after, 0)
    snapshot = compute_snapshot_events(after, "s", 0)
    print(f"synthetic cluster: {partitions:,} partitions, {brokers} brokers x 2 dirs, RF 3")
    print(f"  diff, nothing changed           {best_ms(lambda: compute_events(before, before, 0), repeat):8.1f} ms")
    print(f"  diff, 1 % ISR shrunk ({len(events):,} events) {best_ms(lambda: compute_events(before, after, 0), repeat):8.1f} ms")
    print(f"  encode those events             {best_ms(lambda: [encode(TOPICS[s], r) for s, _, r in events], repeat):8.1f} ms")
    print(f"  snapshot events ({len(snapshot):,})        {best_ms(lambda: compute_snapshot_events(after, 's', 0), repeat):8.1f} ms")
    print(f"  encode the snapshot             {best_ms(lambda: [encode(TOPICS[s], r) for s, _, r in snapshot], 1):8.1f} ms")
    bench_copies_in_flight(before, moves, repeat)


def bench_copies_in_flight(whole, moves: int, repeat: int) -> None:
    """The diff of polls that read the dirs again (every poll does while a reassignment is in
    flight: `compute_log_dirs_hint`), merged as the watcher merges them, with and without `moves`
    partitions whose reassignment adds a broker (replicas r1 r2 r3 -> r1 r2 b: adding b,
    removing r3; b's dir lists the new replica), and with those copies grown by 1 MB."""
    rng = random.Random(3)
    brokers = list(whole.brokers.values())
    broker_ids = sorted(whole.brokers)
    topic_ids = {t.name: t.topic_id for t in whole.topics.values()}
    min_isr = {name: 2 for name in topic_ids}
    moving = set(rng.sample(sorted(whole.partitions), moves))
    states = PartitionList.of(whole.partitions.values()).states
    reassignments, copies, states_moving = {}, {}, []
    for state in states:
        topic, partition, replicas, isr, leader, epoch, offline = state
        if (topic, partition) in moving:
            added = rng.choice([b for b in broker_ids if b not in replicas])
            reassignments[(topic, partition)] = ((added,), (replicas[2],))
            copies[(topic, partition)] = (added, f"/data/{rng.randrange(2)}")  # the dir it is copied into
            state = (topic, partition, (*replicas[:2], added, replicas[2]), isr, leader, epoch, offline)
        states_moving.append(state)
    dirs_moving = []
    for (broker_id, path), d in whole.log_dirs.items():
        extra = [ReplicaInDir(key[0], key[1], False, 10**6) for key, at in copies.items() if at == (broker_id, path)]
        dirs_moving.append(replace(d, replicas=tuple(sorted((*d.replicas, *extra)))) if extra else d)
    plain_dirs = list(whole.log_dirs.values())

    def dirs_read(synthetic_dirs, grown: int = 0) -> list:
        """A DescribeLogDirs read decoded as the adapter decodes it (new objects); the copies in
        flight `grown` bytes larger."""
        answers = log_dirs_answer(synthetic_dirs)
        for broker_id, entry in answers:
            for topic in entry.topics:
                for part in topic.partitions:
                    if copies.get((topic.name, part.partition_index), (None, None)) == (broker_id, entry.log_dir):
                        part.partition_size += grown
        return [d for broker_id, entry in answers for d in compute_log_dirs(broker_id, [entry])]

    def polls(partition_states, reassigning, synthetic_dirs):
        """The poll before (merged from the one before it, so `same_dirs` applies), then the
        next poll read again unchanged, and read again with the copies grown."""
        def merge(dirs, previous):
            return compute_observation(brokers, PartitionList(list(partition_states)), topic_ids, reassigning, dirs,
                                       min_isr, previous)
        previous = merge(dirs_read(synthetic_dirs), merge(dirs_read(synthetic_dirs), None))
        return previous, merge(dirs_read(synthetic_dirs), previous), merge(dirs_read(synthetic_dirs, 10**6), previous)

    before, same, _ = polls(states, {}, plain_dirs)
    moving_before, moving_same, grown = polls(states_moving, reassignments, dirs_moving)
    events = compute_events(moving_before, grown, 0)
    told = [record for suffix, _, record in events if suffix == "disk-failures"]
    receiving = {broker_id for broker_id, _ in copies.values()}
    idle = best_ms(lambda: compute_events(before, same, 0), repeat)
    quiet = best_ms(lambda: compute_events(moving_before, moving_same, 0), repeat)
    copying = best_ms(lambda: compute_events(moving_before, grown, 0), repeat)
    print(f"  copies in flight: {moves} partitions adding a broker ({len(receiving)} brokers receive), dirs read again")
    print(f"  diff, no moves, nothing changed {idle:8.1f} ms ({len(compute_events(before, same, 0))} events)")
    print(f"  diff, moves, no copy grew       {quiet:8.1f} ms ({len(compute_events(moving_before, moving_same, 0))}"
          f" events) x{quiet / idle:.1f}")
    print(f"  diff, moves, every copy grew    {copying:8.1f} ms ({len(told)} dir events, "
          f"{sum(len(r['replicas']) for r in told):,} replicas; {len(events) - len(told)} others) x{copying / idle:.1f}")
    print(f"  encode those events             {best_ms(lambda: [encode(TOPICS[s], r) for s, _, r in events], repeat):8.1f} ms")


def bench_stack(bootstrap: str | None, partitions: int, repeat: int, settle_seconds: float) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    from runtime.clients.kafka_admin import ClusterAdmin
    from runtime.clients.kafka_fast_reads import log_dir_reads, read_metadata

    stack = None
    if bootstrap is None:
        from reassigner.dev.local.stack import LocalStack
        from runtime.settings import load_settings

        stack = LocalStack(Path(tempfile.mkdtemp(prefix="bench-watcher-")) / "stack",
                           load_settings().cache_dir)
        started = time.monotonic()
        bootstrap = stack.up(brokers=3, log_dirs=2).bootstrap_servers
        print(f"local stack up in {time.monotonic() - started:.0f} s")
    try:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120000)
        topics = [NewTopic(f"bench-{i}", num_partitions=min(500, partitions - i * 500), replication_factor=2)
                  for i in range((partitions + 499) // 500)]
        for topic in topics:  # one request each: KRaft refuses 10,000 partitions in one request
            try:
                client.create_topics([topic], timeout_ms=120000)
            except Exception as error:  # already there from an earlier run
                print(f"  (create {topic.name}: {type(error).__name__})")
        client.close()
        admin = ClusterAdmin(bootstrap, request_timeout_ms=60000)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            observation = admin.observe()
            ours = [p for p in observation.partitions.values() if p.topic.startswith("bench-")]
            if len(ours) == partitions and all(p.leader is not None and p.log_dirs for p in ours):
                break
            time.sleep(1)
        total = len(observation.partitions)
        # For about a minute after creating 10,000 partitions the local brokers use both cores
        # (1.9 cores measured, then 0.6): a poll measured then measures their start-up.
        time.sleep(settle_seconds)
        print(f"real local stack: {total:,} partitions (RF 2) on 3 brokers x 2 dirs, "
              f"measured {settle_seconds:.0f} s after they were ready")
        together = {"metadata": (read_metadata, ()), **log_dir_reads([1, 2, 3])}
        for name, action in (
            ("describe cluster", admin.describe_brokers),
            ("describe topics (metadata)", admin.describe_partitions),
            ("list reassignments", admin.list_reassignments),
            ("describe log dirs (3 brokers)", lambda: admin.describe_log_dirs([1, 2, 3])),
            ("metadata + 3 log dirs, together", lambda: admin.read_together(together)),
            ("describe min ISR (configs)", lambda: admin.describe_min_insync_replicas(sorted(observation.topics))),
            ("observe, log dirs due", lambda: admin.observe(observation, log_dirs_due=True)),
            ("observe, log dirs not due", lambda: admin.observe(observation, log_dirs_due=False)),
            ("observe + diff (dirs due)", lambda: compute_events(observation, admin.observe(observation), 0)),
        ):
            times = sorted(timed_ms(action) for _ in range(repeat))
            print(f"  {name:32s} {times[0]:8.1f} ms best, {statistics.median(times):8.1f} median")
        admin.close()
    finally:
        if stack is not None:
            stack.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--stack-partitions", type=int, default=3_000)
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--skip-stack", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--moves", type=int, default=50, help="partitions with a copy in flight (synthetic)")
    parser.add_argument("--brokers", type=int, default=30, help="brokers of the synthetic cluster")
    parser.add_argument("--settle-seconds", type=float, default=60.0,
                        help="wait after the partitions are ready before measuring the stack")
    args = parser.parse_args()
    bench_synthetic(args.partitions, args.repeat, args.moves, args.brokers)
    if not args.skip_stack:
        bench_stack(args.bootstrap_server, args.stack_partitions, args.repeat, args.settle_seconds)


if __name__ == "__main__":
    main()
