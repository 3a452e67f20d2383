"""Log-dir balance through `decide` (issue 16 item 1; SPEC 3, 5.5): the trigger, the requests, the
LogDirMove commands under the per-broker limit, completion, cancel, throttle, command failures."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import (
    T0,
    alerts,
    broker_event,
    commands,
    envelope,
    partition_event,
    request,
    snapshot_end,
    topic_event,
)

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from planning.model import Broker, LogDir, PartitionState, Topic, TopicPartition
from state.model import ControllerState
from tests.settings_defaults import default_policy

TP = TopicPartition


def dir_event(broker_id, path, partitions, at_ms, futures=(), online=True):
    """LogDirState as the watcher writes it: the replicas of `broker_id` in `path`."""
    replicas = [{"topic": p.topic, "partition": p.partition, "size_bytes": p.size_bytes or 0,
                 "offset_lag": 0, "is_future": False}
                for p in partitions if broker_id in p.replicas and p.log_dir_of(broker_id) == path]
    replicas += [{"topic": tp.topic, "partition": tp.partition, "size_bytes": 0, "offset_lag": 0,
                  "is_future": True} for tp in futures]
    return ("LogDirState", {**envelope(f"{broker_id}:{path}", at_ms), "snapshot_id": None,
                            "broker_id": broker_id, "path": path, "online": online, "error": None,
                            "total_bytes": None, "usable_bytes": None, "replicas": replicas if online else []})


def partitions_in(dirs_of_broker_1, sizes=None):
    """Partition n of topic t on brokers (1, 2); broker 1 keeps it in dirs_of_broker_1[n]."""
    sizes = sizes or [10**6] * len(dirs_of_broker_1)
    return [PartitionState("t", n, (1, 2), (1, 2), 1, size_bytes=sizes[n], log_dirs=(path, "/a"), leader_epoch=0)
            for n, path in enumerate(dirs_of_broker_1)]


def first_view(partitions, dirs=("/a", "/b"), at_ms=T0):
    brokers = (Broker(1, rack="r1", log_dirs=tuple(LogDir(d) for d in dirs)),
               Broker(2, rack="r2", log_dirs=(LogDir("/a"),)))
    events = [broker_event(b, at_ms) for b in brokers] + [topic_event(Topic("t", tuple(partitions)), at_ms)]
    events += [partition_event(p, at_ms) for p in partitions]
    events += [dir_event(1, d, partitions, at_ms) for d in dirs] + [dir_event(2, "/a", partitions, at_ms)]
    return tuple(events)


class Driver:
    def __init__(self, policy=None):
        self.state = ControllerState()
        self.policy = policy or default_policy()
        self.batch = 0
        self.now_ms = T0

    def decide(self, events=(), requests=(), results=(), seconds=1.0):
        self.now_ms += int(seconds * 1000)
        requests = tuple(requests) or ({**envelope(f"tick-{self.now_ms}", self.now_ms), "requested_by": None,
                                         "payload": ("Tick", {})},)
        decision = decide(self.state, BatchInputs(self.batch, self.now_ms, tuple(events), requests,
                                                  tuple(results)), self.policy)
        self.batch += 1
        self.state = decision.state
        return decision


def moves_of(decision):
    return [(f["payload"][1]["topic"], f["payload"][1]["partition"], f["payload"][1]["broker_id"],
             f["payload"][1]["target_dir"]) for f in commands(decision, "LogDirMove")]


def test_a_new_empty_dir_is_filled_under_the_per_broker_limit_until_balanced():
    view = partitions_in(["/a", "/a", "/b", "/b"], [600 * 10**6, 300 * 10**6, 500 * 10**6, 400 * 10**6])
    driver = Driver()
    assert not moves_of(driver.decide(first_view(view)))  # 900 MB each: balanced
    # The broker comes back with a third, empty dir (/c): BrokerMembership lists it, LogDirState tells it.
    broker = Broker(1, rack="r1", log_dirs=(LogDir("/a"), LogDir("/b"), LogDir("/c")))
    at = driver.now_ms + 1000
    decision = driver.decide([broker_event(broker, at), dir_event(1, "/c", view, at)])
    (unbalanced,) = alerts(decision, "LogDirsUnbalanced")
    assert unbalanced["details"]["executed"] == "true" and unbalanced["details"]["moves"] == "2"
    # Shares 600 MB: /a sheds the 300 MB replica that fits; /b's smallest (400 MB) still helps.
    assert sorted(moves_of(decision)) == [("t", 1, 1, "/c"), ("t", 3, 1, "/c")]
    # Kafka copies into /c (future replicas): not complete yet.
    at = driver.now_ms + 1000
    assert not moves_of(driver.decide([dir_event(1, "/c", view, at, futures=[TP("t", 1), TP("t", 3)])]))
    assert len(driver.state.log_dir_moves) == 2
    # The swap: the replicas are in /c, no future left.
    moved = [replace(p, log_dirs=("/c", "/a"), leader_epoch=1) if p.partition in (1, 3) else p for p in view]
    at = driver.now_ms + 1000
    after = driver.decide([partition_event(p, at) for p in moved] + [dir_event(1, d, moved, at) for d in ("/a", "/b", "/c")])
    assert not driver.state.log_dir_moves
    (balanced,) = alerts(after, "LogDirsBalanced")
    plan_id = commands(decision, "LogDirMove")[0]["reassignment_id"]
    assert balanced["subject"] == "broker-1" and balanced["details"]["task_id"] == plan_id
    assert unbalanced["details"]["task_id"] == plan_id  # the plan's start and end name the same task
    assert float(balanced["details"]["imbalance"]) < 0.2
    # Judged once: the remaining 17 % (no replica fits the gap) is not planned again and again.
    assert not alerts(driver.decide(), "LogDirsUnbalanced") and not driver.state.log_dir_moves


def test_balanced_dirs_are_left_alone_and_an_unhelpful_plan_is_judged_once():
    parts = partitions_in(["/a", "/b"], [10**6, 10**6])
    driver = Driver()
    assert not alerts(driver.decide(first_view(parts)), "LogDirsUnbalanced")
    lopsided = partitions_in(["/a", "/b"], [10**9, 10**6])
    driver = Driver()
    first = driver.decide(first_view(lopsided))
    assert [a["severity"] for a in alerts(first, "LogDirsUnbalanced")] == ["WARNING"]  # nothing helps
    assert not alerts(driver.decide(), "LogDirsUnbalanced") and not driver.state.log_dir_moves


def test_in_approve_mode_the_trigger_only_alerts_and_the_request_executes():
    parts = partitions_in(["/a"] * 4)
    driver = Driver(default_policy(mode="approve"))
    decision = driver.decide(first_view(parts))
    (alert,) = alerts(decision, "LogDirsUnbalanced")
    assert alert["details"]["executed"] == "false" and "balance-dirs --broker 1" in alert["message"]
    assert not moves_of(decision)
    request_ = request("Rebalance", {"topics": [], "log_dirs": True, "broker_ids": [1]}, driver.now_ms + 500, "dirs-1")
    executed = driver.decide(requests=[request_])
    assert [m[3] for m in moves_of(executed)] == ["/b", "/b"]
    assert {t.task_id for t in driver.state.log_dir_moves.values()} == {"dirs-1-b1"}


def test_balance_dirs_for_an_unknown_broker_is_rejected():
    driver = Driver()
    driver.decide(first_view(partitions_in(["/a", "/b"])))
    decision = driver.decide(requests=[request("Rebalance", {"topics": [], "log_dirs": True, "broker_ids": [9]},
                                               driver.now_ms + 500, "dirs-9")])
    (rejected,) = alerts(decision, "RequestRejected")
    assert rejected["details"]["error_code"] == "INVALID_REPLICA_ASSIGNMENT" and "9" in rejected["message"]


def test_the_tools_json_with_log_dirs_for_the_same_replicas_is_an_intra_broker_move_and_cancel_moves_back():
    parts = partitions_in(["/a", "/b"])
    driver = Driver()
    driver.decide(first_view(parts))
    reassign = request("Reassign", {"version": 1, "additional": False, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/b", "any"]}]}, driver.now_ms + 500, "r-1")
    decision = driver.decide(requests=[reassign])
    assert moves_of(decision) == [("t", 0, 1, "/b")] and not commands(decision, "ReassignmentStep")
    (task,) = driver.state.log_dir_moves.values()
    assert (task.origin_dir, task.number) == ("/a", 1)
    cancel = request("Cancel", {"topic": "t", "partition": 0, "keep": False}, driver.now_ms + 500, "c-1")
    cancelled = driver.decide(requests=[cancel])
    assert moves_of(cancelled) == [("t", 0, 1, "/a")]
    assert alerts(cancelled, "ReassignmentCancelled")[0]["details"]["log_dir_moves"] == "1"
    # The replica never left /a and no future is left: the cancel is over.
    driver.decide([dir_event(1, "/a", parts, driver.now_ms + 1000), dir_event(1, "/b", parts, driver.now_ms + 1000)])
    assert not driver.state.log_dir_moves


def _move_done(driver: Driver, parts, decision) -> list:
    """The events that show the decision's one log-dir move done: the replica in /b, both dirs told."""
    (moved_partition,) = [m[1] for m in moves_of(decision)]
    moved = [replace(p, log_dirs=("/b", "/a"), leader_epoch=1) if p.partition == moved_partition else p
             for p in parts]
    events = [partition_event(p, driver.now_ms + 1000) for p in moved]
    return events + [dir_event(1, d, moved, driver.now_ms + 1000) for d in ("/a", "/b")]


