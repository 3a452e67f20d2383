"""`reassigner demo`: the whole product on a real local cluster, told as a story.

Order (each scene waits on what Kafka itself shows, never on sleeps):
0. a KRaft cluster of 3 brokers (2 log dirs each, racks /dc1/r1, /dc1/r2, /dc2/r1) and Redis;
   topics with data (RF 3, min.insync.replicas 2) and sequenced traffic that runs throughout;
   the product: pipeline (Spark), watcher, executor, status page;
1. add two brokers → one coalesced plan, the batched rebalance onto them;
2. decommission a broker → drained, `BrokerDrained`;
3. fail a log dir → `DiskFailed`, replication factor restored;
3b. add a log dir to broker 3 (restarted with one more, empty dir) → log-dir moves into it until
   its dirs hold their shares, `LogDirsBalanced`;
4. a manual reassignment cancelled mid-flight → reverted to the original replicas;
5. kill a broker past the failure grace → healed;
6. bad input on purpose → `RequestRejected` and `BadEvent`, and the product carries on;
then the no-data-loss check and a summary table (per scene: replicas moved vs the planner's lower
bound, steps, peak partitions moving — as the product counts its steps in flight, and as Kafka
showed them — and peak leader movements, time).

A scene that fails is marked FAILED and the story goes on (`World.scene`). A wait that times out
outside a scene (the setup, the read-back at the end), or a product process that exits there,
stops the demo: the product's and Kafka's logs are copied out of the stack (which the teardown
deletes) into `<stack dir>-failed-logs/`, and the demo ends in one `LocalStackError` naming what
was waited for and where those logs are (`compute_stopped_line`), which the command line prints
as its one error line (`reassigner.cli.printing`), never a traceback.

The world and its scenes are the harness's (`reassigner.dev.harness.world`), shared with the
scenario tests (tests/scenarios/test_scenarios.py); this module is the story: their order, the
narration and the summary.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rich.table import Table

from reassigner.dev.harness.stage import DEMO_SETTINGS
from reassigner.dev.harness.world import World
from schemas.errors import LocalStackError

# Short names for the summary table, which must fit 80 columns.
SCENE_LABELS = {"1. add two brokers": "1. add brokers", "2. decommission a broker": "2. decommission",
                "3. fail a log dir": "3. fail log dir", "3b. add a log dir": "3b. add log dir",
                "4. cancel a manual reassignment": "4. cancel manual",
                "5. kill a broker": "5. kill broker"}


class Demo(World):
    """The world, told as a story (`run`) with a summary table."""

    def run(self, keep_running: bool = False) -> bool:
        started = time.monotonic()
        try:
            self.setup()
            self.scene("1. add two brokers", self.add_broker)
            self.scene("2. decommission a broker", self.decommission)
            self.scene("3. fail a log dir", self.fail_log_dir)
            self.scene("3b. add a log dir", self.add_log_dir)
            self.scene("4. cancel a manual reassignment", self.cancel_manual)
            self.scene("5. kill a broker", self.kill_broker)
            self.scene("6. bad input", self.bad_input)
            report, _ = self.finish()
            self.summary(report, time.monotonic() - started)
            if keep_running:
                self.say(f"\n[bold]Still running.[/] Status page: http://127.0.0.1:{self.status_port}/ "
                         f"— Ctrl-C stops everything.")
                while True:
                    time.sleep(1)
            return (report.clean and not self.monitor_report.violations
                    and all(r.outcome == "ok" for r in self.results))
        except KeyboardInterrupt:
            self.say("\ninterrupted; shutting down")
            return False
        except (TimeoutError, RuntimeError) as error:  # outside a scene (module doc)
            raise LocalStackError(compute_stopped_line(error, self.keep_failed_logs())) from error
        finally:
            self.teardown()

    def keep_failed_logs(self) -> Path | str:
        """The logs copied out of the stack before the teardown deletes it: where they are, or
        why they could not be kept."""
        kept = self.stack_dir.with_name(f"{self.stack_dir.name}-failed-logs")
        try:
            shutil.rmtree(kept, ignore_errors=True)
            self.keep_logs(kept)
        except OSError as error:
            return f"copying them out of {self.stack_dir} failed: {error}"
        return kept

    def summary(self, report, total_seconds: float) -> None:
        partition_limit = DEMO_SETTINGS["REASSIGNER_MAX_PARTITION_MOVEMENTS"]
        leader_limit = DEMO_SETTINGS["REASSIGNER_MAX_LEADER_MOVEMENTS"]
        table = Table(title="summary", caption=(
            "moved: replica moves planned (and their bytes, for a plan in bytes) / the planner's lower bound "
            "(in bytes for a plan in bytes); peak P: steps in flight as "
            "the product counts them (until the watcher reports them done) / partitions Kafka "
            f"showed reassigning, limit P = {partition_limit}; peak L: leader movements, limit "
            f"L = {leader_limit}; Kafka sampled every 250 ms"))
        for column in ("scene", "moved", "steps", f"peak P={partition_limit}", f"peak L={leader_limit}",
                       "time", "outcome"):
            table.add_column(column, no_wrap=True,
                             justify="left" if column in ("scene", "outcome") else "right")
        for r in self.results:
            table.add_row(SCENE_LABELS.get(r.name, r.name), f"{r.replica_moves} / {r.lower_bound}",
                          str(r.steps), f"{r.peak_in_flight} / {r.peak_moving_in_kafka}",
                          str(r.peak_leader_movements), f"{r.seconds:.0f} s",
                          "ok" if r.outcome == "ok" else "[red]FAILED[/]")
        self.console.print(table)
        for r in self.results:
            if r.outcome != "ok":
                self.say(f"[red]{r.name}[/]: {r.outcome}")
        verdict = ("[green]no record lost or reordered[/]" if report.clean
                   else f"[red]DATA CHECK FAILED[/]: {report.problems()}")
        self.say(f"traffic: {report.produced} records written, {report.acknowledged} acknowledged, "
                 f"{report.read} read back: {report.lost} lost, {report.out_of_order} out of order, "
                 f"{report.duplicated} duplicated — {verdict}")
        monitor = self.monitor_report
        self.say(f"invariant monitor: {monitor.samples} samples; peak partitions moving "
                 f"{monitor.peak_partitions_moving} (P = {partition_limit}), "
                 f"peak leader movements {monitor.peak_leader_movements} "
                 f"(L = {leader_limit}); "
                 + ("[green]no violation[/]" if not monitor.violations else
                    f"[red]{len(monitor.violations)} violations[/]: {monitor.violations[:3]}"))
        self.say(f"total {total_seconds:.0f} s; status page http://127.0.0.1:{self.status_port}/")


def compute_stopped_line(error: BaseException, logs: Path | str) -> str:
    """One line for what stopped the demo outside a scene: the wait's own words (what was awaited,
    for how long) and where the logs to check are kept (`logs`: their dir, or why they could not be
    kept). A message whose first line introduces lines that follow (a log's end, after a colon)
    keeps only what comes before that."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0].strip()
    if first.endswith(":"):
        first = first[:-1].rpartition("; ")[0] or first[:-1]
    if not isinstance(logs, Path):
        return f"the demo stopped: {first}; its logs could not be kept ({logs})"
    return (f"the demo stopped: {first}; check the logs kept in {logs} (product/pipeline.log, "
            "product/watcher.log, product/executor.log; Kafka's in <node>/logs/server.log)")
