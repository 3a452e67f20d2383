"""Server processes of the local stack: free ports, detached start, liveness, stop, log tails,
and the short-lived tools run to their end (`run_tool`: one that hangs is killed and ends in one
`ProcessStartError` line, never a traceback).

PATIENCE (`compute_deadline`, for every wait here and the demo's): a wait's timeout is the time it
allows without progress; a wait that sees progress (a starting server still writing its log)
gets that long again from then, up to `PATIENCE_CEILING` times its budget in all. A loaded
machine that is getting there is waited for; a server that writes nothing more fails in time.

Processes are started in their own session (`start_new_session`) so that they outlive the CLI
command that started them (`reassigner local up` returns while the cluster runs) and so that a
Ctrl-C in the terminal does not reach them; they are stopped by pid from the stack's state file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from schemas.errors import PortInUseError, ProcessStartError


PATIENCE_CEILING = 3.0
"""A wait that keeps seeing progress ends anyway after this many times its budget: progress that
never arrives at the end (a pipeline committing batches that never see the cluster, a server
logging the same failure over and over) is a failure too, only a slower one."""


def compute_deadline(started: float, last_progress: float, timeout: float, patience: float = 1.0,
                     ceiling: float = PATIENCE_CEILING) -> float:
    """When a wait that began at `started`, and last saw progress at `last_progress`, gives up:
    its budget (`timeout` × `patience`) after the last progress, and never later than `ceiling`
    budgets after it began."""
    budget = timeout * patience
    return min(max(started, last_progress) + budget, started + budget * max(ceiling, 1.0))


def free_port() -> int:
    """A loopback TCP port that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_port_free(port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise PortInUseError(
                f"port {port} for {what} is already taken on 127.0.0.1; "
                "stop what uses it or choose another base port"
            ) from None


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def spawn(command: Sequence[str], log_file: Path, env: dict[str, str] | None = None) -> int:
    """Start `command` detached, stdout and stderr appended to `log_file`; return its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        process = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return process.pid


def is_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        # Reap it if it is our own exited child, so that a zombie does not look alive.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def stop(pid: int | None, timeout_seconds: float = 20.0, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL if `kill`), then SIGKILL after `timeout_seconds`; waits until gone."""
    if not is_alive(pid):
        return
    assert pid is not None
    try:
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_seconds
    while is_alive(pid):
        if time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 10
        time.sleep(0.1)


def run_tool(command: Sequence[str], what: str, timeout_seconds: float) -> subprocess.CompletedProcess:
    """Run a short-lived tool to its end, its output captured as text; one still running after
    `timeout_seconds` is killed and raises `ProcessStartError` saying what did not finish."""
    try:
        return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        raise ProcessStartError(f"{what}: not done after {timeout_seconds:.0f} s (killed); check the "
                                "machine's load (`uptime`), then try again") from None


def tail(path: Path, lines: int = 20) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    condition: Callable[[], bool],
    timeout_seconds: float,
    what: str,
    pid: int | None = None,
    log_file: Path | None = None,
    interval_seconds: float = 0.25,
) -> None:
    """Poll `condition` until true; fail early, with the log tail, if the process died. Its log
    growing is progress (module PATIENCE): each growth gives `timeout_seconds` again."""
    started = last_progress = time.monotonic()
    size = _log_size(log_file)
    while True:
        if condition():
            return
        if pid is not None and not is_alive(pid):
            detail = tail(log_file) if log_file else ""
            raise ProcessStartError(f"{what}: the process exited; last log lines:\n{detail}")
        now = time.monotonic()
        grown = _log_size(log_file)
        if grown != size:
            size, last_progress = grown, now
        if now > compute_deadline(started, last_progress, timeout_seconds):
            quiet = f", its log quiet for {now - last_progress:.0f} s" if log_file else ""
            detail = f"; last log lines:\n{tail(log_file)}" if log_file else ""
            raise ProcessStartError(f"{what}: not ready after {now - started:.0f} s{quiet}; check the machine's "
                                    f"load (`uptime`){detail}")
        time.sleep(interval_seconds)


def _log_size(log_file: Path | None) -> int:
    try:
        return os.stat(log_file).st_size if log_file else 0
    except OSError:
        return 0
