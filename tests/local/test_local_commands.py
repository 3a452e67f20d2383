"""`reassigner local ...` driven as a user would (the real CLI in a subprocess), while a separate
Admin API client observes the real cluster. Runs its own stack, since it kills and fails things.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long]

KAFKA_STORAGE_ERROR = 56


def reassigner(*args: str, stack_dir: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "reassigner.cli", *args, "--stack-dir", str(stack_dir)],
        capture_output=True, text=True, timeout=300,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"reassigner {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def last_json(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack_dir = tmp_path_factory.mktemp("local-commands") / "stack"
    started = time.monotonic()
    up = reassigner("local", "up", "--brokers", "3", "--log-dirs", "2",
                    "--racks", "/dc1/r1,/dc1/r2,/dc2/r1", stack_dir=stack_dir)
    info = last_json(up)
    info["up_seconds"] = time.monotonic() - started
    info["dir"] = stack_dir
    yield info
    reassigner("local", "down", stack_dir=stack_dir, check=False)


@pytest.fixture(scope="module")
def observer(stack):
    client = KafkaAdminClient(bootstrap_servers=stack["bootstrap_servers"], request_timeout_ms=10000)
    yield client
    client.close()


def brokers_seen(observer) -> dict[int, dict]:
    return {b["broker_id"]: b for b in observer.describe_cluster()["brokers"]}


def create_topic(stack, name: str, replicas: list[int]) -> None:
    # A fresh client: a long-lived one may route to a controller id it has no metadata for yet.
    client = KafkaAdminClient(bootstrap_servers=stack["bootstrap_servers"])
    try:
        client.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1,
                                       replica_assignments={0: replicas})])
    finally:
        client.close()


def log_dirs_of(observer, broker_id: int) -> dict[str, dict]:
    [answer] = observer.describe_log_dirs(brokers=[broker_id])
    return {d["log_dir"]: d for d in answer["log_dirs"]}


def test_up_starts_unfenced_brokers_with_racks_and_separate_log_dirs(stack, observer):
    brokers = brokers_seen(observer)
    assert sorted(brokers) == [1, 2, 3]
    assert {b["rack"] for b in brokers.values()} == {"/dc1/r1", "/dc1/r2", "/dc2/r1"}
    assert not any(b.get("is_fenced", False) for b in brokers.values())
    for broker_id in brokers:
        dirs = log_dirs_of(observer, broker_id)
        assert len(dirs) == 2
        assert all(d["error_code"] == 0 for d in dirs.values())
        assert not any(path.endswith("metadata") for path in dirs)
    state = json.loads((stack["dir"] / "stack.json").read_text())
    assert state["redis_url"] == stack["redis_url"]
    import redis

    client = redis.Redis.from_url(stack["redis_url"])
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert client.config_get("appendfsync")["appendfsync"] == "always"
    print(f"local up took {stack['up_seconds']:.1f} s")


def test_add_broker_registers_unfenced_with_its_rack(stack, observer):
    result = reassigner("local", "add-broker", "--rack", "/dc2/r2", stack_dir=stack["dir"])
    added = last_json(result)
    assert added["broker_id"] == 4
    broker = eventually(lambda: brokers_seen(observer).get(4))
    assert broker["rack"] == "/dc2/r2" and not broker.get("is_fenced", False)


def only_partition(observer, topic: str) -> dict | None:
    """The single partition of `topic`, or None while its metadata has not reached the broker."""
    described = observer.describe_topics([topic])
    partitions = described[0]["partitions"] if described else []
    return partitions[0] if partitions else None


def test_kill_broker_fences_it_and_it_leaves_the_isr(stack, observer):
    create_topic(stack, "kill-test", [1, 2, 3])
    eventually(lambda: (only_partition(observer, "kill-test") or {}).get("isr_nodes"))
    reassigner("local", "kill-broker", "3", stack_dir=stack["dir"])

    def fenced_or_gone():
        broker = brokers_seen(observer).get(3)
        return broker is None or broker.get("is_fenced", False)

    eventually(fenced_or_gone, timeout=30)
    def partition_without_broker_3():
        partition = only_partition(observer, "kill-test")
        return partition if partition and 3 not in partition["isr_nodes"] else None

    partition = eventually(partition_without_broker_3, timeout=30)
    assert sorted(partition["isr_nodes"]) == [1, 2]

    reassigner("local", "start-broker", "3", stack_dir=stack["dir"])
    assert not brokers_seen(observer)[3].get("is_fenced", False)
    eventually(lambda: 3 in (only_partition(observer, "kill-test") or {}).get("isr_nodes", ()),
               timeout=60)


def test_fail_logdir_takes_it_offline_and_the_broker_keeps_serving(stack, observer):
    result = reassigner("local", "fail-logdir", "2", "data-0", stack_dir=stack["dir"])
    failed = last_json(result)["log_dir"]
    assert Path(failed).is_file()
    dirs = log_dirs_of(observer, 2)
    assert dirs[failed]["error_code"] == KAFKA_STORAGE_ERROR
    healthy = [path for path, d in dirs.items() if d["error_code"] == 0]
    assert len(healthy) == 1
    assert not brokers_seen(observer)[2].get("is_fenced", False)

    create_topic(stack, "after-disk-failure", [2, 1])
    producer = Producer({"bootstrap.servers": stack["bootstrap_servers"], "acks": "all"})
    errors: list = []
    for i in range(10):
        producer.produce("after-disk-failure", value=b"x%d" % i,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors
    placed = log_dirs_of(observer, 2)[healthy[0]]
    assert any(t["name"] == "after-disk-failure" for t in placed["topics"])


def test_add_logdir_restarts_the_broker_with_a_new_empty_dir_kafka_uses(stack, observer):
    create_topic(stack, "before-new-dir", [3])
    result = reassigner("local", "add-logdir", "3", stack_dir=stack["dir"])
    added = last_json(result)["log_dir"]
    assert Path(added).name == "data-2" and Path(added, "meta.properties").is_file()
    eventually(lambda: added in log_dirs_of(observer, 3) and log_dirs_of(observer, 3)[added]["error_code"] == 0,
               60, what="the new dir online in describe-log-dirs")
    assert not log_dirs_of(observer, 3)[added]["topics"]
    assert not brokers_seen(observer)[3].get("is_fenced", False)
    # Kafka moves a replica into it when asked (AlterReplicaLogDirs).
    client = KafkaAdminClient(bootstrap_servers=stack["bootstrap_servers"])
    try:
        answer = client.alter_replica_log_dirs({("before-new-dir", 0, 3): added})
    finally:
        client.close()
    assert [error.errno for error in answer.values()] == [0], answer
    eventually(lambda: any(t["name"] == "before-new-dir" for t in log_dirs_of(observer, 3)[added]["topics"]),
               60, what="the replica moved into the new dir")


def test_bad_input_gives_one_line_errors_and_disturbs_nothing(stack, observer, tmp_path):
    unknown = reassigner("local", "kill-broker", "42", stack_dir=stack["dir"], check=False)
    assert unknown.returncode != 0
    assert "no broker 42" in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1

    no_dir = reassigner("local", "fail-logdir", "1", "no-such-dir", stack_dir=stack["dir"], check=False)
    assert no_dir.returncode != 0 and "no log dir 'no-such-dir'" in no_dir.stderr

    not_up = reassigner("local", "add-broker", stack_dir=tmp_path / "nothing-here", check=False)
    assert not_up.returncode != 0 and "reassigner local up" in not_up.stderr

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = reassigner("local", "up", "--base-port", str(port), stack_dir=tmp_path / "busy",
                          check=False)
    assert busy.returncode != 0 and f"port {port}" in busy.stderr

    assert sorted(brokers_seen(observer)) == [1, 2, 3, 4]


def test_down_stops_everything_and_removes_the_data(stack):
    state = json.loads((stack["dir"] / "stack.json").read_text())
    pids = [b["pid"] for b in state["brokers"].values()] + [state["controller_pid"], state["redis_pid"]]
    reassigner("local", "down", stack_dir=stack["dir"])
    assert not stack["dir"].exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
