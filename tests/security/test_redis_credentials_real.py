"""A wrong Redis password against a real Redis with an ACL user: `execute` and `status` stop at
once with one line naming the refusal, exit 2, and never show the password (needs the real
Redis of the test session: marked `stack`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.waiting import PATIENCE

pytestmark = [pytest.mark.stack]

REPO = Path(__file__).resolve().parents[2]
WRONG = "wrong-Passw0rd-xyz"


@pytest.fixture()
def acl_user(redis_client) -> str:
    name = f"reassigner-t{int(time.time() * 1000)}"
    redis_client.execute_command("ACL", "SETUSER", name, "on", ">right-Passw0rd-xyz", "~*", "&*", "+@all")
    yield name
    redis_client.execute_command("ACL", "DELUSER", name)


def run_cli(*arguments: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("REASSIGNER_")}
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "reassigner.cli", *arguments], capture_output=True,
                          text=True, timeout=120 * PATIENCE, cwd=REPO, env=environment)


@pytest.mark.parametrize("command", [["execute", "--bootstrap-server", "127.0.0.1:1"], ["status"]])
def test_a_wrong_password_of_an_acl_user_is_one_line(redis_url, acl_user, command):
    wrong_url = redis_url.replace("redis://", f"redis://{acl_user}:{WRONG}@")
    started = time.monotonic()
    result = run_cli(*command, "--redis-url", wrong_url)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: [REDIS_AUTHENTICATION_FAILED]"), result.stderr
    assert WRONG not in result.stdout + result.stderr
    # Not retried as an outage: the retry policy would wait out its whole deadline (minutes); a
    # refusal ends at the first answer. Scaled like every wait, for a starved machine.
    assert time.monotonic() - started < 60 * PATIENCE


def test_a_password_for_a_redis_without_one_is_never_printed(redis_url):
    # Redis 6+ lets its passwordless default user in with any password (the `nopass` rule), so
    # the command reaches the store (and finds no state of cluster 'local' in this Redis: an
    # error naming the URL); what matters here is that the password shows nowhere.
    result = run_cli("status", "--redis-url", redis_url.replace("redis://", f"redis://:{WRONG}@"))
    assert result.returncode == 2 and "holds no state of cluster 'local'" in result.stderr, result.stderr
    assert WRONG not in result.stdout + result.stderr
