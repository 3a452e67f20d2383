"""Settings from a secrets directory (`REASSIGNER_SECRETS_DIR`): one file per setting, as Docker
and Kubernetes mount secrets, below the environment and above the config file."""

from __future__ import annotations

import os
from unittest import mock

import pytest

from runtime.settings import load_settings
from schemas.errors import InvalidConfigError


def settings_with(environment: dict[str, str]):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REASSIGNER_")}
    with mock.patch.dict(os.environ, {**clean, **environment}, clear=True):
        return load_settings()


def test_a_secret_file_gives_its_setting_and_the_password_stays_out_of_the_repr(tmp_path):
    (tmp_path / "reassigner_redis_url").write_text("redis://:s3cret-pw@redis:6379/0\n")
    (tmp_path / "reassigner_status_token").write_text("tok-123")
    settings = settings_with({"REASSIGNER_SECRETS_DIR": str(tmp_path)})
    assert settings.redis_url == "redis://:s3cret-pw@redis:6379/0"
    assert settings.status_token.get_secret_value() == "tok-123"
    assert "s3cret" not in repr(settings) and "tok-123" not in repr(settings)


def test_the_environment_wins_over_a_secret_file_and_a_secret_file_over_the_config_file(tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "reassigner_cluster_name").write_text("from-secret")
    (secrets / "reassigner_topic_prefix").write_text("from-secret")
    config = tmp_path / "c.toml"
    config.write_text('topic_prefix = "from-toml"\nbootstrap_servers = "toml:9092"\n')
    settings = settings_with({"REASSIGNER_SECRETS_DIR": str(secrets), "REASSIGNER_CONFIG_FILE": str(config),
                              "REASSIGNER_CLUSTER_NAME": "from-env"})
    assert (settings.cluster_name, settings.topic_prefix, settings.bootstrap_servers) == \
        ("from-env", "from-secret", "toml:9092")


def test_a_secrets_dir_that_is_no_directory_is_one_clear_error(tmp_path):
    with pytest.raises(InvalidConfigError, match="REASSIGNER_SECRETS_DIR=.*is no directory"):
        settings_with({"REASSIGNER_SECRETS_DIR": str(tmp_path / "missing")})


def test_a_bad_value_in_a_secret_file_is_the_settings_one_line_error(tmp_path):
    (tmp_path / "reassigner_max_partition_movements").write_text("many")
    with pytest.raises(InvalidConfigError, match="max_partition_movements"):
        settings_with({"REASSIGNER_SECRETS_DIR": str(tmp_path)})
