"""The views as terminal tables (rich): `reassigner list`, `status`, `request show` and `config get`
without `--json`. One function per view, given the console to print on; the numbers are the
views' (`reassigner.operator.views`), sizes and durations read as `views.units` writes them, and
`--json` prints the views' documents (`views.documents`) instead.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table

from reassigner.operator.views import ExternalRow, ListView, LogDirMoveRow, ProposalView, StatusView, step_label
from reassigner.operator.views.units import format_duration, format_rate, format_size
from reassigner.operator.views.documents import compute_banner

SHOWN_PROBLEMS = 20  # partitions named per problem line of `status`
SHOWN_EXCLUDED_TOPICS = 10


def print_list(view: ListView, console: Console) -> None:
    """The ongoing reassignments, the batch in flight, the moves of other tools, the log-dir moves
    and the proposals waiting for approval."""
    table = _table(f"ongoing reassignments ({len(view.reassignments)})",
                   "partition", "state", "current", "adding", "removing", "final target", "step", "progress",
                   "bytes moved / to move", "time left", "waits for")
    for r in view.reassignments:
        table.add_row(f"{r.topic}-{r.partition}", r.state, _ids(r.current_replicas), _ids(r.adding),
                      _ids(r.removing), _ids(r.final_target), step_label(r), _bar(r.progress),
                      f"{format_size(r.bytes_moved)} / {format_size(r.bytes_to_move)}",
                      format_duration(r.time_left_seconds), r.waiting or "-")
    console.print(table if view.reassignments else _nothing_of_ours(view.external))
    if view.in_flight:
        batch = _table(f"batch in flight ({len(view.in_flight)} steps)",
                       "partition", "step", "target", "adding", "removing", "leader move", "running for")
        for f in view.in_flight:
            batch.add_row(f"{f.topic}-{f.partition}", str(f.step), _ids(f.target), _ids(f.adding),
                          _ids(f.removing), "yes" if f.leader_movement else "no", _age(f.age_seconds))
        console.print(batch)
    _print_external(view.external, console)
    _print_log_dir_moves(view.log_dir_moves, console)
    _print_broker_changes(view.brokers, console)
    for p in view.proposals:
        console.print(f"proposal {p.proposal_id} awaits approval: {p.reason}, {len(p.moves)} partitions "
                      f"(`reassigner request show {p.proposal_id}`; approve or reject it)", soft_wrap=True)


def _print_broker_changes(rows, console: Console) -> None:
    """Each broker the ongoing reassignments change: now → once they are done (the rates only
    where some traffic was measured: zero would read as idle)."""
    if not rows:
        return
    measured = any(load.bytes_in_per_sec or load.network_out_per_sec for r in rows for load in (r.now, r.after))
    rates = ("in/s", "out/s") if measured else ()
    table = _table(f"brokers the ongoing reassignments change ({len(rows)}): now → when done",
                   "broker", "replicas", "leaders", "bytes", *rates)
    for r in rows:
        now, after = r.now, r.after
        cells = [str(r.broker), f"{now.replicas} → {after.replicas}", f"{now.leaders} → {after.leaders}",
                 f"{format_size(now.disk_bytes)} → {format_size(after.disk_bytes)}"]
        if measured:
            cells += [f"{format_rate(now.bytes_in_per_sec)} → {format_rate(after.bytes_in_per_sec)}",
                      f"{format_rate(now.network_out_per_sec)} → {format_rate(after.network_out_per_sec)}"]
        table.add_row(*cells)
    console.print(table)


def print_status(view: StatusView, console: Console) -> None:
    """Brokers and their dirs, partition problems, the topic selection, proposals, pause, the
    movement's progress, bytes, rate and time left, then the moves of other tools and log-dir moves."""
    banner = compute_banner(view.mode, view.paused)
    if banner:
        console.print(f"[bold yellow]{banner}[/]")
    if view.kafka is not None:
        console.print(f"cluster: {view.kafka}")
    brokers = _table(f"brokers (epoch {view.epoch}, last batch {view.last_batch})",
                     "broker", "rack", "state", "dirs online", "replicas", "leaders", "bytes",
                     "in/s", "out/s", "per dir (replicas, bytes)")
    for b in view.brokers:
        state = "[red]down[/]" if not b.alive else (
            ("[yellow]draining, cordoned[/]" if b.cordoned else "[yellow]draining[/]") if b.draining
            else "[green]alive[/]")
        if b.isr_shrinks:
            state += f" [yellow]({b.isr_shrinks} ISR shrinks in 10 min)[/]"
        if b.canary_p99_ms is not None:
            state += f" canary p99 {b.canary_p99_ms:.0f} ms" + (
                f" (baseline {b.canary_baseline_ms:.0f})" if b.canary_baseline_ms is not None else "")
        if b.throttle_rate is not None:
            state += f" [cyan]throttle {format_rate(b.throttle_rate)}: {b.throttle_reason}[/]"
        dirs = f"{b.dirs_online}/{b.dirs_total}" + (f" [red](offline: {', '.join(b.offline_dirs)})[/]"
                                                    if b.offline_dirs else "")
        if b.cannot_host:
            dirs += f" [yellow]{b.cannot_host} partitions kept off until restart[/]"
        if b.cordoned_dirs:
            dirs += f" [yellow](cordoned: {', '.join(b.cordoned_dirs)})[/]"
        if b.cordoned_by_others:
            dirs += f" [yellow](cordoned by others: {', '.join(b.cordoned_by_others)})[/]"
        per_dir = "  ".join(f"{path.rsplit('/', 1)[-1]}: {'?' if count is None else count}, {format_size(size)}"
                            for path, count, size in b.dirs)
        rates = (format_rate(b.bytes_in_per_sec), format_rate(b.network_out_per_sec)) if view.traffic_measured \
            else ("?", "?")
        brokers.add_row(str(b.id), b.rack or "-", state, dirs, str(b.replicas), str(b.leaders),
                        format_size(b.disk_bytes), *rates, per_dir)
    console.print(brokers)
    if view.drain_warning:
        console.print(f"[yellow]{view.drain_warning}[/]")
    for title, problems, style in (("under-replicated", view.under_replicated, "yellow"),
                                   ("under min ISR", view.under_min_isr, "red"),
                                   ("offline", view.offline, "red")):
        names = " ".join(f"{p.topic}-{p.partition}" for p in problems[:SHOWN_PROBLEMS])
        eligible = sum(1 for p in problems if p.eligible_leaders)
        kept = f" ({eligible} keep eligible leader replicas)" if eligible and title != "under-replicated" else ""
        console.print(f"{title}: [{style if problems else 'green'}]{len(problems)}[/]{kept} {names}"
                      f"{_more(len(problems), SHOWN_PROBLEMS)}")
    excluded = view.excluded_topics
    console.print(f"topics only healed and drained, never rebalanced: {len(excluded)} "
                  f"(include {view.topics_include!r}, exclude {view.topics_exclude!r}) "
                  f"{', '.join(excluded[:SHOWN_EXCLUDED_TOPICS])}{_more(len(excluded), SHOWN_EXCLUDED_TOPICS)}")
    if view.proposals:
        console.print(f"proposals awaiting approval: {', '.join(view.proposals)} (`reassigner request show ID`)")
    if view.reassignments:
        movement = view.movement  # the meter's (`views.progress`): finished reassignments included
        progress = _table(f"movement progress: {_percent(movement.fraction)} "
                          f"({movement.partitions_done} of {movement.partitions_total} partitions, "
                          f"{movement.steps_done} of {movement.steps_estimated} steps done)",
                          "partition", "state", "step", "progress", "bytes moved / to move", "time left", "waits for")
        for r in view.reassignments:
            progress.add_row(f"{r.topic}-{r.partition}", r.state, step_label(r), _bar(r.progress),
                             f"{format_size(r.bytes_moved)} / {format_size(r.bytes_to_move)}",
                             format_duration(r.time_left_seconds), r.waiting or "-")
        progress.add_row("all", f"{movement.partitions_done} of {movement.partitions_total} done",
                         f"{movement.steps_done} of {movement.steps_estimated}", _bar(movement.fraction),
                         f"{format_size(movement.bytes_moved)} / {format_size(movement.bytes_to_move)}",
                         format_duration(movement.time_left_seconds), "")
        console.print(progress)
        console.print(f"bytes moved {format_size(movement.bytes_moved)} of {format_size(movement.bytes_to_move)} "
                      f"({format_size(movement.bytes_left)} left); rate {_rate(view)}; "
                      f"time left {format_duration(movement.time_left_seconds)}")
    else:
        console.print(_nothing_of_ours(view.external))
    _print_external(view.external, console)
    _print_log_dir_moves(view.log_dir_moves, console)


