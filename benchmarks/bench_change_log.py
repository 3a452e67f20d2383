"""The change log's effect on one batch during a big rebalance (issue 17, item 1): prints
figures, asserts nothing. Pure: no Redis, no Kafka.

A controller state of N partitions (`bench_scale.build_state`: RF 3, topics of 1,000) with R
reassignments under way (`bench_scale.with_rebalance`, P = 50 steps in flight), the stepping memo
built by a first decision; then batches of three kinds, as the driver sees them:

    tick         one Tick request
    isr_10       ten PartitionState events, each an ISR change of a partition not moving
    isr_10_moving  the same for ten partitions waiting for their next step, in ten topics
                 whose other partitions wait too
    completion   the PartitionState that shows a step in flight complete (its next step starts)

For each batch, CPU time of this process (`time.process_time`) of `decide` as a whole, of
`handle_progress` within it, and of the commit's diff (`state.controller_store.compute_changes`,
the part of `ControllerStore.commit` that runs before Redis). Each batch is decided twice from
the same state: with its change log (the stepping told what changed, the diff of the logged
records only) and without it (the log emptied: the full walks, what main did before the log).
Run it with `--root` on a tree without the change log to measure that tree alone.

    .venv/bin/python benchmarks/bench_change_log.py [--partitions 100000] [--reassignments 80000]
        [--batches 10] [--root PATH]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--reassignments", type=int, default=80_000)
    parser.add_argument("--batches", type=int, default=10, help="batches of each kind")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    sys.path.insert(0, str(Path(args.root) / "benchmarks"))

    import handlers.decide as decide_module
    from bench_scale import T0, build_state, partition_record, with_rebalance
    from handlers.micro_batch import BatchInputs
    from runtime.settings import compute_policy, load_settings
    from state.stored_forms import compute_changes
    try:
        from state.model import ChangeLog
    except ImportError:  # a tree without the change log
        ChangeLog = None

    settings = load_settings(cluster_name="bench", max_partition_movements=50, max_movements_per_broker=50,
                             max_leader_movements=50, broker_add_grace_seconds=10**6)
    policy = compute_policy(settings)
    started = time.process_time()
    state = with_rebalance(build_state(args.partitions), args.reassignments, in_flight=50)
    print(f"state built: {args.partitions:,} partitions, {len(state.reassignments):,} reassignments "
          f"({time.process_time() - started:.1f} s)", flush=True)

    progress_cpu: list[float] = []
    original = decide_module.handle_progress

    def timed_progress(context) -> None:
        mark = time.process_time()
        original(context)
        progress_cpu.append(time.process_time() - mark)

    decide_module.handle_progress = timed_progress
    now_ms = T0 + 1000
    number = 0

    def header(key: str) -> dict:
        nonlocal number
        number += 1
        return {"schema_version": 3, "event_time": now_ms, "id": f"b-{number}", "key": key}

    def tick_inputs(batch: int) -> BatchInputs:
        return BatchInputs(batch, now_ms, (), ({**header("tick"), "requested_by": "bench", "payload": ("Tick", {})},))

    def decided(state, inputs, blind: bool = False):
        """(decision, decide CPU, handle_progress CPU, diff CPU); `blind`: without the log."""
        if blind:
            state = replace(state, change_log=ChangeLog())
        progress_cpu.clear()
        mark = time.process_time()
        decision = decide_module.decide(state, inputs, policy)
        spent = time.process_time() - mark
        after = replace(decision.state, change_log=ChangeLog()) if blind else decision.state
        mark = time.process_time()
        compute_changes(state, after)
        diff = time.process_time() - mark
        return decision, spent, progress_cpu[0], diff

    first = time.process_time()
    state = decide_module.decide(state, tick_inputs(0), policy).state  # builds the memo
    print(f"first decision (memo built): {time.process_time() - first:.1f} s", flush=True)
    figures: dict[str, dict[str, list[float]]] = {}
    moving = {tp for tp, r in state.reassignments.items()}
    idle = [p for t in state.cluster.topics for p in t.partitions if p.tp not in moving]
    waiting_by_topic = {t: [p.tp for p in state.cluster.topics[10 + t].partitions] for t in range(10)}
    batch = 1
    gc.collect()
    gc.freeze()
    for round_ in range(args.batches):
        for kind in ("tick", "isr_10", "isr_10_moving", "completion"):
            now_ms += 1000
            if kind == "tick":
                inputs = tick_inputs(batch)
            elif kind.startswith("isr_10"):
                if kind == "isr_10":
                    chosen = idle[round_ * 10:(round_ + 1) * 10]
                else:
                    chosen = [state.cluster.partition(tp) for tp in
                              (waiting_by_topic[t][100 + round_] for t in range(10))
                              if tp in state.reassignments and state.reassignments[tp].in_flight is None]
                events = []
                for p in chosen:
                    shrunk = replace(p, isr=p.replicas[:2], leader_epoch=p.leader_epoch + 1)
                    events.append(("PartitionState", partition_record(shrunk, now_ms, number + 1)))
                    number += 1
                inputs = BatchInputs(batch, now_ms, tuple(events), ())
            else:
                tp, record = next((tp, r) for tp, r in state.reassignments.items() if r.in_flight is not None)
                target = record.in_flight.step.target
                current = state.cluster.partition(tp)
                done = replace(current, replicas=target, isr=target, leader=target[0], adding=(), removing=(),
                               log_dirs=(), leader_epoch=current.leader_epoch + 1)
                number += 1
                inputs = BatchInputs(batch, now_ms, (("PartitionState", partition_record(done, now_ms, number)),), ())
            runs = {}
            if ChangeLog is not None:
                runs["log"] = decided(state, inputs)
                runs["no_log"] = decided(state, inputs, blind=True)
                assert runs["log"][0].outbox == runs["no_log"][0].outbox
            else:
                runs["tree"] = decided(state, inputs)
            for mode, (_, spent, progress, diff) in runs.items():
                row = figures.setdefault(f"{kind} {mode}", {"decide": [], "progress": [], "diff": []})
                row["decide"].append(spent)
                row["progress"].append(progress)
                row["diff"].append(diff)
            state = next(iter(runs.values()))[0].state
            batch += 1
            gc.collect(0)
            gc.freeze()
    print(f"{len(state.reassignments):,} reassignments left; CPU ms per batch, median of {args.batches}:")
    print(f"{'batch':24} {'decide':>8} {'progress':>9} {'diff':>8}")
    for name, row in figures.items():
        print(f"{name:24} " + " ".join(f"{statistics.median(row[k]) * 1000:>8.1f}" for k in ("decide", "progress", "diff")))


if __name__ == "__main__":
    main()
