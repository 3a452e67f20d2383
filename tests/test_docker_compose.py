"""docker-compose.yml is a deployment of the product against an external cluster, with the local
demo in profiles of its own; the Dockerfile passes hadolint.

The file is rendered by Compose itself (`docker compose config`, or the standalone
`docker-compose config`, which need no engine): interpolated, anchors merged, as `up` would run
it. `make install` installs the standalone one when neither is there; without it the rendering
tests are skipped, saying why. What the containers get is then held against the product: each
process's environment and secret files, as Compose mounts them under /run/secrets, load into
valid settings (`runtime.settings.load_settings`), and each health check is a command the CLI
accepts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DEMO_ENV = ROOT / "deploy" / "demo.env"
PRODUCT = {"pipeline": "run", "watcher": "watch", "executor": "execute", "status": "status-server"}
DEMO = {"kafka-volumes", "controller", "broker-1", "broker-2", "broker-3"}
EXPECTED_RACKS = {"broker-1": "/dc1/r1", "broker-2": "/dc1/r2", "broker-3": "/dc2/r1"}
EXTERNAL = {"REASSIGNER_BOOTSTRAP_SERVERS": "kafka-1.example:9092,kafka-2.example:9092"}


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) if the Docker client has it, else the standalone
    `docker-compose` (Debian's package)."""
    if shutil.which("docker") is not None:
        result = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if result.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


def compose(*arguments: str, environment: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed (make install adds it)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REASSIGNER_", "COMPOSE_"))}
    return subprocess.run([*command, "-f", str(COMPOSE_FILE), *arguments], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**clean, **(environment or {})})


def rendered(*arguments: str, environment: dict[str, str] | None = None) -> dict[str, Any]:
    result = compose(*arguments, "config", environment=environment)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def active(services: dict[str, Any], profiles: set[str]) -> set[str]:
    """The services `up` starts with `profiles` on: those in no profile, and those in one of them
    (the standalone docker-compose renders every service whatever the profiles)."""
    return {name for name, service in services.items()
            if not service.get("profiles") or profiles & set(service["profiles"])}


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    return rendered(environment=EXTERNAL)


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    return rendered("--env-file", str(DEMO_ENV))


def test_without_the_clusters_bootstrap_servers_compose_refuses_naming_the_variable():
    result = compose("config", "-q")
    assert result.returncode != 0
    assert "set REASSIGNER_BOOTSTRAP_SERVERS to your brokers" in result.stderr, result.stderr


def test_the_default_profile_is_the_four_processes_and_names_no_broker_or_redis(deployment):
    services = deployment["services"]
    assert active(services, set()) == set(PRODUCT)
    for name in PRODUCT:
        service = services[name]
        assert service["command"][0] == PRODUCT[name] and service["build"]
        environment = service["environment"]
        assert environment["REASSIGNER_BOOTSTRAP_SERVERS"] == EXTERNAL["REASSIGNER_BOOTSTRAP_SERVERS"]
        assert "REASSIGNER_REDIS_URL" not in environment, f"{name}: the Redis URL is a secret, not in the environment"
        assert "depends_on" not in service, f"{name} waits on no bundled service"
    assert all(services[name]["image"] == "kafka-reassigner:local" for name in PRODUCT)


def test_nothing_is_published_beyond_the_hosts_loopback(deployment, demo):
    for services in (deployment["services"], demo["services"]):
        for name, service in services.items():
            for port in service.get("ports", []):
                host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).rsplit(":", 2)[0]
                assert host_ip == "127.0.0.1", f"{name} publishes {port}"
    assert "ports" not in demo["services"]["redis"], "the bundled Redis stays inside the network"


def test_each_processs_environment_and_secrets_load_into_valid_settings(demo, tmp_path):
    from runtime.clients.client_config import compute_client_config
    from runtime.clients.java_properties import parse_properties
    from runtime.settings import load_settings

    for name in PRODUCT:
        service = demo["services"][name]
        secrets_dir = tmp_path / name
        secrets_dir.mkdir()
        for secret in service["secrets"]:
            source = secret["source"] if isinstance(secret, dict) else secret
            shutil.copy(demo["secrets"][source]["file"], secrets_dir / source)
        environment = {key: str(value).replace("/run/secrets", str(secrets_dir))
                       for key, value in service["environment"].items()}
        clean = {k: v for k, v in os.environ.items() if not k.startswith("REASSIGNER_")}
        with mock.patch.dict(os.environ, {**clean, **environment}, clear=True):
            settings = load_settings()
        assert settings.bootstrap_servers == "broker-1:19092,broker-2:19092,broker-3:19092"
        assert settings.cluster_name == "compose-demo"
        compute_client_config(parse_properties(Path(settings.command_config).read_text()))
        if name != "watcher":  # the watcher needs no Redis
            assert settings.redis_url == "redis://:demo-only-not-a-secret@redis:6379/0", name
        if name == "status":
            assert settings.status_token is not None, "the status server listens beyond loopback: it needs a token"
        else:
            assert (settings.metrics_port, settings.metrics_host, settings.metrics_allow_remote) == (9400, "0.0.0.0", True)


def test_every_health_check_is_a_command_the_cli_takes(deployment):
    for name in PRODUCT:
        check = deployment["services"][name]["healthcheck"]["test"]
        assert check[:3] == ["CMD", "reassigner", "healthcheck"], name
        # Nothing listens on the port here: a command the CLI takes exits 1 (unhealthy), a flag it
        # does not take exits 2 (usage).
        result = subprocess.run([sys.executable, "-m", "reassigner.cli", *check[2:], "--timeout", "1"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and result.stderr.startswith("unhealthy: "), (name, result)


def test_the_pipelines_checkpoint_volume_is_writable_by_the_images_user(deployment):
    dockerfile = (ROOT / "Dockerfile").read_text()
    (volume,) = deployment["services"]["pipeline"]["volumes"]
    target = volume["target"] if isinstance(volume, dict) else volume.split(":")[1]
    assert target == deployment["services"]["pipeline"]["environment"]["REASSIGNER_CHECKPOINT_DIR"]
    # A named volume takes the owner of the image's dir at its mount point: the dir must exist
    # in the image, owned by the user the image runs as.
    assert f"mkdir -p {target}" in dockerfile and "chown -R reassigner /var/lib/reassigner" in dockerfile
    assert "USER 10001" in dockerfile and "--uid 10001 reassigner" in dockerfile


def test_the_demo_profiles_add_a_racked_kraft_cluster_and_a_redis_with_a_password_and_aof(demo):
    services = demo["services"]
    assert active(services, {"demo", "redis"}) == set(PRODUCT) | DEMO | {"redis"}
    for name, rack in EXPECTED_RACKS.items():
        environment = services[name]["environment"]
        assert environment["KAFKA_PROCESS_ROLES"] == "broker" and environment["KAFKA_BROKER_RACK"] == rack
        log_dirs = environment["KAFKA_LOG_DIRS"].split(",")
        mounted = {v["target"] if isinstance(v, dict) else v.split(":")[1] for v in services[name]["volumes"]}
        assert len(log_dirs) == 2 and set(log_dirs) | {environment["KAFKA_METADATA_LOG_DIR"]} <= mounted, name
    redis = " ".join(services["redis"]["command"])
    assert "requirepass" in redis and "--appendonly yes --appendfsync always" in redis
    assert "demo-only" not in redis, "the password is read from its secret, never written in the file"


def test_the_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint is not None, "hadolint is installed by `make install` (requirements.lock)"
    result = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(ROOT / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
