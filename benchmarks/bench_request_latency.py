"""How long an operator waits for a request's verdict on an idle pipeline (issue 33): prints
figures, asserts nothing.

The demo's stage (`reassigner.dev.harness.stage.Stage`) on a real local cluster: 3 brokers,
Redis, the product's pipeline (Spark), watcher and executor as separate processes, the demo's
topics with their sequenced traffic. Once the pipeline sees the cluster, `reassigner request
pause` and `reassigner request resume` are run alternately, `--rounds` times in all, as an
operator runs them (the real CLI in a fresh process, which publishes the request and waits for
the pipeline's verdict on the alerts topic). Each call's wall time (start of the process to its
exit, the verdict printed) and the CPU time it spent (user + system, from the child's rusage) are
recorded; then `reassigner status` likewise (a read: Redis only).

Figures: p50 / p90 / max of the wall time, and the CPU time's p50, per command. The wall time
includes the CLI's start (imports), its consumer's assignment to the alerts topic (done before
the request is published, so that no verdict slips by), the pipeline's next micro-batch
(trigger 100 ms) and the alert's publish.

    REASSIGNER_CACHE_DIR=.cache .venv/bin/python benchmarks/bench_request_latency.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reassigner.dev.harness.stage import Stage  # noqa: E402
from runtime.settings import load_settings  # noqa: E402


def timed(stage: Stage, *arguments: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one real CLI call, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    stage.cli(*arguments)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def describe(name: str, samples: list[tuple[float, float]]) -> str:
    walls = sorted(wall for wall, _ in samples)
    cpus = [cpu for _, cpu in samples]
    p90 = walls[max(0, round(0.9 * len(walls)) - 1)]
    return (f"{name:<26} n={len(samples):>3}  wall p50 {statistics.median(walls):5.2f} s  p90 {p90:5.2f} s  "
            f"max {walls[-1]:5.2f} s   CPU p50 {statistics.median(cpus):4.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="requests in all (pause and resume alternately)")
    parser.add_argument("--stack-dir", type=Path, default=None)
    arguments = parser.parse_args()
    if arguments.rounds < 2:
        parser.error("--rounds: at least 2")
    cache = load_settings().cache_dir  # REASSIGNER_CACHE_DIR: `.cache` of this checkout under make
    with tempfile.TemporaryDirectory(prefix="bench-requests-") as scratch:
        stage = Stage((arguments.stack_dir or Path(scratch)) / "stack", cache)
        try:
            stage.setup()
            print(f"machine load (1 min) at start: {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores")
            requests = [timed(stage, "request", "pause" if i % 2 == 0 else "resume")
                        for i in range(arguments.rounds)]
            reads = [timed(stage, "status") for _ in range(max(5, arguments.rounds // 2))]
            print(describe("request pause/resume", requests))
            print(describe("status (a read)", reads))
            print(f"machine load (1 min) at end: {os.getloadavg()[0]:.1f}")
        finally:
            stage.teardown()


if __name__ == "__main__":
    main()
