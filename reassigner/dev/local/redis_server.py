"""The local stack's Redis: Debian's `redis-server` on a loopback port, AOF with fsync always.

`appendfsync always` is what the product asks of its state store (docs/operations.md): a
micro-batch acknowledged by Redis is on disk, so a Redis restart loses no applied transition.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from schemas.errors import LocalStackError
from reassigner.dev.local.processes import port_open, run_tool, spawn, wait_until
from reassigner.dev.local.security import StackSecrets, compute_redis_config, write_private


def redis_server_binary() -> str:
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if binary is None:
        raise LocalStackError(
            "redis-server is not installed; run `make install` (or apt-get install redis-server)"
        )
    return binary


def start_redis(port: int, data_dir: Path, cluster: bool = False,
                secrets: StackSecrets | None = None) -> int:
    """A Redis server on `port` (a Redis Cluster node with `cluster`), data and log in `data_dir`;
    with a secured stack's `secrets`, on TLS only with the product's ACL user (the settings go in
    a 0600 redis.conf: the user's password must not show in `ps`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = data_dir / "redis.log"
    settings = [
        f"port {port}",
        "bind 127.0.0.1",
        "protected-mode yes",
        f"dir {data_dir}",
        "appendonly yes",
        "appendfsync always",
        'save ""',
        "daemonize no",
        'logfile ""',
    ]
    if cluster:
        settings += ["cluster-enabled yes", f"cluster-config-file {data_dir / 'nodes.conf'}",
                     "cluster-node-timeout 5000"]
    if secrets is not None:
        settings += compute_redis_config(secrets, port)
    config_file = data_dir / "redis.conf"
    write_private(config_file, "\n".join(settings) + "\n")
    pid = spawn([redis_server_binary(), str(config_file)], log_file)
    wait_until(lambda: port_open(port), 20, f"redis on port {port}", pid=pid, log_file=log_file)
    return pid


def start_redis_cluster(ports: list[int], base_dir: Path) -> list[int]:
    """A Redis Cluster of one master per port (no replicas), slots spread evenly by
    `redis-cli --cluster create`; returns the pids once the cluster reports itself ok."""
    import redis

    pids = [start_redis(port, base_dir / f"node-{port}", cluster=True) for port in ports]
    cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    created = run_tool([cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                        "--cluster-replicas", "0", "--cluster-yes"], "redis-cli --cluster create", 60)
    if created.returncode != 0:
        raise LocalStackError(f"redis-cli --cluster create failed: {created.stdout[-500:]} {created.stderr[-500:]}")
    wait_until(lambda: all(redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in ports),
               30, "the Redis Cluster to report ok")
    return pids


def free_cluster_ports(count: int = 3) -> list[int]:
    """Free loopback ports whose cluster bus ports (port + 10000) are free too."""
    import random
    import socket

    ports: list[int] = []
    while len(ports) < count:
        port = random.randint(20000, 40000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        if port not in ports:
            ports.append(port)
    return ports


def slot_owner(ports: list[int], slot: int) -> int:
    """The port of the master that serves `slot`, as the cluster's first node tells it."""
    import redis

    for start, end, master, *_ in redis.Redis(port=ports[0]).execute_command("CLUSTER SLOTS"):
        if start <= slot <= end:
            return int(master[1])
    raise LocalStackError(f"no master serves slot {slot}")


def move_slot(slot: int, source_port: int, target_port: int, batch: int = 100) -> int:
    """Reshard one slot from one master to another, keys and all, as `redis-cli --cluster
    reshard` does (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE on every master); returns the
    number of keys moved."""
    import redis

    source, target = redis.Redis(port=source_port), redis.Redis(port=target_port)
    source_id = source.execute_command("CLUSTER MYID").decode()
    target_id = target.execute_command("CLUSTER MYID").decode()
    target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
    moved = 0
    while True:
        keys = source.execute_command("CLUSTER GETKEYSINSLOT", slot, batch)
        if not keys:
            break
        source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys)
        moved += len(keys)
    masters = {int(address.rsplit(":", 1)[1]) for address, node in source.cluster("nodes").items()
               if "master" in node["flags"]}
    for port in sorted(masters):
        redis.Redis(port=port).execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
    return moved
