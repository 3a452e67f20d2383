"""What `reassigner list` shows, and GET /api/reassignments serves: the ongoing reassignments,
the batch in flight, the log-dir moves, the moves of other tools, the proposals waiting for
approval, and the load of each broker the ongoing reassignments change, now and once they are
done (`planning.load.compute_loads_after`: replicas, leaders, bytes, bytes in and network out).
Pure; the rows are `rows`' and `proposals`', the JSON is `documents.list_to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from handlers.policy import Policy
from planning.load import BrokerLoad, compute_broker_loads, compute_loads_after
from planning.model import TopicPartition
from state.model import ControllerState
from reassigner.operator.views.progress import Progress
from reassigner.operator.views.proposals import ProposalView, compute_proposal_views
from reassigner.operator.views.rows import (ExternalRow, InFlightRow, LogDirMoveRow, ReassignmentRow,
                                            compute_external_rows, compute_in_flight, compute_log_dir_move_rows,
                                            compute_reassignment_rows)


@dataclass(frozen=True)
class BrokerChangeRow:
    """One broker the ongoing reassignments change: its load now and once they are done."""

    broker: int
    now: BrokerLoad
    after: BrokerLoad


@dataclass(frozen=True)
class ListView:
    reassignments: tuple[ReassignmentRow, ...]
    in_flight: tuple[InFlightRow, ...]
    log_dir_moves: tuple[LogDirMoveRow, ...]
    external: tuple[ExternalRow, ...]
    proposals: tuple[ProposalView, ...]
    brokers: tuple[BrokerChangeRow, ...] = ()  # by id; those whose load the reassignments change


def compute_list_view(state: ControllerState, default_replica_movements: int, now_seconds: float | None = None,
                      policy: Policy | None = None, progress: Progress | None = None,
                      loads: Mapping[int, BrokerLoad] | None = None) -> ListView:
    """The list view of `state` at `now_seconds`; `policy` (the static settings') says in full why a
    waiting reassignment waits; `progress`: the meter's reading the rows show (computed when not given);
    `loads`: the cluster's broker loads when the caller has them (computed when needed otherwise)."""
    reassignments = compute_reassignment_rows(state, default_replica_movements, now_seconds, policy, progress)
    return ListView(
        reassignments=reassignments,
        in_flight=compute_in_flight(state, now_seconds),
        log_dir_moves=compute_log_dir_move_rows(state, now_seconds),
        external=compute_external_rows(state, now_seconds),
        proposals=compute_proposal_views(state, policy),
        brokers=compute_broker_changes(state, reassignments, loads),
    )


def compute_broker_changes(state: ControllerState, reassignments: tuple[ReassignmentRow, ...],
                           loads: Mapping[int, BrokerLoad] | None = None) -> tuple[BrokerChangeRow, ...]:
    """The brokers whose load the ongoing reassignments change (each partition at its final
    target), by id, with their load now and after; none while nothing is ongoing."""
    targets = {TopicPartition(r.topic, r.partition): r.final_target for r in reassignments if r.final_target}
    if not targets:
        return ()
    cluster = state.cluster
    now = loads if loads is not None else compute_broker_loads(cluster)
    idle = BrokerLoad()
    after = compute_loads_after(cluster, now, targets)
    return tuple(BrokerChangeRow(b, now.get(b, idle), load) for b, load in sorted(after.items())
                 if load != now.get(b, idle))
