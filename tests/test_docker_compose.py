"""docker-compose.yml describes the same stack as the local scripts (SPEC 9).

Two checks, each with the best tool at hand:
- `docker compose config` (or the standalone `docker-compose config`) validates the file against
  the Compose specification (it needs no engine);
- the structure (services, a rack and two log dirs per broker, Redis durability) is checked on
  the parsed file: from `docker compose config --format json`, else PyYAML in this interpreter,
  else PyYAML in a system `python3` (the project adds no YAML dependency for one test).
Each is skipped, saying why, when no tool is there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

COMPOSE_FILE = Path(__file__).resolve().parents[1] / "docker-compose.yml"
EXPECTED_SERVICES = {"controller", "broker-1", "broker-2", "broker-3", "redis", "pipeline", "watcher", "executor"}
EXPECTED_RACKS = {"broker-1": "/dc1/r1", "broker-2": "/dc1/r2", "broker-3": "/dc2/r1"}
YAML_TO_JSON = "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) if the Docker client has it, else the standalone
    `docker-compose` (Debian's package, which `make` installs where the Docker client is)."""
    if shutil.which("docker") is not None:
        result = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True,
                                timeout=30)
        if result.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


def docker_compose_available() -> bool:
    return compose_command() == ["docker", "compose"]


def parse_compose_file() -> dict[str, Any]:
    if docker_compose_available():
        result = subprocess.run(
            ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--format", "json"],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)
    for python in dict.fromkeys([sys.executable, shutil.which("python3"), "/usr/bin/python3"]):
        if python and Path(python).exists():
            result = subprocess.run(
                [python, "-c", YAML_TO_JSON, str(COMPOSE_FILE)], capture_output=True, text=True, timeout=60
            )
            if result.returncode == 0:
                return json.loads(result.stdout)
    pytest.skip("no YAML reader: neither `docker compose` nor a Python with PyYAML is installed")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return parse_compose_file()


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {key: str(value) for key, value in environment.items()}


def test_docker_compose_config_validates_the_file() -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed here")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    listed = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "config", "--services"],
        capture_output=True, text=True, timeout=60,
    )
    assert EXPECTED_SERVICES <= set(listed.stdout.split())


def test_every_service_is_there(compose: dict[str, Any]) -> None:
    assert EXPECTED_SERVICES <= set(compose["services"])


def test_kafka_runs_kraft_with_one_controller_and_three_racked_brokers_with_two_log_dirs(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    controller = environment_of(services["controller"])
    assert services["controller"]["image"] == "apache/kafka:4.1.1"
    assert controller["KAFKA_PROCESS_ROLES"] == "controller"
    for name, rack in EXPECTED_RACKS.items():
        broker = services[name]
        environment = environment_of(broker)
        assert broker["image"] == "apache/kafka:4.1.1"
        assert environment["KAFKA_PROCESS_ROLES"] == "broker"
        assert environment["KAFKA_BROKER_RACK"] == rack
        log_dirs = environment["KAFKA_LOG_DIRS"].split(",")
        assert len(log_dirs) == 2, f"{name} should have two log dirs, has {log_dirs}"
        metadata_dir = environment["KAFKA_METADATA_LOG_DIR"]
        assert metadata_dir not in log_dirs
        assert environment["KAFKA_CONTROLLER_QUORUM_VOTERS"] == controller["KAFKA_CONTROLLER_QUORUM_VOTERS"]
        mounted = {
            (volume["target"] if isinstance(volume, dict) else volume.split(":")[1])
            for volume in broker["volumes"]
        }
        assert set(log_dirs) | {metadata_dir} <= mounted, f"{name}: each dir is its own volume"
    node_ids = [environment_of(services[name])["KAFKA_NODE_ID"] for name in ["controller", *EXPECTED_RACKS]]
    assert len(set(node_ids)) == len(node_ids)


def test_redis_is_durable(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:7")
    command = redis["command"] if isinstance(redis["command"], list) else redis["command"].split()
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "always"


def test_reassigner_services_run_their_command_against_the_compose_cluster(compose: dict[str, Any]) -> None:
    for name, command in {"pipeline": "run", "watcher": "watch", "executor": "execute"}.items():
        service = compose["services"][name]
        assert service["build"]
        assert service["command"] == [command]
        environment = environment_of(service)
        assert set(environment["REASSIGNER_BOOTSTRAP_SERVERS"].split(",")) == {
            f"{broker}:19092" for broker in EXPECTED_RACKS
        }
        assert environment["REASSIGNER_REDIS_URL"].startswith("redis://redis:")
        # metrics inside the container on 9400, published on the host's loopback only
        assert environment["REASSIGNER_METRICS_PORT"] == "9400"
        assert environment["REASSIGNER_METRICS_ALLOW_REMOTE"] == "true"
        published = [str(p) for p in service["ports"]]
        assert len(published) == 1 and published[0].startswith("127.0.0.1:") and published[0].endswith(":9400")
