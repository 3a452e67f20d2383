"""The end of a proposal that is not approved (mode `approve`): rejected, or expired.

A proposal (`state.model.Proposal`) is a plan waiting for `request approve ID`. It ends one of
three ways; approval is `handlers.requests.handle_approve`, the two others are here:

- REJECT (`request reject ID`, a `RequestAction` of kind Reject): the proposal is dropped and a
  `ProposalRejected` (INFO) alert names it, with who asked. Nothing else changes: a
  decommission's brokers stay draining (`request recommission` undoes that). An unknown id is
  refused (INVALID_REQUEST) naming the proposals that wait.
- EXPIRY: a proposal older than `proposal.expiry` (`Policy.proposal_expiry_seconds`, measured
  from its `created_at_ms` to the batch's event time, never a clock) is dropped with one
  `ProposalExpired` (WARNING) alert; the situation that made it is planned again when it
  recurs (a rebalance can be requested again).

Pure: state and outbox in the batch context, time from the batch.
"""

from __future__ import annotations

from typing import Any, Mapping

from handlers.context import BatchContext
from handlers.outbox import INFO, WARNING
from schemas.errors import InvalidInputError
from state.model import Proposal


def require_proposal(proposals: Mapping[str, Proposal], proposal_id: str) -> Proposal:
    """The proposal `proposal_id`; InvalidInputError naming the waiting ones if there is none."""
    proposal = proposals.get(proposal_id)
    if proposal is None:
        raise InvalidInputError(f"no proposal {proposal_id!r} awaits approval "
                                f"(waiting: {sorted(proposals)})")
    return proposal


def handle_reject(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    proposal_id = str(fields.get("proposal_id") or "")
    if not proposal_id:
        raise InvalidInputError("a reject request needs the proposal id")
    proposal = require_proposal(context.state.proposals, proposal_id)
    remaining = {k: v for k, v in context.state.proposals.items() if k != proposal_id}
    context.state = context.state.with_changes(proposals=remaining)
    context.outbox.alert("ProposalRejected", INFO, proposal_id,
                         f"proposal {proposal_id} ({proposal.reason}, {len(proposal.targets)} partitions) "
                         f"rejected by request {request_id}; nothing of it runs",
                         {"proposal_id": proposal_id, "request_id": request_id,
                          "partitions": len(proposal.targets)})


def compute_expired(proposals: Mapping[str, Proposal], now_ms: int, expiry_seconds: float) -> list[str]:
    """Ids of the proposals created `expiry_seconds` or more before `now_ms`, sorted."""
    limit_ms = expiry_seconds * 1000.0
    return sorted(pid for pid, p in proposals.items() if now_ms - p.created_at_ms >= limit_ms)


def handle_proposal_expiry(context: BatchContext) -> None:
    """Drop every proposal older than `proposal.expiry`, one ProposalExpired alert each."""
    proposals = context.state.proposals
    if not proposals:
        return
    expired = compute_expired(proposals, context.now_ms, context.policy.proposal_expiry_seconds)
    if not expired:
        return
    context.state = context.state.with_changes(
        proposals={k: v for k, v in proposals.items() if k not in set(expired)})
    for proposal_id in expired:
        proposal = proposals[proposal_id]
        context.outbox.alert("ProposalExpired", WARNING, proposal_id,
                             f"proposal {proposal_id} ({proposal.reason}) expired unapproved after "
                             f"{context.policy.proposal_expiry_seconds:g} s (proposal.expiry); "
                             "request the work again if it is still wanted",
                             {"proposal_id": proposal_id, "partitions": len(proposal.targets),
                              "created_at_ms": proposal.created_at_ms})
