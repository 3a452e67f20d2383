"""What the watcher's own work does to a latency the canary measures in the same process.

The canary (`reassigner.edge.canary`) times each probe in Python: the send, then the delivery
report, taken by a thread of its own. A thread waits for the GIL while another holds it, so a
long stretch of the watcher's work that never lets go of the GIL (a garbage collection, one big
C-level call) lands in every probe that completes during it, and in the p99 the adaptive
throttle reads. This script runs a probe-like thread that sleeps `--tick-ms` and notes how late
it woke, while the main thread does the watcher's work on a synthetic cluster of
`--partitions` (as `bench_watcher.py` builds it), phase by phase:

  idle                  nothing (the floor: the OS's timer and the switch interval)
  diff, nothing changed `compute_events` on two equal views
  diff, 1 % ISR shrunk  `compute_events` with 1 % of the partitions changed
  snapshot + encode     `compute_snapshot_events` and encoding every record
  young collection      `gc.collect(1)` after a poll's objects were made (what `runtime.heap`
                        does after each poll; the watcher runs with automatic collection off)
  full collection       `gc.collect()` over the whole view (every `full_every_seconds`)

Prints, per phase, the ticks' lateness p50 / p99 / max in ms and its duration. A lateness far
above the canary's baseline (a few ms) is what the canary would charge to the brokers: the
stall guard of `reassigner.edge.canary` drops the probes that overlap one. Run:

  .venv/bin/python benchmarks/bench_canary_stalls.py [--partitions 300000] [--tick-ms 5]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_watcher import synthetic_observation  # noqa: E402
from reassigner.edge.observation import compute_events, compute_snapshot_events  # noqa: E402
from schemas.codec import TOPICS, encode  # noqa: E402


class Ticker:
    """A thread that sleeps `tick` seconds and records how late each wake-up came."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.late: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        due = time.monotonic() + self.tick
        while not self._stop.is_set():
            time.sleep(max(0.0, due - time.monotonic()))
            now = time.monotonic()
            self.late.append((now - due) * 1000)
            due = now + self.tick

    def __enter__(self) -> "Ticker":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank quantile, as the canary computes it; NaN for no values."""
    from planning.movement.canary import nearest_rank

    return nearest_rank(sorted(values), q) if values else float("nan")


def phase(name: str, action, tick: float, repeat: int) -> None:
    started = time.perf_counter()
    with Ticker(tick) as ticker:
        for _ in range(repeat):
            action()
    took = (time.perf_counter() - started) * 1000 / repeat
    late = ticker.late
    print(f"  {name:24s} {took:9.1f} ms each   lateness p50 {percentile(late, 0.5):7.1f}  "
          f"p99 {percentile(late, 0.99):7.1f}  max {max(late, default=0.0):7.1f} ms  ({len(late)} ticks)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300_000)
    parser.add_argument("--tick-ms", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tick = args.tick_ms / 1000
    gc.disable()  # as the watcher runs (`runtime.heap`, automatic collection off)
    before = synthetic_observation(args.partitions)
    churned = dict(before.partitions)
    for key in random.Random(2).sample(sorted(churned), args.partitions // 100):
        p = churned[key]
        churned[key] = replace(p, isr=p.isr[:2])
    after = replace(before, partitions=churned)
    gc.collect()
    gc.freeze()
    print(f"synthetic cluster: {args.partitions:,} partitions, 30 brokers x 2 dirs, RF 3; a tick every "
          f"{args.tick_ms:g} ms")
    phase("idle", lambda: time.sleep(1.0), tick, args.repeat)
    phase("diff, nothing changed", lambda: compute_events(before, before, 0), tick, args.repeat)
    phase("diff, 1 % ISR shrunk", lambda: compute_events(before, after, 0), tick, args.repeat)
    phase("snapshot + encode", lambda: [encode(TOPICS[s], r) for s, _, r in compute_snapshot_events(after, "s", 0)],
          tick, 1)
    made: list = []

    def young() -> None:
        made.append(synthetic_observation(args.partitions // 3, seed=len(made) + 7))  # a poll's objects, outside
        started = time.perf_counter()
        gc.collect(1)
        young.took.append((time.perf_counter() - started) * 1000)  # type: ignore[attr-defined]
        made.clear()

    young.took = []  # type: ignore[attr-defined]
    phase("poll objects + young gc", young, tick, args.repeat)
    print(f"    (the young collections alone: {', '.join(f'{t:.0f}' for t in young.took)} ms)")  # type: ignore[attr-defined]
    gc.unfreeze()
    phase("full collection", gc.collect, tick, args.repeat)


if __name__ == "__main__":
    main()
