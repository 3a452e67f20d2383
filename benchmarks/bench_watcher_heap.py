"""The watcher's polls with CPython's default garbage collection against the heap discipline it
runs with (`runtime.heap.HeapKeeper` with automatic collection off: one young collection and
a freeze after every poll), and the driver's (the same keeper, automatic collection on).

Each simulated poll does the watcher's own work on a synthetic cluster of N partitions
(`bench_watcher.synthetic_observation`, RF 3, 2 dirs a broker): the metadata answer as fresh
objects (`PartitionList`, as the decoding makes it; 10 ISR changes), every 5th poll the dirs read
again from answer structs (`compute_log_dirs`), the merge (`compute_observation`), the diff
(`compute_events`) and one snapshot slice's events, Avro-encoded (`snapshot_slice_partitions`;
a sliced snapshot is always under way, as at the start of a watcher). Each mode runs in a fresh
process, one after the other.

Run:  .venv/bin/python benchmarks/bench_watcher_heap.py [--partitions 300000] [--polls 24]

Prints, per mode, CPU ms per poll (median, max), the full (generation 2) collections during the
polls and their CPU, and the whole run's CPU; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

T0 = 1_800_000_000_000


def run_polls(partitions: int, polls: int, mode: str) -> dict:
    from bench_watcher import log_dirs_answer, synthetic_observation
    from runtime.clients.cluster_merge import compute_observation
    from runtime.clients.cluster_observation import PartitionList, PartitionObservation
    from runtime.clients.kafka_admin import compute_log_dirs
    from reassigner.edge.observation import compute_events, compute_snapshot_slice
    from runtime.heap import HeapKeeper
    from runtime.settings import load_settings
    from schemas.codec import TOPICS, encode

    whole = synthetic_observation(partitions, brokers=max(30, partitions // 1_000))
    brokers = list(whole.brokers.values())
    topic_ids = {t.name: t.topic_id for t in whole.topics.values()}
    min_isr = {name: 2 for name in topic_ids}
    raw = [(p.topic, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch) for p in whole.partitions.values()]
    synthetic_dirs = list(whole.log_dirs.values())

    def dirs_read() -> list:
        return [compute_log_dirs(broker_id, [entry])[0] for broker_id, entry in log_dirs_answer(synthetic_dirs)]

    def metadata_read(number: int) -> PartitionList:
        rng = random.Random(number)
        changed = set(rng.sample(range(partitions), 10))
        return PartitionList.of([
            PartitionObservation(t, n, tuple(list(r)), tuple(list(isr[:2] if i in changed else isr)), leader, epoch)
            for i, (t, n, r, isr, leader, epoch) in enumerate(raw)])

    slice_size = load_settings().snapshot_slice_partitions
    keys = list(whole.partitions)
    dirs = dirs_read()
    view = compute_observation(brokers, metadata_read(0), topic_ids, {}, dirs, min_isr)
    frozen = mode != "default"
    heap = HeapKeeper(automatic_collection=mode != "manual")
    if frozen:
        heap.after_batch()
    full: list[float] = []
    started_at: list[float] = []

    def on_collection(phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started_at.append(time.process_time())
            else:
                full.append(time.process_time() - started_at.pop())

    gc.callbacks.append(on_collection)
    spent = []
    whole_run = time.process_time()
    for number in range(1, polls + 1):
        started = time.process_time()
        listed = metadata_read(number)
        if number % 5 == 0:
            dirs = dirs_read()
        current = compute_observation(brokers, listed, topic_ids, {}, dirs, min_isr, view)
        events = compute_events(view, current, T0 + number)
        part = keys[(number * slice_size) % len(keys):][:slice_size]
        events += compute_snapshot_slice(current, "s", part, T0 + number)
        [encode(TOPICS[suffix], record) for suffix, _key, record in events]
        view = current
        if frozen:
            heap.after_batch()
        spent.append(time.process_time() - started)
    whole_run = time.process_time() - whole_run
    gc.callbacks.remove(on_collection)
    return {"poll_cpu_ms_median": round(statistics.median(spent) * 1000), "poll_cpu_ms_max": round(max(spent) * 1000),
            "full_collections": len(full), "full_collections_cpu_ms": round(sum(full) * 1000),
            "run_cpu_s": round(whole_run, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300_000)
    parser.add_argument("--polls", type=int, default=24)
    parser.add_argument("--mode", choices=["default", "frozen", "manual"], help=argparse.SUPPRESS)  # one mode, in this process
    arguments = parser.parse_args()
    if arguments.mode:
        print(json.dumps(run_polls(arguments.partitions, arguments.polls, arguments.mode)))
        return
    print(f"{arguments.partitions:,} partitions, {arguments.polls} polls (each mode in its own process)")
    print(f"{'mode':<40} {'median ms':>9} {'max ms':>7} {'full gcs':>8} {'their ms':>8} {'run s':>6}")
    for mode, label in (("default", "CPython's default collection"), ("frozen", "HeapKeeper after every poll"),
                        ("manual", "the watcher's: HeapKeeper, no automatic")):
        answer = subprocess.run([sys.executable, __file__, "--partitions", str(arguments.partitions),
                                 "--polls", str(arguments.polls), "--mode", mode],
                                check=True, capture_output=True, text=True)
        figures = json.loads(answer.stdout.strip().splitlines()[-1])
        print(f"{label:<40} {figures['poll_cpu_ms_median']:>9} {figures['poll_cpu_ms_max']:>7} "
              f"{figures['full_collections']:>8} {figures['full_collections_cpu_ms']:>8} {figures['run_cpu_s']:>6}")


if __name__ == "__main__":
    main()
