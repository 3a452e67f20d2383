"""Snapshot and reassignment JSON: round trips, defaults, and errors that say where."""

from __future__ import annotations

import pytest

from planning.model import TopicPartition
from planning.snapshot import (
    cluster_from_json,
    cluster_to_json,
    reassignment_from_json,
    reassignment_to_json,
)
from schemas.errors import MalformedInputError

SNAPSHOT = {
    "brokers": [
        {"id": 0, "rack": "/dc1/r1", "log_dirs": [{"path": "/d0", "online": True, "total_bytes": 10, "usable_bytes": 4}]},
        {"id": 1, "rack": "r2", "alive": False},
        {"id": 2, "draining": True},
    ],
    "topics": [
        {"name": "orders", "min_insync_replicas": 2, "partitions": [
            {"partition": 0, "replicas": [0, 1], "isr": [0], "leader": 0, "size_bytes": 5, "log_dirs": ["/d0", None],
             "bytes_in_per_sec": 1250, "bytes_out_per_sec": 2500.5},
            {"partition": 1, "replicas": [1, 0]},
        ]},
    ],
}


def test_defaults_and_round_trip():
    cluster = cluster_from_json(SNAPSHOT, "snap.json")
    b0, b1, b2 = cluster.brokers
    assert (b0.alive, b0.draining, b1.alive, b2.draining) == (True, False, False, True)
    p1 = cluster.partition(TopicPartition("orders", 1))
    assert p1.isr == (1, 0) and p1.leader == 1 and p1.size_bytes is None and p1.bytes_in_per_sec is None
    p0 = cluster.partition(TopicPartition("orders", 0))
    assert (p0.bytes_in_per_sec, p0.bytes_out_per_sec) == (1250.0, 2500.5)
    assert cluster.min_isr("orders") == 2
    assert cluster_from_json(cluster_to_json(cluster), "again") == cluster


@pytest.mark.parametrize(
    "mutate, path, expected",
    [
        (lambda d: d["topics"][0]["partitions"][0]["replicas"].__setitem__(1, "x"),
         "$.topics[0].partitions[0].replicas[1]", "non-negative integer broker id"),
        (lambda d: d["topics"][0]["partitions"][1].__setitem__("replicas", []),
         "$.topics[0].partitions[1].replicas", "non-empty array"),
        (lambda d: d["topics"][0]["partitions"][1].__setitem__("replicas", [1, 1]),
         "$.topics[0].partitions[1].replicas[1]", "distinct"),
        (lambda d: d["brokers"][1].__setitem__("id", -3), "$.brokers[1].id", "non-negative"),
        (lambda d: d["brokers"][2].__setitem__("alive", "yes"), "$.brokers[2].alive", "true or false"),
        (lambda d: d.pop("brokers"), "$.brokers", "required"),
        (lambda d: d["topics"][0].pop("name"), "$.topics[0].name", "required"),
        (lambda d: d["topics"][0]["partitions"][0].__setitem__("log_dirs", ["/d0"]),
         "$.topics[0].partitions[0].log_dirs", "one log dir per replica"),
        (lambda d: d["topics"][0]["partitions"][0].__setitem__("isr", [7]),
         "$.topics[0].partitions[0].isr[0]", "member of replicas"),
        (lambda d: d["topics"][0]["partitions"][0].__setitem__("bytes_in_per_sec", -1),
         "$.topics[0].partitions[0].bytes_in_per_sec", "non-negative number of bytes per second"),
        (lambda d: d["topics"][0]["partitions"][1].__setitem__("bytes_out_per_sec", "fast"),
         "$.topics[0].partitions[1].bytes_out_per_sec", "non-negative number of bytes per second"),
    ],
)
def test_malformed_snapshot_names_file_path_and_expectation(mutate, path, expected):
    import copy

    data = copy.deepcopy(SNAPSHOT)
    mutate(data)
    with pytest.raises(MalformedInputError) as caught:
        cluster_from_json(data, "snap.json")
    message = str(caught.value)
    assert message.startswith("snap.json: at " + path + ":")
    assert expected in message
    assert caught.value.code == "INVALID_REQUEST"


def test_not_an_object_at_the_root():
    with pytest.raises(MalformedInputError, match=r"snap.json: at \$: expected an object"):
        cluster_from_json([1, 2], "snap.json")


def test_reassignment_round_trip_and_any_dirs():
    doc = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 0], "log_dirs": ["any", "/d0"]},
        {"topic": "orders", "partition": 1, "replicas": [1]},
    ]}
    targets = reassignment_from_json(doc, "plan.json")
    assert targets[TopicPartition("orders", 0)] == ((2, 0), (None, "/d0"))
    assert targets[TopicPartition("orders", 1)] == ((1,), None)
    again = reassignment_to_json(
        {tp: r for tp, (r, _) in targets.items()},
        {tp: d for tp, (_, d) in targets.items() if d is not None},
    )
    assert again == doc


def test_reassignment_keeps_invalid_assignments_for_validation():
    # Negative/duplicate ids are well-formed JSON: validation refuses them with its own code.
    doc = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1, -2]}]}
    assert reassignment_from_json(doc, "p.json")[TopicPartition("t", 0)][0] == (1, 1, -2)


@pytest.mark.parametrize(
    "doc, path",
    [
        ({"version": 2, "partitions": []}, "$.version"),
        ({"version": 1}, "$.partitions"),
        ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, "2"]}]},
         "$.partitions[0].replicas[1]"),
        ({"version": 1, "partitions": [{"topic": "", "partition": 0, "replicas": [1]}]},
         "$.partitions[0].topic"),
    ],
)
def test_malformed_reassignment(doc, path):
    with pytest.raises(MalformedInputError, match=r"p.json: at " + path.replace("$", r"\$").replace("[", r"\[").replace("]", r"\]")):
        reassignment_from_json(doc, "p.json")
