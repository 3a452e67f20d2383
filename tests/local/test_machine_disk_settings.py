"""The local stack's runs (the demo, the tests, the benchmarks) take the disk marks off: its
brokers' dirs share the machine's disk, and a CI machine past 75 % got plans with no replica
placed anywhere (the ELR heal and the secured stack's log-dir heal timed out)."""

from __future__ import annotations

from reassigner.dev.harness.stage import DEMO_SETTINGS
from reassigner.dev.local import MACHINE_DISK_SETTINGS, adopt_machine_disk_settings
from runtime.settings import compute_policy, load_settings


def test_the_test_session_plans_with_the_marks_off():
    policy = compute_policy(load_settings())  # the session's environment (tests/conftest.py)
    assert policy.disk_plan_limit_percent == 100
    assert policy.disk_high_water_percent == 100


def test_the_demo_gives_its_product_the_marks_off():
    assert {k: DEMO_SETTINGS[k] for k in MACHINE_DISK_SETTINGS} == MACHINE_DISK_SETTINGS


def test_a_mark_set_already_is_kept(monkeypatch):
    monkeypatch.setenv("REASSIGNER_DISK_MAX_USAGE_PERCENT", "60")
    monkeypatch.delenv("REASSIGNER_DISK_LOW_WATER_PERCENT")
    adopt_machine_disk_settings()
    settings = load_settings()
    assert settings.disk_max_usage_percent == 60
    assert settings.disk_low_water_percent == 100
