"""The order a test session runs its modules in, and when each shared service may stop.

Rule: a shared service (the session's 3-broker stack, Spark, Redis) is up only while tests
that use it run. An idle local stack is not free: on the 2-core machine its controller and three
brokers take about 1.4 cores doing nothing but their timers when the machine is throttled
(measured with nothing else running: 35-38 % of a core per JVM; `docs/testing.md`), and every
test that runs beside it runs at half speed. So a session runs, in this order:

0. pure modules (nothing started);
1. modules with the session's Redis only, not marked `stack`;
2. modules marked `stack` that do not use the shared stack (a cluster of their own, a Redis
   Cluster, or the session's Redis), before the shared stack is up;
3. modules on the shared stack without Spark;
4. modules on the shared stack with Spark;
5. modules with Spark only, after the shared stack is down.

Invariants:
- a module is never split: its module-scoped fixtures (a private stack, a harness) are set up
  once, so a module's group is the heaviest of its tests' groups;
- within a group, modules keep the order they were collected in (files, then definitions), so
  the order is deterministic and a newcomer finds a test where the tree says it is;
- `compute_last_users` names, for each shared service, the last test that uses it in the final
  order; the service stops after that test's teardown, and never before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

SHARED_SERVICES = ("local_stack", "spark", "redis_url")
"""Session fixtures stopped after their last user (tests/conftest.py registers how)."""


@dataclass(frozen=True)
class CollectedTest:
    """What ordering needs of one collected test: where it lives and what it starts."""

    module: str
    fixtures: frozenset[str]
    own_stack: bool
    """Marked `stack` without the shared stack: a cluster of its own, or Redis only."""


def compute_group(tests: Iterable[CollectedTest]) -> int:
    """The group (0-5, module doc) of a module made of `tests`."""
    tests = list(tests)
    fixtures = frozenset().union(*(t.fixtures for t in tests))
    if "local_stack" in fixtures:
        return 4 if "spark" in fixtures else 3
    if any(t.own_stack for t in tests):
        return 2
    if "spark" in fixtures:
        return 5
    if "redis_url" in fixtures:
        return 1
    return 0


def compute_order(tests: Sequence[CollectedTest]) -> list[int]:
    """Indexes of `tests` in running order: modules by group, collected order within a group,
    each module's tests together and in their own order."""
    modules: dict[str, list[int]] = {}
    for index, test in enumerate(tests):
        modules.setdefault(test.module, []).append(index)
    groups = {module: compute_group(tests[i] for i in indexes) for module, indexes in modules.items()}
    ordered = sorted(modules, key=lambda module: groups[module])  # stable: collected order within
    return [index for module in ordered for index in modules[module]]


def compute_last_users(tests: Sequence[CollectedTest], ids: Sequence[str]) -> dict[str, str]:
    """For each shared service some test uses, the id of the last such test in `tests`' order."""
    last: dict[str, str] = {}
    for test, test_id in zip(tests, ids):
        for service in SHARED_SERVICES:
            if service in test.fixtures:
                last[service] = test_id
    return last
