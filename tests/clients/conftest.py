"""Fixtures of the client doors' tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture()
def closed_port() -> str:
    """host:port where nothing listens (bound once, then released): a cluster that is not there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"
