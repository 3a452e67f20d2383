"""The compose deployment's four processes, run as its containers would run them, against a real
cluster and a real Redis with a password: each process's environment is the one `docker compose
config` renders from docker-compose.yml, its secrets the files Compose would mount (under a
temporary directory standing for /run/secrets), its command and health check the file's. No
Docker engine here: the processes run on this host, each on a port of its own where the
containers would all use 9400.

Checked: every health check passes once the process is up; the pipeline reached Redis through
the URL (and password) of its secret file; the status server requires the token of its secret
file; a pipeline that stops answering fails its health check in one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import pytest

from reassigner.dev.local.processes import free_port, stop, tail
from reassigner.dev.local.redis_server import start_redis
from tests.test_docker_compose import PRODUCT, rendered
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long]

PASSWORD = "pw-" + uuid.uuid4().hex[:12]
TOKEN = "token-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def redis_with_password(tmp_path_factory):
    import redis

    port = free_port()
    pid = start_redis(port, tmp_path_factory.mktemp("redis-password"))
    redis.Redis(port=port).config_set("requirepass", PASSWORD)
    yield port
    stop(pid)


@pytest.fixture(scope="module")
def deployment(local_stack, redis_with_password, cache_dir, tmp_path_factory):
    """The four processes started from the rendered compose file; (processes, ports, env of each)."""
    work = tmp_path_factory.mktemp("compose")
    secrets = work / "run-secrets"
    secrets.mkdir()
    (secrets / "reassigner_redis_url").write_text(f"redis://:{PASSWORD}@127.0.0.1:{redis_with_password}/0\n")
    (secrets / "client_properties").write_text("# PLAINTEXT\n")
    (secrets / "reassigner_status_token").write_text(TOKEN + "\n")
    compose = rendered(environment={"REASSIGNER_BOOTSTRAP_SERVERS": local_stack.bootstrap_servers,
                                    "REASSIGNER_CLUSTER_NAME": "compose-test"})
    prefix = f"compose{uuid.uuid4().hex[:6]}"  # the shared stack's other tests use their own topics
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REASSIGNER_")}
    processes, ports, environments = {}, {}, {}
    for name in PRODUCT:
        service = compose["services"][name]
        ports[name] = free_port()
        environment = {key: str(value).replace("/run/secrets", str(secrets))
                       for key, value in service["environment"].items()}
        environment |= {"REASSIGNER_TOPIC_PREFIX": prefix, "REASSIGNER_METRICS_PORT": str(ports[name]),
                        "REASSIGNER_METRICS_HOST": "127.0.0.1", "REASSIGNER_CACHE_DIR": str(cache_dir),
                        "PYSPARK_PYTHON": sys.executable}
        if name == "pipeline":
            environment["REASSIGNER_CHECKPOINT_DIR"] = str(work / "checkpoints")
        command = [str(part) for part in service["command"]]
        if name == "status":
            command[command.index("--port") + 1] = str(ports[name])
        environments[name] = {**clean, **environment}
        processes[name] = subprocess.Popen([sys.executable, "-m", "reassigner.cli", *command],
                                           stdout=open(work / f"{name}.log", "wb"), stderr=subprocess.STDOUT,
                                           env=environments[name], start_new_session=True)
    yield {"processes": processes, "ports": ports, "env": environments, "work": work, "compose": compose}
    for process in processes.values():
        stop(process.pid)


def healthcheck(deployment, name: str) -> subprocess.CompletedProcess:
    test = deployment["compose"]["services"][name]["healthcheck"]["test"]
    arguments = [str(part) for part in test[2:]]
    arguments[arguments.index("--port") + 1] = str(deployment["ports"][name])
    return subprocess.run([sys.executable, "-m", "reassigner.cli", *arguments, "--timeout", "5"],
                          capture_output=True, text=True, timeout=60)


def alive(deployment) -> None:
    for name, process in deployment["processes"].items():
        assert process.poll() is None, f"{name} exited:\n{tail(deployment['work'] / f'{name}.log', 30)}"


def test_every_health_check_passes_once_its_process_is_up(deployment):
    for name in PRODUCT:
        def healthy() -> bool:
            alive(deployment)
            return healthcheck(deployment, name).returncode == 0
        eventually(healthy, timeout=240, interval=2, what=f"{name}'s health check")


def test_the_pipeline_reached_redis_through_the_password_of_its_secret_file(deployment):
    def committed() -> dict | None:
        alive(deployment)
        result = subprocess.run([sys.executable, "-m", "reassigner.cli", "status", "--json"],
                                capture_output=True, text=True, timeout=60, env=deployment["env"]["executor"])
        status = json.loads(result.stdout) if result.returncode == 0 else None
        return status if status and len(status["brokers"]) == 3 else None
    status = eventually(committed, timeout=240, interval=2, what="a state the pipeline committed with 3 brokers")
    assert status["cluster_name"] == "compose-test", status


def test_the_status_server_wants_the_token_of_its_secret_file(deployment):
    url = f"http://127.0.0.1:{deployment['ports']['status']}/api/status"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code == 401
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"}),
                                timeout=30) as answer:
        assert json.load(answer)["cluster_name"] == "compose-test"


def test_a_pipeline_that_stops_answering_fails_its_health_check_in_one_line(deployment):
    pipeline = deployment["processes"]["pipeline"]
    os.kill(pipeline.pid, signal.SIGSTOP)
    try:
        result = healthcheck(deployment, "pipeline")
    finally:
        os.kill(pipeline.pid, signal.SIGCONT)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result
    assert result.stderr.startswith("unhealthy: nothing answers at http://127.0.0.1:"), result
