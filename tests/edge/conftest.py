"""Helpers of the edge tests: waiting for a condition, and a module-scoped private stack for
tests that kill brokers or fail dirs (the shared session stack must stay undisturbed)."""

from __future__ import annotations


import pytest



@pytest.fixture(scope="module")
def private_stack(tmp_path_factory, cache_dir):
    """(LocalStack, StackState) of a 3-broker, 2-dirs-per-broker stack of this module only."""
    from reassigner.dev.local.stack import LocalStack

    stack = LocalStack(tmp_path_factory.mktemp("edge-stack") / "stack", cache_dir)
    state = stack.up(brokers=3, log_dirs=2)
    try:
        yield stack, state
    finally:
        stack.down()
