"""Disk-pressure relief through `decide`: a dir past the high-water mark is relieved once, to
another volume of its broker (log-dir moves) or to another broker (a plan); approve and observe
only say so (`handlers.disk_pressure`)."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import alerts, broker_event, commands, envelope, partition_event
from test_log_dir_balance import Driver, first_view

from planning.model import CORDONS, LOG_DIR_MOVES, Broker, KafkaFacts, LogDir, PartitionState
from tests.settings_defaults import default_policy

GB = 10**9


def policy(**changes):
    """The defaults, with the log-dir balance off (broker 1's /b starts empty: it would balance)."""
    return replace(default_policy(), logdir_imbalance_threshold=1.0, **changes)


def volume_event(broker_id, path, partitions, at_ms, total, usable):
    """LogDirState of `broker_id`'s dir `path` with its volume's figures."""
    replicas = [{"topic": p.topic, "partition": p.partition, "size_bytes": p.size_bytes or 0, "offset_lag": 0,
                 "is_future": False} for p in partitions if broker_id in p.replicas and p.log_dir_of(broker_id) == path]
    return ("LogDirState", {**envelope(f"{broker_id}:{path}", at_ms), "snapshot_id": None, "broker_id": broker_id,
                            "path": path, "online": True, "error": None, "total_bytes": total, "usable_bytes": usable,
                            "replicas": replicas})


def pressed_cluster(driver, b_usable=900 * GB):
    """Broker 1: /a 90 % used with four replicas, /b on another volume; broker 2 holds their
    other replicas in /a."""
    parts = [PartitionState("t", n, (1, 2), (1, 2), 1, size_bytes=size * GB, log_dirs=("/a", "/a"), leader_epoch=0)
             for n, size in enumerate([100, 200, 300, 250])]
    driver.decide(first_view(parts))
    at = driver.now_ms + 1000
    return parts, [volume_event(1, "/a", parts, at, 1000 * GB, 100 * GB),
                   volume_event(1, "/b", parts, at, 1000 * GB, b_usable),
                   volume_event(2, "/a", parts, at, 1000 * GB, 500 * GB)]


def test_a_dir_past_the_high_water_mark_sheds_the_fewest_bytes_to_another_volume_once():
    driver = Driver(policy())
    _, events = pressed_cluster(driver)
    decision = driver.decide(events)
    (alert,) = alerts(decision, "DiskPressure")
    assert alert["severity"] == "WARNING" and alert["subject"] == "broker-1"
    assert alert["details"]["need_bytes"] == str(150 * GB) and alert["details"]["shed_bytes"] == str(200 * GB)
    assert "90% full" in alert["message"] and "to 70%" in alert["message"]
    (move,) = [c["payload"][1] for c in commands(decision, "LogDirMove")]
    assert (move["partition"], move["broker_id"], move["target_dir"]) == (1, 1, "/b")
    assert not alerts(decision, "PlanCreated")  # nothing leaves the broker
    assert not alerts(driver.decide(), "DiskPressure")  # planned once while it stays above the mark


def test_with_no_room_on_another_volume_the_replica_leaves_the_broker_as_a_plan():
    driver = Driver(policy())
    # /b is 76 % used: under the high-water mark, but no replica fits under the low one.
    _, events = pressed_cluster(driver, b_usable=240 * GB)
    at = driver.now_ms + 1000
    spare = Broker(3, rack="r3", log_dirs=(LogDir("/a"),))
    decision = driver.decide(events + [broker_event(spare, at), volume_event(3, "/a", [], at, 1000 * GB, 1000 * GB)])
    (alert,) = alerts(decision, "DiskPressure")
    assert "to other brokers" in alert["message"] and alert["details"]["away"]
    (plan,) = alerts(decision, "PlanCreated")
    assert plan["details"]["pressed_dir"] == "/a" and plan["details"]["bytes_moved"] == str(200 * GB)


def test_approve_and_observe_only_say_what_would_move():
    for mode in ("approve", "observe"):
        driver = Driver(policy(mode=mode))
        _, events = pressed_cluster(driver)
        decision = driver.decide(events)
        (alert,) = alerts(decision, "DiskPressure")
        assert alert["details"]["executed"] == "false" and f"mode {mode}" in alert["message"]
        assert not commands(decision, "LogDirMove")


def test_nowhere_to_go_is_an_error_naming_what_to_do():
    driver = Driver(policy())
    parts, _ = pressed_cluster(driver)
    at = driver.now_ms + 1000
    # Broker 2 holds every partition already; /b has no room under the low-water mark.
    full = [volume_event(1, "/a", parts, at, 1000 * GB, 100 * GB), volume_event(1, "/b", parts, at, 1000 * GB, 240 * GB),
            volume_event(2, "/a", parts, at, 1000 * GB, 240 * GB)]
    (alert,) = alerts(driver.decide(full), "DiskPressure")
    assert alert["severity"] == "ERROR" and "nowhere to go" in alert["message"]
    assert alert["details"]["short_bytes"] == str(150 * GB) and "add disk or brokers" in alert["message"]


def test_bytes_that_are_no_replica_are_told_apart_from_replicas_with_nowhere_to_go():
    driver = Driver(policy())
    # /a is 90 % used but holds one 100 GB replica: 50 of the 150 GB to shed are other files.
    parts = [PartitionState("t", 0, (1, 2), (1, 2), 1, size_bytes=100 * GB, log_dirs=("/a", "/a"), leader_epoch=0)]
    driver.decide(first_view(parts))
    at = driver.now_ms + 1000
    decision = driver.decide([volume_event(1, "/a", parts, at, 1000 * GB, 100 * GB),
                              volume_event(1, "/b", parts, at, 1000 * GB, 900 * GB),
                              volume_event(2, "/a", parts, at, 1000 * GB, 500 * GB)])
    (alert,) = alerts(decision, "DiskPressure")
    assert alert["severity"] == "WARNING" and "nowhere to go" not in alert["message"], alert
    assert alert["details"]["stranded_bytes"] == str(50 * GB) and "no replica the product can move" in alert["message"]
    (move,) = [c["payload"][1] for c in commands(decision, "LogDirMove")]
    assert (move["partition"], move["target_dir"]) == (0, "/b")


def test_a_dir_whose_replicas_are_moving_is_judged_once_they_are_still():
    # Regression (CI, 2026-11-26): the volume passed the mark while its one replica was still
    # being reassigned; the relief found nothing to move, said ERROR "nowhere to go", and the
    # mark kept the dir from being judged again once the replica was still.
    driver = Driver(policy())
    parts, events = pressed_cluster(driver)
    moving = [replace(p, replicas=(1, 2), adding=(2,)) for p in parts]
    at = driver.now_ms + 1000
    assert not alerts(driver.decide(events + [partition_event(p, at) for p in moving]), "DiskPressure")
    at = driver.now_ms + 1000
    decision = driver.decide([partition_event(p, at) for p in parts])
    (alert,) = alerts(decision, "DiskPressure")
    assert alert["severity"] == "WARNING" and alert["details"]["shed_bytes"] == str(200 * GB), alert
    assert commands(decision, "LogDirMove")


def test_a_replica_that_lands_in_the_dir_is_planned_with_the_size_it_landed_with():
    # Regression (the real-stack scenario, 2026-11-26): the dir's event told a 20 MB replica
    # had landed, while the partition's last event still said 3.6 MB (written since); the relief
    # planned 3.6 MB and called the rest stranded.
    driver = Driver(policy())
    parts, events = pressed_cluster(driver)
    stale = [replace(p, size_bytes=10 * GB, log_dirs=("/b", "/a")) for p in parts]
    at = driver.now_ms + 1000
    driver.decide([partition_event(p, at) for p in stale])
    decision = driver.decide(events)  # /a of broker 1 lists them at their real sizes
    (alert,) = alerts(decision, "DiskPressure")
    assert alert["details"]["shed_bytes"] == str(200 * GB) and alert["details"]["stranded_bytes"] == "0", alert


def test_a_follower_replica_that_lands_raises_a_size_known_smaller():
    # Regression (the real-stack scenario, 2026-11-26, second run): broker 3's restart had moved
    # the leadership to broker 1, so the replica landing in broker 3's dir was a follower's, and
    # the partition's size was still the 0 of the topic's creation: the relief found nothing to
    # move and called the whole need stranded.
    driver = Driver(policy())
    parts, events = pressed_cluster(driver)
    stale = [replace(p, size_bytes=0, log_dirs=("/b", "/a"), leader=2) for p in parts]
    at = driver.now_ms + 1000
    driver.decide([partition_event(p, at) for p in stale])
    (alert,) = alerts(driver.decide(events), "DiskPressure")
    assert alert["details"]["shed_bytes"] == str(200 * GB) and alert["details"]["stranded_bytes"] == "0", alert



def test_a_dir_filled_by_a_copy_in_flight_is_judged_once_the_copy_has_landed():
    # Regression (the real-stack scenario, 2026-11-26, with the watcher telling a dir while a
    # copy into it grows): the volume passed its mark mid-copy; the relief planned the small
    # replicas already there against a need they could not cover, and the mark then kept the dir
    # from being judged again once the big replica had landed.
    driver = Driver(policy())
    small = [PartitionState("t", n, (1, 2), (1, 2), 1, size_bytes=10 * GB, log_dirs=("/a", "/a"), leader_epoch=0)
             for n in range(2)]
    big = PartitionState("t", 2, (1, 2), (1, 2), 1, size_bytes=400 * GB, log_dirs=("/b", "/a"), leader_epoch=0)
    driver.decide(first_view(small + [big]))
    at = driver.now_ms + 1000
    mid_copy = volume_event(1, "/a", small, at, 1000 * GB, 150 * GB)  # 850 GB used, 300 of 400 copied
    mid_copy[1]["replicas"].append({"topic": "t", "partition": 2, "size_bytes": 300 * GB, "offset_lag": 0,
                                    "is_future": True})
    others = [volume_event(1, "/b", [big], at, 2000 * GB, 1600 * GB), volume_event(2, "/a", small + [big], at, 2000 * GB, 1000 * GB)]
    decision = driver.decide([mid_copy] + others)
    assert not alerts(decision, "DiskPressure") and not commands(decision, "LogDirMove")
    landed = replace(big, log_dirs=("/a", "/a"))
    at = driver.now_ms + 1000
    decision = driver.decide([partition_event(landed, at), volume_event(1, "/a", small + [landed], at, 1000 * GB, 50 * GB),
                              volume_event(1, "/b", [], at, 2000 * GB, 2000 * GB)])
    (alert,) = alerts(decision, "DiskPressure")
    assert int(alert["details"]["shed_bytes"]) >= int(alert["details"]["need_bytes"]) == 200 * GB, alert
    (move,) = [c["payload"][1] for c in commands(decision, "LogDirMove")]
    assert (move["partition"], move["target_dir"]) == (2, "/b")


def on_kafka_with_cordons(driver):
    driver.state = driver.state.with_changes(kafka=KafkaFacts("4.4", 33, (LOG_DIR_MOVES, CORDONS)))


def test_on_kafka_4_3_a_dir_being_relieved_is_cordoned_until_it_is_under_the_mark_again():
    driver = Driver(policy())
    parts, events = pressed_cluster(driver)
    on_kafka_with_cordons(driver)
    decision = driver.decide(events)
    (cordon,) = commands(decision, "Cordon")
    assert cordon["action"] == {"kind": "Cordon", "broker_ids": [1], "log_dirs": ["/a"]}
    assert cordon["reason"] == "disk pressure" and driver.state.cordoned == {1: ("/a",)}
    assert not commands(driver.decide(), "Cordon")  # asked once
    at = driver.now_ms + 1000
    relieved = driver.decide([volume_event(1, "/a", parts, at, 1000 * GB, 300 * GB)])  # 70 % used
    (uncordon,) = commands(relieved, "Uncordon")
    assert uncordon["action"]["broker_ids"] == [1] and driver.state.cordoned == {}


def test_a_pressed_dir_of_a_draining_broker_is_left_to_the_whole_brokers_cordon_then_narrowed_to():
    driver = Driver(policy())
    parts, events = pressed_cluster(driver)
    on_kafka_with_cordons(driver)
    at = driver.now_ms + 1000
    third = [broker_event(Broker(3, rack="r3", log_dirs=(LogDir("/a"),)), at),
             volume_event(3, "/a", parts, at, 10_000 * GB, 10_000 * GB)]  # room for broker 1's replicas
    driver.decide(events + third)
    drained = driver.decide(requests=[{**envelope("dc-1", driver.now_ms + 1000), "requested_by": None,
                                       "payload": ("Decommission", {"broker_ids": [1]})}])
    assert [c["action"]["log_dirs"] for c in commands(drained, "Cordon")] == [[]]  # widened to `*`
    assert not commands(drained, "Uncordon") and driver.state.cordoned == {1: ()}
    back = driver.decide(requests=[{**envelope("rc-1", driver.now_ms + 1000), "requested_by": None,
                                    "payload": ("Tick", {}),
                                    "action": {"kind": "Recommission", "proposal_id": None, "broker_ids": [1]}}])
    # Narrowed: the whole broker's cordon is taken back, then the pressed dir's asked again.
    assert [(c["action"]["kind"], c["action"]["log_dirs"]) for c in commands(back)
            if c.get("action")] == [("Uncordon", []), ("Cordon", ["/a"])]
    assert driver.state.cordoned == {1: ("/a",)}


def test_in_mode_observe_or_before_kafka_4_3_no_dir_is_cordoned():
    driver = Driver(policy(mode="observe"))
    _, events = pressed_cluster(driver)
    on_kafka_with_cordons(driver)
    assert alerts(driver.decide(events), "DiskPressure") and driver.state.cordoned == {}
    driver = Driver(policy())
    _, events = pressed_cluster(driver)
    decision = driver.decide(events)
    assert alerts(decision, "DiskPressure") and not commands(decision, "Cordon") and driver.state.cordoned == {}
