"""The JSON forms of the views: one function per document, used by every door that shows it, so
the terminal's `--json`, the HTTP API and the status page read the same numbers in the same shape.

    list_to_json             `reassigner list --json` and GET /api/reassignments
    status_to_json           `reassigner status --json` and `status` of GET /api/status
    compute_status_document  the body of GET /api/status (the page reads it)
    proposal_to_json         a proposal with its moves and Kafka's reassignment JSON

A row is its dataclass's fields (tuples as lists), plus what its properties compute (a
reassignment's `step_label`, `bytes_left`; a disk's `used_fraction`). The movement's progress is
one object (`progress_to_json`), the meter's reading (`views.progress`), under `movement` — and
under `progress` in `status`, the same object, for the readers of its older form. Pure.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from reassigner.operator.views.listing import ListView
from reassigner.operator.views.proposals import ProposalView, proposal_to_reassignment_json
from reassigner.operator.views.rows import ReassignmentRow, step_label
from reassigner.operator.views.progress import Progress
from reassigner.operator.views.status import StatusView


def row_to_json(row: Any) -> dict[str, Any]:
    """A row dataclass as JSON: its fields, tuples as lists."""
    return _plain(asdict(row))


def reassignment_row_to_json(row: ReassignmentRow) -> dict[str, Any]:
    return {**row_to_json(row), "step_label": step_label(row), "bytes_left": row.bytes_left}


def list_to_json(view: ListView | None, state_error: str | None = None,
                 cluster_name: str | None = None) -> dict[str, Any]:
    """The list view (None: no state to show, empty lists) of cluster `cluster_name`;
    `state_error`: why the state could not be read fresh (the status server serves its last
    state then), None from the CLI."""
    return {
        "cluster_name": cluster_name,
        "reassignments": [reassignment_row_to_json(r) for r in view.reassignments] if view else [],
        "in_flight": [row_to_json(f) for f in view.in_flight] if view else [],
        "log_dir_moves": [row_to_json(m) for m in view.log_dir_moves] if view else [],
        "external": [row_to_json(e) for e in view.external] if view else [],
        # each broker the ongoing reassignments change: {"broker", "now": load, "after": load}
        "brokers": [row_to_json(b) for b in view.brokers] if view else [],
        "state_error": state_error,
    }


def progress_to_json(progress: Progress) -> dict[str, Any]:
    """The movement's figures (`views.progress.Figures`: partitions, steps and bytes done and in
    all, the time left), its one percentage (`fraction`), bytes left, and the rate they were
    timed at with where it comes from (observed, throttle, or null: unknown)."""
    movement = progress.movement
    return {**asdict(movement), "fraction": movement.fraction, "bytes_left": movement.bytes_left,
            "replication_rate_bytes_per_second": progress.rate_bytes_per_second,
            "rate_source": progress.rate_source, "steps_in_flight": progress.in_flight,
            "bytes_copying": progress.copying_bytes}


def proposal_to_json(view: ProposalView) -> dict[str, Any]:
    return {**row_to_json(view), "replica_moves": view.replica_moves,
            "reassignment": proposal_to_reassignment_json(view)}


def status_to_json(view: StatusView, cluster_name: str | None = None) -> dict[str, Any]:
    return {
        "cluster_name": cluster_name,
        "brokers": [row_to_json(b) for b in view.brokers],
        "under_replicated": [row_to_json(p) for p in view.under_replicated],
        "under_min_isr": [row_to_json(p) for p in view.under_min_isr],
        "offline": [row_to_json(p) for p in view.offline],
        "reassignments": [reassignment_row_to_json(r) for r in view.reassignments],
        "in_flight": [row_to_json(s) for s in view.in_flight],
        "traffic_measured": view.traffic_measured,
        "topics": view.topics,
        "partitions": view.partitions,
        "progress": progress_to_json(view.progress),  # = "movement": one meter
        "epoch": view.epoch,
        "last_batch": view.last_batch,
        "proposals": list(view.proposals),
        "paused": view.paused,
        "mode": view.mode,
        "banner": compute_banner(view.mode, view.paused),
        "kafka": view.kafka,
        "drain_warning": view.drain_warning,
        "config": dict(view.config),
        "topic_selection": {"include": view.topics_include, "exclude": view.topics_exclude,
                            "excluded_topics": list(view.excluded_topics)},
        "log_dir_moves": [row_to_json(m) for m in view.log_dir_moves],
        "disks": [{**row_to_json(d), "used_fraction": d.used_fraction} for d in view.disks],
        "proposal_details": [proposal_to_json(p) for p in view.proposal_views],
        "external": [row_to_json(e) for e in view.external],
        "movement": progress_to_json(view.progress),
    }


def compute_banner(mode: str, paused: bool) -> str | None:
    """The line `status` and the page show above all when the product is not moving things on
    its own: a mode other than auto, or paused; None otherwise."""
    said = {"observe": "mode observe: plans are only reported, nothing moves",
            "approve": "mode approve: plans wait as proposals until approved (`reassigner request approve ID`)"}
    parts = [said.get(mode, f"mode {mode}")] if mode != "auto" else []
    if paused:
        parts.append("paused: no new step starts until `reassigner request resume`")
    return "; ".join(parts) or None


def compute_status_document(view: StatusView | None, recent_alerts: list[dict[str, Any]],
                            cluster_name: str, state_error: str | None, now: float) -> dict[str, Any]:
    """The body of /api/status; `movement`: the overall progress, finished partitions included
    (the page's overall bar; also in `status`)."""
    return {"cluster_name": cluster_name, "generated_at": now, "state_error": state_error,
            "status": status_to_json(view, cluster_name) if view else None, "alerts": recent_alerts,
            "movement": progress_to_json(view.progress if view else Progress())}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
