"""What `reassigner list` shows, and GET /api/reassignments serves: the ongoing reassignments,
the batch in flight, the log-dir moves, the moves of other tools, and the proposals waiting for
approval. Pure; the rows are `rows`' and `proposals`', the JSON is `documents.list_to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.policy import Policy
from state.model import ControllerState
from reassigner.operator.views.progress import Progress
from reassigner.operator.views.proposals import ProposalView, compute_proposal_views
from reassigner.operator.views.rows import (ExternalRow, InFlightRow, LogDirMoveRow, ReassignmentRow,
                                            compute_external_rows, compute_in_flight, compute_log_dir_move_rows,
                                            compute_reassignment_rows)


@dataclass(frozen=True)
class ListView:
    reassignments: tuple[ReassignmentRow, ...]
    in_flight: tuple[InFlightRow, ...]
    log_dir_moves: tuple[LogDirMoveRow, ...]
    external: tuple[ExternalRow, ...]
    proposals: tuple[ProposalView, ...]


def compute_list_view(state: ControllerState, default_replica_movements: int, now_seconds: float | None = None,
                      policy: Policy | None = None, progress: Progress | None = None) -> ListView:
    """The list view of `state` at `now_seconds`; `policy` (the static settings') says in full why a
    waiting reassignment waits; `progress`: the meter's reading the rows show (computed when not given)."""
    return ListView(
        reassignments=compute_reassignment_rows(state, default_replica_movements, now_seconds, policy, progress),
        in_flight=compute_in_flight(state, now_seconds),
        log_dir_moves=compute_log_dir_move_rows(state, now_seconds),
        external=compute_external_rows(state, now_seconds),
        proposals=compute_proposal_views(state, policy),
    )
