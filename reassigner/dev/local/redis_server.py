"""The local stack's Redis: Debian's `redis-server` on a loopback port, AOF with fsync always.

`appendfsync always` is what SPEC 6 asks of the state store: a micro-batch acknowledged by Redis
is on disk, so a Redis restart loses no applied transition.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from reassigner.errors import LocalStackError
from reassigner.dev.local.processes import port_open, spawn, wait_until


def redis_server_binary() -> str:
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if binary is None:
        raise LocalStackError(
            "redis-server is not installed; run `make install` (or apt-get install redis-server)"
        )
    return binary


def start_redis(port: int, data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = data_dir / "redis.log"
    command = [
        redis_server_binary(),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--protected-mode", "yes",
        "--dir", str(data_dir),
        "--appendonly", "yes",
        "--appendfsync", "always",
        "--save", "",
        "--daemonize", "no",
        "--logfile", "",
    ]
    pid = spawn(command, log_file)
    wait_until(lambda: port_open(port), 20, f"redis on port {port}", pid=pid, log_file=log_file)
    return pid
