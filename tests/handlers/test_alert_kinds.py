"""Every alert kind the handlers raise is a documented kind (schemas.ALERT_KINDS)."""

from __future__ import annotations

import re
from pathlib import Path

import schemas


def test_every_alert_kind_raised_is_listed():
    source = "\n".join(p.read_text() for p in Path(__file__).resolve().parents[2].glob("handlers/*.py"))
    raised = set(re.findall(r'alert\(\s*"([A-Za-z]+)"', source))
    assert raised, "no alert call found: the pattern no longer matches the handlers' code"
    assert raised <= set(schemas.ALERT_KINDS), raised - set(schemas.ALERT_KINDS)