def print_proposal(view: ProposalView, now_seconds: float, console: Console) -> None:
    """A proposal's moves, when it expires, and the commands that run or drop it."""
    expires = "" if view.expires_at_ms is None else \
        f", expires in {format_duration(max(0.0, view.expires_at_ms / 1000.0 - now_seconds))}"
    table = _table(f"proposal {view.proposal_id}: {view.reason} ({len(view.moves)} partitions, "
                   f"{view.replica_moves} replica moves{expires})",
                   "partition", "current", "target", "adding", "removing", "size")
    for m in view.moves:
        table.add_row(f"{m.topic}-{m.partition}", "?" if m.current_replicas is None else _ids(m.current_replicas),
                      _ids(m.target), _ids(m.adding), _ids(m.removing), format_size(m.size_bytes))
    console.print(table)
    console.print(f"`reassigner request approve {view.proposal_id}` runs it, `reassigner request reject "
                  f"{view.proposal_id}` drops it; `--json` gives Kafka's reassignment JSON", soft_wrap=True)


def print_config(effective: Mapping[str, Mapping[str, Any]], console: Console) -> None:
    """`config get`: each dynamic setting's value, where it comes from, and what it means."""
    table = _table("dynamic settings", "key", "value", "source", "meaning")
    for name, entry in effective.items():
        table.add_row(name, entry["value"] or "-", entry["source"], entry["doc"])
    console.print(table)


