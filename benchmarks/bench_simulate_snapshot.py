"""`reassigner simulate` on a snapshot file, phase by phase: load, plan, run (issue 17).

Run: .venv/bin/python benchmarks/bench_simulate_snapshot.py FILE --add N [--max-seconds S]
     [--tick-seconds T] [--profile OUT.prof]

Does what the CLI does (`reassigner.cli.simulate.simulate`: the product's default settings and
limits, N new empty brokers after the existing ids, racks alternating as `make_snapshot.py`
gives them) and prints wall and CPU time of each phase, the decision points, the decisions
computed, steps, simulated makespan and violations. `--max-seconds` stops the simulated run
early (to measure the per-decision cost on a big cluster without running it to the end).
Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.make_snapshot import rack_of  # noqa: E402
from planning.placement.placer import Goal, compute_planning_cluster, plan_placement  # noqa: E402
from planning.simulation.simulator import SimulationParams, run_plan  # noqa: E402
from planning.snapshot import cluster_from_json  # noqa: E402
from reassigner.cli.simulate import parse_broker  # noqa: E402
from runtime.settings import compute_limits, load_settings  # noqa: E402


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> str:
    wall, cpu = _clock()
    return f"wall {wall - start[0]:.2f} s, CPU {cpu - start[1]:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("snapshot")
    parser.add_argument("--add", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=SimulationParams().max_seconds)
    parser.add_argument("--tick-seconds", type=float, default=1.0)
    parser.add_argument("--profile", help="write a cProfile of the run phase here")
    args = parser.parse_args()

    settings = load_settings()
    limits = compute_limits(settings)
    t = _clock()
    with open(args.snapshot) as f:
        cluster = cluster_from_json(json.load(f), args.snapshot)
    replicas = sum(len(p.replicas) for p in cluster.partitions())
    print(f"load: {_since(t)}  ({len(cluster.brokers)} brokers, {len(cluster.partitions_by_tp)} partitions, "
          f"{replicas} replicas)")
    top = max(b.id for b in cluster.brokers)
    added = tuple(parse_broker(f"{b}:{rack_of(b)}", cluster) for b in range(top + 1, top + 1 + args.add))
    goal = Goal(add_brokers=added, drain_brokers=frozenset(), explicit_targets={},
                disk_max_usage_percent=settings.disk_max_usage_percent)
    t = _clock()
    plan = plan_placement(cluster, goal)
    print(f"plan: {_since(t)}  ({len(plan.targets)} partitions to move, {plan.bytes_moved / 1e12:.1f} TB)")
    simulated = compute_planning_cluster(cluster, goal)
    params = SimulationParams(tick_seconds=args.tick_seconds, max_seconds=args.max_seconds)
    profiler = cProfile.Profile() if args.profile else None
    t = _clock()
    if profiler:
        profiler.enable()
    report = run_plan(simulated, plan.targets, limits, params, stall_timeout=settings.step_stall_timeout_seconds)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    wall = time.perf_counter() - t[0]
    computed = getattr(report, "decisions_computed", report.decisions)
    print(f"run: {_since(t)}  decision points {report.decisions}, computed {computed}, "
          f"{wall / max(computed, 1) * 1000:.2f} ms per computed decision, steps {report.steps} "
          f"({report.steps / wall:.1f}/s), finished {report.finished}, makespan {report.makespan_seconds}, "
          f"violations {len(report.invariant_violations)}")
    print(f"limits: {limits}")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
