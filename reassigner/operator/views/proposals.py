"""A proposal waiting for approval (mode `approve`) as `request show ID` and the status page show
it: each partition's current replicas, the proposal's target, what it adds and removes, and when
the proposal expires; and the proposal as Kafka's reassignment JSON. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from handlers.policy import Policy, effective_policy
from state.model import ControllerState


@dataclass(frozen=True)
class ProposalMoveRow:
    """One partition of a proposal: where it is, where the proposal puts it."""

    topic: str
    partition: int
    current_replicas: tuple[int, ...] | None  # None: the partition is not observed any more
    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    size_bytes: int | None


@dataclass(frozen=True)
class ProposalView:
    """`request show ID`: a proposal, its moves and when it expires."""

    proposal_id: str
    reason: str
    created_at_ms: int
    expires_at_ms: int | None  # None without the policy
    moves: tuple[ProposalMoveRow, ...]

    @property
    def replica_moves(self) -> int:
        return sum(len(m.adding) for m in self.moves)


def compute_proposal_view(state: ControllerState, proposal_id: str, policy: Policy | None = None) -> ProposalView:
    """The proposal `proposal_id` (InvalidInputError naming the waiting ones if none)."""
    from handlers.proposals import require_proposal

    proposal = require_proposal(state.proposals, proposal_id)
    moves = []
    for tp, target in sorted(proposal.targets.items()):
        partition = state.cluster.partition(tp)
        current = tuple(partition.replicas) if partition is not None else None
        moves.append(ProposalMoveRow(tp.topic, tp.partition, current, tuple(target),
                                     tuple(b for b in target if b not in (current or ())),
                                     tuple(b for b in (current or ()) if b not in target),
                                     partition.size_bytes if partition is not None else None))
    expiry = effective_policy(policy, state.config).proposal_expiry_seconds if policy is not None else None
    return ProposalView(proposal.proposal_id, proposal.reason, proposal.created_at_ms,
                        None if expiry is None else proposal.created_at_ms + int(expiry * 1000), tuple(moves))


def compute_proposal_views(state: ControllerState, policy: Policy | None = None) -> tuple[ProposalView, ...]:
    """Every proposal waiting for approval, by id."""
    return tuple(compute_proposal_view(state, proposal_id, policy) for proposal_id in sorted(state.proposals))


def proposal_to_reassignment_json(view: ProposalView) -> dict[str, Any]:
    """The proposal as Kafka's reassignment JSON, as `kafka-reassign-partitions.sh
    --reassignment-json-file` reads it (no `log_dirs`: the brokers choose, the tool's default)."""
    from planning.model import TopicPartition
    from planning.snapshot import reassignment_to_json

    targets = {TopicPartition(m.topic, m.partition): m.target for m in view.moves}
    return reassignment_to_json(targets)
