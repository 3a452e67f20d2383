"""A re-published outbox carries the current epoch (regression: a crashed batch's commands went
out again with the old epoch after the new instance bumped it; an executor that had seen the new
epoch refused them, and the steps waited for the stall timeout)."""

from __future__ import annotations

from handlers.outbox import Outbox, compute_restamped


def test_commands_get_the_new_epoch_and_keep_their_ids_other_messages_are_untouched():
    outbox = Outbox(batch_id=7, now_ms=1_000, epoch=3)
    outbox.command("r1/t-0:1:ReassignmentStep", "t-0", "r1", 1, "test", "ElectLeader", {"topic": "t", "partition": 0})
    outbox.alert("PlanCreated", "INFO", "r1", "planned")
    restamped = compute_restamped(outbox.messages, 4)
    command, alert = restamped
    assert (command.record["epoch"], command.record["id"]) == (4, "r1/t-0:1:ReassignmentStep")
    assert alert is outbox.messages[1]
    assert compute_restamped(restamped, 4)[0] is restamped[0]
