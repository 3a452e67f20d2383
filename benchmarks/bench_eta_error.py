"""How right the time left is (issue 33 item 3): prints figures, asserts nothing.

The demo's stage on a real local cluster (4 brokers, racks /dc1/r1, /dc1/r2, /dc2/r1, /dc2/r2;
Redis; the product's pipeline, watcher and executor as separate processes; the demo's topics
and sequenced traffic), the replication throttle at `--throttle` bytes/s, `--megabytes` of
filler written to each partition of the bulk topic. Broker 4 is then decommissioned, and
`reassigner status --json` (the meter every view shows) is sampled every `--every` seconds
until the movement ends: its percentage, bytes done and in all, and its time left.

Figures: the movement's real duration (first sample with a time left to the sample that shows
nothing left to move), and for each sample with a time left the error of the finish it
predicts, `t + time_left - end`, relative to the real time left then, `end - t`; reported at
the samples nearest 10, 25, 50 and 75 % done, and the median of the absolute relative error over
all. The sampling period bounds the end's precision.

    REASSIGNER_CACHE_DIR=.cache .venv/bin/python benchmarks/bench_eta_error.py [--throttle 1000000]
        [--megabytes 6] [--every 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reassigner.dev.harness.cluster_tools import write_bulk  # noqa: E402
from reassigner.dev.harness.stage import BULK_PARTITIONS, BULK_TOPIC, Stage  # noqa: E402
from runtime.settings import load_settings  # noqa: E402

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1", "/dc2/r2")


def sample(stage: Stage) -> dict | None:
    result = stage.cli("status", "--json", check=False)
    if result.returncode != 0:
        return None
    progress = json.loads(result.stdout)["progress"]
    return {"at": time.monotonic(), **progress}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throttle", type=int, default=1_000_000, help="replication throttle, bytes/s")
    parser.add_argument("--megabytes", type=int, default=6, help="filler per bulk partition")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eta-") as scratch:
        stage = Stage(Path(scratch) / "stack", load_settings().cache_dir, brokers=4, racks=RACKS)
        stage.environment["REASSIGNER_THROTTLE_BYTES_PER_SEC"] = str(arguments.throttle)
        try:
            stage.setup()
            write_bulk(stage.bootstrap, [(BULK_TOPIC, p) for p in range(BULK_PARTITIONS)], arguments.megabytes,
                       client=stage.client)
            # The sizes reach the pipeline with the next snapshot (every 30 s in the demo's settings).
            stage.wait("the pipeline knows the bulk topic's sizes", lambda: sum(
                p.size_bytes or 0 for p in stage.controller_state().cluster.partitions()
                if p.tp.topic == BULK_TOPIC) >= BULK_PARTITIONS * arguments.megabytes * 900_000, timeout=120)
            stage.cli("request", "decommission", "--broker", "4")
            samples: list[dict] = []
            started, moving = time.monotonic(), False
            while time.monotonic() - started < 1800:
                seen = sample(stage)
                active = bool(stage.controller_state().reassignments)
                if seen is not None:
                    samples.append(seen)
                moving = moving or active
                if moving and not active:  # the movement ended: this sample is its end
                    break
                time.sleep(arguments.every)
            timed = [s for s in samples if s["time_left_seconds"] is not None and s["bytes_to_move"]
                     and s["fraction"] is not None]
            end = samples[-1]["at"]
            if not timed:
                print("no sample carried a time left")
                return
            print(f"throttle {arguments.throttle:,} B/s, {arguments.megabytes} MB x {BULK_PARTITIONS} bulk "
                  f"partitions; movement of {timed[0]['bytes_to_move'] / 1e6:.1f} MB over "
                  f"{timed[0]['partitions_total']} partitions took {end - timed[0]['at']:.0f} s from the first "
                  f"time left; {len(samples)} samples every {arguments.every:g} s")
            errors = []
            for s in timed:
                real = end - s["at"]
                if real > arguments.every:
                    errors.append(((s["at"] + s["time_left_seconds"] - end) / real, s))
            for target in (0.10, 0.25, 0.50, 0.75):
                error, s = min(errors, key=lambda e: abs(e[1]["fraction"] - target))
                print(f"  at {s['fraction']:.0%} done: time left said {s['time_left_seconds']:.0f} s, "
                      f"really {end - s['at']:.0f} s: error {error:+.0%} (rate {s['rate_source']})")
            print(f"  median |error| over {len(errors)} samples: "
                  f"{statistics.median(abs(e) for e, _ in errors):.0%}")
        finally:
            stage.teardown()


if __name__ == "__main__":
    main()
