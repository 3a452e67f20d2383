"""Disk-pressure relief: a log dir whose volume passes the high-water mark gets the fewest bytes
moved off it, to another volume of its broker first, else to another broker, down to the
low-water mark (`planning.placement.disk_relief`).

RULES:
- TRIGGER (`handle_disk_pressure`, before the log-dir balance). Judged once per brokers tuple (a
  dir's usage comes with its broker's dirs, `Cluster.derive_from_brokers`): every online dir of
  an alive broker whose volume is fuller than `disk.high.water.percent`. A dir is planned once
  while it stays above the mark (`DiskPressure:<broker>:<path>` in `open_alerts`, dropped once it
  is under the mark again); a broker that owns log-dir moves is planned when they are over
  (their bytes are already on their way), and a dir whose plan falls short while some of its
  replicas are being reassigned is judged again once they are not (no alert meanwhile: the
  replica may be on its way out, and then the relief has less to do).
- PLAN: `plan_disk_relief` down to `disk.low.water.percent` (at most the high-water mark),
  leaving alone the partitions being reassigned.
- ACTION, mode auto: the moves within the broker are owned as log-dir tasks (as a log-dir
  balance's, run under the same per-broker limit; `LogDirsBalanced` tells their end), the
  replicas leaving the broker are one plan of explicit targets (`handle_plan`: stepped and
  throttled like any plan, `PlanCreated`). In approve the replicas leaving become a proposal and
  the moves within are only shown; in observe nothing runs.
- CORDON: in mode auto, on Kafka 4.3+, a dir whose mark is open takes no new replica
  (`handlers.cordons`): the mark opening or closing reconciles the cordons.
- ALERT: one `DiskPressure` per planned dir, WARNING, ERROR when replicas that must go have
  nowhere to go: the dir, its use, the bytes to shed, what goes where, what is short, told apart
  from the bytes that are no replica the product can move (other files on the volume, old copies
  Kafka deletes `file.delete.delay.ms` after a log-dir move: WARNING).
"""

from __future__ import annotations

from typing import Iterable

from handlers.context import BatchContext
from handlers.log_dirs import own_log_dir_moves
from handlers.outbox import ERROR, WARNING, broker_subject, summarise
from handlers.plans import handle_plan
from planning.model import Broker
from planning.placement.disk_relief import compute_pressed_dirs, plan_disk_relief

PRESSURE_MARKER = "DiskPressure:"


def pressure_marker(broker_id: int, path: str) -> str:
    """The open-alert mark of a planned dir (`DiskPressure:<broker>:<path>`)."""
    return f"{PRESSURE_MARKER}{broker_id}:{path}"


def compute_marked_dirs(open_alerts: Iterable[str]) -> list[tuple[int, str]]:
    """(broker, path) of the dirs whose mark is open: planned, and still above the mark."""
    marked = (key[len(PRESSURE_MARKER):].partition(":") for key in open_alerts if key.startswith(PRESSURE_MARKER))
    return [(int(broker), path) for broker, _, path in marked if broker.isdigit()]


def handle_disk_pressure(context: BatchContext) -> bool:
    """The TRIGGER rule (module docstring). Whether a dir's mark opened or closed: the dirs the
    product empties are cordoned while their mark is open (`handlers.cordons`)."""
    state = context.state
    high = context.policy.disk_high_water_percent
    low = min(context.policy.disk_low_water_percent, high)
    pressed = state.cluster.derive_from_brokers(("disk pressure", high), lambda brokers: _pressed(brokers, high))
    markers = {pressure_marker(b, path) for b, path in pressed}
    relieved = [k for k in state.open_alerts if k.startswith(PRESSURE_MARKER) and k not in markers]
    context.close_alerts(relieved)
    changed = bool(relieved)
    owners = {key[0] for key in state.log_dir_moves}
    for broker_id, path in pressed:
        marker = pressure_marker(broker_id, path)
        if marker in context.state.open_alerts or broker_id in owners:
            continue
        relief = plan_disk_relief(context.state.cluster, broker_id, path, high, low,
                                  skip=set(context.state.reassignments))
        if relief is None or (relief.short_bytes and relief.held_bytes):
            continue
        context.open_alert(marker)
        changed = True
        _announce(context, relief, high, low)
        if context.policy.mode == "auto" and relief.within:
            own_log_dir_moves(context, relief.within, context.next_plan_id("relief"),
                              f"disk pressure on {path} of broker {broker_id}")
        if relief.away:
            handle_plan(context, context.next_plan_id("relief"), dict(relief.away),
                        f"disk pressure on {path} of broker {broker_id}", broker_subject(broker_id),
                        target_log_dirs=dict(relief.away_dirs),
                        details={"bytes_moved": relief.away_bytes, "pressed_dir": path})
    return changed


def _pressed(brokers: tuple[Broker, ...], high: float) -> tuple[tuple[int, str], ...]:
    return tuple((b.id, d.path) for b in brokers if b.alive for d in compute_pressed_dirs(b, high))


def _announce(context: BatchContext, relief, high: float, low: float) -> None:
    within = [f"{m.tp}->{m.target_dir}" for m in relief.within]
    away = [f"{tp}:{list(final)}" for tp, final in sorted(relief.away.items())]
    runs = context.policy.mode == "auto"
    what = (f"moving {relief.shed_bytes:,} bytes off it: {len(within)} replicas to other dirs of the broker, "
            f"{len(away)} to other brokers" + ("" if runs else f" (mode {context.policy.mode}: "
                                                 "the moves within the broker are not run)"))
    short = (f"; {relief.nowhere_bytes:,} bytes have nowhere to go (no other volume or broker with room under "
             f"{low:g} %): add disk or brokers, or delete data") if relief.nowhere_bytes else ""
    if relief.stranded_bytes:
        short += (f"; {relief.stranded_bytes:,} bytes of the volume are no replica the product can move (other "
                  "files, or old copies Kafka deletes file.delete.delay.ms after a log-dir move): if the volume "
                  "stays above the mark, look at what else it holds")
    context.outbox.alert(
        "DiskPressure", ERROR if relief.nowhere_bytes else WARNING, broker_subject(relief.broker_id),
        f"log dir {relief.path} of broker {relief.broker_id} is {relief.used_fraction_before:.0%} full "
        f"(high-water mark {high:g} %): {what}, to {relief.used_fraction_after:.0%}{short}",
        {"broker_id": relief.broker_id, "path": relief.path, "total_bytes": relief.total_bytes,
         "used_bytes": relief.used_bytes, "need_bytes": relief.need_bytes, "shed_bytes": relief.shed_bytes,
         "short_bytes": relief.short_bytes, "stranded_bytes": relief.stranded_bytes,
         "within": summarise(within, 10), "away": summarise(away, 10),
         "executed": str(runs).lower()})