def test_the_throttle_rides_on_the_move_and_is_cleared_for_that_rate_only():
    parts = partitions_in(["/a"] * 2)
    driver = Driver(default_policy(logdir_throttle_bytes_per_sec=10**6))
    decision = driver.decide(first_view(parts))
    assert [c["payload"][1]["throttle_bytes_per_sec"] for c in commands(decision, "LogDirMove")] == [10**6]
    events = _move_done(driver, parts, decision)
    done = driver.decide(events)
    (clear,) = commands(done, "ClearThrottle")
    assert clear["payload"][1] == {"broker_ids": [1], "partitions": [], "log_dir_only": True}
    assert alerts(done, "LogDirsBalanced")


def test_a_down_brokers_log_dir_throttle_is_cleared_once_it_is_back():
    """Kafka serves a broker's configs on the broker: the clear waits until it is back."""
    parts = partitions_in(["/a"] * 2)
    driver = Driver(default_policy(logdir_throttle_bytes_per_sec=10**6))
    decision = driver.decide(first_view(parts))
    one = Broker(1, rack="r1", log_dirs=(LogDir("/a"), LogDir("/b")))
    events = _move_done(driver, parts, decision)
    done = driver.decide(events + [broker_event(one, driver.now_ms + 1000, "FENCED")])
    assert alerts(done, "LogDirsBalanced") and not commands(done, "ClearThrottle"), "broker 1 is down"
    assert not commands(driver.decide(), "ClearThrottle")
    back = driver.decide([broker_event(one, driver.now_ms + 1000, "UNFENCED")])
    (clear,) = commands(back, "ClearThrottle")
    assert clear["payload"][1] == {"broker_ids": [1], "partitions": [], "log_dir_only": True}
    assert not any(k.startswith("LogDirThrottle:") for k in driver.state.open_alerts)


