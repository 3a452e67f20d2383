"""The executor's ledger when Redis loses or rolls back its data under a running executor
(`reassigner.edge.ledger`, THROTTLE RECORDS; `Executor.claim`): against a real Redis, the
throttle records are put back from the executor's own copy, and a command waits while the store
holds no planner epoch instead of being refused."""

from __future__ import annotations

import threading
import uuid

import pytest

from reassigner.edge import executor as executor_module
from reassigner.edge.ledger import THROTTLES_MARK, CommandLedger
from state.controller_store import ControllerStore
from tests.edge.test_executor_trust import FakeMessage, build_executor, command

pytestmark = [pytest.mark.stack]


@pytest.fixture
def ledger(redis_client):
    return CommandLedger(redis_client, f"ledger-{uuid.uuid4().hex[:8]}")


def record(rate: int, sequence: int) -> dict:
    return {"set": rate, "before": None, "sequence": sequence}


def stored_records(ledger: CommandLedger) -> dict[str, str]:
    found = {k.decode(): v.decode() for k, v in ledger.client.hgetall(ledger._throttles_key()).items()}
    found.pop(THROTTLES_MARK, None)
    return found


def test_throttle_records_emptied_under_the_executor_are_written_back(ledger):
    ledger.store_throttles({"broker:1:leader.replication.throttled.rate": record(1000, 1),
                            "broker:2:leader.replication.throttled.rate": record(1000, 1)})
    ledger.forget_throttles(["broker:2:leader.replication.throttled.rate"])
    ledger.client.delete(ledger._throttles_key())  # FLUSHALL, as far as these records go
    assert ledger.read_throttles() == {"broker:1:leader.replication.throttled.rate": record(1000, 1)}
    assert list(stored_records(ledger)) == ["broker:1:leader.replication.throttled.rate"]


def test_throttle_records_rolled_back_under_the_executor_are_replaced_whole(ledger):
    ledger.store_throttles({"broker:1:follower.replication.throttled.rate": record(500, 1)})
    backup = ledger.client.dump(ledger._throttles_key())
    ledger.forget_throttles(["broker:1:follower.replication.throttled.rate"])
    ledger.store_throttles({"broker:3:follower.replication.throttled.rate": record(700, 2)})
    ledger.client.restore(ledger._throttles_key(), 0, backup, replace=True)  # an older copy
    # a write finds the old mark, writes nothing over the old copy and puts its own back whole
    ledger.store_throttles({"broker:4:follower.replication.throttled.rate": record(700, 3)})
    assert sorted(stored_records(ledger)) == ["broker:3:follower.replication.throttled.rate",
                                              "broker:4:follower.replication.throttled.rate"]


def test_a_new_executor_adopts_the_records_it_finds(ledger, redis_client):
    ledger.store_throttles({"broker:1:leader.replication.throttled.rate": record(1000, 1)})
    restarted = CommandLedger(redis_client, ledger.cluster_name)
    assert restarted.read_throttles() == {"broker:1:leader.replication.throttled.rate": record(1000, 1)}
    restarted.forget_throttles(["broker:1:leader.replication.throttled.rate"])
    assert stored_records(restarted) == {}


def test_a_claim_while_the_store_holds_no_planner_epoch_is_no_planner(ledger):
    assert ledger.claim("c1", 3, "t")[0] == "NO_PLANNER"
    ledger.client.hset(ControllerStore.meta_key(ledger.cluster_name), "epoch", 3)
    assert ledger.claim("c1", 3, "t")[0] == "APPLY"


class PlannerLater:
    """A ledger whose store gets its planner epoch (or a higher one) after `answers` claims."""

    def __init__(self, answers: list[tuple[str, str]]) -> None:
        self.answers = answers
        self.claims = 0
        self.stored: dict = {}

    def claim(self, command_id, epoch, token):
        self.claims += 1
        return self.answers.pop(0) if self.answers else ("APPLY", "-1")

    def store_outcome(self, command_id, outcome) -> None:
        self.stored[command_id] = outcome


@pytest.mark.parametrize("waiting", ["NO_PLANNER", "UNKNOWN"])
def test_a_command_waits_for_the_planner_epoch_and_is_then_applied(monkeypatch, waiting):
    monkeypatch.setattr(executor_module, "PLANNER_WAIT_SECONDS", 0.01)
    ledger = PlannerLater([(waiting, "0")] * 3)
    executor, published = build_executor(monkeypatch, ledger=ledger)
    executor.handle_message(FakeMessage(command(), []))
    assert ledger.claims == 4 and executor.admin.moves == [("t", 0, [2, 3])]
    assert [(r["ok"], r["error_code"]) for r in published] == [(True, None)]


def test_an_unknown_epoch_past_the_grace_is_refused(monkeypatch):
    monkeypatch.setattr(executor_module, "PLANNER_WAIT_SECONDS", 0.01)
    monkeypatch.setattr(executor_module, "UNKNOWN_EPOCH_GRACE_SECONDS", 0.05)
    ledger = PlannerLater([("UNKNOWN", "3")] * 1000)
    executor, published = build_executor(monkeypatch, ledger=ledger)
    executor.handle_message(FakeMessage(command(), []))
    assert executor.admin.moves == [] and 1 < ledger.claims < 1000
    assert [(r["ok"], r["error_code"]) for r in published] == [(False, "UNKNOWN_EPOCH")]


def test_a_stop_while_waiting_leaves_the_command_unconsumed(monkeypatch):
    from schemas.errors import TransientError

    ledger = PlannerLater([("NO_PLANNER", "0")] * 1000)
    executor, published = build_executor(monkeypatch, ledger=ledger)
    executor._stop = threading.Event()
    executor._stop.set()
    with pytest.raises(TransientError):
        executor.handle_message(FakeMessage(command(), []))
    assert published == [] and executor.admin.moves == []
