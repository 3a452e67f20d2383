"""What the plausibility checks of events (`handlers.event_checks`) cost the pipeline's reader, at
cluster scale: the events of a full snapshot, and a batch of 10 ISR changes on a cluster that
size, folded by `handlers.events.compute_cluster_after_events` with the checks and with them
replaced by a no-op, in the same run (the machine is shared: compare the ratio, not seconds).

Run:  .venv/bin/python benchmarks/bench_event_checks.py [--partitions 300000] [--repeat 3]

Prints CPU seconds (best of `--repeat`) and the ratio checked / unchecked; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import handlers.events as events_module  # noqa: E402
from bench_watcher import synthetic_observation  # noqa: E402
from handlers.events import compute_cluster_after_events  # noqa: E402
from reassigner.edge.observation import compute_cluster, compute_events, compute_snapshot_events  # noqa: E402
from schemas.codec import TOPICS  # noqa: E402


def best_cpu_seconds(action, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    observation = synthetic_observation(args.partitions, brokers=200)
    snapshot = [(TOPICS[suffix], record) for suffix, _key, record in compute_snapshot_events(observation, "s", 0)]
    cluster = compute_cluster(observation)
    changed = list(observation.partitions.items())[:10]
    after = replace(observation, partitions={**observation.partitions, **{
        key: replace(p, isr=p.isr[:2], leader_epoch=p.leader_epoch + 1) for key, p in changed}})
    batch = [(TOPICS[suffix], record) for suffix, _key, record in compute_events(observation, after, 1)]
    cases = {
        f"snapshot ({len(snapshot):,} events) into an empty view": lambda: compute_cluster_after_events(
            type(cluster)(), snapshot),
        f"{len(batch)} ISR changes into a {args.partitions:,}-partition view": lambda: compute_cluster_after_events(
            cluster, batch),
    }
    checked_problem = events_module.compute_event_problem
    print(f"{'case':<58} {'checked':>9} {'unchecked':>10} {'ratio':>6}")
    for name, action in cases.items():
        checked = best_cpu_seconds(action, args.repeat)
        events_module.compute_event_problem = lambda *_args: None
        try:
            unchecked = best_cpu_seconds(action, args.repeat)
        finally:
            events_module.compute_event_problem = checked_problem
        print(f"{name:<58} {checked:>8.3f}s {unchecked:>9.3f}s {checked / unchecked:>6.2f}")


if __name__ == "__main__":
    main()