def test_a_failed_log_dir_clear_is_asked_again_at_the_next_snapshot():
    """The executor could not remove the broker's log-dir rate: its marker comes back at the next
    snapshot (not at once: a broker that refuses would loop), and the clear goes again."""
    parts = partitions_in(["/a"] * 2)
    driver = Driver(default_policy(logdir_throttle_bytes_per_sec=10**6))
    decision = driver.decide(first_view(parts))
    events = _move_done(driver, parts, decision)
    (clear,) = commands(driver.decide(events), "ClearThrottle")
    failed = {**envelope(f"res-{clear['id']}", driver.now_ms), "command_id": clear["id"],
              "command_kind": "ClearThrottle", "epoch": 0, "reassignment_id": None, "step": 0, "ok": False,
              "error_code": "KAFKA_TIMEOUT", "message": "KAFKA_TIMEOUT"}
    answered = driver.decide(results=[failed])
    assert alerts(answered, "CommandFailed") and not commands(answered, "ClearThrottle")
    schema, record = snapshot_end(driver.state.cluster, driver.now_ms + 1000, "snap-2")
    snapshot = (schema, {**record, "kafka_release": "4.1", "kafka_metadata_level": 27, "kafka_capabilities": []})
    (again,) = commands(driver.decide([snapshot]), "ClearThrottle")
    assert again["payload"][1] == {"broker_ids": [1], "partitions": [], "log_dir_only": True}
    assert again["id"] != clear["id"]


def test_a_failed_move_is_retried_while_transient_then_dropped():
    parts = partitions_in(["/a"] * 2)
    driver = Driver(default_policy(step_retry_max=1))
    decision = driver.decide(first_view(parts))
    (command,) = commands(decision, "LogDirMove")

    def failure(cmd, code):
        return {**envelope(f"res-{cmd['id']}", driver.now_ms), "command_id": cmd["id"], "command_kind": "LogDirMove",
                "epoch": 0, "reassignment_id": cmd["reassignment_id"], "step": cmd["step"], "ok": False,
                "error_code": code, "message": code}

    retried = driver.decide(results=[failure(command, "REQUEST_TIMED_OUT")])
    assert not alerts(retried, "CommandFailed")  # retried quietly (a broker away is no news yet)
    (again,) = commands(retried, "LogDirMove")  # the slot is free again in the same batch
    assert again["id"] != command["id"]
    dropped = driver.decide(results=[failure(again, "LOG_DIR_NOT_FOUND")])
    [given_up] = alerts(dropped, "CommandFailed")  # one alert, when the move is given up
    assert "dropped" in given_up["message"]
    assert not driver.state.log_dir_moves


def test_the_per_broker_limit_is_dynamic():
    parts = partitions_in(["/a"] * 8)
    driver = Driver()
    driver.decide(requests=[request("SetConfig", {"key": "reassignment.max.concurrent.logdir.movements.per.broker",
                                                  "value": "3"}, T0, "cfg")])
    decision = driver.decide(first_view(parts, at_ms=driver.now_ms))
    assert len(moves_of(decision)) == 3