def _print_external(external: tuple[ExternalRow, ...], console: Console) -> None:
    """The moves of other tools Kafka shows (`external`): respected, never stepped."""
    if not external:
        return
    table = _table(f"moved by another tool ({len(external)}, external: no step of ours starts on them)",
                   "partition", "kind", "replicas", "adding", "removing", "seen for", "our reassignment waiting")
    for e in external:
        table.add_row(f"{e.topic}-{e.partition}", e.kind, _ids(e.replicas), _ids(e.adding), _ids(e.removing),
                      format_duration(e.age_seconds), e.held_by or "-")
    console.print(table)


def _print_log_dir_moves(moves: tuple[LogDirMoveRow, ...], console: Console) -> None:
    if not moves:
        return
    table = _table(f"log-dir moves ({sum(m.state != 'waiting' for m in moves)} of {len(moves)} running)",
                   "partition", "broker", "from", "to", "size", "state", "now in", "running for")
    for m in moves:
        table.add_row(f"{m.topic}-{m.partition}", str(m.broker_id), m.origin_dir or "?", m.target_dir,
                      format_size(m.size_bytes), m.state + (" (copy in progress)" if m.future_replica else ""),
                      m.current_dir or "?", _age(m.age_seconds))
    console.print(table)


def _nothing_of_ours(external: tuple[ExternalRow, ...]) -> str:
    """The line for no reassignment of ours: none at all only when no other tool moves one either."""
    if not external:
        return "no reassignment in progress"
    return f"no reassignment of the product in progress; {len(external)} by another tool (external, below)"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    return table


def _ids(values: Iterable[int] | None) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _bar(fraction: float | None) -> Any:
    if fraction is None:
        return "?"
    return ProgressBar(total=100, completed=round(fraction * 100), width=20)


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{round(fraction * 100)} %"


def _rate(view: StatusView) -> str:
    """The rate the times left are computed at, and where it comes from."""
    progress = view.progress
    if progress.rate_bytes_per_second is None:
        return "not measured yet (no byte seen copied, no throttle set)"
    said = {"observed": "observed", "throttle": "assumed from the throttle, none observed yet"}
    return f"{format_rate(progress.rate_bytes_per_second)} ({said.get(progress.rate_source, progress.rate_source)})"


def _age(seconds: float | None) -> str:
    """How long something has run; "-" when it has not started."""
    return "-" if seconds is None else format_duration(seconds)


def _more(count: int, shown: int) -> str:
    return f" (+{count - shown} more)" if count > shown else ""
