"""Fixtures of the security tests: a TCP server that answers every Redis command as a Redis
whose ACL refuses the client's credentials, and a clean secrets registry per test."""

from __future__ import annotations

import socket
import threading
from typing import Iterator

import pytest

from schemas.redaction import forget_secrets

WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


@pytest.fixture(autouse=True)
def clean_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.fixture()
def refusing_redis() -> Iterator[int]:
    """The port of a server that answers any command (AUTH, HELLO, PING...) with WRONGPASS, as
    a real Redis does for a wrong password; no real Redis is started."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            try:
                while not stop.is_set() and connection.recv(65536):
                    connection.sendall(WRONGPASS)
            except OSError:
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()
